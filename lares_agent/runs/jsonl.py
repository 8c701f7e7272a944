"""Append-only JSONL logs (``metrics.jsonl``, ``events.jsonl``) for the engine.

Each record is one line, flushed immediately, so that a killed run leaves every finished evaluation on disk
and a partially written line can only ever be the last one (readers skip it, see :func:`read_jsonl`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import numpy as np

__all__ = ["JsonlWriter", "read_jsonl", "to_jsonable"]


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, sets and non-finite floats into strict JSON values.

    Non-finite floats become ``null``: strict JSON has no NaN, and a NaN task return (a task without a human
    reward) should read as "absent", not crash a downstream parser.
    """
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


class JsonlWriter:
    """Append JSON lines to one file, flushing after every line (optionally fsyncing)."""

    def __init__(self, path: str | Path, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._fh = open_append(self.path)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` as one line and flush it to the OS."""
        line = json.dumps(to_jsonable(record), allow_nan=False, separators=(",", ":"))
        self._fh.write(line + "\n")
        self._fh.flush()
        if self._fsync:
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close the file; further writes raise."""
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def open_append(path: str | Path) -> IO[str]:
    """Open a JSONL file for appending; a torn last line left by a killed writer is ended first, so the
    next record starts on a line of its own instead of gluing onto the fragment."""
    p = Path(path)
    if p.exists() and p.stat().st_size > 0:
        with p.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            torn = fh.read(1) != b"\n"
        if torn:
            with p.open("a", encoding="utf-8") as fh:
                fh.write("\n")
    return p.open("a", encoding="utf-8")


def append_jsonl(path: str | Path, record: Mapping[str, Any], default: Any = None) -> None:
    """Append one record as one line and flush it (a crash loses at most the record in flight)."""
    line = json.dumps(record, ensure_ascii=False, default=default)
    with open_append(path) as fh:
        fh.write(line + "\n")
        fh.flush()


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a JSONL file; a line torn by a killed writer, or anything but an object, is skipped."""
    p = Path(path)
    if not p.is_file():
        return
    with p.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record
