"""The LaRes loop: warm-up, Thompson-sampled interaction, population updates, reward-population updates.

One iteration (docs/lares-reference.md §1, with §12's fixes): Thompson sampling picks distinct learners, each plays
one stochastic episode; the steps enter the shared buffer with the features of every step and the reward of
every candidate; then every learner does ``utd_ratio * steps`` updates on its own reward column. Every
``reward_period`` env steps the population is evaluated, the top ``elites`` candidates are kept and the other
slots are refilled by the ``propose`` hook (the LLM graph, wired in by ``search.py``); a new slot's column is
relabelled over the whole buffer, scaled to the best elite, and its learner inherits the best learner with an
L2 pull toward it (§5-7). The engine never imports LLM or graph code: ``propose`` is an opaque callable.

Settings: ``scratch`` (all candidates proposed), ``init`` (the task's human reward seeds one slot and an extra
learner trains on it throughout, always acting outside TS, never replaced), ``baseline`` (plain SAC on the
human reward with the same code: one slot, no reward updates).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from lares_agent.engine.buffer import ReplayBuffer
from lares_agent.engine.errors import RewardColumnError
from lares_agent.engine.loop.state import EngineStateMixin
from lares_agent.engine.rollouts.evaluation import MemberEvaluation, evaluate_members
from lares_agent.engine.loop.fitness import UpdateContext
from lares_agent.engine.loop.config import EngineConfig, EngineError
from lares_agent.runs.jsonl import JsonlWriter
from lares_agent.engine.learners.sac_population import Population
from lares_agent.engine.loop.slots import RewardUpdateMixin
from lares_agent.engine.contracts import (
    HUMAN_REWARD_FEATURE,
    HumanReward,
    RewardFunction,
    initial_slot_rewards,
)
from lares_agent.engine.rollouts.episodes import (
    EVAL_STREAM,
    TRAIN_STREAM,
    WARMUP_STREAM,
    EnvPool,
    batch_features,
    episode_seed,
    run_episodes,
)
from lares_agent.engine.loop.thompson import ThompsonSampler

if TYPE_CHECKING:
    from lares_agent.engine.tasks import TaskSpec

__all__ = ["EngineConfig", "EngineError", "IterationInfo", "LaResEngine", "ProposeFn", "UpdateContext"]

ProposeFn = Callable[[UpdateContext], Sequence[RewardFunction]]
_LOSS_KEYS = ("q_loss", "actor_loss", "alpha_loss", "anchor_loss", "alpha")


@dataclass(frozen=True)
class IterationInfo:
    """What one iteration did, for progress callbacks."""

    env_steps: int
    round: int
    acted: tuple[int, ...]
    steps: int
    successes: tuple[bool, ...]
    updates: int


class LaResEngine(RewardUpdateMixin, EngineStateMixin):
    """The LaRes engine over one task. Drive it with :meth:`run` or :meth:`step_iteration`.

    ``initial_rewards``: scratch -> K candidates; init -> K - 1 candidates (slot 0 holds the human reward);
    baseline -> none. ``propose`` is called at every reward update; ``run_dir`` receives ``metrics.jsonl``,
    ``events.jsonl`` and ``checkpoints/`` (None: nothing is written, events are kept in ``self.events``).
    """

    def __init__(
        self,
        task: TaskSpec,
        config: EngineConfig,
        initial_rewards: Sequence[RewardFunction] = (),
        propose: ProposeFn | None = None,
        run_dir: str | Path | None = None,
    ) -> None:
        rewards = initial_slot_rewards(
            config.setting, config.num_slots, initial_rewards, task.has_human_reward, task.name
        )
        if config.setting == "init":
            rewards.append(HumanReward())  # the extra env-reward learner (reference with_init), never replaced
        self._setup(task, config, rewards, propose, run_dir)

    def _setup(
        self,
        task: TaskSpec,
        config: EngineConfig,
        rewards: list[RewardFunction],
        propose: ProposeFn | None,
        run_dir: str | Path | None,
    ) -> None:
        self.task, self.config, self.propose = task, config, propose
        self.num_slots = config.num_slots
        self.num_learners = self.num_slots + (1 if config.setting == "init" else 0)
        self.extra: int | None = self.num_slots if config.setting == "init" else None
        self.horizon = config.horizon or task.horizon
        self.rewards: list[RewardFunction] = rewards
        seeds = np.random.SeedSequence(config.seed).spawn(4)
        self.rng = np.random.default_rng(seeds[0])
        self.torch_gen = torch.Generator().manual_seed(int(seeds[1].generate_state(1)[0]))
        # One pool for training and evaluation: every reset is seeded from its own stream (train/eval/warm-up),
        # so sharing envs changes no episode, and MetaWorld envs cost seconds each to build.
        self.train_pool = EnvPool(task.make_env, config.seed)
        self.eval_pool = self.train_pool
        env = self.train_pool.get(1)[0]
        self.obs_dim = int(np.prod(env.observation_space.shape))
        self.act_dim = int(np.prod(env.action_space.shape))
        names = [f.name for f in task.features]
        self.feature_names = tuple(dict.fromkeys([*names, "success", HUMAN_REWARD_FEATURE]))
        self.buffer = ReplayBuffer(
            config.buffer_capacity, self.obs_dim, self.act_dim, self.feature_names, self.num_learners
        )
        pop_seed = int(seeds[2].generate_state(1)[0] >> 1)
        self.population = Population(self.num_learners, self.obs_dim, self.act_dim, config.sac, pop_seed)
        self.ts = ThompsonSampler(self.num_slots, config.ts_window)
        self.env_steps = 0
        self.train_episodes = 0
        self.eval_episode_counter = 0
        self.round = 0
        self.last_update_steps = 0
        self.next_eval = config.eval_every if config.eval_every > 0 else math.inf
        self.next_checkpoint = config.checkpoint_every if config.checkpoint_every > 0 else math.inf
        self.warmed_up = False
        self.quarantined: set[int] = set()
        self.best_slot = 0
        self.acted = np.zeros(self.num_learners, np.int64)
        self._loss_sum = {key: np.zeros(self.num_learners) for key in _LOSS_KEYS}
        self._loss_count = 0
        self._start = time.monotonic()
        self.events: list[dict[str, Any]] = []
        self.last_metrics: dict[str, Any] | None = None
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._metrics = JsonlWriter(self.run_dir / "metrics.jsonl") if self.run_dir else None
        self._events = JsonlWriter(self.run_dir / "events.jsonl") if self.run_dir else None

    # ------------------------------------------------------------------ driving
    @property
    def done(self) -> bool:
        """True once the counted env-step budget is spent."""
        return self.env_steps >= self.config.total_steps

    def run(
        self,
        until_steps: int | None = None,
        progress: Callable[[IterationInfo], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> int:
        """Iterate until ``until_steps`` (default: the budget) or ``should_stop()``; returns env steps."""
        limit = self.config.total_steps if until_steps is None else min(until_steps, self.config.total_steps)
        while self.env_steps < limit:
            if should_stop is not None and should_stop():
                break
            info = self.step_iteration()
            if progress is not None:
                progress(info)
        return self.env_steps

    def step_iteration(self) -> IterationInfo:
        """Warm up if needed, run a due reward update, then one interaction + learning iteration."""
        if not self.warmed_up:
            self.warmup()
        if self._update_due():
            self.reward_update()
        select = self.ts.select if self.config.thompson else self.ts.select_uniform
        arms = select(self.num_slots, self.rng)
        extra = [self.extra] if self.extra is not None and self.extra not in self.quarantined else []
        members = arms + extra
        if not members:
            raise EngineError("every learner is quarantined (non-finite); nothing can act")
        seeds = [episode_seed(self.config.seed, TRAIN_STREAM, self.train_episodes + i) for i in range(len(members))]
        self.train_episodes += len(members)
        member_arr = np.asarray(members, np.int64)
        batch = run_episodes(
            self.train_pool.get(len(members)),
            lambda obs: self.population.act(obs, member_arr, False, self.torch_gen),
            self.task.raw_state,
            self.horizon,
            seeds,
        )
        successes = self._store(batch, members)
        self.ts.record_many(arms, successes[: len(arms)])
        steps = int(batch.lengths.sum())
        self.env_steps += steps
        self.acted[member_arr] += 1
        updates = self._learn(steps)
        if self.env_steps >= self.next_eval:
            while self.next_eval <= self.env_steps:
                self.next_eval += self.config.eval_every
            self._log_evaluation("eval", self.evaluate(range(self.num_learners), self.config.eval_episodes))
        if self.env_steps >= self.next_checkpoint:
            while self.next_checkpoint <= self.env_steps:
                self.next_checkpoint += self.config.checkpoint_every
            self.save_checkpoint()
        return IterationInfo(self.env_steps, self.round, tuple(members), steps, tuple(successes), updates)

    # ------------------------------------------------------------------ warm-up
    def warmup(self) -> None:
        """Fill the buffer with uniform-random episodes (not counted in the budget, as the reference),
        then label every column with its initial reward (identity map, docs/lares-reference.md §6)."""
        n_envs = max(1, self.num_learners)
        stored, counter = 0, 0
        while stored < self.config.warmup_steps:
            seeds = [episode_seed(self.config.seed, WARMUP_STREAM, counter + i) for i in range(n_envs)]
            counter += n_envs
            batch = run_episodes(
                self.train_pool.get(n_envs),
                lambda obs: self.rng.uniform(-1.0, 1.0, size=(obs.shape[0], self.act_dim)),
                self.task.raw_state,
                self.horizon,
                seeds,
            )
            self._store(batch, None)
            stored += int(batch.lengths.sum())
        rejected: list[int] = []
        for j, fn in enumerate(self.rewards):
            try:
                self.buffer.set_column(j, fn, reference=None)
            except RewardColumnError as exc:
                self._event({"event": "candidate_rejected", "slot": j, "reward_id": fn.id, "reason": exc.reason})
                rejected.append(j)
        for j in rejected:
            self._fallback_column(j, rejected)
        self.warmed_up = True
        self._event({"event": "warmup", "steps": stored, "rewards": [fn.id for fn in self.rewards]})

    def _fallback_column(self, j: int, rejected: Sequence[int]) -> None:
        """An initial candidate the buffer rejects: share a valid slot's reward and refill it at the update."""
        donors = [i for i in range(self.num_slots) if i not in rejected]
        if not donors:
            raise EngineError("no initial reward candidate is usable on the warm-up data")
        self.buffer.set_column(j, self.rewards[donors[0]], reference=None)
        self.rewards[j] = self.rewards[donors[0]]
        self._quarantine(j, f"initial reward rejected; sharing slot {donors[0]}'s reward until the next update")

    # ------------------------------------------------------------------ interaction + learning
    def _store(self, batch: Any, members: Sequence[int] | None) -> list[bool]:
        """Add an episode batch to the buffer; returns the any-step success of each episode."""
        feats, offsets = batch_features(self.task.features, batch)
        m = len(batch.lengths)
        rows = [batch.valid(i) for i in range(m)]

        def cat(x: np.ndarray) -> np.ndarray:
            return np.concatenate([x[i, rows[i]] for i in range(m)])

        before = self.buffer.nonfinite_count.copy()
        self.buffer.add(
            cat(batch.obs), cat(batch.action), cat(batch.next_obs), cat(batch.terminated), cat(batch.truncated),
            {k: feats[k] for k in self.feature_names if k in feats},
        )
        success = feats["success"]
        out = [bool(np.any(success[offsets[i] : offsets[i + 1]] > 0.5)) for i in range(m)]
        if members is not None:
            for j in np.flatnonzero(self.buffer.nonfinite_count > before):
                self._quarantine(int(j), "reward is NaN/inf on new steps")
            for i in np.flatnonzero(batch.nonfinite):
                self._quarantine(int(members[i]), "policy emitted non-finite actions")
        return out

    def _learn(self, steps: int) -> int:
        """``utd_ratio * steps`` population updates, each learner on its own column (§9 UTD)."""
        members = [i for i in range(self.num_learners) if i not in self.quarantined]
        updates = int(round(self.config.sac.utd_ratio * steps))
        if not members or updates == 0:
            return 0
        done = 0
        while done < updates and members:
            batch = self.buffer.sample(self.config.sac.batch_size, members, self.rng)
            stats = self.population.update(batch, members)
            for key in _LOSS_KEYS:
                if key in stats:
                    self._loss_sum[key] += np.nan_to_num(np.asarray(stats[key], np.float64), nan=0.0)
            self._loss_count += 1
            done += 1
            diverged = [m for m in members if not np.isfinite(stats["q_loss"][m] + stats["actor_loss"][m])]
            for m in diverged:  # a diverged learner stops training and acting until the next update resets it
                self._quarantine(m, "non-finite SAC loss")
                members.remove(m)
        return done

    def _quarantine(self, learner: int, reason: str) -> None:
        if learner in self.quarantined:
            return
        self.quarantined.add(learner)
        if learner < self.num_slots:
            self.ts.block(learner)
        self._event({"event": "quarantine", "learner": learner, "reason": reason, "env_steps": self.env_steps})

    # ------------------------------------------------------------------ evaluation
    def evaluate(
        self, learners: Sequence[int] | range, episodes: int, keep_rollouts: int = 0
    ) -> list[MemberEvaluation]:
        """Deterministic evaluation of ``learners`` on common reset seeds (not counted in the budget)."""
        learners = list(learners)
        seeds = [episode_seed(self.config.seed, EVAL_STREAM, self.eval_episode_counter + e) for e in range(episodes)]
        self.eval_episode_counter += episodes
        drop = frozenset({HUMAN_REWARD_FEATURE}) if self.config.setting == "scratch" else frozenset()
        evals = evaluate_members(
            self.eval_pool,
            lambda obs, members: self.population.act(obs, members, True, self.torch_gen),
            self.task.raw_state,
            self.task.features,
            learners,
            [self.rewards[i] for i in learners],
            episodes,
            self.horizon,
            seeds,
            self.task.progress_feature,
            keep_rollouts=keep_rollouts,
            drop_features=drop,
        )
        for ev in evals:
            if ev.nonfinite:
                self._quarantine(ev.member, "non-finite actions or reward during evaluation")
        return evals

    def _log_evaluation(self, kind: str, evals: list[MemberEvaluation]) -> None:
        slot_evals = [e for e in evals if e.member < self.num_slots]
        succ = [e.success_rate for e in slot_evals]
        count = max(self._loss_count, 1)
        record: dict[str, Any] = {
            "kind": kind,
            "env_steps": self.env_steps,
            "round": self.round,
            "slots": [{**e.summary(), "slot": e.member, "reward_id": self.rewards[e.member].id} for e in slot_evals],
            # §12 item 16: report the max (the reference's number) AND the mean and the selected policy.
            "success_max": max(succ) if succ else None,
            "success_mean": float(np.mean(succ)) if succ else None,
            "success_best_slot": next((e.success_rate for e in slot_evals if e.member == self.best_slot), None),
            "best_slot": self.best_slot,
            "acted": self.acted.tolist(),
            "losses": {key: (self._loss_sum[key] / count).tolist() for key in _LOSS_KEYS if key != "alpha"},
            "alpha": (self._loss_sum["alpha"] / count).tolist(),
            "quarantined": sorted(self.quarantined),
            "wall_time": time.monotonic() - self._start,
        }
        if self.extra is not None:
            record["extra"] = next((e.summary() for e in evals if e.member == self.extra), None)
        if self._metrics is not None:
            self._metrics.write(record)
        self.last_metrics = record
        self.acted[:] = 0
        for key in _LOSS_KEYS:
            self._loss_sum[key][:] = 0.0
        self._loss_count = 0

    # ------------------------------------------------------------------ logging
    def _event(self, record: dict[str, Any]) -> None:
        self.events.append(record)
        if self._events is not None:
            self._events.write(record)

    def close(self) -> None:
        """Close environments and log files."""
        self.train_pool.close()
        for w in (self._metrics, self._events):
            if w is not None:
                w.close()
