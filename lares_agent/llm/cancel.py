"""Give up an LLM call within a fraction of a second once the run is asked to stop.

A first SIGTERM used to wait for the call in flight: the call's time-out, then its retries and back-off, on a
server that never answers (benchmarks/README.md, "Stopping during an LLM round"). `LLMClient.cancelled` is the run's
stop request, read as a plain flag (nothing here runs in a signal handler or takes a lock a handler could need).
The client checks it before each attempt and while it backs off. A call runs on a daemon thread while the caller
waits in slices of `POLL_S` (so that in round 0 the main thread is free to run the signal handler that sets the
flag):

- an HTTP (or any other) chat model's thread is left behind on a stop: a socket read blocked on a silent
  server cannot be interrupted from outside, so the thread ends with its time-out or with the process (a
  daemon thread never holds the process open);
- the local model is given the flag and stops itself (`local.py`, `abort.py`: llama.cpp aborts within a graph
  node); the caller waits for that, up to `LOCAL_GRACE_S`, because llama.cpp must not be left running in a
  thread the process no longer waits for (its model is freed at exit).

Either way the call raises `Cancelled`, which the graph does not catch, so the round ends unfinished and the
trace keeps it resumable.
"""

from __future__ import annotations

import contextvars
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage

from lares_agent.errors import Cancelled

__all__ = ["LOCAL_GRACE_S", "POLL_S", "CancelFn", "check", "invoke", "pause"]

POLL_S = 0.1  # how often a waiting caller looks at the stop request
LOCAL_GRACE_S = 30.0  # the local model's own stop: milliseconds with the abort callback, else one prompt batch
CancelFn = Callable[[], bool]


def check(cancelled: CancelFn | None, what: str = "an LLM call") -> None:
    """Raise `Cancelled` when the run was asked to stop."""
    if cancelled is not None and cancelled():
        raise Cancelled(f"{what} given up: the run was asked to stop")


def pause(seconds: float, cancelled: CancelFn | None, sleep: Callable[[float], None]) -> None:
    """The back-off between attempts, in slices of `POLL_S`, ending early on a stop. Counted in slices, not by a
    clock, so an injected `sleep` that does not sleep still ends."""
    if cancelled is None:
        sleep(seconds)
        return
    slices = max(1, math.ceil(seconds / POLL_S))
    for i in range(slices):
        check(cancelled, "the back-off before the next LLM attempt")
        sleep(min(POLL_S, seconds - i * POLL_S))
    check(cancelled, "the back-off before the next LLM attempt")


def invoke(chat_model: BaseChatModel, kind: str, messages: Sequence[BaseMessage], kwargs: Mapping[str, Any],
           cancelled: CancelFn | None) -> Any:
    """`chat_model.invoke(messages, **kwargs)`, given up with `Cancelled` once `cancelled()` holds."""
    if cancelled is None:
        return chat_model.invoke(list(messages), **kwargs)
    check(cancelled)
    if kind == "local":  # stops itself (see the module docstring)
        kwargs = {**kwargs, "cancel": cancelled}
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()
    context = contextvars.copy_context()  # LangChain's run config travels in context variables

    def call() -> None:
        try:
            outcome.append((True, context.run(chat_model.invoke, list(messages), **kwargs)))
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=call, name="lares-llm-call", daemon=True).start()
    while not done.wait(POLL_S):
        if cancelled():
            if kind == "local":
                done.wait(LOCAL_GRACE_S)
            check(cancelled)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
