"""The ``events.jsonl`` record: one line per thing that happened to the run, and the typed reward update.

Every line has ``event`` (one of :data:`EventKind`) and, where it applies, ``round``, ``env_steps`` and
``time``; the rest is the kind's own fields, with the names the engine (``LaResEngine`` and its populations) and
the search (``SearchRun``, ``GraphProposer``) have always written. ``reward_update``, the line the report is
built around, has its own typed view, :class:`RewardUpdateRecord`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from lares_agent.runs.coerce import (
    as_float,
    as_int,
    as_int_list,
    as_mapping,
    as_opt_float,
    as_opt_str,
    int_keyed,
)
from lares_agent.runs.slots import SlotRecord

__all__ = ["EVENT_KINDS", "Event", "EventKind", "RewardUpdateRecord"]

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
    slots: tuple[SlotRecord, ...] = ()
    """Every slot as the update judged it (``SlotRecord``'s events view)."""
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
            slots=[s.to_json("events") for s in self.slots],
            **{k: v for k, v in extra.items() if v is not None},
        )

    def to_json(self) -> dict[str, Any]:
        return self.to_event().to_json()

    @classmethod
    def from_event(cls, event: Event) -> RewardUpdateRecord:
        f = event.fields
        slots = [SlotRecord.from_json(s, "events") for s in f.get("slots") or []
                 if isinstance(s, Mapping) and as_int(s.get("slot")) is not None]
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
            slots=tuple(slots),
            learner=learner,
            generation=as_int(f.get("generation")),
            selection=selection,
            diversity=as_mapping(f["diversity"]) if isinstance(f.get("diversity"), Mapping) else None,
        )

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> RewardUpdateRecord | None:
        event = Event.from_json(row)
        return cls.from_event(event) if event is not None and event.event == "reward_update" else None
