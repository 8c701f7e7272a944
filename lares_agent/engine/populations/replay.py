"""SAC or CrossQ learners sharing one replay buffer: the population of the LaRes paper (docs/lares-reference.md
§3-9, with §12's fixes).

Warm-up fills the buffer with uniform-random episodes (not counted in the budget, as the reference) and labels every
reward column (identity map, §6, or the factor `replay/reward_gain.py` chooses). Each step Thompson sampling picks
distinct learners (§8); each plays one stochastic episode; the steps enter the buffer with every feature and every
column's reward, and the learners' running observation statistics see them (warm-up and training steps only, never
evaluation). Then every open learner does ``utd_ratio * steps`` updates on its own column (§9 UTD, §12 item 13), as
one batched computation (``learners/``). A reward update installs a candidate by relabelling its column over the
whole buffer, scaled to the best elite's (§5-6; the buffer refuses a constant or non-finite column), and the slot's
learners inherit the best learner with an L2 pull toward it (§7). A learner whose policy, reward or loss goes
non-finite is quarantined: it stops acting and learning until the next update resets it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lares_agent.engine.contracts import HUMAN_REWARD_FEATURE, Diversity, MemberEvaluation, RewardFunction
from lares_agent.engine.errors import EngineError, RewardColumnError
from lares_agent.engine.learners.devices import resolve_device
from lares_agent.engine.learners.factory import LEARNER_NAMES, make_population
from lares_agent.engine.populations.thompson import ThompsonSampler
from lares_agent.engine.protocols import PopulationLearner, StepInfo
from lares_agent.engine.replay.buffer import ReplayBuffer
from lares_agent.engine.replay.reward_gain import start_scale
from lares_agent.engine.rollouts.episodes import (
    TRAIN_STREAM,
    WARMUP_STREAM,
    EnvPool,
    EpisodeBatch,
    batch_features,
    episode_seed,
    run_episodes,
)
from lares_agent.engine.rollouts.evaluation import evaluate_members
from lares_agent.engine.rollouts.sampling import uniform_actions
from lares_agent.engine.setup.config import EngineConfig, ReplayConfig
from lares_agent.engine.setup.groups import LearnerGroups
from lares_agent.engine.setup.slots import learner_count
from lares_agent.engine.state.schema import load_counters
from lares_agent.engine.tasks import TaskSpec

__all__ = ["LOSS_KEYS", "ReplayPopulation"]

LOSS_KEYS = ("q_loss", "actor_loss", "alpha_loss", "anchor_loss", "alpha")
"""The per-learner update metrics averaged between evaluations (every learner population reports them)."""


@dataclass
class ReplayCounters:
    """What the replay population counts (checkpointed with it)."""

    train_episodes: int = 0
    """Training episodes played (their reset seeds come from this counter)."""
    warmed_up: bool = False
    loss_count: int = 0
    """Learner updates since the last metrics row (the losses logged are their means)."""


class ReplayPopulation:
    """K reward slots of N SAC or CrossQ learners each (then the ``init`` setting's extra learner) on one buffer.

    ``rng`` is the loop's generator (Thompson sampling, minibatches and feature samples draw from it too);
    ``event`` receives the quarantine and warm-up events.
    """

    def __init__(
        self,
        task: TaskSpec,
        config: EngineConfig,
        rng: np.random.Generator,
        event: Callable[[dict[str, Any]], None],
    ) -> None:
        if not isinstance(config.learners, ReplayConfig):
            raise EngineError(f"a replay population needs a ReplayConfig, got {type(config.learners).__name__}")
        self.task, self.config, self.replay, self.rng, self.event = task, config, config.learners, rng, event
        self.device = resolve_device(self.replay.device)  # "auto" resolved on the machine that runs, before any env
        self.kind: str = self.replay.learner
        self.num_slots = config.num_slots
        self.groups = LearnerGroups(self.num_slots, self.replay.learners_per_reward, config.setting == "init")
        self.num_learners = self.groups.num_learners
        self.extra = self.groups.extra_learner
        # Each slot's learners, best first at the last reward update (before one: in order), then the init
        # setting's extra learner alone (it is ranked with the slots: docs/lares-reference.md §3).
        self.ranked: list[list[int]] = [self.groups.learners(s) for s in range(self.num_slots)] + self._extra_rank()
        self.horizon = config.horizon or task.horizon
        self.counters = ReplayCounters()
        seeds = np.random.SeedSequence(config.seed).spawn(4)  # [0] is the loop's generator (populations/__init__)
        self.torch_gen = torch.Generator().manual_seed(int(seeds[1].generate_state(1)[0]))
        # One pool for training and evaluation: every reset is seeded from its own stream (train/eval/warm-up),
        # so sharing envs changes no episode, and MetaWorld envs cost seconds each to build.
        self.pool = EnvPool(task.make_env, config.seed)
        env = self.pool.get(1)[0]
        self.obs_dim = int(np.prod(env.observation_space.shape or (1,)))
        self.act_dim = int(np.prod(env.action_space.shape or (1,)))
        names = [f.name for f in task.features]
        self.buffer = ReplayBuffer(  # one column per slot (and the extra learner), shared by its learners
            self.replay.buffer_capacity, self.obs_dim, self.act_dim,
            tuple(dict.fromkeys([*names, "success", HUMAN_REWARD_FEATURE])),
            learner_count(config.setting, self.num_slots),
        )
        self.learners: PopulationLearner = make_population(
            self.replay.learner_config, self.num_learners, self.obs_dim, self.act_dim,
            int(seeds[2].generate_state(1)[0] >> 1), device=self.device)
        # The arms are the slots' learners: with one learner per reward, LaRes' one arm per slot; with several, each
        # learner keeps its own record (they differ by seed), and K*N draws keep the env steps per step of K*N
        # learners with one reward each.
        self.ts = ThompsonSampler(self.groups.slot_learners, self.replay.ts_window)
        self.quarantined_learners: set[int] = set()
        self.acted = np.zeros(self.num_learners, np.int64)
        self.loss_sum = {key: np.zeros(self.num_learners) for key in LOSS_KEYS}
        self.seconds = {"sim_s": 0.0, "learn_s": 0.0, "eval_s": 0.0, "warmup_s": 0.0, "relabel_s": 0.0}
        self._loss_reason = f"non-finite {LEARNER_NAMES[self.replay.learner]} loss"

    def _extra_rank(self) -> list[list[int]]:
        return [[self.extra]] if self.extra is not None else []

    # ------------------------------------------------------------------ views
    @property
    def leaders(self) -> list[int]:
        """Each slot's best learner at the last reward update: the policy the slot hands over, and the one replaced
        slots inherit when it is the best slot's (its first learner before any update)."""
        return [order[0] for order in self.ranked]

    @property
    def timing(self) -> dict[str, float]:
        """Wall seconds this session in episodes (training and evaluation: ``sim_s``; ``eval_s`` the evaluations'
        part of it), in learner updates (``learn_s``), in the warm-up's random episodes and first labels
        (``warmup_s``) and in labelling reward columns at updates (``relabel_s``: relabel and rescale)."""
        return dict(self.seconds)

    def quarantined(self, slot: int) -> bool:
        return all(i in self.quarantined_learners for i in self.groups.learners(slot))

    def learner_quarantined(self, learner: int) -> bool:
        return learner in self.quarantined_learners

    def action_box(self) -> tuple[np.ndarray, np.ndarray]:
        box: Any = self.pool.get(1)[0].action_space
        return np.asarray(box.low), np.asarray(box.high)

    def _quarantine(self, learner: int, reason: str, env_steps: int) -> None:
        if learner in self.quarantined_learners:
            return
        self.quarantined_learners.add(learner)
        if learner < self.groups.slot_learners:
            self.ts.block(learner)
        self.event({"event": "quarantine", "learner": learner, "reason": reason, "env_steps": env_steps})

    # ------------------------------------------------------------------ warm-up
    def prepare(self, rewards: list[RewardFunction]) -> None:
        """The first time: store uniform-random episodes, then label every column with its initial reward; a
        candidate the buffer refuses shares a usable slot's reward (``rewards`` is changed in place) and its
        learners are quarantined until the next update."""
        if self.counters.warmed_up:
            return
        began = time.monotonic()
        stored, counter = 0, 0
        act = uniform_actions(self.rng, self.act_dim)
        while stored < self.replay.warmup_steps:
            seeds = [episode_seed(self.config.seed, WARMUP_STREAM, counter + i) for i in range(self.num_learners)]
            counter += self.num_learners
            batch = run_episodes(self.pool.get(self.num_learners), act, self.task.raw_state, self.horizon, seeds)
            self._store(batch, None, 0)
            stored += int(batch.lengths.sum())
        rejected: list[int] = []
        normalisation = self.replay.reward_normalisation
        gains: list[dict[str, Any]] = []  # each scaled reward's gain and factor (ReplayConfig.reward_gain)
        scales = [self._start_scale(fn, gains) for fn in rewards]
        for j, fn in enumerate(rewards):
            try:
                # the baseline's one reward is taken as it is: a sparse success reward is 0 on random warm-up data
                self.buffer.set_column(j, fn, reference=None, allow_constant=self.config.setting == "baseline",
                                       normalisation=normalisation, scale=scales[j])
            except RewardColumnError as exc:
                self.event({"event": "candidate_rejected", "slot": j, "reward_id": fn.id, "reason": exc.reason})
                rejected.append(j)
        donors = [i for i in range(self.num_slots) if i not in rejected]
        for j in rejected:
            if not donors:
                raise EngineError("no initial reward candidate is usable on the warm-up data")
            self.buffer.set_column(j, rewards[donors[0]], reference=None, normalisation=normalisation,
                                   scale=scales[donors[0]])
            rewards[j] = rewards[donors[0]]
            for learner in self.groups.learners(j):
                self._quarantine(learner, f"initial reward rejected; sharing slot {donors[0]}'s reward until the "
                                          "next update", 0)
        self.counters.warmed_up = True
        self.seconds["warmup_s"] += time.monotonic() - began
        self.event({"event": "warmup", "steps": stored, "rewards": [fn.id for fn in rewards],
                    "device": str(self.device), **({"reward_gain": gains} if gains else {})})

    def _start_scale(self, fn: RewardFunction, gains: list[dict[str, Any]]) -> float:
        scale, record = start_scale(fn, self.buffer.feature_view(), self.task, self.replay.reward_gain)
        gains.extend([record] if record is not None else [])
        return scale

    # ------------------------------------------------------------------ acting and learning
    def step(self, env_steps: int) -> StepInfo:
        """Thompson sampling picks who acts (and the extra learner acts); each plays one stochastic episode, stored;
        then every open learner learns on its column."""
        select = self.ts.select if self.replay.thompson else self.ts.select_uniform
        arms = select(self.groups.slot_learners, self.rng)
        extra = [self.extra] if self.extra is not None and self.extra not in self.quarantined_learners else []
        members = arms + extra
        if not members:
            raise EngineError("every learner is quarantined (non-finite); nothing can act")
        batch, successes = self._play(members, env_steps)
        self.ts.record_many(arms, successes[: len(arms)])
        steps = int(batch.lengths.sum())
        self.acted[np.asarray(members, np.int64)] += 1
        updates = self._learn(steps, env_steps + steps)
        return StepInfo(steps=steps, acted=tuple(members), successes=tuple(successes), updates=updates)

    def _play(self, members: Sequence[int], env_steps: int) -> tuple[EpisodeBatch, list[bool]]:
        """One stochastic training episode per member (seeded from the train stream), stored; returns the batch
        and each episode's any-step success."""
        c = self.counters
        start = time.monotonic()
        seeds = [episode_seed(self.config.seed, TRAIN_STREAM, c.train_episodes + i) for i in range(len(members))]
        c.train_episodes += len(members)
        member_arr = np.asarray(members, np.int64)
        batch = run_episodes(
            self.pool.get(len(members)),
            lambda obs: self.learners.act(obs, member_arr, False, self.torch_gen),
            self.task.raw_state,
            self.horizon,
            seeds,
        )
        self.seconds["sim_s"] += time.monotonic() - start
        return batch, self._store(batch, members, env_steps)

    def _store(self, batch: EpisodeBatch, members: Sequence[int] | None, env_steps: int) -> list[bool]:
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
        self.learners.observe(obs)
        success = feats["success"]
        out = [bool(np.any(success[offsets[i] : offsets[i + 1]] > 0.5)) for i in range(m)]
        if members is not None:
            for j in np.flatnonzero(self.buffer.nonfinite_count > before):
                for learner in self.groups.learners(int(j)):
                    self._quarantine(learner, "reward is NaN/inf on new steps", env_steps)
            for i in np.flatnonzero(batch.nonfinite):
                self._quarantine(int(members[int(i)]), "policy emitted non-finite actions", env_steps)
        return out

    def _learn(self, steps: int, env_steps: int) -> int:
        """``utd_ratio * steps`` batched updates, each open learner on its own column; returns the count."""
        members = [i for i in range(self.num_learners) if i not in self.quarantined_learners]
        learner = self.replay.learner_config
        updates = round(learner.utd_ratio * steps)
        done, start = 0, time.monotonic()
        column_of = self.groups.column_of
        while done < updates and members:
            batch = self.buffer.sample(learner.batch_size, column_of[members].tolist(), self.rng)
            stats = self.learners.update(batch, members)
            for key in LOSS_KEYS:
                self.loss_sum[key] += np.nan_to_num(np.asarray(stats[key], np.float64), nan=0.0)
            self.counters.loss_count += 1
            done += 1
            diverged = [m for m in members if not np.isfinite(stats["q_loss"][m] + stats["actor_loss"][m])]
            for m in diverged:  # a diverged learner stops training and acting until the next update resets it
                self._quarantine(m, self._loss_reason, env_steps)
                members.remove(m)
        self.seconds["learn_s"] += time.monotonic() - start
        return done

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, rewards: Sequence[RewardFunction], seeds: Sequence[int], env_steps: int, *,
                 keep_rollouts: int = 0) -> list[MemberEvaluation]:
        """Every learner's deterministic episodes, in learner order."""
        start = time.monotonic()
        learners = list(range(self.num_learners))
        drop = frozenset({HUMAN_REWARD_FEATURE}) if self.config.setting == "scratch" else frozenset()
        evals = evaluate_members(
            self.pool,
            lambda obs, members: self.learners.act(obs, members, True, self.torch_gen),
            self.task.raw_state,
            self.task.features,
            learners,
            [rewards[int(self.groups.column_of[i])] for i in learners],
            len(seeds),
            self.horizon,
            list(seeds),
            self.task.progress_feature,
            keep_rollouts=keep_rollouts,
            drop_features=drop,
            approach_feature=self.task.approach_feature,
        )
        for ev in evals:
            if ev.nonfinite:
                self._quarantine(ev.member, "non-finite actions or reward during evaluation", env_steps)
        self.seconds["sim_s"] += time.monotonic() - start
        self.seconds["eval_s"] += time.monotonic() - start
        return evals

    def lead(self, ranked: Sequence[Sequence[int]]) -> None:
        self.ranked = [[int(i) for i in order] for order in ranked]

    def feature_sample(self, n: int) -> dict[str, np.ndarray]:
        """Random stored rows of every feature (without the human reward in the scratch setting) and their next
        steps (`NEXT_PREFIX`), for the proposer's numeric validation and offline pre-screen of candidates."""
        drop = frozenset({HUMAN_REWARD_FEATURE}) if self.config.setting == "scratch" else frozenset()
        return self.buffer.feature_sample(n, self.rng, drop)

    def diversity(self, evals: Sequence[MemberEvaluation], rewards: Sequence[RewardFunction]) -> Diversity | None:
        return None  # not measured here: the proposer judges from the rewards and rollouts it is given

    # ------------------------------------------------------------------ reward update
    def install(self, slot: int, fn: RewardFunction, best: int) -> Mapping[str, float]:
        """Relabel the slot's column with ``fn`` (over the whole buffer unless the no-relabel ablation), scaled
        to the best slot's column; the buffer raises RewardColumnError for a constant or non-finite column."""
        began = time.monotonic()
        try:
            affine = self.buffer.set_column(slot, fn, reference=best if self.replay.scale_to_best else None,
                                            relabel=self.replay.relabel,
                                            normalisation=self.replay.reward_normalisation)
        finally:
            self.seconds["relabel_s"] += time.monotonic() - began
        return {"scale": affine.scale, "shift": affine.shift}

    def reward_nonfinite(self, slot: int, evaluation: MemberEvaluation) -> bool:
        return bool(self.buffer.nonfinite_count[slot] > 0)

    def inherit(self, slots: Sequence[int], best: int) -> None:
        """The learners of replaced and broken slots, and any diverged learner of a kept slot, copy the best slot's
        best healthy learner and are pulled toward it (L2 anchor, §7); the others drop their anchors; every reset
        learner acts again, and TS starts fresh windows (§8)."""
        source = next((i for i in self.ranked[best] if i not in self.quarantined_learners), self.ranked[best][0])
        dst = {i for s in slots for i in self.groups.learners(s)}
        dst |= {i for i in self.quarantined_learners if i < self.groups.slot_learners}
        dst.discard(source)
        reset = sorted(dst)
        if reset:
            self.learners.inherit(reset, source, self.replay.anchor_weight)
        self.learners.release_anchor([i for i in range(self.num_learners) if i not in dst])
        # Every quarantined slot learner was just reset; only a diverged extra (human-reward) learner stays out.
        self.quarantined_learners.difference_update(reset)
        self.ts.reset()

    # ------------------------------------------------------------------ metrics rows
    def slot_fields(self, slot: int) -> dict[str, Any]:
        return {}

    def metrics_fields(self) -> dict[str, Any]:
        """How often each learner acted, the mean losses (and temperature) per learner since the previous row,
        and the quarantined learners."""
        count = max(self.counters.loss_count, 1)
        means = {key: (self.loss_sum[key] / count).tolist() for key in LOSS_KEYS}
        fields = {"acted": self.acted.tolist(), "losses": {k: v for k, v in means.items() if k != "alpha"},
                  "alpha": means["alpha"], "quarantined": sorted(self.quarantined_learners)}
        self.acted[:] = 0
        for key in LOSS_KEYS:
            self.loss_sum[key][:] = 0.0
        self.counters.loss_count = 0
        return fields

    def event_fields(self) -> dict[str, Any]:
        return {}

    # ------------------------------------------------------------------ state
    def policy_state(self) -> dict[str, Any]:
        return {"learners": self.learners.state_dict()}

    def state_dict(self) -> dict[str, Any]:
        return {
            "counters": dataclasses.asdict(self.counters),
            "quarantined": sorted(self.quarantined_learners),
            "acted": self.acted.copy(),
            "loss_sum": {k: v.copy() for k, v in self.loss_sum.items()},
            "torch_gen": self.torch_gen.get_state(),
            "ts": self.ts.state_dict(),
            "ranked": [list(order) for order in self.ranked],
            "learners": self.learners.state_dict(),
            "buffer": self.buffer.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any], rewards: Sequence[RewardFunction]) -> None:
        """Restore from ``state_dict()``; the buffer's columns get their reward functions back (ids checked)."""
        self.counters = load_counters(ReplayCounters, state["counters"])
        self.quarantined_learners = {int(q) for q in state["quarantined"]}
        self.acted[:] = np.asarray(state["acted"])
        for key, value in state["loss_sum"].items():
            self.loss_sum[key][:] = np.asarray(value)
        self.torch_gen.set_state(state["torch_gen"])
        self.ts.load_state_dict(state["ts"])
        self.ranked = [[int(i) for i in order] for order in state["ranked"]]
        self.learners.load_state_dict(state["learners"])
        self.buffer.load_state_dict(state["buffer"], rewards if self.counters.warmed_up else None)

    def close(self) -> None:
        self.pool.close()
