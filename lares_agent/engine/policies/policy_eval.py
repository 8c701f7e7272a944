"""Roll a saved policy out: deterministic episodes on seeded resets (`lares eval`; its video is policies/video.py).

The episodes go through the engine's own evaluation (`rollouts.evaluation.evaluate_members`), so success and
task return mean what they mean in the run's metrics: an episode succeeds if the success flag is set at any
step, the task return is the sum of the task's own reward (NaN where it has none).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lares_agent.engine.contracts import MemberEvaluation
from lares_agent.engine.errors import EngineError
from lares_agent.engine.policies.policy_artefact import PolicyArtefact
from lares_agent.engine.rollouts.episodes import EVAL_STREAM, EnvPool, episode_seed
from lares_agent.engine.rollouts.evaluation import evaluate_members
from lares_agent.engine.tasks import TaskSpec

__all__ = ["check_policy_fits", "evaluate_policy"]


def check_policy_fits(policy: PolicyArtefact, env: Any, task: TaskSpec) -> None:
    """A policy trained on another task fails here in one line, not deep inside a matrix product."""
    obs_dim = int(np.prod(env.observation_space.shape or (1,)))
    want = int(policy.data["actor.0.weight"].shape[0])
    if obs_dim != want:
        raise EngineError(f"the policy takes {want} observations but task {task.name} gives {obs_dim}; "
                          f"it was trained on {policy.task} (pass --task {policy.task})")


def evaluate_policy(task: TaskSpec, policy: PolicyArtefact, episodes: int, seed: int,
                    horizon: int | None = None) -> MemberEvaluation:
    """``episodes`` deterministic episodes, episode e reset with the evaluation seed (seed, e)."""
    if episodes < 1:
        raise EngineError(f"--episodes must be >= 1, got {episodes}")
    pool = EnvPool(task.make_env, seed)
    try:
        check_policy_fits(policy, pool.get(1)[0], task)
        seeds = [episode_seed(seed, EVAL_STREAM, e) for e in range(episodes)]
        # one episode at a time: the envs of a one-off evaluation would cost more to build than they save
        (result,) = evaluate_members(pool, lambda obs, _m: policy.act(obs), task.raw_state, task.features, [0],
                                     [None], episodes, int(horizon or task.horizon), seeds, task.progress_feature,
                                     max_envs=1)
    finally:
        pool.close()
    return result
