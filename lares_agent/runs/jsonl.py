"""Append-only JSONL files of a run (metrics, events, candidates, LLM calls), and their torn-line mending.

Each record is one line, flushed immediately, so that a killed run leaves every finished record on disk and a
partially written line can only ever be the last one: the next writer ends it first (:func:`open_append`) and
readers skip it (:func:`read_jsonl`).
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

from lares_agent.runs.oserrors import run_file_error

__all__ = ["JsonlTail", "JsonlWriter", "append_jsonl", "append_lines", "dumps_line", "open_append", "read_jsonl",
           "to_jsonable"]


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, sets, paths and non-finite floats into strict JSON values.

    Non-finite floats become ``null``: strict JSON has no NaN, and a NaN task return (a task without a human
    reward) should read as "absent", not crash a downstream parser. Sets are sorted where they can be, so the
    same content always gives the same line.
    """
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        try:
            value = sorted(value)
        except TypeError:
            value = list(value)
    if isinstance(value, (list, tuple)):
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


def dumps_line(record: Mapping[str, Any]) -> str:
    """One record as one line of strict JSON (no newline); anything JSON cannot hold is written as its text."""
    return json.dumps(to_jsonable(record), allow_nan=False, ensure_ascii=False, default=str, separators=(",", ":"))


def open_append(path: str | Path) -> IO[str]:
    """Open a JSONL file for appending; a torn last line left by a killed writer is ended first, so the
    next record starts on a line of its own instead of gluing onto the fragment."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.exists() and p.stat().st_size > 0:
        with p.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            torn = fh.read(1) != b"\n"
        if torn:
            with p.open("a", encoding="utf-8") as fh:
                fh.write("\n")
    return p.open("a", encoding="utf-8")


def append_lines(path: str | Path, text: str) -> None:
    """Append whole lines and flush them; when the write fails (a full disk, say) the file is cut back to what
    it held, so no half line stays, and RunFileError names the file and the cause."""
    p = Path(path)
    data = text.encode("utf-8")
    try:
        open_append(p).close()  # creates the file and ends a torn last line
        fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        try:
            start = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:  # unbuffered: nothing is left in a buffer to be written after the cut
                    view = view[os.write(fd, view):]
            except OSError:
                os.ftruncate(fd, start)
                raise
        finally:
            os.close(fd)
    except OSError as exc:
        raise run_file_error("append to", p, exc, ", then `lares resume` the run") from exc


def append_jsonl(path: str | Path, record: Mapping[str, Any]) -> None:
    """Append one record as one line and flush it (a crash loses at most the record in flight)."""
    append_lines(path, dumps_line(record) + "\n")


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file in order; a line torn by a killed writer, or anything but an object,
    is skipped. A missing file reads as empty."""
    p = Path(path)
    if not p.is_file():
        return []
    out: list[dict[str, Any]] = []
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
                out.append(record)
    return out


class JsonlWriter:
    """Append JSON lines to one file through one open handle, flushing after every line (optionally fsyncing);
    for writers that log often (the engine's evaluations)."""

    def __init__(self, path: str | Path, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._fh = open_append(self.path)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` as one line and flush it to the OS."""
        self._fh.write(dumps_line(record) + "\n")
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


class JsonlTail:
    """The complete new lines of a growing JSONL file, read from a byte offset (one stat per call when nothing is
    new); a line still being written waits for the next call, a torn one (a killed writer's) is skipped."""

    def __init__(self, path: Path, skip_existing: bool = False) -> None:
        self.path = path
        self.offset = path.stat().st_size if skip_existing and path.is_file() else 0

    def rows(self) -> Iterator[dict[str, Any]]:
        try:
            if self.path.stat().st_size <= self.offset:
                return
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield row
