"""One OpenAI-ES policy per reward slot (``--learner es``): the LaRes loop without a replay buffer.

Each slot's policy trains on that slot's reward, computed vectorised from the task's features over the rollouts'
raw states; every policy updates every generation (the seed text's "dual population": policies every
generation, rewards every reward period). A new reward is installed by swapping the policy's reward (no buffer:
nothing is relabelled, and proposals were already validated by the search layer), and a replaced slot's policy
restarts from the best slot's parameters, optimiser moments and observation statistics. ES has no quarantine: a
non-finite evaluation ranks the slot last. The population measures its diversity at every update (reward texts
and behaviours), which tells the proposer to explore. The local and Ray backends hold the same state, so either
can resume the other's run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lares_agent.engine.contracts import HUMAN_REWARD_FEATURE, Diversity, MemberEvaluation, RewardFunction
from lares_agent.engine.errors import EngineError
from lares_agent.engine.es.learner import ESBackend, LearnerSettings, LocalBackend
from lares_agent.engine.protocols import StepInfo
from lares_agent.engine.setup.config import EngineConfig, ESPopulationConfig
from lares_agent.engine.setup.diversity import measure_diversity
from lares_agent.engine.setup.groups import LearnerGroups
from lares_agent.engine.tasks import TaskSpec

__all__ = ["ESPopulation", "make_backend"]


def make_backend(task: TaskSpec, rewards: Sequence[RewardFunction], config: EngineConfig) -> ESBackend:
    """The local or Ray backend the config names, with one ES learner per reward."""
    es = config.learners
    if not isinstance(es, ESPopulationConfig):
        raise EngineError(f"an ES population needs an ESPopulationConfig, got {type(es).__name__}")
    settings = LearnerSettings(es=es.es, hidden=es.hidden, episodes_per_member=es.episodes_per_member,
                               horizon=config.horizon, asynchronous=es.asynchronous_envs,
                               rollout_workers=es.rollout_workers)
    if es.backend == "ray":
        from lares_agent.engine.es.ray_backend import RayBackend  # optional extra: import only when chosen

        return RayBackend(task, rewards, settings, config.seed, address=es.ray_address, num_cpus=es.ray_num_cpus)
    return LocalBackend(task, rewards, settings, config.seed)


class ESPopulation:
    """K ES policies (then the ``init`` setting's extra one) over a backend that holds them, maybe remotely."""

    kind = "es"

    def __init__(self, task: TaskSpec, config: EngineConfig, backend: ESBackend,
                 event: Callable[[dict[str, Any]], None]) -> None:
        if not isinstance(config.learners, ESPopulationConfig):
            raise EngineError(f"an ES population needs an ESPopulationConfig, got {type(config.learners).__name__}")
        self.task, self.config, self.es, self.backend = task, config, config.learners, backend
        self.num_slots = config.num_slots
        self.num_learners = backend.num_learners
        self.groups = LearnerGroups(self.num_slots, 1, self.num_learners > self.num_slots)
        self.feature_names = tuple(f.name for f in task.features)
        self.generation = 0
        self.last_diversity: Diversity | None = None
        self._es_sum = np.zeros((self.num_learners, 2))  # fitness_mean, lr accumulated since the last row
        self._es_count = 0
        self._action_box: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def leaders(self) -> list[int]:
        return list(range(self.num_learners))  # one policy per slot, then the init setting's human-reward one

    @property
    def ranked(self) -> list[list[int]]:
        return [[i] for i in self.leaders]

    def lead(self, ranked: Sequence[Sequence[int]]) -> None:
        """Nothing to choose: each slot is one policy."""

    @property
    def timing(self) -> dict[str, float]:
        return {}

    def quarantined(self, slot: int) -> bool:
        return False

    def learner_quarantined(self, learner: int) -> bool:
        return False

    def action_box(self) -> tuple[np.ndarray, np.ndarray]:
        if self._action_box is None:  # the population holds no env itself (the learners do, maybe remotely)
            env = self.task.make_env(self.config.seed)
            space: Any = env.action_space
            self._action_box = (np.asarray(space.low), np.asarray(space.high))
            env.close()
        return self._action_box

    # ------------------------------------------------------------------ acting and learning
    def prepare(self, rewards: list[RewardFunction]) -> None:
        """Nothing to prepare: the backend's learners were built with their rewards."""

    def step(self, env_steps: int) -> StepInfo:
        """One ES generation for every learner."""
        metrics = self.backend.generation()
        self.generation += 1
        self._es_sum += np.asarray([[m["fitness_mean"], m["lr"]] for m in metrics])
        self._es_count += 1
        return StepInfo(steps=int(sum(m["steps"] for m in metrics)), acted=tuple(range(self.num_learners)),
                        updates=1)

    def evaluate(self, rewards: Sequence[RewardFunction], seeds: Sequence[int], env_steps: int, *,
                 keep_rollouts: int = 0) -> list[MemberEvaluation]:
        """Deterministic episodes of every learner's ES mean (one per slot, then the extra learner)."""
        drop = frozenset({HUMAN_REWARD_FEATURE}) if self.config.setting == "scratch" else frozenset()
        return self.backend.evaluate(len(seeds), list(seeds), keep_rollouts, drop)

    def feature_sample(self, n: int) -> dict[str, np.ndarray]:
        """Recent training steps of every learner (ES has no buffer), subsampled to ``n`` rows."""
        parts = self.backend.feature_samples(max(1, n // max(self.num_learners, 1)))
        keys = [k for k in (parts[0] if parts else {}) if not (k == HUMAN_REWARD_FEATURE and
                                                              self.config.setting == "scratch")]
        return {k: np.concatenate([p[k] for p in parts]).astype(np.float64) for k in keys}

    def diversity(self, evals: Sequence[MemberEvaluation], rewards: Sequence[RewardFunction]) -> Diversity:
        step_feats = [{k: np.concatenate([r[k] for r in ev.rollouts]) for k in self.feature_names} for ev in evals]
        self.last_diversity = measure_diversity(rewards, step_feats, self.feature_names, self.es.diversity)
        return self.last_diversity

    # ------------------------------------------------------------------ reward update
    def install(self, slot: int, fn: RewardFunction, best: int) -> Mapping[str, float]:
        """The slot's learner trains on ``fn`` from now on (no buffer: nothing to relabel or refuse)."""
        self.backend.set_reward(slot, fn)
        return {}

    def reward_nonfinite(self, slot: int, evaluation: MemberEvaluation) -> bool:
        return not math.isfinite(evaluation.own_return)

    def inherit(self, slots: Sequence[int], best: int) -> None:
        if slots:
            self.backend.copy_policy(slots, best)

    # ------------------------------------------------------------------ metrics rows
    def _es_means(self) -> np.ndarray:
        return self._es_sum / max(self._es_count, 1)

    def slot_fields(self, slot: int) -> dict[str, Any]:
        """The slot's mean ES fitness and learning rate since the previous row."""
        means = self._es_means()
        return {"es_fitness": float(means[slot, 0]), "lr": float(means[slot, 1])}

    def metrics_fields(self) -> dict[str, Any]:
        fields = {"learner": self.kind, "generation": self.generation,
                  "diversity": self.last_diversity.to_json() if self.last_diversity else None}
        self._es_sum[:] = 0.0
        self._es_count = 0
        return fields

    def event_fields(self) -> dict[str, Any]:
        return {"learner": self.kind, "generation": self.generation}

    # ------------------------------------------------------------------ state
    def policy_state(self) -> dict[str, Any]:
        return {"learners": self.backend.state_dicts()}

    def state_dict(self) -> dict[str, Any]:
        """Every learner (ES state, observation statistics, generator), the generation count and the ES means
        since the last metrics row."""
        return {"learners": self.backend.state_dicts(), "generation": self.generation,
                "es_sum": self._es_sum.copy(), "es_count": self._es_count}

    def load_state_dict(self, state: Mapping[str, Any], rewards: Sequence[RewardFunction]) -> None:
        """Restore from ``state_dict()`` (the backend was built with ``rewards``)."""
        self.backend.load_state_dicts(state["learners"])
        self.generation = int(state["generation"])
        self._es_sum[:] = np.asarray(state["es_sum"])
        self._es_count = int(state["es_count"])

    def close(self) -> None:
        self.backend.close()
