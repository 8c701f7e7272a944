"""Uniform-random actions and the features of uniform-random steps: the engine's one random sampler.

The SAC warm-up fills the buffer with uniform-random episodes (docs/lares-reference.md §6), and round 0 of a
search validates the initial candidates on random-action steps before any buffer exists. Both draw actions
here, in policy space [-1, 1] (``run_episodes`` maps them onto the env's Box bounds), from a generator the
caller passes in.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lares_agent.engine.contracts import NEXT_PREFIX
from lares_agent.engine.rollouts.episodes import EnvPool, batch_features, run_episodes
from lares_agent.engine.tasks import TaskSpec

__all__ = ["random_feature_sample", "uniform_actions"]

# Offset of the sample's env construction seeds from the run seed, so its envs differ from the run's own.
_SAMPLE_ENV_SEED = 7_919


def uniform_actions(rng: np.random.Generator, act_dim: int) -> Callable[[np.ndarray], np.ndarray]:
    """A policy for ``run_episodes``: every row of ``obs`` gets an action drawn uniformly from [-1, 1]^act_dim."""

    def act(obs: np.ndarray) -> np.ndarray:
        return rng.uniform(-1.0, 1.0, size=(obs.shape[0], act_dim))

    return act


def random_feature_sample(
    task: TaskSpec, steps: int, seed: int, horizon: int | None = None
) -> dict[str, np.ndarray]:
    """Every feature of at least ``steps`` uniform-random steps (whole episodes of one env, reset seeds
    ``seed``, ``seed + 1``, ...): what round 0 validates candidates on, before any buffer exists. Like the
    buffer's sample, it carries each feature at the next step as ``next:<name>`` (NaN at an episode's end)."""
    pool = EnvPool(task.make_env, seed + _SAMPLE_ENV_SEED)
    env = pool.get(1)[0]
    act = uniform_actions(np.random.default_rng(seed), int(np.prod(env.action_space.shape or (1,))))
    cap = horizon or task.horizon
    parts: list[dict[str, np.ndarray]] = []
    total, episode = 0, 0
    try:
        while total < steps or not parts:
            batch = run_episodes([env], act, task.raw_state, cap, [seed + episode])
            feats, _ = batch_features(task.features, batch)
            for k, v in list(feats.items()):  # one episode: the next step is the next row, none after the last
                feats[NEXT_PREFIX + k] = np.append(np.asarray(v, np.float64)[1:], np.nan)
            parts.append(feats)
            total += int(batch.lengths.sum())
            episode += 1
    finally:
        pool.close()
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
