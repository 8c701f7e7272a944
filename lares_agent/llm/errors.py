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


class ContextTooSmall(LLMError):
    """A prompt and its answer do not fit the model's context: refused before the call, or the server refused it
    (an HTTP 400 about the context length). Not retried unchanged: the same request fails the same way. Carries
    the tokens the server reported, so a failed call still counts what it spent."""

    def __init__(self, message: str, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


class AnswerCut(ContextTooSmall):
    """The answer ended at its token limit (`finish_reason=length`): a structured answer cut there is unusable."""

    answer: str | None = None  # what the answer said before the cut (kept in the call's record)
