"""How a reward update chooses its elites: the selection method and its settings (``EngineConfig.selection``).

The choosing itself is ``loop/selection.py``. The config sits here, below ``loop/`` and ``populations/``, with
the rest of the run's config (``setup/config.py``), and imports no torch, so ``lares_agent.engine`` exports it
without loading the learners.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lares_agent.errors import ConfigError

__all__ = ["SELECTION_METHODS", "SelectionConfig", "SelectionMethod"]

SelectionMethod = Literal["truncation", "tournament", "pareto"]
SELECTION_METHODS: tuple[SelectionMethod, ...] = ("truncation", "tournament", "pareto")


@dataclass(frozen=True)
class SelectionConfig:
    """How elites are chosen among the K reward slots."""

    method: SelectionMethod = "truncation"
    tournament_size: int = 2
    keep_best: bool = True
    """Tournament and Pareto: the single best candidate always survives (elitism), so selection never loses it
    (refilled slots inherit the best slot's learner)."""

    def __post_init__(self) -> None:
        if self.method not in SELECTION_METHODS:
            raise ConfigError(f"selection method must be one of {', '.join(SELECTION_METHODS)}, got {self.method!r}")
        if self.tournament_size < 1:
            raise ConfigError(f"tournament_size must be >= 1, got {self.tournament_size}")
