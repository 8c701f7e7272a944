"""Batched episodes through a Gymnasium vector env, recording what reward functions need.

Every sub-env is wrapped so that its ``info`` carries ``raw_state`` (the task's ``raw_state(env, obs, info)``,
computed inside the sub-env, so it also works with ``AsyncVectorEnv`` where the driver cannot reach the env
objects). A rollout runs one episode per sub-env, steps all of them together and stores per step the policy's
observation, the action, the raw state after the step and an ``alive`` mask; features are computed once for
the whole [T * N] block with the task's vectorised ``features`` (docs/lares-reference.md §12 items 19 and 23: no
per-step Python reward calls).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv, VectorEnv

from lares_agent.engine.rollouts.episodes import to_env_action

if TYPE_CHECKING:
    from lares_agent.engine.contracts import RewardFunction
    from lares_agent.engine.tasks import TaskSpec

__all__ = ["RAW_STATE_KEY", "RawStateWrapper", "Rollout", "concat_rollouts", "make_vector_env", "rollout"]

RAW_STATE_KEY = "raw_state"

Policy = Callable[[np.ndarray], np.ndarray]
"""obs [N, obs_dim] -> actions in [-1, 1] (policy space), [N, act_dim], for the N sub-envs."""


class RawStateWrapper(gymnasium.Wrapper):
    """Replaces ``info`` by ``{"raw_state": float64 [state_dim]}`` after every reset and step.

    The raw state already holds everything features need from ``info``; passing only it keeps the vector
    env's per-key info merging (a measurable share of a Reacher step) to one key.
    """

    def __init__(self, env: gymnasium.Env, task: TaskSpec) -> None:
        super().__init__(env)
        self._task = task

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, {RAW_STATE_KEY: np.asarray(self._task.raw_state(self.env, obs, info), dtype=np.float64)}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        raw = np.asarray(self._task.raw_state(self.env, obs, info), dtype=np.float64)
        return obs, reward, terminated, truncated, {RAW_STATE_KEY: raw}


def _wrapped_env(task: TaskSpec, seed: int) -> gymnasium.Env:
    # module-level (not a lambda) so AsyncVectorEnv can pickle the thunk
    return RawStateWrapper(task.make_env(seed), task)


def make_vector_env(task: TaskSpec, num_envs: int, seed: int = 0, asynchronous: bool = False) -> VectorEnv:
    """``num_envs`` copies of ``task``'s env in a Sync (default) or Async vector env, seeded ``seed + i``."""
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    fns = [partial(_wrapped_env, task, seed + i) for i in range(num_envs)]
    if asynchronous:
        return AsyncVectorEnv(fns, shared_memory=True, copy=False)
    return SyncVectorEnv(fns, copy=False)


@dataclass(frozen=True)
class Rollout:
    """One episode per sub-env: arrays are time-major [T, N, ...]; ``alive[t, n]`` marks real steps.

    ``action`` is the env-space action (what the features see), ``obs`` the observation acted on.
    """

    obs: np.ndarray
    action: np.ndarray
    raw: np.ndarray
    alive: np.ndarray
    features: Mapping[str, np.ndarray]

    @property
    def steps(self) -> int:
        """Env steps actually taken (the ES budget counts these)."""
        return int(self.alive.sum())

    def flat_features(self) -> dict[str, np.ndarray]:
        """Features of alive steps only, as [M] arrays (for statistics and buffers)."""
        return {k: v[self.alive] for k, v in self.features.items()}

    def returns(self, reward: RewardFunction) -> np.ndarray:
        """Undiscounted episode return under ``reward`` per sub-env, [N]; one vectorised reward call."""
        t, n = self.alive.shape
        flat = {k: v.reshape(t * n) for k, v in self.features.items()}
        r = np.asarray(reward(flat), dtype=np.float64).reshape(t, n)
        return np.asarray(np.where(self.alive, r, 0.0).sum(axis=0))

    def success(self) -> np.ndarray:
        """Any-step success per sub-env (LaRes counts an episode successful if any step succeeds), [N]."""
        s = np.where(self.alive, self.features["success"], 0.0)
        return np.asarray((s > 0.5).any(axis=0), dtype=np.float64)

    def task_return(self) -> np.ndarray:
        """Return under the env's own reward (``human_reward``; NaN where the task has none), [N]."""
        h = self.features.get("human_reward")
        if h is None:
            return np.full(self.alive.shape[1], np.nan)
        return np.asarray(np.where(self.alive, h, 0.0).sum(axis=0))

    def select(self, columns: np.ndarray | Sequence[int]) -> Rollout:
        """The sub-rollout of the given sub-env columns."""
        c = np.asarray(columns)
        return Rollout(obs=self.obs[:, c], action=self.action[:, c], raw=self.raw[:, c], alive=self.alive[:, c],
                       features={k: v[:, c] for k, v in self.features.items()})


