"""Abort the local model's computation mid-batch once the run is asked to stop.

Checking the stop between prompt batches and tokens (`local.py`) is not enough: one prompt batch of the 1.5B
model takes tens of seconds on a loaded 2-core machine (benchmarks/README.md, "Stopping during an LLM round"), so a
stop still waited that long. llama.cpp can abort a
decode between two graph nodes through its abort callback, but that callback runs once per node (about a
thousand per batch) on a compute thread: a Python callback would take the GIL each time and slow every answer
down while the learners train beside it. So the callback is C's own `strlen` over a flag byte: 0 (go on) or 1
(abort) is exactly `bool callback(void *)`'s answer under the C calling conventions, and it reads the byte
without Python. A self-test at install checks both answers; where anything about it fails (another libc, another
binding), no callback is installed and the checks between batches and tokens remain.

A watcher thread sets the byte once `cancel()` holds: the thread that runs the decode is inside llama.cpp and
runs no Python until the batch is done (in round 0 that is the main thread, whose signal handler waits too).
The aborted decode raises `RuntimeError` in llama-cpp-python and leaves the KV cache as it was before the batch
(`Llama.eval` trims the cells past `n_tokens` first), so the next call works as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["AbortFlag", "aborting"]

_FLAGS: dict[int, AbortFlag | None] = {}  # id(Llama) -> its flag (None: no callback could be installed)
_LOGGER = "llama-cpp-python"  # llama-cpp-python prints llama.cpp's errors through this logger's level


class AbortFlag:
    """A flag byte that llama.cpp's abort callback reads, installed on one `Llama` context."""

    def __init__(self, llama: Any) -> None:
        from llama_cpp import llama_cpp

        self._byte = ctypes.create_string_buffer(2)
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        address = ctypes.cast(libc.strlen, ctypes.c_void_p).value
        if address is None:
            raise OSError("no strlen in the C library")
        self._callback = llama_cpp.ggml_abort_callback(address)  # kept: llama.cpp holds only the pointer
        data = ctypes.addressof(self._byte)
        idle = self._callback(data)
        self.set()
        fired = self._callback(data)
        self.clear()
        if idle is not False or fired is not True:
            raise OSError(f"strlen does not answer as an abort callback here ({idle!r}, {fired!r})")
        llama_cpp.llama_set_abort_callback(llama._ctx.ctx, self._callback, data)

    def set(self) -> None:
        self._byte[0] = b"\x01"

    def clear(self) -> None:
        self._byte[0] = b"\x00"

    @property
    def is_set(self) -> bool:
        return self._byte[0] != b"\x00"


def flag_of(llama: Any) -> AbortFlag | None:
    """The abort flag of a cached `Llama` (installed on first use; call under the model's lock)."""
    key = id(llama)
    if key not in _FLAGS:
        try:
            _FLAGS[key] = AbortFlag(llama)
        except (OSError, AttributeError, TypeError, ValueError):
            _FLAGS[key] = None
    return _FLAGS[key]


def forget(llama: Any) -> None:
    """Drop a `Llama`'s flag (the model is closed)."""
    _FLAGS.pop(id(llama), None)


@contextlib.contextmanager
def aborting(llama: Any, cancel: Callable[[], bool] | None, poll_s: float) -> Iterator[AbortFlag | None]:
    """For one call under the model's lock: a watcher sets the model's abort flag once `cancel()` holds (checked
    every `poll_s`); yields the flag (None without `cancel` or without a callback)."""
    flag = flag_of(llama) if cancel is not None else None
    if flag is None or cancel is None:
        yield None
        return
    flag.clear()
    done = threading.Event()
    logger = logging.getLogger(_LOGGER)
    level = logger.level

    def watch() -> None:
        while not done.wait(poll_s):
            if cancel():
                logger.setLevel(logging.CRITICAL)  # the aborted decode's error lines are no news
                flag.set()
                return

    watcher = threading.Thread(target=watch, name="lares-llm-abort", daemon=True)
    watcher.start()
    try:
        yield flag
    finally:
        done.set()
        watcher.join()
        flag.clear()
        logger.setLevel(level)
