"""The engine's run log: events, metrics rows and atomic checkpoints, written where the run's files are.

``populations/__init__.py`` makes one before it builds the engine, so the population reports its events (warm-up,
quarantine) to the same log as the loop.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from lares_agent.engine.errors import EngineError
from lares_agent.engine.state.checkpoint import save_checkpoint
from lares_agent.runs import Event, MetricRow, RunLayout, RunLog, log_sizes

__all__ = ["EngineLog"]


class EngineLog:
    """Events (kept in ``events`` and appended to the run's events file), metrics rows and atomic checkpoints.

    The files and their record schemas belong to ``lares_agent.runs``: a row the schema does not know is a bug
    here, so it raises instead of being written. Without a run directory nothing is written: events are only
    kept in memory and checkpoints are skipped. ``records_s``: the seconds spent writing checkpoints and, through
    :meth:`timed`, policy files, this session.
    """

    def __init__(self, run_dir: str | Path | None) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.events: list[dict[str, Any]] = []
        self._files = RunLog(RunLayout(self.run_dir)) if self.run_dir is not None else None
        self.records_s = 0.0
        self._periodic_at: tuple[int, int] | None = None  # (env_steps, round) of the newest periodic checkpoint

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        """Count the block's seconds as writing records (``records_s``)."""
        began = time.monotonic()
        try:
            yield
        finally:
            self.records_s += time.monotonic() - began

    def event(self, record: dict[str, Any]) -> None:
        """Keep and write one event."""
        self.events.append(record)
        if self._files is not None:
            self._files.events.append(_typed(Event.from_json(record), record))

    def metrics(self, record: dict[str, Any]) -> None:
        """Write one metrics row."""
        if self._files is not None:
            self._files.metrics.append(_typed(MetricRow.from_json(record), record))

    def checkpoint(self, state: Callable[[], dict[str, Any]], name: str | None, env_steps: int,
                   round_: int) -> Path | None:
        """Atomically save ``state()`` in the run's checkpoints folder and log a ``checkpoint`` event (at the loop's
        ``env_steps`` and ``round_``).

        Default name ``step-<env_steps>`` (only the newest periodic one is kept); reward updates use
        ``round-<n>`` names, which are kept. A periodic one at the step and round of the newest periodic one is
        not written again (the end of a run whose last step just wrote it; a named one in between clears the mark).
        """
        periodic, at = name is None, (env_steps, round_)
        if self._files is None or (periodic and at == self._periodic_at):
            return None
        name = name or f"step-{env_steps:09d}"
        with self.timed():
            # the event goes first, so the sizes a resume cuts the logs back to keep it (a resume from this
            # checkpoint still says it was taken); a kill before the save leaves it past an older checkpoint's
            # sizes, cut then
            self.event({"event": "checkpoint", "name": name, "env_steps": env_steps, "round": round_})
            saved = save_checkpoint(
                self._files.layout.checkpoints, state(), name, prune_prefix="step-" if periodic else None,
                meta={"log_bytes": log_sizes(self._files.layout)},  # what a resume truncates the logs back to
            )
        self._periodic_at = at if periodic else None
        return saved

    def close(self) -> None:
        """Nothing stays open: every record is appended and flushed on its own (kept for the engine's close)."""


T = TypeVar("T")


def _typed(record: T | None, raw: Mapping[str, Any]) -> T:
    if record is None:
        raise EngineError(f"the engine wrote a row its record schema does not know: {sorted(raw)}")
    return record
