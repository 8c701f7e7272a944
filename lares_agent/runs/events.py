"""The ``events.jsonl`` record: one line per thing that happened to the run, and the typed reward update.

Every line has ``event`` (one of :data:`EventKind`) and, where it applies, ``round``, ``env_steps`` and
``time``; the rest is the kind's own fields, with the names the engine (``LaResEngine`` and its populations) and
the search (``SearchRun``, ``GraphProposer``) have always written. ``reward_update``, the line the report is
built around, has its own typed view, :class:`RewardUpdateRecord`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from lares_agent.runs.coerce import (
    as_float,
    as_float_list,
    as_int,
    as_int_list,
    as_mapping,
    as_opt_float,
    as_opt_str,
    as_stats,
    as_str,
    int_keyed,
)

__all__ = ["EVENT_KINDS", "Event", "EventKind", "RewardUpdateRecord", "SlotFitness", "fitness_breakdown",
           "graded_value"]

EventKind = Literal[
    "warmup",  # engine: the buffer is filled and labelled with the initial rewards
    "candidate_accepted",  # engine: a proposal was installed in a slot
    "candidate_rejected",  # engine: the buffer (or ES's check) refused a proposal
    "reward_shared",  # engine: a slot whose reward went NaN/inf shares the best slot's reward
    "quarantine",  # engine: a learner stops training/acting until the next update
    "reward_update",  # engine: fitness, ranking, elites and replacements of one round
    "initial_rewards",  # engine: round 0's rewards, written while the learners trained from step 0, installed
    "reward_update_started",  # engine: a round was evaluated and ranked; its proposal runs (maybe in the background)
    "reward_update_abandoned",  # engine: a stop cancelled the round's proposal; nothing installed, a resume redoes it
    "handover",  # engine: the top learners replayed on fresh episodes; the best one's policy written (runs/handover.py)
    "checkpoint",  # engine: a checkpoint was written
    "resumed",  # engine: restored from a checkpoint
    "run_start",  # search: the run (or its resumption) started
    "run_end",  # search: the run stopped, finished or not
    "fallback",  # search: the LLM gave no valid candidate; the slot got the fallback reward
    "feedback",  # search: a round took a user's note (runs/feedback.py) into its critique; each note is taken once
    "llm_breaker",  # search: the LLM endpoint failed the same way repeatedly; not called for a round or the run
    "llm_fault",  # llm/faults.py: an injected fault (tests and benchmarks write these to their own file)
    "llm_format_step",  # search: the endpoint refused a grammar or response_format; the client stepped down
    "llm_context",  # search: a prompt and its answer did not fit the model's context; the cause and fix (llm/window.py)
    "potential",  # search: a reward is a potential shaping its base reward (--shaping, engine/replay/potential.py)
]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)
_COMMON = ("event", "round", "env_steps", "time")


@dataclass(frozen=True)
class Event:
    """One ``events.jsonl`` line: its kind, the common fields and the kind's own ``fields``."""

    event: EventKind
    round: int | None = None
    env_steps: int | None = None
    time: float | None = None  # Unix time; the search's events carry it, the engine's do not
    fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, kind: EventKind, /, **fields: Any) -> Event:
        """``Event.of("quarantine", learner=2, reason=..., env_steps=n)``: the common fields are picked out."""
        return cls(
            event=kind,
            round=fields.pop("round", None),
            env_steps=fields.pop("env_steps", None),
            time=fields.pop("time", None),
            fields=fields,
        )

    def get(self, name: str, default: Any = None) -> Any:
        """A field of the line (common or the kind's own)."""
        if name in _COMMON:
            value = getattr(self, name)
            return default if value is None else value
        return self.fields.get(name, default)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.event}
        for name in ("round", "env_steps", "time"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out.update({k: v for k, v in self.fields.items() if k not in _COMMON})
        return out

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Event | None:
        """None for a line whose ``event`` is not a known kind."""
        kind = row.get("event")
        if kind not in EVENT_KINDS:
            return None
        return cls(
            event=kind,
            round=as_int(row.get("round")),
            env_steps=as_int(row.get("env_steps")),
            time=as_opt_float(row.get("time")),
            fields={str(k): v for k, v in row.items() if k not in _COMMON},
        )


def graded_value(grade: str | None, success: float, progress_closed: float, approach_closed: float,
                 task_return: float = math.nan) -> float:
    """The value a slot's fitness was graded on (docs/DESIGN.md, "Graded fitness"): its success rate, the share
    of the start distance closed of the progress or of the approach feature, or its task return ("return"). No
    grade (a record from before graded fitness): the success rate."""
    if grade == "progress":
        return progress_closed
    if grade == "return":
        return task_return
    return approach_closed if grade == "approach" else success


def fitness_breakdown(graded_by: str | None, graded: float, penalty: float,
                      learner_success: tuple[float, ...] = (), fitness: float = math.nan) -> str:
    """What a slot's fitness was made of (docs/DESIGN.md, "Graded fitness"): "<graded_by> <value>", with the
    learners' success spread when a slot has several, e.g. "success 0.60 [0.20-1.00 over 3]" or "return 412.3"; ""
    without a grade. The fitness is the graded value; a record of a run before the one ranking rule, whose
    ``fitness`` lies a complexity penalty below it, says so: "success 0.60 - 0.01 cx". Shared by the report and
    `lares trace`, so both say it in the same words. A return is shown to one decimal: it runs to the hundreds,
    rates and shares to 1."""
    if graded_by is None or not math.isfinite(graded):
        return ""
    charged = math.isfinite(penalty) and penalty > 0 and math.isfinite(fitness) and graded - fitness > penalty / 2
    cx = f" - {penalty:.2f} cx" if charged else ""
    values = [v for v in learner_success if math.isfinite(v)]
    spread = f" [{min(values):.2f}-{max(values):.2f} over {len(values)}]" if len(values) > 1 else ""
    value = f"{graded:.1f}" if graded_by == "return" else f"{graded:.2f}"
    return f"{graded_by} {value}{spread}{cx}"


@dataclass(frozen=True)
class SlotFitness:
    """One slot as a reward update judged it (``SlotEvaluation.to_json()``)."""

    slot: int
    reward_id: str
    fitness: float
    success: float = math.nan
    task_return: float = math.nan
    own_return: float = math.nan
    final_progress: float = math.nan
    complexity: float = math.nan
    quarantined: bool = False
    components: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # component -> mean/std/share
    # what the fitness was made of (absent in runs before graded fitness): the graded value (graded value -
    # complexity_penalty in runs before the one ranking rule, setup/fitness.py)
    graded_by: str | None = None  # "success", "progress", "approach" or "return" (one per update)
    progress_closed: float = math.nan
    approach_closed: float = math.nan  # absent in runs before the approach grade
    complexity_penalty: float = math.nan
    action_jerk: float = math.nan
    learner_success: tuple[float, ...] = ()  # each learner's success, with --learners-per-reward > 1

    @property
    def graded(self) -> float:
        """The value the fitness was graded on (``graded_value``; NaN for a record without a grade)."""
        if self.graded_by is None:
            return math.nan
        return graded_value(self.graded_by, self.success, self.progress_closed, self.approach_closed,
                            self.task_return)

    @property
    def breakdown(self) -> str:
        """What the fitness was made of (``fitness_breakdown``; "" for a record without a grade)."""
        return fitness_breakdown(self.graded_by, self.graded, self.complexity_penalty, self.learner_success,
                                 self.fitness)

    def to_json(self) -> dict[str, Any]:
        graded = {} if self.graded_by is None else {
            "graded_by": self.graded_by, "progress_closed": self.progress_closed,
            "approach_closed": self.approach_closed, "complexity_penalty": self.complexity_penalty,
            "action_jerk": self.action_jerk}
        if self.learner_success:
            graded["learner_success"] = list(self.learner_success)
        return {
            "slot": self.slot,
            "reward_id": self.reward_id,
            "success": self.success,
            "task_return": self.task_return,
            "own_return": self.own_return,
            "final_progress": self.final_progress,
            "complexity": self.complexity,
            "fitness": self.fitness,
            "quarantined": self.quarantined,
            "components": {k: dict(v) for k, v in self.components.items()},
            **graded,
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> SlotFitness | None:
        slot = as_int(row.get("slot"))
        if slot is None:
            return None
        return cls(
            slot=slot,
            reward_id=as_str(row.get("reward_id"), "?"),
            fitness=as_float(row.get("fitness")),
            success=as_float(row.get("success")),
            task_return=as_float(row.get("task_return")),
            own_return=as_float(row.get("own_return")),
            final_progress=as_float(row.get("final_progress")),
            complexity=as_float(row.get("complexity")),
            quarantined=bool(row.get("quarantined", False)),
            components=as_stats(row.get("components")),
            graded_by=as_opt_str(row.get("graded_by")),
            progress_closed=as_float(row.get("progress_closed")),
            approach_closed=as_float(row.get("approach_closed")),
            complexity_penalty=as_float(row.get("complexity_penalty")),
            action_jerk=as_float(row.get("action_jerk")),
            learner_success=as_float_list(row.get("learner_success")),
        )



@dataclass(frozen=True)
class RewardUpdateRecord:
    """A ``reward_update`` event: the fitness of the rewards held during the round and what replaced whom.

    ``fitness`` and ``replaced`` are keyed by slot (strings in the JSON); a quarantined slot's fitness is -inf,
    which JSON holds as null and reads back as NaN. ES adds ``learner``, ``generation``, ``selection`` and
    ``diversity``.
    """

    round: int
    env_steps: int
    fitness: Mapping[int, float]
    best: int | None = None
    ranking: tuple[int, ...] = ()
    elites: tuple[int, ...] = ()
    replaced: Mapping[int, str] = field(default_factory=dict)
    inherited: tuple[int, ...] = ()
    slots: tuple[SlotFitness, ...] = ()
    learner: str | None = None
    generation: int | None = None
    selection: str | None = None
    diversity: Mapping[str, Any] | None = None

    def to_event(self) -> Event:
        extra = {
            "learner": self.learner,
            "generation": self.generation,
            "selection": self.selection,
            "diversity": None if self.diversity is None else dict(self.diversity),
        }
        return Event.of(
            "reward_update",
            round=self.round,
            env_steps=self.env_steps,
            fitness={str(k): v for k, v in self.fitness.items()},
            ranking=list(self.ranking),
            elites=list(self.elites),
            best=self.best,
            replaced={str(k): v for k, v in self.replaced.items()},
            inherited=list(self.inherited),
            slots=[s.to_json() for s in self.slots],
            **{k: v for k, v in extra.items() if v is not None},
        )

    def to_json(self) -> dict[str, Any]:
        return self.to_event().to_json()

    @classmethod
    def from_event(cls, event: Event) -> RewardUpdateRecord:
        f = event.fields
        slots = [SlotFitness.from_json(s) for s in f.get("slots") or [] if isinstance(s, Mapping)]
        learner, selection = as_opt_str(f.get("learner")), as_opt_str(f.get("selection"))
        return cls(
            round=event.round or 0,
            env_steps=event.env_steps or 0,
            fitness={k: as_float(v) for k, v in int_keyed(f.get("fitness")).items()},
            best=as_int(f.get("best")),
            ranking=as_int_list(f.get("ranking")),
            elites=as_int_list(f.get("elites")),
            replaced={k: str(v) for k, v in int_keyed(f.get("replaced")).items()},
            inherited=as_int_list(f.get("inherited")),
            slots=tuple(s for s in slots if s is not None),
            learner=learner,
            generation=as_int(f.get("generation")),
            selection=selection,
            diversity=as_mapping(f["diversity"]) if isinstance(f.get("diversity"), Mapping) else None,
        )

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> RewardUpdateRecord | None:
        event = Event.from_json(row)
        return cls.from_event(event) if event is not None and event.event == "reward_update" else None
