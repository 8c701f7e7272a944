"""Ray backend for the ES search (``--backend ray``, extra ``lares-agent[ray]``): one Ray actor per learner.

Each actor is an :class:`~lares_agent.engine.es.learner.ESLearner`: it owns its policy, its ES state, its
reward and its own rollout vector env, so a population spreads over a Ray cluster (``--ray-address``) with
one round trip per generation. The actor runs exactly the code of the in-process backend, so results and
checkpoints are the same for the same seeds.

Ray is imported inside functions only: the package imports and runs without it. On a 2-core laptop Ray adds
about 3 s of start-up and 700 MiB of memory for nothing (docs/feasibility.md §7), so the in-process backend stays
the default.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lares_agent.engine.contracts import MemberEvaluation
from lares_agent.engine.es.learner import ESLearner, LearnerSettings

if TYPE_CHECKING:
    from lares_agent.engine.contracts import RewardFunction
    from lares_agent.engine.tasks import TaskSpec

__all__ = ["RayBackend", "RayUnavailableError", "ensure_ray", "import_ray"]

INSTALL_HINT = "pip install 'lares-agent[ray]'"


class RayUnavailableError(ImportError):
    """Ray is not installed; ``reason`` names the install command."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def import_ray() -> Any:
    """The ``ray`` module, or :class:`RayUnavailableError` naming the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError(f"the Ray backend needs Ray, which is not installed: {INSTALL_HINT}") from exc
    return ray


def ensure_ray(address: str | None = None, num_cpus: int | None = 2) -> bool:
    """Connect to ``address`` or start a quiet local Ray instance, unless Ray is already initialised.

    Returns True when this call started/connected Ray (the caller then owns the shutdown). Local mode turns
    off token authentication, usage statistics and the dashboard: the machine may be offline and a local
    instance serves only this process (docs/feasibility.md §7 lists the warning this avoids).
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address is None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")  # "local": never the cluster a `ray start` left its address for
    else:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    return True


class RayBackend:
    """The learners as Ray actors; same methods (and numbers) as ``LocalBackend``."""

    def __init__(
        self, task: TaskSpec, rewards: Sequence[RewardFunction], settings: LearnerSettings, run_seed: int,
        address: str | None = None, num_cpus: int | None = 2, cpus_per_actor: float | None = None,
    ) -> None:
        self._ray = import_ray()
        self._owns_ray = ensure_ray(address, num_cpus)
        # Ray's default actor needs a CPU to be placed and holds none while idle, so K actors fit on 2 cores;
        # cpus_per_actor reserves cores per learner on a cluster.
        opts = {} if cpus_per_actor is None else {"num_cpus": cpus_per_actor}
        actor_cls = self._ray.remote(ESLearner).options(**opts) if opts else self._ray.remote(ESLearner)
        self.actors = [actor_cls.remote(task, k, fn, settings, run_seed) for k, fn in enumerate(rewards)]
        self.num_learners = len(self.actors)

    def _all(self, method: str, *args: Any) -> list[Any]:
        return list(self._ray.get([getattr(a, method).remote(*args) for a in self.actors]))

    def generation(self) -> list[dict[str, float]]:
        return self._all("generation")

    def evaluate(self, episodes: int, reset_seeds: Sequence[int], keep_rollouts: int,
                 drop_features: frozenset[str]) -> list[MemberEvaluation]:
        return self._all("evaluate", episodes, list(reset_seeds), keep_rollouts, drop_features)

    def set_reward(self, slot: int, reward: RewardFunction) -> None:
        self._ray.get(self.actors[slot].set_reward.remote(reward))

    def copy_policy(self, dst: Sequence[int], src: int) -> None:
        donor = self._ray.get(self.actors[src].policy_state.remote())
        self._ray.get([self.actors[d].inherit.remote(donor) for d in dst])

    def feature_samples(self, n: int) -> list[dict[str, np.ndarray]]:
        return self._all("feature_sample", n)

    def state_dicts(self) -> list[dict[str, Any]]:
        return self._all("state_dict")

    def load_state_dicts(self, states: Sequence[dict[str, Any]]) -> None:
        self._ray.get([a.load_state_dict.remote(d) for a, d in zip(self.actors, states, strict=True)])

    def close(self) -> None:
        """Close the actors' envs, end the actors, and shut Ray down if this backend started it."""
        if not self.actors:
            return
        try:
            self._all("close")
        finally:
            for a in self.actors:
                self._ray.kill(a)
            self.actors = []
            if self._owns_ray:
                self._ray.shutdown()
