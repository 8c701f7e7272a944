"""The outcome of checking a candidate: what the CLI prints, the graph records and the LLM reads back."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lares_agent.rewards.compile import CompiledReward

__all__ = ["ComponentStats", "Verdict"]


@dataclass(frozen=True)
class ComponentStats:
    """One component (or the total) over the sample states; nan where no state gave a finite value."""

    mean: float
    std: float
    min: float
    max: float
    nonfinite_share: float


@dataclass(frozen=True)
class Verdict:
    """The outcome of validation; `reason` is one line (the first failure), fit for an LLM critique.

    `key` is the reward's identity (`reward_key`) once it parsed; `reward` the compiled function, only when
    accepted (never serialised: `to_json` is what a person or a machine reads).
    """

    accepted: bool
    reason: str
    complexity: float | None = None
    canonical: Mapping[str, str] | None = None
    stats: Mapping[str, ComponentStats] = field(default_factory=dict)  # per component, and "total"
    warnings: tuple[str, ...] = ()  # e.g. a component constant on this sample (a sparse bonus may be)
    key: str | None = None
    reward: CompiledReward | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "reason": self.reason,
            "complexity": self.complexity,
            "canonical": dict(self.canonical) if self.canonical is not None else None,
            "key": self.key,
            "stats": {name: {k: _json_number(v) for k, v in vars(s).items()} for name, s in self.stats.items()},
            "warnings": list(self.warnings),
        }


def _json_number(value: float) -> float | None:
    """JSON has no nan/inf: they become null."""
    return value if math.isfinite(value) else None
