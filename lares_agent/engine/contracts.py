"""What the engine needs from a reward function, and the task's own reward as one.

The engine never imports `lares_agent.rewards` (layers point down): it relabels buffer columns with any
object that satisfies `RewardFunction`. Reward functions are vectorised over rows (one call per buffer
column, docs/lares-reference.md §12 items 19 and 23) and serialise themselves for checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from lares_agent.engine.errors import EngineError

HUMAN_REWARD_FEATURE = "human_reward"
"""Feature name under which tasks expose the environment's own reward (NaN where none exists)."""


class Batch(NamedTuple):
    """Minibatches for C columns, stacked for the population update (float32 unless noted).

    obs [C, B, obs_dim], action [C, B, act_dim], reward [C, B], next_obs [C, B, obs_dim],
    terminated [C, B] (1.0 where the episode really ended; time-limit cuts are 0, §12 item 12),
    indices [C, B] (int64 buffer rows, for diagnostics).
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    indices: np.ndarray

    def column(self, i: int) -> Batch:
        """The minibatch of the i-th sampled column, with the leading C axis dropped ([B, ...])."""
        return Batch(*(x[i] for x in self))


@runtime_checkable
class RewardFunction(Protocol):
    """A vectorised reward: named feature arrays of N rows in, N rewards out.

    `id` names the reward; `key` is its identity: rewards with equal keys are the same function (diversity counts
    distinct keys).
    """

    id: str
    key: str
    complexity: float

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """Total reward per row, shape [N]."""
        ...

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each named component per row (they sum to `__call__`), for reports and feedback."""
        ...

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable description from which the owner can rebuild the function."""
        ...


class HumanReward:
    """The task's own (human-designed) reward, read from the `human_reward` feature.

    Used for the "with human reward" setting and as a baseline; it is never shown to the LLM in the
    from-scratch setting (docs/ARCHITECTURE.md, engine/tasks).
    """

    id: str = "human"
    key: str = "human"
    complexity: float = 0.0

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """Return `features["human_reward"]` as float64 (a copy, so callers cannot alias buffer memory)."""
        if HUMAN_REWARD_FEATURE not in features:
            raise KeyError(f"feature {HUMAN_REWARD_FEATURE!r} is missing: the task exposes no human reward")
        return np.array(features[HUMAN_REWARD_FEATURE], dtype=np.float64)

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One component, the reward itself."""
        return {HUMAN_REWARD_FEATURE: self(features)}

    def to_json(self) -> dict[str, Any]:
        """Serialise as a tag; `load_reward` implementations recognise `{"id": "human"}`."""
        return {"id": self.id, "kind": "human", "complexity": self.complexity}

    def __repr__(self) -> str:
        return "HumanReward()"


def initial_slot_rewards(
    setting: str, num_slots: int, given: Sequence[RewardFunction], has_human_reward: bool, task_name: str
) -> list[RewardFunction]:
    """The reward of every slot at the start of a run, shared by the SAC and ES engines.

    scratch: the K given candidates; init: the human reward in slot 0, then K - 1 given ones; baseline: the human
    reward alone. Raises EngineError with a one-line reason when the count or the task does not fit the setting.
    """
    rewards = list(given)
    if setting in ("init", "baseline") and not has_human_reward:
        raise EngineError(f"setting {setting!r} needs a human reward, task {task_name} has none")
    if setting == "scratch":
        if len(rewards) != num_slots:
            raise EngineError(f"setting 'scratch' needs {num_slots} initial rewards, got {len(rewards)}")
        return rewards
    if setting == "init":
        if len(rewards) != num_slots - 1:
            raise EngineError(f"setting 'init' needs {num_slots - 1} initial rewards (slot 0 is human), got {len(rewards)}")
        return [HumanReward(), *rewards]
    if rewards:
        raise EngineError("setting 'baseline' trains on the human reward only; pass no initial rewards")
    return [HumanReward()]
