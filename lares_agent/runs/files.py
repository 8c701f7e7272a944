"""Typed access to a run's JSONL files: each file is read and written through its record schema only.

``RunLog(RunLayout(root))`` gives one :class:`RecordFile` per record kind; writers append records
(``log.metrics.append(MetricRow(...))``, ``log.event("run_start", env_steps=0)``), readers get typed records
back (``log.candidates.read()``), skipping lines a killed writer tore and lines that are not records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from lares_agent.runs.candidates import CandidateRow
from lares_agent.runs.events import Event, EventKind
from lares_agent.runs.feedback import FeedbackNote
from lares_agent.runs.jsonl import append_jsonl, append_lines, dumps_line, read_jsonl
from lares_agent.runs.layout import RunLayout
from lares_agent.runs.llm_calls import LLMCallRow
from lares_agent.runs.metrics import MetricRow

__all__ = ["JsonRecord", "RecordFile", "RunLog"]


class JsonRecord(Protocol):
    def to_json(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=JsonRecord)


@dataclass(frozen=True)
class RecordFile(Generic[R]):
    """One JSONL file holding one record kind. Every append opens, mends (a torn last line), writes one line,
    flushes and closes, so several writers and a crash leave whole lines only."""

    path: Path
    parse: Callable[[Mapping[str, Any]], R | None]

    def append(self, record: R) -> None:
        append_jsonl(self.path, record.to_json())

    def extend(self, records: Iterable[R]) -> None:
        lines = [dumps_line(r.to_json()) + "\n" for r in records]
        if lines:
            append_lines(self.path, "".join(lines))

    def read(self) -> list[R]:
        """The file's records in order (a missing file is empty)."""
        out: list[R] = []
        for row in read_jsonl(self.path):
            record = self.parse(row)
            if record is not None:
                out.append(record)
        return out


class RunLog:
    """The record files of one run folder."""

    def __init__(self, layout: RunLayout | Path, clock: Callable[[], float] = time.time) -> None:
        self.layout = layout if isinstance(layout, RunLayout) else RunLayout(Path(layout))
        self._clock = clock
        self.metrics: RecordFile[MetricRow] = RecordFile(self.layout.metrics, MetricRow.from_json)
        self.events: RecordFile[Event] = RecordFile(self.layout.events, Event.from_json)
        self.candidates: RecordFile[CandidateRow] = RecordFile(self.layout.candidates, CandidateRow.from_json)
        self.llm_calls: RecordFile[LLMCallRow] = RecordFile(self.layout.llm_calls, LLMCallRow.from_json)
        self.feedback: RecordFile[FeedbackNote] = RecordFile(self.layout.feedback, FeedbackNote.from_json)

    def event(self, kind: EventKind, /, **fields: Any) -> Event:
        """Append one event stamped with the current time (the search's events); returns it."""
        record = Event.of(kind, **fields, time=self._clock())
        self.events.append(record)
        return record
