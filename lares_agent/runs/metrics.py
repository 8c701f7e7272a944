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
)
from lares_agent.runs.slots import SlotRecord

__all__ = ["METRIC_KINDS", "MetricKind", "MetricRow"]

MetricKind = Literal["eval", "update"]  # periodic evaluation | the evaluation of a reward update
METRIC_KINDS: tuple[MetricKind, ...] = get_args(MetricKind)


def _drop_none(data: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not (k in keys and v is None)}


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
    slots: tuple[SlotRecord, ...]
    """Every slot's evaluation (``SlotRecord``'s metrics view)."""
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
                "slots": [s.to_json("metrics") for s in self.slots],
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
        slots = [SlotRecord.from_json(s, "metrics") for s in raw_slots
                 if isinstance(s, Mapping) and as_int(s.get("slot")) is not None] if isinstance(raw_slots, list) else []
        losses = row.get("losses")
        return cls(
            kind=kind if kind in METRIC_KINDS else "eval",
            env_steps=steps,
            round=as_int(row.get("round")) or 0,
            slots=tuple(slots),
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
