"""The gradient engine's data path: warm-up, playing and storing episodes, and learning from the shared buffer.

Warm-up fills the buffer with uniform-random episodes (not counted in the budget, as the reference) and labels
every reward column (identity map, docs/lares-reference.md §6). Each iteration the acting learners play one
stochastic episode each; the steps enter the buffer with every feature and every learner's reward, and the
population's running observation statistics see them (warm-up and training steps only, never evaluation).
Then every open learner does ``utd_ratio * steps`` updates on its own column (§9 UTD, §12 item 13). A learner
whose policy, reward or loss goes non-finite is reported to ``quarantine`` and stops learning.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lares_agent.engine.buffer import ReplayBuffer
from lares_agent.engine.contracts import HUMAN_REWARD_FEATURE, NEXT_PREFIX, PopulationLearner, RewardFunction
from lares_agent.engine.errors import EngineError, RewardColumnError
from lares_agent.engine.learners.factory import LEARNER_NAMES
from lares_agent.engine.loop.config import EngineConfig
from lares_agent.engine.loop.groups import LearnerGroups
from lares_agent.engine.loop.state import EngineLog, SACCounters
from lares_agent.engine.rollouts.episodes import (
    TRAIN_STREAM,
    WARMUP_STREAM,
    EnvPool,
    EpisodeBatch,
    batch_features,
    episode_seed,
    run_episodes,
)
from lares_agent.engine.rollouts.sampling import uniform_actions
from lares_agent.engine.tasks import TaskSpec

__all__ = ["LOSS_KEYS", "Interaction", "IterationInfo"]

LOSS_KEYS = ("q_loss", "actor_loss", "alpha_loss", "anchor_loss", "alpha")
"""The per-learner update metrics the engine averages between evaluations (every population reports them)."""

Quarantine = Callable[[int, str], None]


@dataclass(frozen=True)
class IterationInfo:
    """What one iteration did, for progress callbacks."""

    env_steps: int
    round: int
    acted: tuple[int, ...]
    steps: int
    successes: tuple[bool, ...]
    updates: int


class Interaction:
    """Warm-up, episodes into the buffer and population updates, over objects the engine owns.

    ``quarantined`` is the engine's set (read here, changed only through ``quarantine``); the loss sums since
    the last logged evaluation live here (``loss_sum``, counted in ``counters.loss_count``). ``groups`` maps
    learners to their reward columns.
    """

    def __init__(
        self,
        task: TaskSpec,
        config: EngineConfig,
        horizon: int,
        pool: EnvPool,
        buffer: ReplayBuffer,
        population: PopulationLearner,
        rng: np.random.Generator,
        torch_gen: torch.Generator,
        counters: SACCounters,
        log: EngineLog,
        quarantined: set[int],
        quarantine: Quarantine,
        groups: LearnerGroups,
    ) -> None:
        self.task, self.config, self.horizon, self.pool = task, config, horizon, pool
        self.buffer, self.population, self.rng, self.torch_gen = buffer, population, rng, torch_gen
        self.counters, self.log, self.quarantined, self.quarantine = counters, log, quarantined, quarantine
        self.num_learners = population.k
        self.groups = groups
        self.column_of = self.groups.column_of
        if len(self.column_of) != self.num_learners:
            raise EngineError(f"{self.num_learners} learners but the grouping has {len(self.column_of)}")
        self.loss_sum = {key: np.zeros(self.num_learners) for key in LOSS_KEYS}
        self.seconds = {"sim_s": 0.0, "learn_s": 0.0}
        """Wall seconds this session in training episodes (and the engine's evaluations) and in learner updates:
        the run's wall-time split (issue 14), not checkpointed, like the LLM wait."""
        self._loss_reason = f"non-finite {LEARNER_NAMES[config.learner]} loss"

    # ------------------------------------------------------------------ warm-up
    def warmup(self, rewards: list[RewardFunction], num_slots: int) -> None:
        """Store uniform-random episodes, then label every column with its initial reward; a candidate the
        buffer refuses shares a usable slot's reward (``rewards`` is changed in place) and is quarantined."""
        n_envs = max(1, self.num_learners)
        stored, counter = 0, 0
        act = uniform_actions(self.rng, self.buffer.act_dim)
        while stored < self.config.warmup_steps:
            seeds = [episode_seed(self.config.seed, WARMUP_STREAM, counter + i) for i in range(n_envs)]
            counter += n_envs
            batch = run_episodes(self.pool.get(n_envs), act, self.task.raw_state, self.horizon, seeds)
            self.store(batch, None)
            stored += int(batch.lengths.sum())
        rejected: list[int] = []
        for j, fn in enumerate(rewards):
            try:
                # the baseline's one reward is taken as it is: a sparse success reward is 0 on random warm-up data
                self.buffer.set_column(j, fn, reference=None, allow_constant=self.config.setting == "baseline",
                                       normalisation=self.config.reward_normalisation)
            except RewardColumnError as exc:
                self.log.event({"event": "candidate_rejected", "slot": j, "reward_id": fn.id, "reason": exc.reason})
                rejected.append(j)
        donors = [i for i in range(num_slots) if i not in rejected]
        for j in rejected:
            if not donors:
                raise EngineError("no initial reward candidate is usable on the warm-up data")
            self.buffer.set_column(j, rewards[donors[0]], reference=None,
                                   normalisation=self.config.reward_normalisation)
            rewards[j] = rewards[donors[0]]
            for learner in self.groups.learners(j):
                self.quarantine(learner, f"initial reward rejected; sharing slot {donors[0]}'s reward until the "
                                         "next update")
        self.counters.warmed_up = True
        self.log.event({"event": "warmup", "steps": stored, "rewards": [fn.id for fn in rewards]})

    # ------------------------------------------------------------------ playing and storing
    def play(self, members: Sequence[int]) -> tuple[EpisodeBatch, list[bool]]:
        """One stochastic training episode per member (seeded from the train stream), stored; returns the batch
        and each episode's any-step success."""
        c = self.counters
        start = time.monotonic()
        seeds = [episode_seed(self.config.seed, TRAIN_STREAM, c.train_episodes + i) for i in range(len(members))]
        c.train_episodes += len(members)
        member_arr = np.asarray(members, np.int64)
        batch = run_episodes(
            self.pool.get(len(members)),
            lambda obs: self.population.act(obs, member_arr, False, self.torch_gen),
            self.task.raw_state,
            self.horizon,
            seeds,
        )
        self.seconds["sim_s"] += time.monotonic() - start
        return batch, self.store(batch, members)

    def store(self, batch: EpisodeBatch, members: Sequence[int] | None) -> list[bool]:
        """Add an episode batch to the buffer and to the observation statistics; returns the any-step success
        of each episode. ``members`` None: warm-up episodes (nobody to quarantine)."""
        feats, offsets = batch_features(self.task.features, batch)
        m = len(batch.lengths)
        rows = [batch.valid(i) for i in range(m)]

        def cat(x: np.ndarray) -> np.ndarray:
            return np.concatenate([x[i, rows[i]] for i in range(m)])

        before = self.buffer.nonfinite_count.copy()
        obs = cat(batch.obs)
        self.buffer.add(
            obs, cat(batch.action), cat(batch.next_obs), cat(batch.terminated), cat(batch.truncated),
            {k: feats[k] for k in self.buffer.feature_names if k in feats},
        )
        self.population.observe(obs)
        success = feats["success"]
        out = [bool(np.any(success[offsets[i] : offsets[i + 1]] > 0.5)) for i in range(m)]
        if members is not None:
            for j in np.flatnonzero(self.buffer.nonfinite_count > before):
                for learner in self.groups.learners(int(j)):
                    self.quarantine(learner, "reward is NaN/inf on new steps")
            for i in np.flatnonzero(batch.nonfinite):
                self.quarantine(int(members[int(i)]), "policy emitted non-finite actions")
        return out

    # ------------------------------------------------------------------ learning
    def learn(self, steps: int) -> int:
        """``utd_ratio * steps`` population updates, each open learner on its own column; returns the count."""
        members = [i for i in range(self.num_learners) if i not in self.quarantined]
        learner = self.config.learner_config
        updates = round(learner.utd_ratio * steps)
        done, start = 0, time.monotonic()
        while done < updates and members:
            batch = self.buffer.sample(learner.batch_size, self.column_of[members].tolist(), self.rng)
            stats = self.population.update(batch, members)
            for key in LOSS_KEYS:
                self.loss_sum[key] += np.nan_to_num(np.asarray(stats[key], np.float64), nan=0.0)
            self.counters.loss_count += 1
            done += 1
            diverged = [m for m in members if not np.isfinite(stats["q_loss"][m] + stats["actor_loss"][m])]
            for m in diverged:  # a diverged learner stops training and acting until the next update resets it
                self.quarantine(m, self._loss_reason)
                members.remove(m)
        self.seconds["learn_s"] += time.monotonic() - start
        return done

    def feature_sample(self, n: int) -> dict[str, np.ndarray]:
        """Random stored rows (copies) of every feature, for the proposer's numeric validation of candidates
        (without the human reward in the scratch setting), and each feature at the row's next step as
        ``next:<name>`` (NaN where there is none; `NEXT_PREFIX`), for the proposer's offline pre-screen."""
        view = self.buffer.feature_view()
        size = len(self.buffer)
        idx = np.sort(self.rng.choice(size, size=min(n, size), replace=False)) if size else np.zeros(0, np.int64)
        drop = {HUMAN_REWARD_FEATURE} if self.config.setting == "scratch" else set()
        nxt, has_next = self.buffer.next_rows(idx)
        out = {k: np.asarray(v[idx], np.float64) for k, v in view.items() if k not in drop}
        for k, v in view.items():
            if k not in drop:
                out[NEXT_PREFIX + k] = np.where(has_next, np.asarray(v[nxt], np.float64), np.nan)
        return out

    def loss_means(self) -> dict[str, list[float]]:
        """Mean of every loss key per learner since the last ``reset_losses`` (zeros before any update)."""
        count = max(self.counters.loss_count, 1)
        return {key: (self.loss_sum[key] / count).tolist() for key in LOSS_KEYS}

    def reset_losses(self) -> None:
        for key in LOSS_KEYS:
            self.loss_sum[key][:] = 0.0
        self.counters.loss_count = 0
