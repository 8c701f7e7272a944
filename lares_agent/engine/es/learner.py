"""One reward slot's ES learner: a policy, its OpenAI-ES state, its observation statistics and its reward.

This is the unit that a backend places somewhere: in process (``LocalBackend``) or as a Ray actor
(``ray_backend``). It holds its own vector env and RNG and its methods take and return plain data, so the
in-process and Ray backends run exactly the same code and produce the same numbers for the same seeds.

A generation is ``ask`` (P antithetic perturbations) -> one batched rollout of P * E sub-envs -> fitness =
mean return under the slot's reward -> ``tell``. Antithetic twins share their reset seeds (common random
numbers), so the difference in their returns comes from the perturbation, not from the start state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from lares_agent.engine.contracts import MemberEvaluation
from lares_agent.engine.es import strategy as es
from lares_agent.engine.es.policies import PolicyBatch, PolicySpec, RunningNorm, act, init_params
from lares_agent.engine.es.workers import RolloutWorkers
from lares_agent.engine.rollouts.episodes import EnvPool
from lares_agent.engine.rollouts.evaluation import evaluate_members
from lares_agent.engine.rollouts.vector import make_vector_env, rollout

if TYPE_CHECKING:
    from lares_agent.engine.contracts import RewardFunction
    from lares_agent.engine.tasks import TaskSpec

__all__ = ["ESBackend", "ESLearner", "LearnerSettings", "LocalBackend", "generation_seeds"]


@dataclass(frozen=True)
class LearnerSettings:
    """Per-learner settings shared by every slot (the engine builds one from its config)."""

    es: es.ESConfig
    hidden: tuple[int, ...] = ()
    episodes_per_member: int = 1
    """Episodes each perturbation plays per generation (its fitness is their mean return)."""
    horizon: int | None = None
    """Episode cap; None uses the task's horizon."""
    asynchronous: bool = False
    """AsyncVectorEnv (one process per sub-env, a message per step) instead of SyncVectorEnv."""
    rollout_workers: int = 0
    """>= 2: split the sub-envs over that many worker processes that play whole episodes (one message per
    rollout; ``engine.rollout_workers``); 0 or 1: all sub-envs in this process."""


def generation_seeds(run_seed: int, slot: int, generation: int, pairs: int, episodes: int) -> np.ndarray:
    """Reset seeds [2 * pairs * episodes] for one generation: twin i and i + pairs get the same seeds."""
    ss = np.random.SeedSequence([int(run_seed), 7919, int(slot), int(generation)])
    half = (ss.generate_state(pairs * episodes, dtype=np.uint32) >> 1).astype(np.int64).reshape(pairs, episodes)
    return np.concatenate([half, half], axis=0).reshape(-1)


