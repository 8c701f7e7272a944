"""OS errors in words: one line naming the file and the cause (a full disk, permissions, a missing folder).

Python's own text (`[Errno 28] No space left on device`) is close, but a line torn by a failed append stayed
behind, and the library writers (torch) hide the errno entirely. `RunFileError` is what
the run writers raise; the CLI prints it as its one error line.
"""

from __future__ import annotations

import errno
from pathlib import Path

from lares_agent.errors import LaresError

__all__ = ["RunFileError", "cause_of", "run_file_error"]

_CAUSES = {
    errno.ENOSPC: ("no space left on the device", "free some space"),
    errno.EDQUOT: ("the disk quota is exceeded", "free some space"),
    errno.EACCES: ("permission denied", "choose a folder you may write, or fix its permissions"),
    errno.EPERM: ("operation not permitted", "choose a folder you may write"),
    errno.EROFS: ("the file system is read-only", "choose a writable folder"),
    errno.ENOENT: ("a folder on the path does not exist or cannot hold files", "choose an existing, writable folder"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "correct the path"),
    errno.EISDIR: ("it is a folder, not a file", "pass a file"),
}


class RunFileError(LaresError, OSError):
    """A run file could not be written or read; the message names it and says why."""


def cause_of(exc: OSError) -> tuple[str, str]:
    """(cause, fix) in words for an OS error."""
    found = _CAUSES.get(exc.errno or -1)
    if found is not None:
        return found
    return (exc.strerror or str(exc) or type(exc).__name__).lower(), "check the path"


def run_file_error(action: str, path: Path | str, exc: OSError, then: str = "") -> RunFileError:
    """`cannot <action> <path>: <cause> (<fix><then>)`, keeping the errno."""
    cause, fix = cause_of(exc)
    error = RunFileError(f"cannot {action} {path}: {cause} ({fix}{then})")
    error.errno = exc.errno
    return error
