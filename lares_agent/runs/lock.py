"""One writer per run folder: `lares run` and `lares resume` hold an exclusive lock on the folder while they write.

Without it, `lares resume` on a live run took the live process's checkpoint write in progress for one left by
a kill, deleted it, cut the logs back and trained beside it. The lock is `flock(2)` on the run folder itself:
the kernel drops it when the holder's last descriptor closes, so a killed process never leaves it stuck, and no
file is added to the folder. Within one process the lock is re-entrant (the CLI takes it before its progress
bar, the runner again around its work).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lares_agent.errors import LaresError

__all__ = ["RunBusyError", "hold_run"]


class RunBusyError(LaresError):
    """Another process holds the run folder's lock."""


_held: dict[str, tuple[int, int]] = {}  # real path -> (descriptor, depth), for this process's own holds
_guard = threading.Lock()


def _acquire(key: str) -> None:
    with _guard:
        if key in _held:
            fd, depth = _held[key]
            _held[key] = (fd, depth + 1)
            return
        fd = os.open(key, os.O_RDONLY)  # non-inheritable (PEP 446): a child process never keeps the lock
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # flock(2): released when the holder exits or dies
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RunBusyError(f"{key} is in use by another lares process (a `lares run` or `lares resume` "
                                   "still writing it); wait for it to end or stop it, then resume") from None
            raise
        _held[key] = (fd, 1)


def _release(key: str) -> None:
    with _guard:
        fd, depth = _held[key]
        if depth > 1:
            _held[key] = (fd, depth - 1)
            return
        del _held[key]
        os.close(fd)  # closing the last descriptor releases the flock


@contextmanager
def hold_run(root: Path) -> Iterator[None]:
    """Hold `root`'s writer lock for the block; RunBusyError (one line) when another process holds it."""
    key = os.path.realpath(root)
    _acquire(key)
    try:
        yield
    finally:
        _release(key)
