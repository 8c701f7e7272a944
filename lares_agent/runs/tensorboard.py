"""TensorBoard scalars of a run (`lares run --tensorboard`), mirrored from the records the run writes anyway.

Why a mirror of the files rather than logger calls in the engine: ``metrics.jsonl``, ``events.jsonl`` and
``llm_calls.jsonl`` are the run's record whatever else happens, so the scalars say exactly what the record says,
the engine stays free of a logger, and a resumed run catches up with the same code that logs a live one.

What is written (``tensorboard/`` in the run folder, one event file per session):

- every metrics row, at its env step: ``eval/...`` for a periodic evaluation, ``update_eval/...`` for the
  evaluation a reward update ranks on: ``success/slot_N``, ``task_return/slot_N``, ``own_return/slot_N`` (the
  init setting's learner on the task's own reward is ``slot_human``), ``success/max``, ``success/mean``,
  ``success/ranked_first``; the learners' losses and temperature since the previous row, ``losses/<name>/
  learner_I`` and ``alpha/learner_I``;
- every ``reward_update`` event, at its env step: ``fitness/slot_N``;
- every LLM call attempt, at its row number in ``llm_calls.jsonl``: ``llm/prompt_tokens``,
  ``llm/completion_tokens`` and the run's running total ``llm/total_tokens``.

Values that are not finite (a task without its own reward has no task return; a quarantined slot's fitness) are
left out, as the report leaves them out.

A resume cuts metrics and events back to its checkpoint and replays the steps after it (``runs/repair.py``). The
mirror keeps, in ``tensorboard/mirrored.json``, the newest step it wrote for each tag and writes a value only at a
later step: no row from before the checkpoint is written twice, and a step replayed after it keeps the value
first written (TensorBoard would draw both).
"""

from __future__ import annotations

import json
import math
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Protocol

from lares_agent.runs.atomic import atomic_write_text
from lares_agent.runs.events import RewardUpdateRecord
from lares_agent.runs.jsonl import JsonlTail
from lares_agent.runs.layout import RunLayout
from lares_agent.runs.llm_calls import LLMCallRow
from lares_agent.runs.metrics import MetricRow

__all__ = ["MIRROR_STATE_NAME", "TENSORBOARD_INSTALL", "Scalar", "TensorBoardMirror", "llm_scalars",
           "metric_scalars", "read_scalars", "update_scalars"]

Scalar = tuple[str, int, float]
"""One TensorBoard point: tag, step, value."""

MIRROR_STATE_NAME = "mirrored.json"
TENSORBOARD_INSTALL = "--tensorboard needs tensorboardX: pip install tensorboardX==2.6.5 (a lares-agent dependency)"
HUMAN_SLOT = "slot_human"  # the init setting's extra learner, trained on the task's own reward throughout


class _Writer(Protocol):
    def add_scalar(self, tag: str, scalar_value: float, global_step: int) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


def _finite(tag: str, step: int, value: float | None) -> list[Scalar]:
    if value is None or not math.isfinite(value):
        return []
    return [(tag, step, float(value))]


def metric_scalars(row: MetricRow) -> list[Scalar]:
    """The scalars of one metrics row (module docstring), in a fixed order."""
    prefix = "update_eval" if row.kind == "update" else "eval"
    step = row.env_steps
    out: list[Scalar] = []
    for s in row.slots:
        name = f"slot_{s.slot}"
        out += _finite(f"{prefix}/success/{name}", step, s.success)
        out += _finite(f"{prefix}/task_return/{name}", step, s.task_return)
        out += _finite(f"{prefix}/own_return/{name}", step, s.own_return)
        out += _finite(f"{prefix}/es_fitness/{name}", step, s.es_fitness)
    if row.extra is not None:
        for key in ("success", "task_return", "own_return"):
            value = row.extra.get(key)
            out += _finite(f"{prefix}/{key}/{HUMAN_SLOT}", step, value if isinstance(value, (int, float)) else None)
    out += _finite(f"{prefix}/success/max", step, row.success_max)
    out += _finite(f"{prefix}/success/mean", step, row.success_mean)
    out += _finite(f"{prefix}/success/ranked_first", step, row.success_best_slot)
    for name, values in sorted((row.losses or {}).items()):
        for i, value in enumerate(values):
            out += _finite(f"losses/{name}/learner_{i}", step, value)
    for i, value in enumerate(row.alpha or ()):
        out += _finite(f"alpha/learner_{i}", step, value)
    return out


