"""What kind of failure an LLM attempt had: for the breaker, the retry rule and the one-line messages.

Kept apart from `client.py` so the rules (which HTTP statuses are transient, what a non-chat answer is) read in
one place.
"""

from __future__ import annotations

from lares_agent.llm.errors import BadAnswer, LLMError, LLMTimeout

__all__ = ["bad_answer", "failure_kind", "one_line", "retryable", "status_of"]


def status_of(exc: BaseException) -> int | None:
    """HTTP status of an SDK error, also when LangChain re-raised it as another type (`raise ... from e`)."""
    seen: BaseException | None = exc
    for _ in range(3):
        if seen is None:
            break
        status = getattr(seen, "status_code", None)
        if isinstance(status, int):
            return status
        seen = seen.__cause__ or seen.__context__
    return None


def failure_kind(exc: BaseException) -> str:
    """What kind of failure an attempt had, for the breaker: time-out, connection, an HTTP status, bad answer."""
    if isinstance(exc, LLMTimeout) or "timeout" in type(exc).__name__.lower():
        return "timeout"
    status = status_of(exc)
    if status is not None:
        return f"http {status}"
    if isinstance(exc, BadAnswer):
        return "bad answer"
    if isinstance(exc, ConnectionError) or "connection" in type(exc).__name__.lower():
        return "connection"
    return type(exc).__name__


def bad_answer(exc: Exception, kind: str) -> Exception:
    """An OpenAI-compatible server that answered, but not with a chat completion (a 200 with an HTML page or
    other non-JSON text, JSON without `choices` or with an empty `choices` list): the SDK then fails with
    AttributeError / TypeError / ValueError / IndexError / KeyError, which is no transient failure to retry."""
    if kind != "openai" or status_of(exc) is not None or not isinstance(
            exc, (AttributeError, TypeError, ValueError, IndexError, KeyError)):
        return exc
    error = BadAnswer(f"the endpoint answered, but not with an OpenAI chat completion (not JSON, or no 'choices', "
                      f"or an empty 'choices' list): {one_line(exc)}")
    error.__cause__ = exc
    return error


def retryable(exc: BaseException) -> bool:
    """Transient failures (time-outs, connection errors, 5xx, 408/409/429) are retried; the rest are not."""
    if isinstance(exc, LLMTimeout):
        return True
    if isinstance(exc, LLMError):
        return False
    status = status_of(exc)
    return not (status is not None and 400 <= status < 500 and status not in (408, 409, 429))


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`: what records and errors show of an exception."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else 'no message'}"
