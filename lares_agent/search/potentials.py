"""`--shaping potential` in the search: what the LLM writes is a potential Phi, and the slot's reward is the base
reward shaped by it (engine/replay/potential.py: base + gamma*Phi(s') - Phi(s), Phi standardised on the round's buffer
sample).

The base is what the setting already trains on besides the LLM: from scratch the task's success indicator (the
sparse baseline's reward, `given_rewards.success_reward`), with init the task's own reward. gamma is the learner's
discount, so the shaping is the one Ng, Harada and Russell (1999) prove harmless for that learner's objective.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lares_agent.engine import HumanReward, PotentialReward, RewardFunction, TaskSpec
from lares_agent.search.config import SearchConfig, engine_config
from lares_agent.search.given_rewards import success_reward

__all__ = ["Shaper", "load_potential", "shaper_for"]


@dataclass(frozen=True)
class Shaper:
    """Turns each potential the search accepts into the reward its slot trains on."""

    base: RewardFunction
    gamma: float

    def shape(self, potential: RewardFunction, sample: Mapping[str, np.ndarray]) -> PotentialReward:
        """``potential`` shaping the base, standardised on ``sample`` (the round's stored states)."""
        return PotentialReward.fitted(self.base, potential, self.gamma, sample)

    def describe(self, reward: PotentialReward) -> dict[str, Any]:
        """The fields of the `potential` event: what the reward's form is, for the report, trace and export."""
        return {"reward_id": reward.id, "base": reward.base.id, "gamma": reward.gamma, "top": reward.top,
                "spread": reward.spread}


def shaper_for(cfg: SearchConfig, task: TaskSpec, human_complexity: float) -> Shaper | None:
    """The run's shaper under `--shaping potential` (None under additive); `cfg.setting` is resolved already."""
    if cfg.shaping != "potential":
        return None
    learners = engine_config(cfg).learners
    gamma = float(getattr(getattr(learners, "learner_config", None), "gamma", 0.99))
    base: RewardFunction = HumanReward(human_complexity) if cfg.setting == "init" else success_reward(task)
    return Shaper(base, gamma)


def load_potential(data: Mapping[str, Any], feature_names: Collection[str]) -> PotentialReward:
    """A `PotentialReward` from its `to_json()` (a checkpoint): both rewards parsed again, gamma and the
    standardisation as they were fixed at install."""
    from lares_agent.rewards import load_reward

    base_data = data["base"]
    base: RewardFunction
    if base_data.get("kind") == "human":
        complexity = base_data.get("complexity")
        base = HumanReward(float(complexity) if isinstance(complexity, (int, float)) else 0.0)
    else:
        base = load_reward(base_data, feature_names)
    return PotentialReward(base, load_reward(data["potential"], feature_names), float(data["gamma"]),
                           float(data["top"]), float(data["spread"]))
