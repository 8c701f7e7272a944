"""The run directory: where every file of a run lives, atomic writes, and append-only JSONL logs."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lares_agent.runs.jsonl import append_jsonl as _append
from lares_agent.runs.jsonl import read_jsonl as _read
from lares_agent.errors import LaresError


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and `os.replace`, so a kill never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """One JSON object per line, flushed at once (engine.metrics mends a line torn by a kill)."""
    _append(path, record, default=_json_default)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All complete lines; a torn line (killed mid-write) is skipped rather than fatal."""
    return list(_read(path))


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


@dataclass(frozen=True)
class RunDir:
    """Paths of one run (docs/DESIGN.md §6)."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def candidates(self) -> Path:
        return self.root / "candidates.jsonl"

    @property
    def llm_calls(self) -> Path:
        return self.root / "llm_calls.jsonl"

    @property
    def trace(self) -> Path:
        return self.root / "trace.sqlite"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def report(self) -> Path:
        return self.root / "report"

    def event(self, name: str, **fields: Any) -> None:
        append_jsonl(self.events, {"event": name, "time": time.time(), **fields})

    @classmethod
    def create(cls, base: Path, task: str, run_id: str | None = None) -> "RunDir":
        """A new, empty run folder `base/<task>-<timestamp>` (or `base/run_id`)."""
        name = run_id or f"{task}-{time.strftime('%Y%m%d-%H%M%S')}"
        root = base / name
        suffix = 1
        while root.exists() and any(root.iterdir()):
            root = base / f"{name}-{suffix}"
            suffix += 1
        root.mkdir(parents=True, exist_ok=True)
        return cls(root)

    @classmethod
    def open(cls, path: Path) -> "RunDir":
        """An existing run; a folder without `config.json` is not a run and says so."""
        run = cls(Path(path))
        if not run.config.is_file():
            raise LaresError(f"{path} is not a lares run directory (no config.json); pass the folder `lares run` printed")
        return run
