"""Prompt templates and personas, shipped as package data."""
