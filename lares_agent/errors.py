"""The error every layer raises for bad user input, so the CLI can print one line instead of a traceback."""

from __future__ import annotations


class LaresError(Exception):
    """A user-facing error: the message says what is wrong and what to do."""
