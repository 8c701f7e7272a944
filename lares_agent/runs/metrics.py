"""The ``metrics.jsonl`` record: one line per evaluation of the whole population at one env step.

Field names are the JSON keys the engine has always written (``LaResEngine._log_evaluation``, with the
population's own fields: ``populations/replay.py`` for SAC and CrossQ, ``populations/es.py`` for ES), so old runs
read unchanged. Learner-specific fields are None when the other kind wrote the line, and are then left out of
the JSON.
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
    as_str,
)

__all__ = ["METRIC_KINDS", "MetricKind", "MetricRow", "SlotMetric"]

MetricKind = Literal["eval", "update"]  # periodic evaluation | the evaluation of a reward update
METRIC_KINDS: tuple[MetricKind, ...] = get_args(MetricKind)


def _drop_none(data: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not (k in keys and v is None)}


@dataclass(frozen=True)
class SlotMetric:
    """One slot's evaluation: ``MemberEvaluation.summary()`` plus the slot and its reward id (ES adds the
    mean ES fitness and learning rate since the last line)."""

    slot: int
    reward_id: str
    success: float
    task_return: float = math.nan
    own_return: float = math.nan
    final_progress: float = math.nan
    episode_length: float = math.nan
    nonfinite: bool = False
    member: int | None = None  # the engine's learner index (equal to the slot)
    es_fitness: float | None = None
    lr: float | None = None
    learner_success: tuple[float, ...] | None = None  # each learner's success (--learners-per-reward > 1)

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "member": self.member,
                "success": self.success,
                "task_return": self.task_return,
                "own_return": self.own_return,
                "final_progress": self.final_progress,
                "episode_length": self.episode_length,
                "nonfinite": self.nonfinite,
                "slot": self.slot,
                "reward_id": self.reward_id,
                "es_fitness": self.es_fitness,
                "lr": self.lr,
                "learner_success": None if self.learner_success is None else list(self.learner_success),
            },
            ("member", "es_fitness", "lr", "learner_success"),
        )

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> SlotMetric | None:
        """None when the line names no slot."""
        slot = as_int(row.get("slot"))
        if slot is None:
            return None
        return cls(
            slot=slot,
            reward_id=as_str(row.get("reward_id"), "?"),
            success=as_float(row.get("success")),
            task_return=as_float(row.get("task_return")),
            own_return=as_float(row.get("own_return")),
            final_progress=as_float(row.get("final_progress")),
            episode_length=as_float(row.get("episode_length")),
            nonfinite=bool(row.get("nonfinite", False)),
            member=as_int(row.get("member")),
            es_fitness=as_opt_float(row.get("es_fitness")),
            lr=as_opt_float(row.get("lr")),
            learner_success=None if row.get("learner_success") is None
            else as_float_list(row.get("learner_success")),
        )


_OPTIONAL = ("learner", "generation", "diversity", "acted", "losses", "alpha", "quarantined", "extra")


@dataclass(frozen=True)
class MetricRow:
    """One ``metrics.jsonl`` line.

    The success summaries report the max (the reference's number) and the mean and the selected policy's
    (docs/lares-reference.md §12 item 16). SAC adds per-learner arrays since the last line (``acted``,
    ``losses``, ``alpha``), the quarantined learners and the optional env-reward learner (``extra``); ES adds
    ``learner="es"``, the generation and the population's diversity.
    """

    kind: MetricKind
    env_steps: int
    round: int
    slots: tuple[SlotMetric, ...]
    success_max: float | None = None
    success_mean: float | None = None
    success_best_slot: float | None = None
    best_slot: int | None = None
    wall_time: float = math.nan  # seconds since the engine started (or was restored)
    learner: str | None = None
    generation: int | None = None
    diversity: Mapping[str, Any] | None = None
    acted: tuple[int, ...] | None = None
    losses: Mapping[str, tuple[float, ...]] | None = None
    alpha: tuple[float, ...] | None = None
    quarantined: tuple[int, ...] | None = None
    extra: Mapping[str, Any] | None = field(default=None)

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "kind": self.kind,
                "learner": self.learner,
                "env_steps": self.env_steps,
                "round": self.round,
                "generation": self.generation,
                "slots": [s.to_json() for s in self.slots],
                "success_max": self.success_max,
                "success_mean": self.success_mean,
                "success_best_slot": self.success_best_slot,
                "best_slot": self.best_slot,
                "acted": None if self.acted is None else list(self.acted),
                "losses": None if self.losses is None else {k: list(v) for k, v in self.losses.items()},
                "alpha": None if self.alpha is None else list(self.alpha),
                "quarantined": None if self.quarantined is None else list(self.quarantined),
                "diversity": None if self.diversity is None else dict(self.diversity),
                "extra": None if self.extra is None else dict(self.extra),
                "wall_time": self.wall_time,
            },
            _OPTIONAL,
        )

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> MetricRow | None:
        """None for a line without ``env_steps`` (nothing to plot it at); a missing or unknown ``kind`` reads
        as ``"eval"``, slots without a slot number are dropped."""
        steps = as_int(row.get("env_steps"))
        if steps is None:
            return None
        kind = row.get("kind")
        raw_slots = row.get("slots")
        slots = [SlotMetric.from_json(s) for s in raw_slots if isinstance(s, Mapping)] if isinstance(
            raw_slots, list) else []
        losses = row.get("losses")
        return cls(
            kind=kind if kind in METRIC_KINDS else "eval",
            env_steps=steps,
            round=as_int(row.get("round")) or 0,
            slots=tuple(s for s in slots if s is not None),
            success_max=as_opt_float(row.get("success_max")),
            success_mean=as_opt_float(row.get("success_mean")),
            success_best_slot=as_opt_float(row.get("success_best_slot")),
            best_slot=as_int(row.get("best_slot")),
            wall_time=as_float(row.get("wall_time")),
            learner=None if row.get("learner") is None else str(row["learner"]),
            generation=as_int(row.get("generation")),
            diversity=as_mapping(row["diversity"]) if isinstance(row.get("diversity"), Mapping) else None,
            acted=as_int_list(row["acted"]) if "acted" in row else None,
            losses={str(k): as_float_list(v) for k, v in losses.items()} if isinstance(losses, Mapping) else None,
            alpha=as_float_list(row["alpha"]) if "alpha" in row else None,
            quarantined=as_int_list(row["quarantined"]) if "quarantined" in row else None,
            extra=as_mapping(row["extra"]) if isinstance(row.get("extra"), Mapping) else None,
        )
