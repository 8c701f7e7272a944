"""OS errors in words: one line naming the file and the cause (a full disk, permissions, a missing folder).

Python's own text (`[Errno 28] No space left on device`) is close, but a line torn by a failed append stayed
behind, and the library writers (torch) hide the errno entirely. `RunFileError` is what
the run writers raise; the CLI prints it as its one error line.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

from lares_agent.errors import LaresError

__all__ = ["RunFileError", "cause_of", "run_file_error", "sqlite_file_error"]

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


_NEARLY_FULL_BYTES = 1 << 20  # below this, a failed SQLite write is put down to a full disk


def _sqlite_cause(path: Path, exc: sqlite3.Error) -> tuple[int | None, str, str]:
    """(errno, cause, fix) of a SQLite failure. SQLite reports a full disk as SQLITE_FULL, but a failed journal or
    WAL write as a bare SQLITE_IOERR ("disk I/O error", https://sqlite.org/rescode.html#ioerr), so the free space
    of the file's folder decides between the two."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    try:
        nearly_full = shutil.disk_usage(path.parent).free < _NEARLY_FULL_BYTES
    except OSError:
        nearly_full = False
    if name.startswith("SQLITE_FULL") or "disk is full" in str(exc) or (
            nearly_full and (name.startswith("SQLITE_IOERR") or "disk I/O error" in str(exc))):
        return (errno.ENOSPC, *_CAUSES[errno.ENOSPC])
    if name.startswith("SQLITE_READONLY") or "readonly database" in str(exc):
        return (errno.EROFS, "the file or its folder is read-only", "choose a writable folder")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return None, "the file is damaged", "`lares resume` sets a damaged trace aside"
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in str(exc):
        return None, "the disk failed a read or write", "check the disk and its free space"
    return None, " ".join((str(exc) or type(exc).__name__).split()), "check the file"


def sqlite_file_error(what: str, path: Path | str, exc: sqlite3.Error, then: str = "") -> RunFileError:
    """`cannot write <what> <path>: <cause> (sqlite: <its text>; <fix><then>)`: SQLite's own text names no file
    and, for a full disk, often says only `disk I/O error`."""
    path = Path(path)
    code, cause, fix = _sqlite_cause(path, exc)
    text = " ".join((str(exc) or type(exc).__name__).split())
    error = RunFileError(f"cannot write {what} {path}: {cause} (sqlite: {text}; {fix}{then})")
    error.errno = code
    return error
