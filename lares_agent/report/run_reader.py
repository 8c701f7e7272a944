"""Read a run directory into typed records for the report.

The run directory is written by three layers (engine, search, llm) whose field names may still move. Every
field is read here and only here, through :func:`_get` with its accepted aliases, so a rename is a one-line
fix in this module. Reading is tolerant on purpose: a report of a crashed or half-finished run is the most
useful one, so a missing file or field gives an empty series, an unknown field is ignored, and a truncated
last JSONL line (a killed writer) is skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.errors import LaresError
from lares_agent.runs.jsonl import read_jsonl

__all__ = [
    "Candidate",
    "Evaluation",
    "LLMCall",
    "NotARunError",
    "RewardUpdate",
    "RunData",
    "RunEvent",
    "SlotEval",
    "is_run_dir",
    "read_run",
]

# Files whose presence marks a run directory (config.json alone is enough: a run killed before its first
# evaluation still deserves a report that says so).
RUN_MARKERS = ("config.json", "metrics.jsonl", "events.jsonl")
# Config keys that may hold the env-step budget, searched depth-first through nested dataclass JSON.
BUDGET_KEYS = ("budget", "total_env_steps", "env_step_budget", "budget_env_steps", "total_steps", "env_steps")


class NotARunError(LaresError, ValueError):
    """The given path is not a run directory; ``reason`` is one line fit for the CLI."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class SlotEval:
    """One learner's evaluation (one slot of one metrics.jsonl line)."""

    slot: int
    reward_id: str
    success: float
    task_return: float
    own_return: float
    alpha: float
    q_loss: float
    actor_loss: float
    component_stats: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Evaluation:
    """One metrics.jsonl line: every learner evaluated at the same env step."""

    env_steps: int
    round: int
    wall_s: float
    slots: tuple[SlotEval, ...]
    acted: Mapping[int, int]


@dataclass(frozen=True)
class RewardUpdate:
    """A ``reward_update`` event: fitness of the rewards held during ``round`` and what replaced whom."""

    round: int
    env_steps: int
    fitness: Mapping[int, float]
    elites: tuple[int, ...]
    replaced: Mapping[int, str]
    best_slot: int | None
    # what the engine judged, per slot (the event's "slots" list): reward id, complexity, component stats
    judged: Mapping[int, str] = field(default_factory=dict)
    complexity: Mapping[int, float] = field(default_factory=dict)
    component_stats: Mapping[int, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)


@dataclass(frozen=True)
class RunEvent:
    """Any events.jsonl line (reward updates included), kept raw for the summary."""

    event: str
    round: int | None
    env_steps: int | None
    data: Mapping[str, Any]


@dataclass(frozen=True)
class Candidate:
    """One candidates.jsonl line: a proposal, its verdict and (later) its fitness."""

    id: str
    round: int | None
    slot: int | None
    components: Mapping[str, str]
    rationale: str
    verdict: str
    reason: str
    complexity: float
    parent_id: str | None
    critique_id: str | None
    fitness: float | None
    component_stats: Mapping[str, Mapping[str, float]]

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"


@dataclass(frozen=True)
class LLMCall:
    """One llm_calls.jsonl line, reduced to what the cost figure needs."""

    tag: str
    round: int | None
    prompt_tokens: int
    completion_tokens: int
    seconds: float


