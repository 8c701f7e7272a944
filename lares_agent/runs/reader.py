"""Read a run directory into typed records: for the report, and for `lares export` and a found reward trained alone
(`search/found_reward.py`), which read the reward a run hands over (`selected.py`). Here, below both the search and
the report, so that neither imports the other to read a run.

Every file is read through its record schema in ``lares_agent.runs`` (the one the writers use), so each field
has one name. Reading is tolerant on purpose: a report of a crashed or half-finished run is the most useful
one, so a missing file or field gives an empty series, an unknown field is ignored, and a truncated last JSONL
line (a killed writer) is skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.runs import (
    RUN_MARKERS,
    CandidateRow,
    Event,
    LLMCallRow,
    MetricRow,
    NotARunError,
    RewardUpdateRecord,
    RunLayout,
    RunLog,
    SlotRecord,
)
from lares_agent.runs.coerce import as_float, as_int

__all__ = [
    "HUMAN_REWARD_ID",
    "Candidate",
    "Evaluation",
    "LLMCall",
    "NotARunError",
    "RewardUpdate",
    "RunData",
    "SlotEval",
    "is_run_dir",
    "read_run",
]


HUMAN_REWARD_ID = "human"
"""The id of the task's own reward in the run's records (engine.contracts.HumanReward's): the init setting's kept
learner and the baseline train on it."""


@dataclass(frozen=True)
class SlotEval:
    """One learner's evaluation (one slot of one metrics.jsonl line); SAC's losses and temperature are the
    means since the previous line (NaN for ES)."""

    slot: int
    reward_id: str
    success: float
    task_return: float
    own_return: float
    alpha: float
    q_loss: float
    actor_loss: float


@dataclass(frozen=True)
class Evaluation:
    """One metrics.jsonl line: every learner evaluated at the same env step."""

    env_steps: int
    round: int
    wall_s: float
    slots: tuple[SlotEval, ...]
    acted: Mapping[int, int]
    human: SlotEval | None = None
    """The init setting's learner on the task's own reward (metrics.jsonl's ``extra``), kept beside the slots."""


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
    # what each slot's fitness was made of (runs before graded fitness have none): the graded value (minus the
    # penalty in runs before the one ranking rule)
    graded_by: Mapping[int, str] = field(default_factory=dict)  # "success", "return", "progress" or "approach"
    graded: Mapping[int, float] = field(default_factory=dict)  # the success rate, task return or a share closed
    complexity_penalty: Mapping[int, float] = field(default_factory=dict)
    learner_success: Mapping[int, tuple[float, ...]] = field(default_factory=dict)
    """Each learner's success per slot, with several learners per reward (the fitness used their mean)."""


@dataclass(frozen=True)
class Candidate:
    """A proposal, its verdict and (later) its fitness: candidates.jsonl lines of one id, merged."""

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
    proxy: float | None = None  # the offline pre-screen's score when it was proposed
    verifier_tau: float | None = None  # the verifier's order tau when it was proposed (rewards/verifier.py)

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
    events: tuple[Event, ...]
    candidates: tuple[Candidate, ...]
    llm_calls: tuple[LLMCall, ...]
    by_id: Mapping[str, Candidate] = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.path.name

    # config.json is SearchConfig.to_json(): its field names
    @property
    def task(self) -> str:
        return str(self.config.get("task") or "?")

    @property
    def setting(self) -> str:
        return str(self.config.get("setting") or "?")

    @property
    def budget(self) -> int | None:
        return as_int(self.config.get("budget"))

    def candidate(self, reward_id: str) -> Candidate | None:
        """The (last) candidate record with this id, or None (e.g. the built-in human reward)."""
        return self.by_id.get(reward_id)

    def human_series(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """``(env_steps, values)`` of the init setting's human-reward learner for a SlotEval field; empty when the
        run kept none."""
        rows = [(e.env_steps, getattr(e.human, metric)) for e in self.evaluations if e.human is not None]
        return (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=float))

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
# from the record schemas to the report's views


def _mean_at(values: tuple[float, ...] | None, start: int, n: int) -> float:
    """The mean of a slot's learners' entries ``start .. start+n-1`` of a per-learner array (the engine logs
    losses and alpha as [K*N] arrays); NaN where none is there."""
    got = [v for v in (values or ())[start:start + n] if math.isfinite(v)] if start >= 0 else []
    return sum(got) / len(got) if got else math.nan


def _evaluation(row: MetricRow) -> Evaluation:
    losses = row.losses or {}

    def mean(values: tuple[float, ...] | None, s: SlotRecord) -> float:  # over the slot's N learners
        n = max(1, len(s.learner_success or ()))
        return _mean_at(values, s.slot * n, n)

    slots = tuple(
        SlotEval(
            slot=s.slot,
            reward_id=s.reward_id,
            success=s.success,
            task_return=s.task_return,
            own_return=s.own_return,
            alpha=mean(row.alpha, s),
            q_loss=mean(losses.get("q_loss"), s),
            actor_loss=mean(losses.get("actor_loss"), s),
        )
        for s in row.slots
    )
    extra = row.extra or {}
    human = None
    if extra:
        human = SlotEval(slot=len(row.slots), reward_id=HUMAN_REWARD_ID, success=as_float(extra.get("success")),
                         task_return=as_float(extra.get("task_return")), own_return=as_float(extra.get("own_return")),
                         alpha=math.nan, q_loss=math.nan, actor_loss=math.nan)
    return Evaluation(
        env_steps=row.env_steps,
        round=row.round,
        wall_s=row.wall_time,
        slots=slots,
        acted=dict(enumerate(row.acted or ())),
        human=human,
    )


def _update(rec: RewardUpdateRecord) -> RewardUpdate:
    best = rec.best
    if best is None and rec.fitness:  # a line cut short of its "best": the fittest slot
        finite = {k: v for k, v in rec.fitness.items() if math.isfinite(v)}
        best = max(finite, key=finite.__getitem__) if finite else None
    return RewardUpdate(
        round=rec.round,
        env_steps=rec.env_steps,
        fitness=dict(rec.fitness),
        elites=rec.elites,
        replaced=dict(rec.replaced),
        best_slot=best,
        judged={j.slot: j.reward_id for j in rec.slots},
        complexity={j.slot: j.complexity for j in rec.slots},
        component_stats={j.slot: j.components for j in rec.slots},
        graded_by={j.slot: j.graded_by for j in rec.slots if j.graded_by is not None},
        graded={j.slot: j.graded for j in rec.slots if j.graded_by is not None},
        complexity_penalty={j.slot: j.complexity_penalty for j in rec.slots if j.graded_by is not None},
        learner_success={j.slot: j.learner_success for j in rec.slots if j.learner_success},
    )


def _candidate(row: CandidateRow) -> Candidate:
    return Candidate(
        id=row.id,
        round=row.round,
        slot=row.slot,
        components=dict(row.components or {}),
        rationale=row.rationale or "",
        verdict=row.verdict or "?",
        reason=row.reason or "",
        complexity=as_float(row.complexity),
        parent_id=row.parent_id,
        critique_id=row.critique_id,
        fitness=_fitness(row.evaluated),
        component_stats=dict(row.evaluated.components) if row.evaluated is not None else {},
        proxy=row.proxy,
        verifier_tau=row.verifier_tau,
    )


def _fitness(evaluated: SlotRecord | None) -> float | None:
    """An evaluated line's fitness; None where the line has none (a proposal's line, or no fitness recorded)."""
    return evaluated.fitness if evaluated is not None and not math.isnan(evaluated.fitness) else None


def _llm_call(row: LLMCallRow) -> LLMCall:
    return LLMCall(
        tag=row.tag or "?",
        round=row.round,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        seconds=row.seconds,
    )


# ---------------------------------------------------------------------------------------------------------
# entry points


def is_run_dir(path: Path) -> bool:
    """True if ``path`` is a directory holding at least one run marker file."""
    return RunLayout(path).is_run()


def read_run(path: str | Path) -> RunData:
    """Read a run directory; raises :class:`NotARunError` if ``path`` is not one."""
    p = Path(path)
    if not p.is_dir():
        raise NotARunError(f"{p} is not a run directory: it does not exist or is not a directory")
    layout = RunLayout(p)
    if not layout.is_run():
        raise NotARunError(f"{p} is not a run directory: it has none of {', '.join(RUN_MARKERS)}")
    config: Mapping[str, Any] = {}
    if layout.config.is_file():
        try:
            loaded = json.loads(layout.config.read_text(encoding="utf-8", errors="replace"))
        except json.JSONDecodeError as exc:
            raise NotARunError(f"{layout.config} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
        config = loaded if isinstance(loaded, Mapping) else {}

    log = RunLog(layout)
    evaluations = [_evaluation(r) for r in log.metrics.read()]
    evaluations.sort(key=lambda e: e.env_steps)  # stable: a resumed run may append out of order
    events = log.events.read()
    updates = [_update(RewardUpdateRecord.from_event(e)) for e in events if e.event == "reward_update"]
    updates.sort(key=lambda u: (u.round, u.env_steps))
    candidates = [_candidate(r) for r in log.candidates.read()]
    calls = [_llm_call(r) for r in log.llm_calls.read()]
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
        proxy=new.proxy if new.proxy is not None else old.proxy,
        verifier_tau=new.verifier_tau if new.verifier_tau is not None else old.verifier_tau,
    )
