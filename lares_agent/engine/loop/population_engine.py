"""The LaRes loop over a population of gradient learners (SAC or CrossQ) sharing one replay buffer.

One iteration (docs/lares-reference.md §1, with §12's fixes): Thompson sampling picks distinct learners, each plays
one stochastic episode; the steps enter the shared buffer with the features of every step and the reward of
every candidate; then every learner does ``utd_ratio * steps`` updates on its own reward column (warm-up, storing
and learning: ``loop/interaction.py``). Every ``reward_period`` env steps the population is evaluated, the top
``elites`` candidates are kept and the other slots are refilled by the ``propose`` hook (the LLM graph, wired in by
the search layer); a new slot's column is relabelled over the whole buffer, scaled to the best elite, and its
learner inherits the best learner with an L2 pull toward it (§5-7). The engine never imports LLM or graph code.

Settings as in ``loop/slots.py`` (scratch, init with its extra human-reward learner, baseline). The reward update
itself is ``RewardSlots.start``/``finish``, run by ``loop/update_schedule.py`` (blocking, or with ``propose`` on a
worker thread: ``--sync-llm`` off); this module passes it the buffer side: relabelling as the install step (the
buffer refuses a constant or non-finite column) and inheritance with an L2 anchor. The learner kind is
``EngineConfig.learner``; the loop sees it only through ``contracts.PopulationLearner``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lares_agent.engine.buffer import ReplayBuffer
from lares_agent.engine.checkpoint import load_checkpoint
from lares_agent.engine.contracts import (
    HUMAN_REWARD_FEATURE,
    GradientLearner,
    LoadReward,
    MemberEvaluation,
    PopulationLearner,
    ProposeFn,
    RewardFunction,
)
from lares_agent.engine.errors import EngineError
from lares_agent.engine.learners.factory import make_population
from lares_agent.engine.loop.config import EngineConfig
from lares_agent.engine.loop.engine_base import RewardLoopEngine
from lares_agent.engine.loop.groups import LearnerGroups
from lares_agent.engine.loop.interaction import Interaction, IterationInfo
from lares_agent.engine.loop.selection import choose_elites
from lares_agent.engine.loop.slots import LearnerHooks, RewardSlots, SlotRules, initial_slot_rewards, learner_count
from lares_agent.engine.loop.state import (
    STATE_VERSION,
    EngineLog,
    SACCounters,
    check_state,
    evaluation_row,
    load_counters,
    rewards_from_state,
)
from lares_agent.engine.loop.thompson import ThompsonSampler
from lares_agent.engine.loop.update_schedule import UpdateSchedule
from lares_agent.engine.policy_artefact import write_policies
from lares_agent.engine.rollouts.episodes import EVAL_STREAM, EnvPool, episode_seed
from lares_agent.engine.rollouts.evaluation import evaluate_members
from lares_agent.engine.tasks import TaskSpec
from lares_agent.runs import RunLayout

__all__ = ["LaResEngine"]


class LaResEngine(RewardLoopEngine):
    """The LaRes engine over one task and a population of ``config.learner`` learners. Drive it with
    :meth:`run` or :meth:`step_iteration`.

    ``initial_rewards``: scratch -> K candidates; init -> K - 1 candidates (slot 0 holds the human reward);
    baseline -> none. ``rewards`` (instead): every learner's reward as a checkpoint holds them (see
    :meth:`restore`). ``propose`` is called at every reward update; ``run_dir`` receives ``metrics.jsonl``,
    ``events.jsonl`` and ``checkpoints/`` (None: nothing is written, events are kept in ``self.events``).
    """

    config: EngineConfig
    counters: SACCounters

    def __init__(
        self,
        task: TaskSpec,
        config: EngineConfig,
        initial_rewards: Sequence[RewardFunction] = (),
        propose: ProposeFn | None = None,
        run_dir: str | Path | None = None,
        *,
        rewards: Sequence[RewardFunction] | None = None,
    ) -> None:
        if rewards is None:
            rewards = initial_slot_rewards(
                config.setting, config.num_slots, initial_rewards, task.has_human_reward, task.name
            )
        self.task, self.config, self.propose = task, config, propose
        self.num_slots = config.num_slots
        self.groups = LearnerGroups(self.num_slots, config.learners_per_reward, config.setting == "init")
        self.num_learners = self.groups.num_learners
        # Each slot's learners, best first at the last reward update (before one: in order); see `leaders`.
        self._ranked: list[list[int]] = [self.groups.learners(s) for s in range(self.num_slots)]
        self._learner_evals: list[MemberEvaluation] = []
        self.horizon = config.horizon or task.horizon
        self.counters = SACCounters(
            next_eval=config.eval_every if config.eval_every > 0 else None,
            next_checkpoint=config.checkpoint_every if config.checkpoint_every > 0 else None,
        )
        self.log = EngineLog(run_dir)
        self.slots = RewardSlots(list(rewards), SlotRules.of(config, task.has_human_reward), self.counters,
                                 self.log.event)
        self.extra = self.groups.extra_learner
        seeds = np.random.SeedSequence(config.seed).spawn(4)
        self.rng = np.random.default_rng(seeds[0])
        self.torch_gen = torch.Generator().manual_seed(int(seeds[1].generate_state(1)[0]))
        # One pool for training and evaluation: every reset is seeded from its own stream (train/eval/warm-up),
        # so sharing envs changes no episode, and MetaWorld envs cost seconds each to build.
        self.pool = EnvPool(task.make_env, config.seed)
        env = self.pool.get(1)[0]
        self.obs_dim = int(np.prod(env.observation_space.shape or (1,)))
        self.act_dim = int(np.prod(env.action_space.shape or (1,)))
        names = [f.name for f in task.features]
        self.feature_names = tuple(dict.fromkeys([*names, "success", HUMAN_REWARD_FEATURE]))
        self.buffer = ReplayBuffer(  # one column per slot (and the extra learner), shared by its learners
            config.buffer_capacity, self.obs_dim, self.act_dim, self.feature_names,
            learner_count(config.setting, self.num_slots)
        )
        pop_seed = int(seeds[2].generate_state(1)[0] >> 1)
        self.population: PopulationLearner = make_population(
            config.learner_config, self.num_learners, self.obs_dim, self.act_dim, pop_seed)
        # The arms are the slots' learners: with one learner per reward, LaRes' one arm per slot; with several, each
        # learner keeps its own record (they differ by seed), and K*N draws keep the env steps per iteration of
        # K*N learners with one reward each (issue 17).
        self.ts = ThompsonSampler(self.groups.slot_learners, config.ts_window)
        self.quarantined: set[int] = set()  # one set, changed in place: the interaction reads it
        self.acted = np.zeros(self.num_learners, np.int64)
        self.interaction = Interaction(task, config, self.horizon, self.pool, self.buffer, self.population,
                                       self.rng, self.torch_gen, self.counters, self.log, self.quarantined,
                                       self._quarantine, self.groups)
        self._start = time.monotonic()
        self.last_metrics: dict[str, Any] | None = None
        self._hooks = LearnerHooks(
            evaluate=self._update_evaluation,
            quarantined=lambda slot: all(i in self.quarantined for i in self.groups.learners(slot)),
            choose_elites=lambda ranking, slots: choose_elites(ranking, slots, config.elites, config.selection,
                                                               self.rng),
            feature_sample=lambda: self.interaction.feature_sample(config.feature_sample),
            install=self._install,
            reward_nonfinite=lambda slot, _ev: bool(self.buffer.nonfinite_count[slot] > 0),
            inherit=self._inherit,
            log_evaluation=lambda _slot_evals: self._log_evaluation("update", self._learner_evals),
            checkpoint=self._round_checkpoint,
            event_fields=lambda: {} if config.selection.method == "truncation"
            else {"selection": config.selection.method},
        )
        # An update is due every reward_period steps; a background proposal is overdue once the next one is.
        self.updates = UpdateSchedule(
            self.slots, self._hooks,
            lambda: config.reward_period > 0 and self.slots.may_update()
            and self.counters.env_steps - self.counters.last_update_steps >= config.reward_period,
            background=config.propose_in_background,
            overdue=lambda ctx: self.counters.env_steps - ctx.env_steps >= config.reward_period)

    # ------------------------------------------------------------------ views and driving (also engine_base.py)
    @property
    def leaders(self) -> list[int]:
        """Each slot's best learner at the last reward update: the policy the slot hands over, and the one replaced
        slots inherit when it is the best slot's (its first learner before any update)."""
        return [order[0] for order in self._ranked]

    @property
    def warmed_up(self) -> bool:
        return self.counters.warmed_up

    def run(
        self,
        until_steps: int | None = None,
        progress: Callable[[IterationInfo], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> int:
        """Iterate until ``until_steps`` (default: the budget) or ``should_stop()``; returns env steps."""
        limit = self.config.total_steps if until_steps is None else min(until_steps, self.config.total_steps)
        while self.counters.env_steps < limit:
            if should_stop is not None and should_stop():
                break
            info = self.step_iteration()
            if progress is not None:
                progress(info)
        # A proposal still running is waited for and installed: its candidates are already logged as accepted,
        # and the checkpoints the caller writes next must hold them (a second signal still stops at once; the
        # resume then reruns the round from the trace, from the checkpoint before it started).
        self.finish_update()
        return self.counters.env_steps

    def step_iteration(self) -> IterationInfo:
        """Warm up if needed, run a due reward update, then one interaction + learning iteration."""
        c = self.counters
        if not c.warmed_up:
            self.warmup()
        self.updates.step(self.propose)
        select = self.ts.select if self.config.thompson else self.ts.select_uniform
        arms = select(self.groups.slot_learners, self.rng)
        extra = [self.extra] if self.extra is not None and self.extra not in self.quarantined else []
        members = arms + extra
        if not members:
            raise EngineError("every learner is quarantined (non-finite); nothing can act")
        batch, successes = self.interaction.play(members)
        self.ts.record_many(arms, successes[: len(arms)])
        steps = int(batch.lengths.sum())
        c.env_steps += steps
        self.acted[np.asarray(members, np.int64)] += 1
        updates = self._learn(steps)
        if c.next_eval is not None and c.env_steps >= c.next_eval:
            while c.next_eval <= c.env_steps:
                c.next_eval += self.config.eval_every
            self._log_evaluation("eval", self.evaluate(range(self.num_learners), self.config.eval_episodes))
        # No periodic checkpoint while a proposal is in flight: it would hold a state from which the resume could
        # not rerun the round that started before it (the next iteration after the install writes it).
        if c.next_checkpoint is not None and c.env_steps >= c.next_checkpoint and not self.updates.in_flight:
            while c.next_checkpoint <= c.env_steps:
                c.next_checkpoint += self.config.checkpoint_every
            self.save_checkpoint()
        return IterationInfo(c.env_steps, c.round, tuple(members), steps, tuple(successes), updates)

    # ------------------------------------------------------------------ warm-up and learning (interaction.py)
    def warmup(self) -> None:
        """Fill the buffer with uniform-random episodes (not counted in the budget, as the reference), then
        label every column with its initial reward (identity map, docs/lares-reference.md §6)."""
        self.interaction.warmup(self.rewards, self.num_slots)

    def _learn(self, steps: int) -> int:
        """``utd_ratio * steps`` population updates, each learner on its own column (§9 UTD)."""
        return self.interaction.learn(steps)

    def _quarantine(self, learner: int, reason: str) -> None:
        if learner in self.quarantined:
            return
        self.quarantined.add(learner)
        if learner < self.groups.slot_learners:
            self.ts.block(learner)
        self.log.event({"event": "quarantine", "learner": learner, "reason": reason,
                        "env_steps": self.counters.env_steps})

    # ------------------------------------------------------------------ reward update hooks (update_schedule.py)
    def _install(self, slot: int, fn: RewardFunction, best: int) -> Mapping[str, float]:
        """Relabel the slot's column with ``fn`` (over the whole buffer unless the no-relabel ablation), scaled
        to the best slot's column; the buffer raises RewardColumnError for a constant or non-finite column."""
        affine = self.buffer.set_column(slot, fn, reference=best if self.config.scale_to_best else None,
                                        relabel=self.config.relabel,
                                        normalisation=self.config.reward_normalisation)
        return {"scale": affine.scale, "shift": affine.shift}

    def _inherit(self, slots: Sequence[int], best: int) -> None:
        """The learners of replaced and broken slots, and any diverged learner of a kept slot, copy the best slot's
        best healthy learner and are pulled toward it (L2 anchor, §7); the others drop their anchors; every reset
        learner acts again, and TS starts fresh windows (§8)."""
        source = next((i for i in self._ranked[best] if i not in self.quarantined), self._ranked[best][0])
        dst = {i for s in slots for i in self.groups.learners(s)}
        dst |= {i for i in self.quarantined if i < self.groups.slot_learners}
        dst.discard(source)
        reset = sorted(dst)
        if reset:
            self.population.inherit(reset, source, self.config.anchor_weight)
        self.population.release_anchor([i for i in range(self.num_learners) if i not in dst])
        # Every quarantined slot learner was just reset; only a diverged extra (human-reward) learner stays out.
        self.quarantined.difference_update(reset)
        self.ts.reset()

    # ------------------------------------------------------------------ evaluation
    def _update_evaluation(self) -> list[MemberEvaluation]:
        """A reward update's evaluation of every learner, seen per slot (``LearnerGroups.slot_view``: the mean
        over a slot's learners); the slots' leaders are chosen here, the learners' own rows kept for the log."""
        cfg = self.config
        evals = self.evaluate(range(self.num_learners), cfg.update_eval_episodes, keep_rollouts=cfg.rollouts_kept)
        self._learner_evals = evals
        self._ranked = self.groups.leaders(evals, self.rewards, cfg.complexity_lambda, self.slots.rules.use_task_return,
                                           lambda i: i in self.quarantined)
        return self.groups.slot_view(evals, self._ranked, lambda i: i in self.quarantined)

    def evaluate(
        self, learners: Sequence[int] | range, episodes: int, keep_rollouts: int = 0
    ) -> list[MemberEvaluation]:
        """Deterministic evaluation of ``learners`` on common reset seeds (not counted in the budget)."""
        learners = list(learners)
        c, start = self.counters, time.monotonic()
        seeds = [episode_seed(self.config.seed, EVAL_STREAM, c.eval_episode_counter + e) for e in range(episodes)]
        c.eval_episode_counter += episodes
        drop = frozenset({HUMAN_REWARD_FEATURE}) if self.config.setting == "scratch" else frozenset()
        evals = evaluate_members(
            self.pool,
            lambda obs, members: self.population.act(obs, members, True, self.torch_gen),
            self.task.raw_state,
            self.task.features,
            learners,
            [self.rewards[int(self.groups.column_of[i])] for i in learners],
            episodes,
            self.horizon,
            seeds,
            self.task.progress_feature,
            keep_rollouts=keep_rollouts,
            drop_features=drop,
            approach_feature=self.task.approach_feature,
        )
        for ev in evals:
            if ev.nonfinite:
                self._quarantine(ev.member, "non-finite actions or reward during evaluation")
        self.interaction.seconds["sim_s"] += time.monotonic() - start
        return evals

    @property
    def timing(self) -> dict[str, float]:
        """Wall seconds this session in episodes (training and evaluation: ``sim_s``) and in learner updates
        (``learn_s``); the run's ``run_end`` event records them beside the LLM wait."""
        return dict(self.interaction.seconds)

    def _log_evaluation(self, kind: str, evals: Sequence[MemberEvaluation]) -> None:
        """One metrics row of every learner's evaluation, per slot (the mean over its learners, each learner's
        success in ``learner_success``)."""
        slot_evals = self.groups.slot_view(evals, self._ranked, lambda i: i in self.quarantined)[: self.num_slots]
        losses = self.interaction.loss_means()
        extra = next((e for e in evals if e.member == self.extra), None)
        record = evaluation_row(kind, self.counters, slot_evals, [fn.id for fn in self.rewards],
                                time.monotonic() - self._start, extra)
        record.update(acted=self.acted.tolist(), losses={k: v for k, v in losses.items() if k != "alpha"},
                      alpha=losses["alpha"], quarantined=sorted(self.quarantined))
        self.log.metrics(record)
        self.last_metrics = record
        self.acted[:] = 0
        self.interaction.reset_losses()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The full engine state as nested dicts of arrays, tensors and scalars."""
        return {
            "version": STATE_VERSION,
            "learner": self.config.learner,
            "task": self.task.name,
            "config": self.config.to_json(),
            "counters": dataclasses.asdict(self.counters),
            "quarantined": sorted(self.quarantined),
            "acted": self.acted.copy(),
            "loss_sum": {k: v.copy() for k, v in self.interaction.loss_sum.items()},
            "rng": self.rng.bit_generator.state,
            "torch_gen": self.torch_gen.get_state(),
            "ts": self.ts.state_dict(),
            "population": self.population.state_dict(),
            "buffer": self.buffer.state_dict(),
            "rewards": [fn.to_json() for fn in self.rewards],
            "leaders": [list(order) for order in self._ranked],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore counters, RNGs, TS, learners and buffer; ``self.rewards`` must already be the saved ones."""
        check_state(state, self.config.learner, self.task.name)
        # The counters object is shared with the reward slots: update it in place.
        for name, value in dataclasses.asdict(load_counters(SACCounters, state["counters"])).items():
            setattr(self.counters, name, value)
        self.quarantined.clear()
        self.quarantined.update(int(q) for q in state["quarantined"])
        self.acted[:] = np.asarray(state["acted"])
        for key, value in state["loss_sum"].items():
            self.interaction.loss_sum[key][:] = np.asarray(value)
        self.rng.bit_generator.state = state["rng"]
        self.torch_gen.set_state(state["torch_gen"])
        self.ts.load_state_dict(state["ts"])
        # Checkpoints from before learners_per_reward hold no leaders: one learner per slot, in slot order.
        self._ranked = [[int(i) for i in order] for order in state.get("leaders", self._ranked)]
        self.population.load_state_dict(state["population"])
        columns = self.rewards if self.counters.warmed_up else None
        self.buffer.load_state_dict(state["buffer"], columns)

    def save_policy(self, name: str, every_slot: bool = False) -> Path | None:
        """The ranked-first slot's policy as ``policies/<name>.pt`` (engine/policy_artefact.py; no-op without a
        run directory). ``every_slot``: also each slot's own file (the end of a run)."""
        if self.run_dir is None:
            return None
        state = {"learner": self.config.learner, "task": self.task.name, "config": self.config.to_json(),
                 "counters": dataclasses.asdict(self.counters), "population": self.population.state_dict()}
        box: Any = self.pool.get(1)[0].action_space
        ids = [fn.id for fn in self.rewards[: self.num_slots]]
        return write_policies(RunLayout(self.run_dir), name, state, self.best_slot, box.low, box.high, ids, every_slot,
                              members=self.leaders)

    @classmethod
    def restore(
        cls,
        checkpoint: str | Path,
        task: TaskSpec,
        load_reward: LoadReward | None = None,
        propose: ProposeFn | None = None,
        run_dir: str | Path | None = None,
        *,
        learner: GradientLearner | None = None,
    ) -> LaResEngine:
        """Rebuild an engine from a checkpoint directory (or a ``checkpoints/`` root: its latest).

        ``load_reward(dict)`` rebuilds each saved candidate from its ``to_json()``; the human reward is
        rebuilt here. ``learner``: the kind the caller expects (a state of another kind is refused in one
        line); None takes the saved config's. Logging continues in ``run_dir`` (metrics lines after the
        checkpoint may repeat; a ``resumed`` event marks where).
        """
        state = load_checkpoint(checkpoint)
        saved = state.get("config")
        check_state(state, learner or (saved.get("learner", "sac") if isinstance(saved, dict) else "sac"), task.name)
        config = EngineConfig.from_json(state["config"])
        engine = cls(task, config, propose=propose, run_dir=run_dir, rewards=rewards_from_state(state, load_reward))
        engine.load_state_dict(state)
        engine.log.event({"event": "resumed", "env_steps": engine.env_steps, "round": engine.round})
        return engine

    def close(self) -> None:
        """Close environments and log files (and let the proposal worker go)."""
        self.updates.close()
        self.pool.close()
        self.log.close()
