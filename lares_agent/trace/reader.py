"""Read what the agent graph did in a run: one `TraceStep` per node execution, with its LLM calls and verdicts.

Three files of the run directory are joined here (ARCHITECTURE, "Run directory"):

- `trace.sqlite`: LangGraph's SQLite checkpoints, one thread per round (`round-N`). Each node's partial update
  appends a `{node, attempt, summary}` record to the `steps` channel, so the records a checkpoint adds over its
  predecessor are the node executions of that super-step, and the checkpoint's timestamp is when they ended.
  It is read through `SqliteSaver.list()` on a read-only connection: a live run is never disturbed, and a
  missing file is never created.
- `llm_calls.jsonl`: every LLM call with `meta = {node, round, attempt, persona}`, joined to the step with the
  same (round, node, attempt).
- `candidates.jsonl`: verdicts, slots, fitness and lineage (`parent_id`: the elite a child was asked to improve,
  `critique_id`: the critique it was conditioned on).

The reward updates of `events.jsonl` come along: what graded each round's slots and each slot's graded value.
"""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from lares_agent.errors import LaresError
from lares_agent.runs import CandidateRow, LLMCallRow, RewardUpdateRecord, RunLayout, RunLog
from lares_agent.trace.types import CandidateTrace, LLMCall, NoteTrace, RunTrace, TraceStep

__all__ = ["read_trace"]

# What each node writes into the state (graphs/nodes.py); list channels with a reducer are shown as the delta.
_OUTPUT_KEYS: Mapping[str, tuple[str, ...]] = {
    "analyse": ("analysis", "facts", "fact_check"),
    "critique": ("critique", "critique_id", "defects", "critics", "critique_check"),
    "propose": ("pending",),
    "validate": ("accepted", "rejected"),
}
_APPENDED = ("accepted", "rejected")


def _when(text: str | None) -> _dt.datetime | None:
    try:
        when = _dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=_dt.UTC)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------- trace.sqlite
def _checkpoints(path: Path) -> dict[str, list[Any]]:
    """Checkpoint tuples of every root thread, oldest first. A missing or empty file is an empty trace."""
    if not path.is_file() or path.stat().st_size == 0:
        return {}
    # No `-wal` file: no writer holds the database (a live WAL writer always has one), so it is opened as
    # immutable and SQLite leaves no `-shm`/`-wal` companions behind; otherwise plain read-only, which sees a
    # live run's newest steps.
    live = path.with_name(path.name + "-wal").exists()
    uri = f"{path.resolve().as_uri()}?mode=ro" + ("" if live else "&immutable=1")
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    try:
        tuples = list(SqliteSaver(conn).list(None))
    except sqlite3.Error as exc:
        raise LaresError(f"{path} is not a readable graph trace ({exc}); was it written by `lares run`?") from None
    finally:
        conn.close()
    threads: dict[str, list[Any]] = defaultdict(list)
    for t in tuples:
        conf = t.config.get("configurable", {})
        if conf.get("checkpoint_ns", ""):
            continue  # subgraph checkpoints: the round graph has none
        threads[str(conf.get("thread_id"))].append(t)
    for rows in threads.values():
        rows.sort(key=lambda t: str(t.config["configurable"]["checkpoint_id"]))  # uuid6: time-ordered
    return dict(threads)


def _thread_round(thread: str, values: Mapping[str, Any]) -> int:
    if thread.startswith("round-") and _int(thread[6:]) is not None:
        return int(thread[6:])
    return _int(values.get("round")) or 0