def rollout(
    venv: VectorEnv, task: TaskSpec, policy: Policy, horizon: int, seeds: Sequence[int] | None = None
) -> Rollout:
    """Run one episode in every sub-env of ``venv`` for at most ``horizon`` steps.

    ``seeds`` (one per sub-env) reset the sub-envs, so callers can give antithetic twins the same start
    (common random numbers). Steps after a sub-env's episode ended are masked out (the vector env's
    next-step autoreset makes them throwaway steps of a new episode); the loop stops once all are done.
    """
    n = venv.num_envs
    obs, _ = venv.reset(seed=list(seeds) if seeds is not None else None)  # type: ignore[arg-type]
    obs_l, act_l, raw_l, alive_l = [], [], [], []
    done = np.zeros(n, dtype=bool)
    space = venv.single_action_space
    for _ in range(horizon):
        obs = np.array(obs, dtype=np.float64)  # a copy: the vector env reuses its buffer (copy=False)
        a = np.asarray(policy(obs), dtype=np.float64)
        a = np.where(np.isfinite(a), a, 0.0)  # a diverged policy must not crash the simulator
        action = to_env_action(a, space)
        obs_l.append(obs)
        act_l.append(action)
        alive_l.append(~done)
        obs, _, terminated, truncated, info = venv.step(action.astype(space.dtype))
        raw_l.append(np.asarray(info[RAW_STATE_KEY], dtype=np.float64))
        done = done | np.asarray(terminated) | np.asarray(truncated)
        if done.all():
            break
    raw = np.stack(raw_l)
    action = np.stack(act_l)
    t = raw.shape[0]
    feats = task.features(raw.reshape(t * n, -1), action.reshape(t * n, -1))
    features = {k: np.asarray(v, dtype=np.float64).reshape(t, n) for k, v in feats.items()}
    return Rollout(obs=np.stack(obs_l), action=action, raw=raw, alive=np.stack(alive_l), features=features)


def concat_rollouts(parts: Sequence[Rollout]) -> Rollout:
    """Join rollouts of disjoint sub-env blocks along the sub-env axis, padding shorter ones (not alive)."""
    t = max(p.alive.shape[0] for p in parts)

    def pad(x: np.ndarray) -> np.ndarray:
        if x.shape[0] == t:
            return x
        return np.concatenate([x, np.zeros((t - x.shape[0], *x.shape[1:]), dtype=x.dtype)], axis=0)

    keys = list(parts[0].features)
    return Rollout(
        obs=np.concatenate([pad(p.obs) for p in parts], axis=1),
        action=np.concatenate([pad(p.action) for p in parts], axis=1),
        raw=np.concatenate([pad(p.raw) for p in parts], axis=1),
        alive=np.concatenate([pad(p.alive) for p in parts], axis=1),
        features={k: np.concatenate([pad(p.features[k]) for p in parts], axis=1) for k in keys},
    )
