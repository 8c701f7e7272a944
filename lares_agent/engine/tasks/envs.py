"""The outermost wrapper of every built-in task env: seeding and the little episode state raw states need.

Features are pure functions of one stored raw state, so anything they need from the start of the episode
(the object's initial position, the x position at reset, the step count) is recorded here and copied into
every raw state instead of being reconstructed later.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from lares_agent.engine.tasks.spec import TaskSpecError

__all__ = ["EpisodeRecorder", "recorder_of"]


class EpisodeRecorder(gymnasium.Wrapper):
    """Seeds the first reset with the task seed and records the reset observation, reset qpos and step count.

    Later resets without a seed continue the env's own random stream, so every episode gets a new
    initial state (and, for MetaWorld, a new goal variation through RandomTaskSelect).
    """

    def __init__(self, env: gymnasium.Env, seed: int) -> None:
        super().__init__(env)
        self._pending_seed: int | None = int(seed)
        self.action_space.seed(int(seed))
        self.episode_step = 0
        self.reset_obs = np.zeros(self.observation_space.shape or (0,), dtype=np.float64)
        self.reset_qpos = np.zeros(0, dtype=np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is None:
            seed, self._pending_seed = self._pending_seed, None
        else:
            self._pending_seed = None
        obs, info = self.env.reset(seed=seed, options=options)
        self.episode_step = 0
        self.reset_obs = np.array(obs, dtype=np.float64, copy=True).reshape(-1)
        data = getattr(self.env.unwrapped, "data", None)
        self.reset_qpos = np.array(data.qpos, dtype=np.float64, copy=True) if data is not None else np.zeros(0)
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        result = self.env.step(action)
        self.episode_step += 1
        return result


def recorder_of(env: gymnasium.Env) -> EpisodeRecorder:
    """The EpisodeRecorder in `env`'s wrapper chain (raw_state may be handed the recorder or a wrapper of it)."""
    current: Any = env
    while current is not None:
        if isinstance(current, EpisodeRecorder):
            return current
        current = getattr(current, "env", None)
    raise TaskSpecError("env was not made by TaskSpec.make_env (no EpisodeRecorder in its wrapper chain)")
