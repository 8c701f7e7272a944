"""The errors every layer raises for bad user input, so the CLI can print one line instead of a traceback."""

from __future__ import annotations

__all__ = ["Cancelled", "ConfigError", "LaresError"]


class LaresError(Exception):
    """A user-facing error: the message says what is wrong and what to do."""


class ConfigError(LaresError, ValueError):
    """An invalid configuration (an option out of range, a choice that does not exist or does not apply).

    Raised by every config's validation (search, engine, learners, LLM, graph limits), so one `except` and one
    exit code (2, like a usage error) cover them all. A `ValueError` too, because a bad config is a bad value.
    """


class Cancelled(Exception):
    """Work given up because the run was asked to stop (a first SIGTERM/SIGINT): an LLM call, and with it the
    reward round that made it.

    Not a `LaresError` on purpose: the graph turns LLM errors into rejected candidates or fallbacks, and a stop
    must not become either. It travels up to whoever decides what a stop leaves behind (the engine abandons the
    round in flight; the search ends a round 0 with nothing installed), so a resume redoes the round.
    """
