"""Exceptions of the LLM layer.

Every failure the graph can see is an `LLMError` with a one-line reason, so a caller can catch one type and
report why (a missing model, a spent budget, an unreachable endpoint) without a traceback.
"""

from __future__ import annotations

from lares_agent.errors import LaresError


class LLMError(LaresError, RuntimeError):
    """An LLM call or setup failed; the message is one line saying why and, where possible, how to fix it."""


class BudgetExceeded(LLMError):
    """The run's token or wall-clock budget for LLM calls is spent; no further call is made."""


class ModelNotFound(LLMError):
    """A model name or GGUF path could not be resolved to a usable, verified file."""


class ReplayMissing(LLMError):
    """A replay record holds no answer for the call being made (the run diverged or the record is short)."""


class LLMTimeout(LLMError):
    """One call ran past its time limit (local: a wall-clock deadline checked per generated token)."""


class EndpointDown(LLMError):
    """The breaker keeps calls from an endpoint that failed the same way several times in a row (`breaker.py`)."""


class BadAnswer(LLMError):
    """The server answered, but not with a chat completion (a 200 with non-JSON text, JSON without `choices`)."""
