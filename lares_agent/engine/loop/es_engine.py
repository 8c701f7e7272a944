"""LaRes with ES learners (``--learner es``): the same reward-population loop as the SAC engine.

Each of the K reward slots has its own OpenAI-ES policy trained on that slot's reward (rewards are computed
vectorised from the task's features over the rollouts' raw states). Every reward period the engine evaluates
every policy deterministically, scores the slots with the SAC engine's fitness code (success rate - lambda *
complexity, same tie-breaks), picks elites by truncation or tournament, measures population diversity, and
calls the ``propose`` hook for the other slots (``RewardSlots`` through ``loop/update_schedule.py``, shared
with the SAC engine). A replaced
slot's policy restarts from the best slot's parameters, optimiser moments and observation statistics. ES keeps
no buffer, so nothing is relabelled and the install step refuses nothing: proposals are validated by the
propose hook (the search layer's validator). In the ``init`` setting an extra ES policy trains on the human
reward throughout, never ranked or replaced, as the SAC engine's extra learner.

Outputs match ``LaResEngine``: ``metrics.jsonl`` rows with ``env_steps``, ``round`` and per slot ``{slot,
reward_id, success, task_return, own_return}``; ``reward_update`` events; atomic checkpoints under
``checkpoints/`` (identical for the local and Ray backends, so either can resume the other's run).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.engine.checkpoint import load_checkpoint
from lares_agent.engine.contracts import (
    HUMAN_REWARD_FEATURE,
    Diversity,
    LoadReward,
    MemberEvaluation,
    ProposeFn,
    RewardFunction,
    SlotEvaluation,
)
from lares_agent.engine.es.learner import ESBackend, LearnerSettings, LocalBackend
from lares_agent.engine.loop.engine_base import RewardLoopEngine
from lares_agent.engine.loop.es_config import ESSearchConfig
from lares_agent.engine.loop.selection import choose_elites, measure_diversity
from lares_agent.engine.loop.slots import LearnerHooks, RewardSlots, SlotRules, initial_slot_rewards
from lares_agent.engine.loop.state import (
    STATE_VERSION,
    EngineLog,
    ESCounters,
    check_state,
    evaluation_row,
    load_counters,
    rewards_from_state,
)
from lares_agent.engine.loop.update_schedule import UpdateSchedule
from lares_agent.engine.policy_artefact import write_policies
from lares_agent.engine.rollouts.episodes import EVAL_STREAM, episode_seed
from lares_agent.engine.tasks import TaskSpec
from lares_agent.runs import RunLayout

__all__ = ["ESEngine", "GenerationInfo"]

LEARNER = "es"


@dataclass(frozen=True)
class GenerationInfo:
    """What one generation did, for progress callbacks."""

    env_steps: int
    round: int
    generation: int
    steps: int
    fitness_mean: tuple[float, ...]


def _make_backend(task: TaskSpec, rewards: Sequence[RewardFunction], config: ESSearchConfig) -> ESBackend:
    settings = LearnerSettings(es=config.es, hidden=config.hidden, episodes_per_member=config.episodes_per_member,
                               horizon=config.horizon, asynchronous=config.asynchronous_envs,
                               rollout_workers=config.rollout_workers)
    if config.backend == "ray":
        from lares_agent.engine.es.ray_backend import RayBackend  # optional extra: import only when chosen

        return RayBackend(task, rewards, settings, config.seed, address=config.ray_address,
                          num_cpus=config.ray_num_cpus)
    return LocalBackend(task, rewards, settings, config.seed)


class ESEngine(RewardLoopEngine):
    """The ES reward search over one task. Drive it with :meth:`run` or :meth:`step_generation`.

    ``initial_rewards``: scratch -> K candidates; init -> K - 1 (slot 0 starts on the human reward);
    baseline -> none. ``rewards`` (instead): every learner's reward as a checkpoint holds them.
    ``propose`` is called at every reward update with an :class:`UpdateContext` that carries the diversity.
    """

    config: ESSearchConfig
    counters: ESCounters

    def __init__(
        self,
        task: TaskSpec,
        config: ESSearchConfig,
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
        self.counters = ESCounters()
        self.log = EngineLog(run_dir)
        self.slots = RewardSlots(list(rewards), SlotRules.of(config, task.has_human_reward), self.counters,
                                 self.log.event)
        self.extra = self.slots.extra
        self.num_learners = len(self.slots.rewards)
        self.rng = np.random.default_rng(np.random.SeedSequence([config.seed, 31337]))
        self.backend = _make_backend(task, self.slots.rewards, config)
        self.feature_names = tuple(f.name for f in task.features)
        self.last_diversity: Diversity | None = None
        self._es_sum = np.zeros((self.num_learners, 2))  # fitness_mean, lr accumulated since the last log
        self._es_count = 0
        self._start = time.monotonic()
        self.last_metrics: dict[str, Any] = {}
        self._action_box: tuple[np.ndarray, np.ndarray] | None = None
        self._hooks = LearnerHooks(
            # the diversity measure needs at least one rollout per slot, whatever the proposer is given
            evaluate=lambda: self.evaluate(config.update_eval_episodes, keep_rollouts=max(config.rollouts_kept, 1)),
            quarantined=lambda _slot: False,  # ES has no quarantine: a non-finite evaluation ranks the slot last
            choose_elites=self._choose_elites,
            feature_sample=lambda: self._feature_sample(config.feature_sample),
            install=self._install,
            reward_nonfinite=lambda _slot, ev: not math.isfinite(ev.own_return),
            inherit=self._inherit,
            log_evaluation=lambda evals: self._log_evaluation("update", evals),
            checkpoint=self._round_checkpoint,
            diversity=self._diversity,
            event_fields=lambda: {"learner": LEARNER, "generation": self.counters.generation,
                                  "selection": config.selection.method},
        )
        # ES waits for the proposal (its generations are short and, with Ray, run elsewhere): timed only.
        self.updates = UpdateSchedule(self.slots, self._hooks, self._update_due)

    # ------------------------------------------------------------------ views and driving (also engine_base.py)
    @property
    def generation(self) -> int:
        return self.counters.generation

    def run(self, until_steps: int | None = None, progress: Callable[[GenerationInfo], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> int:
        """Generations until ``until_steps`` (default: the budget) or ``should_stop()``; returns env steps."""
        limit = self.config.total_steps if until_steps is None else min(until_steps, self.config.total_steps)
        while self.counters.env_steps < limit:
            if should_stop is not None and should_stop():
                break
            info = self.step_generation()
            if progress is not None:
                progress(info)
        return self.counters.env_steps

    def step_generation(self) -> GenerationInfo:
        """A due reward update, then one ES generation for every learner (policies update every generation)."""
        self.updates.step(self.propose)
        c, cfg = self.counters, self.config
        metrics = self.backend.generation()
        steps = int(sum(m["steps"] for m in metrics))
        c.env_steps += steps
        c.generation += 1
        self._es_sum += np.asarray([[m["fitness_mean"], m["lr"]] for m in metrics])
        self._es_count += 1
        if cfg.eval_every_generations and c.generation % cfg.eval_every_generations == 0:
            self._log_evaluation("eval", self.evaluate(cfg.eval_episodes))
        if cfg.checkpoint_every_generations and c.generation % cfg.checkpoint_every_generations == 0:
            self.save_checkpoint()
        return GenerationInfo(c.env_steps, c.round, c.generation, steps,
                              tuple(float(m["fitness_mean"]) for m in metrics))

    def _update_due(self) -> bool:
        cfg, c = self.config, self.counters
        if not self.slots.may_update():
            return False
        by_gen = cfg.reward_every_generations > 0 and (
            c.generation - c.last_update_generation >= cfg.reward_every_generations)
        by_steps = cfg.reward_every_steps > 0 and c.env_steps - c.last_update_steps >= cfg.reward_every_steps
        return by_gen or by_steps

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, episodes: int, keep_rollouts: int = 0) -> list[MemberEvaluation]:
        """Deterministic episodes of every learner's ES mean on common reset seeds (not counted in the budget)."""
        c = self.counters
        seeds = [episode_seed(self.config.seed, EVAL_STREAM, c.eval_episode_counter + e) for e in range(episodes)]
        c.eval_episode_counter += episodes
        drop = frozenset({HUMAN_REWARD_FEATURE}) if self.config.setting == "scratch" else frozenset()
        return self.backend.evaluate(episodes, seeds, keep_rollouts, drop)

    def _log_evaluation(self, kind: str, evals: Sequence[MemberEvaluation]) -> None:
        es_mean = self._es_sum / max(self._es_count, 1)
        record = evaluation_row(
            kind, self.counters, [e for e in evals if e.member < self.num_slots], [fn.id for fn in self.rewards],
            time.monotonic() - self._start, next((e for e in evals if e.member == self.extra), None),
            lambda e: {"es_fitness": float(es_mean[e.member, 0]), "lr": float(es_mean[e.member, 1])})
        record.update(learner=LEARNER, generation=self.counters.generation,
                      diversity=self.last_diversity.to_json() if self.last_diversity else None)
        self.log.metrics(record)
        self.last_metrics = record
        self._es_sum[:] = 0.0
        self._es_count = 0

    # ------------------------------------------------------------------ reward update hooks (update_schedule.py)
    def _choose_elites(self, ranking: Sequence[int], slots: Sequence[SlotEvaluation]) -> Sequence[int]:
        return choose_elites(ranking, slots, self.config.elites, self.config.selection, self.rng)

    def _diversity(self, evals: Sequence[MemberEvaluation]) -> Diversity:
        step_feats = [{k: np.concatenate([r[k] for r in ev.rollouts]) for k in self.feature_names} for ev in evals]
        self.last_diversity = measure_diversity(self.rewards[: self.num_slots], step_feats, self.feature_names,
                                                self.config.diversity)
        return self.last_diversity

    def _install(self, slot: int, fn: RewardFunction, best: int) -> Mapping[str, float]:
        """The slot's learner trains on ``fn`` from now on (no buffer: nothing to relabel or refuse)."""
        self.backend.set_reward(slot, fn)
        return {}

    def _inherit(self, slots: Sequence[int], best: int) -> None:
        if slots:
            self.backend.copy_policy(slots, best)

    def _feature_sample(self, n: int) -> dict[str, np.ndarray]:
        """Recent training steps of every learner (ES has no buffer), subsampled to ``n`` rows."""
        parts = self.backend.feature_samples(max(1, n // max(self.num_learners, 1)))
        keys = [k for k in (parts[0] if parts else {}) if not (k == HUMAN_REWARD_FEATURE and
                                                              self.config.setting == "scratch")]
        return {k: np.concatenate([p[k] for p in parts]).astype(np.float64) for k in keys}

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Counters, RNG, every learner (ES state, obs statistics, RNG) and every reward as JSON."""
        return {
            "version": STATE_VERSION, "learner": LEARNER, "task": self.task.name, "config": self.config.to_json(),
            "counters": dataclasses.asdict(self.counters),
            "rng": self.rng.bit_generator.state,
            "learners": self.backend.state_dicts(),
            "rewards": [fn.to_json() for fn in self.rewards],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore counters, RNG and learners; ``self.rewards`` must already be the saved ones."""
        check_state(state, LEARNER, self.task.name)
        # The counters object is shared with the reward slots: update it in place.
        for name, value in dataclasses.asdict(load_counters(ESCounters, state["counters"])).items():
            setattr(self.counters, name, value)
        self.rng.bit_generator.state = state["rng"]
        self.backend.load_state_dicts(state["learners"])

    def save_policy(self, name: str, every_slot: bool = False) -> Path | None:
        """The ranked-first slot's ES mean as ``policies/<name>.pt`` (engine/policy_artefact.py; no-op without a
        run directory). ``every_slot``: also each slot's own file (the end of a run)."""
        if self.run_dir is None:
            return None
        if self._action_box is None:  # the engine holds no env itself (the learners do, maybe remotely)
            env = self.task.make_env(self.config.seed)
            self._action_box = (np.asarray(env.action_space.low), np.asarray(env.action_space.high))  # type: ignore[attr-defined]
            env.close()
        state = {"learner": LEARNER, "task": self.task.name, "config": self.config.to_json(),
                 "counters": dataclasses.asdict(self.counters), "learners": self.backend.state_dicts()}
        low, high = self._action_box
        ids = [fn.id for fn in self.rewards[: self.num_slots]]
        return write_policies(RunLayout(self.run_dir), name, state, self.best_slot, low, high, ids, every_slot)

    @classmethod
    def restore(cls, checkpoint: str | Path, task: TaskSpec, load_reward: LoadReward | None = None,
                propose: ProposeFn | None = None, run_dir: str | Path | None = None,
                backend: str | None = None) -> ESEngine:
        """Rebuild an engine from a checkpoint (or a ``checkpoints/`` root: its latest); ``backend`` may
        switch between 'local' and 'ray' (the state is the same)."""
        state = load_checkpoint(checkpoint)
        check_state(state, LEARNER, task.name)
        data = dict(state["config"])
        if backend is not None:
            data["backend"] = backend
        config = ESSearchConfig.from_json(data)
        engine = cls(task, config, propose=propose, run_dir=run_dir, rewards=rewards_from_state(state, load_reward))
        engine.load_state_dict(state)
        engine.log.event({"event": "resumed", "env_steps": engine.env_steps, "round": engine.round})
        return engine

    def close(self) -> None:
        """Close environments, Ray actors and log files."""
        self.backend.close()
        self.log.close()