def _output(node: str, values: Mapping[str, Any], before: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The node's own part of the state (list channels as the delta), and the decoded answer of each proposal."""
    out: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    for key in _OUTPUT_KEYS.get(node, ()):
        value = values.get(key)
        if key in _APPENDED:
            value = list(value or [])[len(before.get(key) or []):]
        if key == "pending":
            pending = []
            for rec in value or []:
                if rec.get("candidate") and rec.get("id"):
                    raw[str(rec["id"])] = rec["candidate"]
                pending.append({k: v for k, v in rec.items() if k != "candidate"})
            value = pending
        out[key] = value
    return out, raw


def _steps(threads: Mapping[str, list[Any]], persona: str) -> tuple[list[TraceStep], dict[str, Any]]:
    steps: list[TraceStep] = []
    raw: dict[str, Any] = {}
    for thread, rows in threads.items():
        before: Mapping[str, Any] = {}
        before_ts: _dt.datetime | None = None
        for t in rows:
            values = t.checkpoint.get("channel_values") or {}
            ts = str(t.checkpoint.get("ts") or "")
            when = _when(ts)
            new = list(values.get("steps") or [])[len(before.get("steps") or []):]
            for rec in new:
                node = str(rec.get("node", "?"))
                output, found = _output(node, values, before)
                raw.update(found)
                seconds = (when - before_ts).total_seconds() if when and before_ts else None
                steps.append(TraceStep(
                    round=_thread_round(thread, values), step=_int((t.metadata or {}).get("step")) or 0, time=ts,
                    seconds=seconds, node=node, attempt=_int(rec.get("attempt")) or 0, persona=persona,
                    summary=str(rec.get("summary", "")), output=output,
                ))
            before, before_ts = values, when or before_ts
    steps.sort(key=lambda s: (s.time, s.round, s.step))
    return steps, raw


# ---------------------------------------------------------------------------------------------- llm_calls.jsonl
def _calls(rows: Iterable[LLMCallRow]) -> list[LLMCall]:
    return [
        LLMCall(
            call=row.call,
            node=row.node,
            round=row.round,
            attempt=_int(row.meta.get("attempt")),
            persona=None if row.meta.get("persona") is None else str(row.meta["persona"]),
            messages=row.messages,
            answer=row.answer,
            ok=row.ok,
            error=row.error,
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            seconds=row.seconds,
            time=row.time,
            try_number=row.attempt,
        )
        for row in rows
    ]


def _join(steps: list[TraceStep], calls: list[LLMCall]) -> tuple[list[TraceStep], list[LLMCall]]:
    """Give each call to the step with its (round, node, attempt); when a round was re-run after a kill and
    several steps share that key, to the first of them that ended after the call started."""
    by_key: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, s in enumerate(steps):
        by_key[(s.round, s.node, s.attempt)].append(i)
    owned: dict[int, list[LLMCall]] = defaultdict(list)
    unmatched: list[LLMCall] = []
    for c in calls:
        idx = by_key.get((c.round, c.node, c.attempt))
        if not idx:
            unmatched.append(c)
            continue
        start = _when(c.time)
        pick = next((i for i in idx if start is None or (_when(steps[i].time) or start) >= start), idx[-1])
        owned[pick].append(c)
    # validate makes no call: it shows the persona its round's calls were made with (not a persona file's path)
    round_persona = {c.round: c.persona for c in calls if c.persona}
    joined = []
    for i, s in enumerate(steps):
        mine = tuple(owned.get(i, ()))
        persona = next((c.persona for c in mine if c.persona), round_persona.get(s.round) or s.persona)
        joined.append(replace(s, calls=mine, persona=persona))
    return joined, unmatched


# ---------------------------------------------------------------------------------------------- candidates
# What an evaluated line says the fitness was made of (runs.candidates.CandidateRow), where the run recorded it.
_GRADED = ("learner_success", "graded_by", "task_return", "progress_closed", "approach_closed", "complexity_penalty")
def _candidates(steps: Iterable[TraceStep], rows: Iterable[CandidateRow]) -> dict[str, CandidateTrace]:
    """Verdicts from the validate steps, then candidates.jsonl (slots, fallbacks, fitness) on top."""
    found: dict[str, dict[str, Any]] = {}
    evaluations: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in steps:
        for key in _APPENDED if s.node == "validate" else ():
            for rec in s.output.get(key) or []:
                found[str(rec.get("id"))] = {**rec, "verdict": key}
    for record in rows:
        cid, row = record.id, record.to_json()
        if record.verdict == "evaluated":
            evaluations[cid].append({k: row.get(k) for k in ("round", "slot", "fitness", "success")}
                                    | {k: row[k] for k in _GRADED if k in row})
            found.setdefault(cid, {"verdict": "evaluated", "complexity": row.get("complexity")})
            continue
        merged = found.setdefault(cid, {})
        merged.update({k: v for k, v in row.items() if v is not None and v != "" and k != "id"})
    out: dict[str, CandidateTrace] = {}
    for cid, rec in found.items():
        complexity = rec.get("complexity")
        out[cid] = CandidateTrace(
            id=cid, round=_int(rec.get("round")), attempt=_int(rec.get("attempt")),
            verdict=str(rec.get("verdict") or "unknown"), reason=str(rec.get("reason") or ""),
            components=dict(rec.get("components") or {}), rationale=str(rec.get("rationale") or ""),
            complexity=float(complexity) if isinstance(complexity, (int, float)) else None,
            slot=_int(rec.get("slot")), parent_id=rec.get("parent_id"), critique_id=rec.get("critique_id"),
            evaluations=tuple(evaluations.get(cid, ())),
        )
    return out


def _updates(log: RunLog) -> tuple[RewardUpdateRecord, ...]:
    updates = [RewardUpdateRecord.from_event(e) for e in log.events.read() if e.event == "reward_update"]
    return tuple(sorted(updates, key=lambda u: (u.round, u.env_steps)))  # stable: a resumed run's repeat stays last


def _notes(log: RunLog) -> tuple[NoteTrace, ...]:
    taken = {str(e.get("note")): e.round for e in log.events.read() if e.event == "feedback"}
    return tuple(NoteTrace(n.id, n.text, taken.get(n.id)) for n in log.feedback.read())


def read_trace(path: Path) -> RunTrace:
    """Read a run directory's graph trace; raises LaresError when `path` is not a run or its trace is unreadable."""
    run = RunLayout.open(Path(path))
    log = RunLog(run)
    try:
        config = json.loads(run.config.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LaresError(f"{run.config} is not a readable run configuration ({exc})") from None
    if not isinstance(config, Mapping):
        raise LaresError(f"{run.config} is not a run configuration (a JSON object is expected)")
    persona = str(config.get("persona") or "")
    steps, raw = _steps(_checkpoints(run.trace), persona)
    steps, unmatched = _join(steps, _calls(log.llm_calls.read()))
    return RunTrace(
        root=run.root,
        task=str(config.get("task") or "?"),
        persona=persona,
        llm_backend=str(config.get("llm_backend") or "?"),
        steps=tuple(steps),
        candidates=_candidates(steps, log.candidates.read()),
        unmatched_calls=tuple(unmatched),
        raw=raw,
        updates=_updates(log),
        notes=_notes(log),
        shaping=str(config.get("shaping") or "additive"),
        potentials={str(e.get("reward_id")): dict(e.fields) for e in log.events.read() if e.event == "potential"},
    )