@dataclass(frozen=True)
class RunData:
    """Everything the report needs from one run directory."""

    path: Path
    config: Mapping[str, Any]
    evaluations: tuple[Evaluation, ...]
    updates: tuple[RewardUpdate, ...]
    events: tuple[RunEvent, ...]
    candidates: tuple[Candidate, ...]
    llm_calls: tuple[LLMCall, ...]
    by_id: Mapping[str, Candidate] = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def task(self) -> str:
        return str(_find_key(self.config, ("task", "task_name")) or "?")

    @property
    def setting(self) -> str:
        return str(_find_key(self.config, ("setting",)) or "?")

    @property
    def budget(self) -> int | None:
        value = _find_key(self.config, BUDGET_KEYS)
        return _as_int(value)

    def candidate(self, reward_id: str) -> Candidate | None:
        """The (last) candidate record with this id, or None (e.g. the built-in human reward)."""
        return self.by_id.get(reward_id)

    def slots(self) -> list[int]:
        """Sorted slot numbers seen in any evaluation."""
        return sorted({s.slot for e in self.evaluations for s in e.slots})

    def slot_matrix(self, metric: str) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Return ``(env_steps [E], values [E, K], slots)`` for a SlotEval field, NaN where a slot is absent."""
        slots = self.slots()
        col = {s: j for j, s in enumerate(slots)}
        steps = np.array([e.env_steps for e in self.evaluations], dtype=np.int64)
        values = np.full((len(self.evaluations), len(slots)), np.nan)
        for i, ev in enumerate(self.evaluations):
            for s in ev.slots:
                values[i, col[s.slot]] = getattr(s, metric)
        return steps, values, slots


# ---------------------------------------------------------------------------------------------------------
# tolerant field access


def _get(rec: Mapping[str, Any], *names: str, default: Any = None) -> Any:
    """First present, non-null field among ``names`` (the aliases a renamed field may carry)."""
    for n in names:
        if n in rec and rec[n] is not None:
            return rec[n]
    return default


def _as_float(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _int_keyed(value: Any) -> dict[int, Any]:
    """``{"0": x}`` (JSON object keys are strings) or ``[x0, x1]`` -> ``{0: x0, 1: x1}``."""
    if isinstance(value, Mapping):
        out: dict[int, Any] = {}
        for k, v in value.items():
            ik = _as_int(k)
            if ik is not None:
                out[ik] = v
        return out
    if isinstance(value, Sequence) and not isinstance(value, str):
        return dict(enumerate(value))
    return {}


def _find_key(obj: Any, keys: Sequence[str]) -> Any:
    """Depth-first search of nested config JSON for the first key in ``keys`` (in key priority order)."""
    if not isinstance(obj, Mapping):
        return None
    for k in keys:
        if k in obj and not isinstance(obj[k], Mapping) and obj[k] is not None:
            return obj[k]
    for v in obj.values():
        found = _find_key(v, keys)
        if found is not None:
            return found
    return None


def _stats(raw: Any) -> dict[str, dict[str, float]]:
    """``{component: {"mean", "std", "share"}}`` with float values; anything else gives ``{}``."""
    if not isinstance(raw, Mapping):
        return {}
    return {str(n): {str(k): _as_float(v) for k, v in st.items()} for n, st in raw.items() if isinstance(st, Mapping)}


# ---------------------------------------------------------------------------------------------------------
# record parsers (one per file; aliases live here)


def _slot_eval(rec: Mapping[str, Any], default_slot: int) -> SlotEval:
    slot = _as_int(_get(rec, "slot", "member"))
    return SlotEval(
        slot=default_slot if slot is None else slot,
        reward_id=str(_get(rec, "reward_id", "reward", default="?")),
        success=_as_float(_get(rec, "success", "success_rate")),
        task_return=_as_float(_get(rec, "task_return", "return", "human_return")),
        own_return=_as_float(_get(rec, "own_return")),
        alpha=_as_float(_get(rec, "alpha")),
        q_loss=_as_float(_get(rec, "q_loss")),
        actor_loss=_as_float(_get(rec, "actor_loss")),
        component_stats=_stats(_get(rec, "component_stats", default={})),
    )


def _evaluation(rec: Mapping[str, Any]) -> Evaluation | None:
    steps = _as_int(_get(rec, "env_steps", "steps"))
    if steps is None:
        return None
    raw_slots = _get(rec, "slots", "members", default=[])
    items = list(raw_slots.values()) if isinstance(raw_slots, Mapping) else list(raw_slots)
    losses = _get(rec, "losses", default={})
    losses = losses if isinstance(losses, Mapping) else {}
    per_slot = {"alpha": _get(rec, "alpha"), "q_loss": _get(losses, "q_loss"), "actor_loss": _get(losses, "actor_loss")}
    slots = tuple(
        _slot_eval({**_at_slot(per_slot, _as_int(_get(s, "slot", "member")), i), **s}, i)
        for i, s in enumerate(items)
        if isinstance(s, Mapping)
    )
    acted = {k: _as_int(v) or 0 for k, v in _int_keyed(_get(rec, "acted", default={})).items()}
    return Evaluation(
        env_steps=steps,
        round=_as_int(_get(rec, "round")) or 0,
        wall_s=_as_float(_get(rec, "wall_s", "wall_time", "elapsed_s")),
        slots=slots,
        acted=acted,
    )


def _at_slot(arrays: Mapping[str, Any], slot: int | None, default: int) -> dict[str, Any]:
    """Record-level per-slot lists (the engine logs losses and alpha as [K] arrays) reduced to one slot."""
    k = default if slot is None else slot
    return {n: v[k] for n, v in arrays.items() if isinstance(v, list) and 0 <= k < len(v)}


def _event(rec: Mapping[str, Any]) -> RunEvent:
    return RunEvent(
        event=str(_get(rec, "event", "type", default="?")),
        round=_as_int(_get(rec, "round")),
        env_steps=_as_int(_get(rec, "env_steps", "steps")),
        data=dict(rec),
    )


def _update(rec: Mapping[str, Any]) -> RewardUpdate:
    fitness = {k: _as_float(v) for k, v in _int_keyed(_get(rec, "fitness", default={})).items()}
    elites = tuple(i for i in (_as_int(e) for e in _get(rec, "elites", default=[])) if i is not None)
    replaced = {k: str(v) for k, v in _int_keyed(_get(rec, "replaced", default={})).items()}
    best = _as_int(_get(rec, "best_slot", "best"))
    if best is None and fitness:
        finite = {k: v for k, v in fitness.items() if math.isfinite(v)}
        best = max(finite, key=finite.__getitem__) if finite else None
    judged_raw = _get(rec, "slots", default=[])
    judged = [j for j in (judged_raw if isinstance(judged_raw, list) else []) if isinstance(j, Mapping)]
    judged = [j for j in judged if _as_int(_get(j, "slot", "member")) is not None]

    def slot_of(j: Mapping[str, Any]) -> int:
        return int(_as_int(_get(j, "slot", "member")) or 0)

    return RewardUpdate(
        round=_as_int(_get(rec, "round")) or 0,
        env_steps=_as_int(_get(rec, "env_steps", "steps")) or 0,
        fitness=fitness,
        elites=elites,
        replaced=replaced,
        best_slot=best,
        judged={slot_of(j): str(_get(j, "reward_id")) for j in judged if _get(j, "reward_id") is not None},
        complexity={slot_of(j): _as_float(_get(j, "complexity")) for j in judged},
        component_stats={slot_of(j): _stats(_get(j, "component_stats", "components", default={})) for j in judged},
    )


def _candidate(rec: Mapping[str, Any]) -> Candidate | None:
    cid = _get(rec, "id", "reward_id")
    if cid is None:
        return None
    comps = _get(rec, "components", default={})
    comps = {str(k): str(v) for k, v in comps.items()} if isinstance(comps, Mapping) else {}
    stats = _stats(_get(rec, "component_stats", default={}))
    fit = _get(rec, "fitness")
    parent = _get(rec, "parent_id", "parent")
    critique = _get(rec, "critique_id")
    return Candidate(
        id=str(cid),
        round=_as_int(_get(rec, "round")),
        slot=_as_int(_get(rec, "slot")),
        components=comps,
        rationale=str(_get(rec, "rationale", default="")),
        verdict=str(_get(rec, "verdict", default="?")),
        reason=str(_get(rec, "reason", default="")),
        complexity=_as_float(_get(rec, "complexity")),
        parent_id=None if parent is None else str(parent),
        critique_id=None if critique is None else str(critique),
        fitness=None if fit is None else _as_float(fit),
        component_stats=stats,
    )


def _llm_call(rec: Mapping[str, Any]) -> LLMCall:
    meta = _get(rec, "meta", default={})
    meta = meta if isinstance(meta, Mapping) else {}
    usage = _get(rec, "usage", default={})
    usage = usage if isinstance(usage, Mapping) else {}
    return LLMCall(
        tag=str(_get(rec, "tag", "node", default=_get(meta, "node", default="?"))),
        round=_as_int(_get(meta, "round", default=_get(rec, "round"))),
        prompt_tokens=_as_int(_get(rec, "prompt_tokens", default=_get(usage, "prompt_tokens", default=0))) or 0,
        completion_tokens=_as_int(
            _get(rec, "completion_tokens", default=_get(usage, "completion_tokens", default=0))
        )
        or 0,
        seconds=_as_float(_get(rec, "seconds", "latency_s", default=0.0)),
    )


# ---------------------------------------------------------------------------------------------------------
# entry points


def is_run_dir(path: Path) -> bool:
    """True if ``path`` is a directory holding at least one run marker file."""
    return path.is_dir() and any((path / m).is_file() for m in RUN_MARKERS)


def read_run(path: str | Path) -> RunData:
    """Read a run directory; raises :class:`NotARunError` if ``path`` is not one."""
    p = Path(path)
    if not p.is_dir():
        raise NotARunError(f"{p} is not a run directory: it does not exist or is not a directory")
    if not is_run_dir(p):
        raise NotARunError(f"{p} is not a run directory: it has none of {', '.join(RUN_MARKERS)}")
    config: Mapping[str, Any] = {}
    cfg_path = p / "config.json"
    if cfg_path.is_file():
        try:
            loaded = json.loads(cfg_path.read_text(encoding="utf-8", errors="replace"))
        except json.JSONDecodeError as exc:
            raise NotARunError(f"{cfg_path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
        config = loaded if isinstance(loaded, Mapping) else {}

    evaluations = [e for e in (_evaluation(r) for r in read_jsonl(p / "metrics.jsonl")) if e is not None]
    evaluations.sort(key=lambda e: e.env_steps)  # stable: a resumed run may append out of order
    events = [_event(r) for r in read_jsonl(p / "events.jsonl")]
    updates = [_update(e.data) for e in events if e.event == "reward_update"]
    updates.sort(key=lambda u: (u.round, u.env_steps))
    candidates = [c for c in (_candidate(r) for r in read_jsonl(p / "candidates.jsonl")) if c is not None]
    calls = [_llm_call(r) for r in read_jsonl(p / "llm_calls.jsonl")]
    # A candidate may be logged twice (proposal, then fitness later): the last line wins field by field.
    by_id: dict[str, Candidate] = {}
    for c in candidates:
        prev = by_id.get(c.id)
        by_id[c.id] = c if prev is None else _merge(prev, c)
    return RunData(
        path=p,
        config=config,
        evaluations=tuple(evaluations),
        updates=tuple(updates),
        events=tuple(events),
        candidates=tuple(candidates),
        llm_calls=tuple(calls),
        by_id=by_id,
    )


def _merge(old: Candidate, new: Candidate) -> Candidate:
    """Later record wins, but an absent field in it keeps the earlier value."""
    return Candidate(
        id=new.id,
        round=new.round if new.round is not None else old.round,
        slot=new.slot if new.slot is not None else old.slot,
        components=new.components or old.components,
        rationale=new.rationale or old.rationale,
        verdict=new.verdict if new.verdict != "?" else old.verdict,
        reason=new.reason or old.reason,
        complexity=new.complexity if math.isfinite(new.complexity) else old.complexity,
        parent_id=new.parent_id or old.parent_id,
        critique_id=new.critique_id or old.critique_id,
        fitness=new.fitness if new.fitness is not None else old.fitness,
        component_stats=new.component_stats or old.component_stats,
    )