def update_scalars(record: RewardUpdateRecord) -> list[Scalar]:
    """Each slot's fitness at one reward update."""
    return [p for slot, value in sorted(record.fitness.items())
            for p in _finite(f"fitness/slot_{slot}", record.env_steps, value)]


def llm_scalars(row: LLMCallRow, number: int, total_before: int) -> list[Scalar]:
    """One LLM call attempt's tokens at ``number`` (its 1-based row in ``llm_calls.jsonl``), and the run's total
    after it (``total_before`` plus its own)."""
    total = total_before + row.prompt_tokens + row.completion_tokens
    return [("llm/prompt_tokens", number, float(row.prompt_tokens)),
            ("llm/completion_tokens", number, float(row.completion_tokens)),
            ("llm/total_tokens", number, float(total))]


def _tensorboardx_writer(logdir: Path) -> _Writer:
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        from lares_agent.errors import LaresError

        raise LaresError(TENSORBOARD_INSTALL) from None
    # tensorboardX names the file by the second and opens it with "wb": a second session (a resume) started in
    # the same second would empty the first one's file without a suffix of its own
    writer: _Writer = SummaryWriter(logdir=str(logdir), flush_secs=30, filename_suffix=f".{time.time_ns()}")
    return writer


class TensorBoardMirror:
    """Writes the scalars of a run's records that are new since the last call (`poll`), into ``tensorboard/``.

    ``writer`` makes the writer for the folder (tests pass their own); the default is tensorboardX's
    ``SummaryWriter``, which Ray Tune's TensorBoard logger uses too.
    """

    def __init__(self, layout: RunLayout, writer: Callable[[Path], _Writer] = _tensorboardx_writer) -> None:
        self.layout = layout
        self.folder = layout.tensorboard
        self._state_path = self.folder / MIRROR_STATE_NAME
        self._last = self._read_state()  # tag -> newest step written, over every session
        self._writer = writer(self.folder)
        self._metrics, self._events, self._llm = (JsonlTail(layout.metrics), JsonlTail(layout.events),
                                                  JsonlTail(layout.llm_calls))
        self._llm_rows = 0
        self._llm_total = 0
        self.written = 0  # points written by this mirror

    def _read_state(self) -> dict[str, int]:
        try:
            data = json.loads(self._state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        last = data.get("last_step") if isinstance(data, dict) else None
        if not isinstance(last, dict):
            return {}
        return {str(k): int(v) for k, v in last.items() if isinstance(v, int)}

    def _scalars(self) -> Iterator[Scalar]:
        for raw in self._metrics.rows():
            row = MetricRow.from_json(raw)
            if row is not None:
                yield from metric_scalars(row)
        for raw in self._events.rows():
            record = RewardUpdateRecord.from_json(raw) if raw.get("event") == "reward_update" else None
            if record is not None:
                yield from update_scalars(record)
        for raw in self._llm.rows():
            call = LLMCallRow.from_json(raw)
            self._llm_rows += 1
            points = llm_scalars(call, self._llm_rows, self._llm_total)
            self._llm_total = int(points[-1][2])
            yield from points

    def poll(self) -> int:
        """Write what the records gained since the last call; returns the number of points written. The event
        file is flushed before the steps are recorded as written, so a kill can lose a point's record but never
        a recorded point."""
        count = 0
        for tag, step, value in self._scalars():
            if step <= self._last.get(tag, -1):
                continue  # written by an earlier session (or an earlier row at this step)
            self._writer.add_scalar(tag, value, global_step=step)
            self._last[tag] = step
            count += 1
        if count:
            self._writer.flush()
            atomic_write_text(self._state_path, json.dumps({"last_step": self._last}, sort_keys=True), fsync=False)
            self.written += count
        return count

    def close(self) -> None:
        """A last `poll`, then the event file is closed."""
        try:
            self.poll()
        finally:
            self._writer.close()

    def __enter__(self) -> TensorBoardMirror:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()



def read_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar point in the event files under ``folder``, per tag, in file and write order: what the tests
    read back, and a reader for a machine without TensorBoard. The files are TFRecords (length, its CRC, one
    ``Event`` protobuf, its CRC), decoded with tensorboardX's protobuf types; a torn last record is skipped, the
    CRCs are not checked. Values are float32, as TensorBoard stores them."""
    from tensorboardX.proto.event_pb2 import Event as TBEvent

    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(folder.rglob("events.out.tfevents.*")):
        data = path.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, pos)
            start, end = pos + 12, pos + 12 + int(length)
            if end + 4 > len(data):
                break
            event = TBEvent.FromString(data[start:end])
            pos = end + 4
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    out.setdefault(str(value.tag), []).append((int(event.step), float(value.simple_value)))
    return out