class ESLearner:
    """The ES policy of one reward slot. Not thread-safe; one owner (the engine or one Ray actor)."""

    def __init__(
        self, task: TaskSpec, slot: int, reward: RewardFunction, settings: LearnerSettings, run_seed: int
    ) -> None:
        self.task = task
        self.slot = int(slot)
        self.reward = reward
        self.settings = settings
        self.run_seed = int(run_seed)
        self.horizon = int(settings.horizon or task.horizon)
        self._eval_pool = EnvPool(task.make_env, self.run_seed + 500_000 + self.slot)
        env = self._eval_pool.get(1)[0]  # the spaces give the dimensions, whatever the task declares
        obs_dim = int(np.prod(env.observation_space.shape or (1,)))
        act_dim = int(np.prod(env.action_space.shape or (1,)))
        self.spec = PolicySpec(obs_dim=obs_dim, act_dim=act_dim, hidden=tuple(settings.hidden))
        # per-slot generator: independent streams, and a slot's draws do not depend on the others'
        self.rng = np.random.default_rng(np.random.SeedSequence([self.run_seed, 104729, self.slot]))
        self.state = es.init(settings.es, init_params(self.spec, self.rng))
        self.norm = RunningNorm.create(self.spec.obs_dim)
        self._venv: Any = None
        self._last_features: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------------------------------ training
    def _rollout(self, policy: PolicyBatch, seeds: list[int]) -> Any:
        if self._venv is None:
            n = self.settings.es.population_size * self.settings.episodes_per_member
            seed = self.run_seed + 1000 * self.slot
            if self.settings.rollout_workers >= 2:
                self._venv = RolloutWorkers(self.task, n, self.settings.rollout_workers, seed=seed)
            else:
                self._venv = make_vector_env(self.task, n, seed=seed, asynchronous=self.settings.asynchronous)
        if isinstance(self._venv, RolloutWorkers):
            return self._venv.rollout(policy, self.horizon, seeds)
        return rollout(self._venv, self.task, policy, self.horizon, seeds=seeds)

    def _normed(self, obs: np.ndarray) -> np.ndarray:
        return self.norm.apply(obs) if self.settings.es.normalize_obs else obs

    def generation(self) -> dict[str, float]:
        """One ask / rollout / tell step on this slot's reward; returns metrics incl. ``steps`` taken."""
        cfg = self.settings.es
        e = self.settings.episodes_per_member
        pop, self.state = es.ask(cfg, self.state, self.rng)
        seeds = generation_seeds(self.run_seed, self.slot, self.state.generation, cfg.population_size // 2, e)
        # sub-env n = member * e + episode
        policy = PolicyBatch(self.spec, np.repeat(pop, e, axis=0), self.norm if cfg.normalize_obs else None)
        ro = self._rollout(policy, seeds.tolist())
        fitness = ro.returns(self.reward).reshape(cfg.population_size, e).mean(axis=1)
        self.state, metrics = es.tell(cfg, self.state, pop, fitness)
        if cfg.normalize_obs:
            self.norm = self.norm.update(ro.obs[ro.alive])
        self._last_features = ro.flat_features()
        metrics["steps"] = float(ro.steps)
        metrics["train_success"] = float(ro.success().mean())
        return metrics

    # ------------------------------------------------------------------------------------------ evaluation
    def act_deterministic(self, obs: np.ndarray) -> np.ndarray:
        """The current policy (the ES mean) on a batch of observations [M, obs_dim] -> [M, act_dim]."""
        return np.asarray(act(self.spec, self.state.mean[None, :], self._normed(obs)[None])[0])

    def evaluate(
        self, episodes: int, reset_seeds: Sequence[int], keep_rollouts: int = 0,
        drop_features: frozenset[str] = frozenset(),
    ) -> MemberEvaluation:
        """Deterministic episodes of the ES mean with the shared evaluation code (``engine.evaluation``)."""
        (ev,) = evaluate_members(
            self._eval_pool, lambda obs, _m: self.act_deterministic(obs), self.task.raw_state, self.task.features,
            [self.slot], [self.reward], episodes, self.horizon, list(reset_seeds), self.task.progress_feature,
            keep_rollouts=keep_rollouts, drop_features=drop_features, approach_feature=self.task.approach_feature,
        )
        return ev

    def feature_sample(self, n: int) -> dict[str, np.ndarray]:
        """Up to ``n`` random steps of the last generation's features (ES keeps no buffer; this stands in for
        the buffer sample on which the proposal hook checks new candidates numerically)."""
        feats = self._last_features
        size = len(next(iter(feats.values()))) if feats else 0
        gen = np.random.default_rng([self.run_seed, 15485863, self.slot, self.state.generation])
        idx = np.sort(gen.choice(size, size=min(n, size), replace=False)) if size else np.zeros(0, np.int64)
        return {k: v[idx].copy() for k, v in feats.items()}

    # ------------------------------------------------------------------------------------------ replacement
    def set_reward(self, reward: RewardFunction) -> None:
        """Train on a new reward from now on (ES has no buffer, so nothing is relabelled)."""
        self.reward = reward

    def policy_state(self) -> dict[str, Any]:
        """What another slot needs to continue from this policy: ES state and observation statistics."""
        return {"es": self.state.state_dict(), "norm": self.norm.state_dict()}

    def inherit(self, policy_state: dict[str, Any]) -> None:
        """Restart from another slot's policy (parameters, optimiser moments, schedule position, obs stats).

        The best-so-far record is reset: it was measured under the donor's reward, not this slot's.
        """
        st = es.ESState.from_state_dict(policy_state["es"])
        self.state = es.ESState(mean=st.mean.copy(), m=st.m.copy(), v=st.v.copy(), generation=st.generation,
                                best_fitness=-math.inf, best_params=st.mean.copy())
        self.norm = RunningNorm.from_state_dict(policy_state["norm"])

    # ------------------------------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Policy, optimiser, obs statistics and RNG state (no reward: the engine stores rewards as JSON)."""
        return {"slot": self.slot, **self.policy_state(), "rng": self.rng.bit_generator.state,
                "last_features": dict(self._last_features)}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.state = es.ESState.from_state_dict(d["es"])
        self.norm = RunningNorm.from_state_dict(d["norm"])
        self.rng.bit_generator.state = d["rng"]
        self._last_features = {k: np.asarray(v) for k, v in d.get("last_features", {}).items()}

    def close(self) -> None:
        """Release the vector env and evaluation envs (AsyncVectorEnv holds worker processes)."""
        if self._venv is not None:
            self._venv.close()
            self._venv = None
        self._eval_pool.close()


class ESBackend(Protocol):
    """Where the learners live (one per slot, then the ``init`` setting's extra one). ``LocalBackend`` (in
    process) and ``ray_backend.RayBackend`` (one Ray actor per learner) implement it with the same methods and,
    for the same seeds, the same numbers."""

    num_learners: int

    def generation(self) -> list[dict[str, float]]: ...
    def evaluate(self, episodes: int, reset_seeds: Sequence[int], keep_rollouts: int,
                 drop_features: frozenset[str]) -> list[MemberEvaluation]: ...
    def set_reward(self, slot: int, reward: RewardFunction) -> None: ...
    def copy_policy(self, dst: Sequence[int], src: int) -> None: ...
    def feature_samples(self, n: int) -> list[dict[str, np.ndarray]]: ...
    def state_dicts(self) -> list[dict[str, Any]]: ...
    def load_state_dicts(self, states: Sequence[dict[str, Any]]) -> None: ...
    def close(self) -> None: ...


class LocalBackend:
    """All learners in this process, run one after the other (the default backend)."""

    def __init__(self, task: TaskSpec, rewards: Sequence[RewardFunction], settings: LearnerSettings,
                 run_seed: int) -> None:
        self.learners = [ESLearner(task, k, fn, settings, run_seed) for k, fn in enumerate(rewards)]
        self.num_learners = len(self.learners)

    def generation(self) -> list[dict[str, float]]:
        return [lr.generation() for lr in self.learners]

    def evaluate(self, episodes: int, reset_seeds: Sequence[int], keep_rollouts: int,
                 drop_features: frozenset[str]) -> list[MemberEvaluation]:
        return [lr.evaluate(episodes, reset_seeds, keep_rollouts, drop_features) for lr in self.learners]

    def set_reward(self, slot: int, reward: RewardFunction) -> None:
        self.learners[slot].set_reward(reward)

    def copy_policy(self, dst: Sequence[int], src: int) -> None:
        donor = self.learners[src].policy_state()
        for d in dst:
            self.learners[d].inherit(donor)

    def feature_samples(self, n: int) -> list[dict[str, np.ndarray]]:
        return [lr.feature_sample(n) for lr in self.learners]

    def state_dicts(self) -> list[dict[str, Any]]:
        return [lr.state_dict() for lr in self.learners]

    def load_state_dicts(self, states: Sequence[dict[str, Any]]) -> None:
        for lr, d in zip(self.learners, states, strict=True):
            lr.load_state_dict(d)

    def close(self) -> None:
        for lr in self.learners:
            lr.close()
