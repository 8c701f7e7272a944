"""Configuration of the ES reward search (``--learner es``), kept apart from the loop for readability.

Two update frequencies (the seed's "dual population" design): every slot's ES policy updates every
generation; the reward population updates every ``reward_every_generations`` generations and/or every
``reward_every_steps`` env steps, whichever comes first. The reward population size is either given
(``population_size``) or a fraction of the ES policy population (``reward_fraction``; the seed suggests
20-30% for ES).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lares_agent.engine.contracts import SETTINGS
from lares_agent.engine.errors import EngineError
from lares_agent.engine.es.strategy import ESConfig
from lares_agent.engine.loop.selection import DiversityConfig, SelectionConfig
from lares_agent.errors import ConfigError

__all__ = ["BACKENDS", "ESSearchConfig", "reward_population_size"]

BACKENDS = ("local", "ray")


def reward_population_size(policy_population: int, fraction: float) -> int:
    """Reward slots for a policy population of ``policy_population`` at ``fraction`` (at least 1, rounded)."""
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(f"reward_fraction must be in (0, 1], got {fraction}")
    return max(1, round(policy_population * fraction))


@dataclass(frozen=True, kw_only=True)
class ESSearchConfig:
    """Everything the ES loop needs besides the task and the reward candidates."""

    setting: str = "scratch"
    """'scratch': every slot's reward is proposed; 'init': slot 0 starts on the human reward (replaceable like
    any slot) and an extra ES policy trains on the human reward throughout (never ranked or replaced, as the
    SAC engine's extra learner); 'baseline': one slot on the human reward, no reward updates."""
    population_size: int = 5
    """K reward slots (one ES policy each), unless ``reward_fraction`` is set."""
    reward_fraction: float | None = None
    """K = round(fraction * es.population_size) instead of ``population_size``."""
    elites: int = 3
    total_steps: int = 200_000
    """Counted env steps of ES training rollouts (evaluation episodes are not counted, as for SAC)."""
    reward_every_generations: int = 10
    """Generations between reward-population updates (0: off)."""
    reward_every_steps: int = 0
    """Env steps between reward-population updates (0: off)."""
    max_rounds: int | None = None
    eval_every_generations: int = 5
    """Generations between evaluations logged to metrics.jsonl (0: only at reward updates)."""
    eval_episodes: int = 5
    update_eval_episodes: int = 10
    complexity_lambda: float = 0.0
    es: ESConfig = field(default_factory=ESConfig)
    hidden: tuple[int, ...] = ()
    """Hidden layers of each ES policy (empty: linear)."""
    episodes_per_member: int = 1
    horizon: int | None = None
    asynchronous_envs: bool = False
    """Gymnasium AsyncVectorEnv for training rollouts (a message per sub-env and step)."""
    rollout_workers: int = 0
    """>= 2: each slot's rollouts run in that many worker processes, whole episodes per message."""
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    diversity: DiversityConfig = field(default_factory=DiversityConfig)
    rollout_slots: int = 2
    rollouts_kept: int = 2
    feature_sample: int = 4096
    backend: str = "local"
    ray_address: str | None = None
    """Ray cluster address (None: a local Ray instance)."""
    ray_num_cpus: int | None = 2
    """CPUs of a local Ray instance (ignored when ``ray_address`` is set)."""
    seed: int = 0
    checkpoint_every_generations: int = 0

    def __post_init__(self) -> None:
        if self.setting not in SETTINGS:
            raise ConfigError(f"unknown setting {self.setting!r}; choose one of {', '.join(SETTINGS)}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        k = self.num_slots
        if self.setting != "baseline" and not 1 <= self.elites <= k:
            raise ConfigError(f"elites must be in 1..{k}, got {self.elites}")
        if self.setting == "init" and k < 2:
            raise ConfigError("setting 'init' needs population_size >= 2 (slot 0 is the human reward)")
        for name in ("total_steps", "rollout_workers", "reward_every_generations", "reward_every_steps",
                     "eval_every_generations", "rollout_slots", "rollouts_kept", "feature_sample",
                     "checkpoint_every_generations"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("eval_episodes", "update_eval_episodes", "episodes_per_member"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.horizon is not None and self.horizon < 1:
            raise ConfigError(f"horizon must be >= 1, got {self.horizon}")
        if self.complexity_lambda < 0:
            raise ConfigError("complexity_lambda must be >= 0")

    @property
    def num_slots(self) -> int:
        """K reward slots (1 in the baseline)."""
        if self.setting == "baseline":
            return 1
        if self.reward_fraction is not None:
            return reward_population_size(self.es.population_size, self.reward_fraction)
        if self.population_size < 1:
            raise ConfigError(f"population_size must be >= 1, got {self.population_size}")
        return self.population_size

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (config.json, checkpoints)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ESSearchConfig:
        """Inverse of :meth:`to_json`; unknown keys are an error, not silently dropped."""
        d = dict(data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise EngineError(f"unknown ES config keys: {sorted(unknown)}")
        es = ESConfig(**dict(d.pop("es", {})))
        sel = SelectionConfig(**dict(d.pop("selection", {})))
        div = DiversityConfig(**dict(d.pop("diversity", {})))
        if "hidden" in d:
            d["hidden"] = tuple(d["hidden"])
        return cls(**d, es=es, selection=sel, diversity=div)
