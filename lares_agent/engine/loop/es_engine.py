"""LaRes with ES learners (``--learner es``): the same reward-population loop as ``engine.lares``.

Each of the K reward slots has its own OpenAI-ES policy trained on that slot's reward (rewards are computed
vectorised from the task's features over the rollouts' raw states). Every reward period the engine evaluates
every policy deterministically, scores the slots with the SAC engine's fitness code (success rate - lambda *
complexity, same tie-breaks), picks elites by truncation or tournament, measures population diversity, and
calls the ``propose`` hook for the other slots. A replaced slot's policy restarts from the best slot's
parameters, optimiser moments and observation statistics. ES keeps no buffer, so nothing is relabelled.

Outputs match ``LaResEngine``: ``metrics.jsonl`` rows with ``env_steps``, ``round`` and per slot ``{slot,
reward_id, success, task_return, own_return}``; ``reward_update`` events; atomic checkpoints under
``checkpoints/`` (identical for the local and Ray backends, so either can resume the other's run).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lares_agent.engine.checkpoint import load_checkpoint, save_checkpoint
from lares_agent.engine.loop.state import LoadReward, restored_engine
from lares_agent.engine.loop.es_config import ESSearchConfig
from lares_agent.engine.es.learner import ESBackend, LearnerSettings, LocalBackend
from lares_agent.engine.rollouts.evaluation import MemberEvaluation
from lares_agent.engine.loop.fitness import UpdateContext, rank_slots, slot_evaluation
from lares_agent.engine.loop.config import EngineError
from lares_agent.runs.jsonl import JsonlWriter
from lares_agent.engine.contracts import (
    HUMAN_REWARD_FEATURE,
    RewardFunction,
    initial_slot_rewards,
)
from lares_agent.engine.rollouts.episodes import EVAL_STREAM, episode_seed
from lares_agent.engine.loop.selection import Diversity, measure_diversity, select_elites

if TYPE_CHECKING:
    from lares_agent.engine.tasks import TaskSpec

__all__ = ["ESEngine", "ESUpdateContext", "GenerationInfo"]

STATE_VERSION = 1
ProposeFn = Callable[[UpdateContext], Sequence[RewardFunction]]


@dataclass(frozen=True)
class ESUpdateContext(UpdateContext):
    """The SAC engine's ``UpdateContext`` plus the diversity measurement and the explore request.

    ``explore`` is True when the reward texts or the policies' behaviours became too alike: the proposer
    should then write new structures instead of refining the elites (seed text: monitor diversity).
    """

    diversity: Diversity | None = None
    explore: bool = False


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


class ESEngine:
    """The ES reward search over one task. Drive it with :meth:`run` or :meth:`step_generation`.

    ``initial_rewards``: scratch -> K candidates; init -> K - 1 (slot 0 starts on the human reward);
    baseline -> none. ``propose`` is called at every reward update with an :class:`ESUpdateContext`.
    """

    def __init__(
        self,
        task: TaskSpec,
        config: ESSearchConfig,
        initial_rewards: Sequence[RewardFunction] = (),
        propose: ProposeFn | None = None,
        run_dir: str | Path | None = None,
    ) -> None:
        rewards = initial_slot_rewards(
            config.setting, config.num_slots, initial_rewards, task.has_human_reward, task.name
        )
        self._setup(task, config, rewards, propose, run_dir)

    def _setup(self, task: TaskSpec, config: ESSearchConfig, rewards: list[RewardFunction],
               propose: ProposeFn | None, run_dir: str | Path | None) -> None:
        self.task, self.config, self.propose = task, config, propose
        self.num_slots = config.num_slots
        self.rewards = rewards
        self.rng = np.random.default_rng(np.random.SeedSequence([config.seed, 31337]))
        self.backend = _make_backend(task, rewards, config)
        self.feature_names = tuple(f.name for f in task.features)
        self.env_steps = 0
        self.generation = 0
        self.round = 0
        self.last_update_steps = 0
        self.last_update_generation = 0
        self.eval_episode_counter = 0
        self.best_slot = 0
        self.last_diversity: Diversity | None = None
        self._es_sum = np.zeros((self.num_slots, 2))  # fitness_mean, lr accumulated since the last log
        self._es_count = 0
        self._start = time.monotonic()
        self.events: list[dict[str, Any]] = []
        self.last_metrics: dict[str, Any] = {}
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._metrics = JsonlWriter(self.run_dir / "metrics.jsonl") if self.run_dir else None
        self._events = JsonlWriter(self.run_dir / "events.jsonl") if self.run_dir else None

    # ------------------------------------------------------------------ driving
    @property
    def done(self) -> bool:
        """True once the counted env-step budget is spent."""
        return self.env_steps >= self.config.total_steps

    def run(self, until_steps: int | None = None, progress: Callable[[GenerationInfo], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> int:
        """Generations until ``until_steps`` (default: the budget) or ``should_stop()``; returns env steps."""
        limit = self.config.total_steps if until_steps is None else min(until_steps, self.config.total_steps)
        while self.env_steps < limit:
            if should_stop is not None and should_stop():
                break
            info = self.step_generation()
            if progress is not None:
                progress(info)
        return self.env_steps

    def step_generation(self) -> GenerationInfo:
        """A due reward update, then one ES generation for every slot (policies update every generation)."""
        if self._update_due():
            self.reward_update()
        metrics = self.backend.generation()
        steps = int(sum(m["steps"] for m in metrics))
        self.env_steps += steps
        self.generation += 1
        self._es_sum += np.asarray([[m["fitness_mean"], m["lr"]] for m in metrics])
        self._es_count += 1
        cfg = self.config
        if cfg.eval_every_generations and self.generation % cfg.eval_every_generations == 0:
            self._log_evaluation("eval", self.evaluate(cfg.eval_episodes))
        if cfg.checkpoint_every_generations and self.generation % cfg.checkpoint_every_generations == 0:
            self.save_checkpoint()
        return GenerationInfo(self.env_steps, self.round, self.generation, steps,
                              tuple(float(m["fitness_mean"]) for m in metrics))

    def _update_due(self) -> bool:
        cfg = self.config
        if cfg.setting == "baseline" or (cfg.max_rounds is not None and self.round >= cfg.max_rounds):
            return False
        by_gen = cfg.reward_every_generations > 0 and (
            self.generation - self.last_update_generation >= cfg.reward_every_generations)
        by_steps = cfg.reward_every_steps > 0 and self.env_steps - self.last_update_steps >= cfg.reward_every_steps
        return by_gen or by_steps

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, episodes: int, keep_rollouts: int = 0) -> list[MemberEvaluation]:
        """Deterministic episodes of every slot's ES mean on common reset seeds (not counted in the budget)."""
        seeds = [episode_seed(self.config.seed, EVAL_STREAM, self.eval_episode_counter + e) for e in range(episodes)]
        self.eval_episode_counter += episodes
        drop = frozenset({HUMAN_REWARD_FEATURE}) if self.config.setting == "scratch" else frozenset()
        return self.backend.evaluate(episodes, seeds, keep_rollouts, drop)

    def _log_evaluation(self, kind: str, evals: list[MemberEvaluation]) -> None:
        succ = [e.success_rate for e in evals]
        es_mean = self._es_sum / max(self._es_count, 1)
        record: dict[str, Any] = {
            "kind": kind, "learner": "es", "env_steps": self.env_steps, "round": self.round,
            "generation": self.generation,
            "slots": [{**e.summary(), "slot": e.member, "reward_id": self.rewards[e.member].id,
                       "es_fitness": float(es_mean[e.member, 0]), "lr": float(es_mean[e.member, 1])} for e in evals],
            "success_max": max(succ), "success_mean": float(np.mean(succ)),
            "success_best_slot": succ[self.best_slot], "best_slot": self.best_slot,
            "diversity": self.last_diversity.to_json() if self.last_diversity else None,
            "wall_time": time.monotonic() - self._start,
        }
        if self._metrics is not None:
            self._metrics.write(record)
        self.last_metrics = record
        self._es_sum[:] = 0.0
        self._es_count = 0

    # ------------------------------------------------------------------ reward-population update
    def reward_update(self) -> ESUpdateContext:
        """Evaluate, rank, select elites, measure diversity, refill the other slots via ``propose``."""
        cfg = self.config
        evals = self.evaluate(cfg.update_eval_episodes, keep_rollouts=max(cfg.rollouts_kept, 1))
        use_task_return = cfg.setting != "scratch" and self.task.has_human_reward
        slots = [slot_evaluation(evals[i], self.rewards[i], cfg.complexity_lambda, use_task_return, False)
                 for i in range(self.num_slots)]
        ranking = rank_slots(slots)
        if slots[ranking[0]].quarantined:
            raise EngineError("every slot's policy or reward is non-finite; no policy can be inherited from")
        best = ranking[0]
        # selection works on rank positions so that tournaments respect rank_slots' tie-breaks
        score = np.empty(self.num_slots)
        score[np.asarray(ranking)] = -np.arange(self.num_slots, dtype=np.float64)
        elites = tuple(int(i) for i in select_elites(score, cfg.elites, cfg.selection, self.rng))
        refill = tuple(sorted(set(range(self.num_slots)) - set(elites)))
        step_feats = [{k: np.concatenate([r[k] for r in ev.rollouts]) for k in self.feature_names}
                      for ev in evals]
        diversity = measure_diversity(self.rewards, step_feats, self.feature_names, cfg.diversity)
        self.last_diversity = diversity
        ctx = ESUpdateContext(
            round=self.round + 1, env_steps=self.env_steps, setting=cfg.setting, slots=tuple(slots),
            ranking=tuple(ranking), elites=elites, refill=refill, rewards=tuple(self.rewards),
            rollouts={s: evals[s].rollouts[: cfg.rollouts_kept] for s in ranking[: cfg.rollout_slots]},
            feature_sample=self._feature_sample(cfg.feature_sample), diversity=diversity,
            explore=diversity.explore,
        )
        proposals = list(self.propose(ctx)) if self.propose is not None else []
        if len(proposals) > len(refill):
            raise EngineError(f"propose returned {len(proposals)} rewards for {len(refill)} slots")
        replaced: dict[int, str] = {}
        for slot, fn in zip(refill, proposals, strict=False):
            reason = self._reject_reason(fn, ctx.feature_sample)
            if reason:
                self._event({"event": "candidate_rejected", "round": ctx.round, "slot": slot,
                             "reward_id": fn.id, "reason": reason})
                continue
            self.rewards[slot] = fn
            self.backend.set_reward(slot, fn)
            replaced[slot] = fn.id
            self._event({"event": "candidate_accepted", "round": ctx.round, "slot": slot, "reward_id": fn.id})
        # a slot whose policy went non-finite restarts from the best even when it keeps its reward
        inherit = sorted(set(replaced) | {s.slot for s in slots if s.quarantined and s.slot != best})
        if inherit:
            self.backend.copy_policy(inherit, best)
        self.round, self.best_slot = ctx.round, best
        self.last_update_steps, self.last_update_generation = self.env_steps, self.generation
        self._event({
            "event": "reward_update", "round": self.round, "env_steps": self.env_steps, "learner": "es",
            "generation": self.generation, "fitness": {str(s.slot): s.fitness for s in slots},
            "ranking": list(ranking), "elites": list(elites), "best": best, "selection": cfg.selection.method,
            "replaced": {str(k): v for k, v in replaced.items()}, "inherited": inherit,
            "diversity": diversity.to_json(), "slots": [s.to_json() for s in slots],
        })
        self._log_evaluation("update", evals)
        self.save_checkpoint(name=f"round-{self.round:04d}")
        return ctx

    @staticmethod
    def _reject_reason(fn: RewardFunction, sample: dict[str, np.ndarray]) -> str:
        """ES ranks returns, so a reward needs only to be finite and not constant on recent steps."""
        if not sample or not len(next(iter(sample.values()))):
            return ""
        try:
            values = np.asarray(fn(sample), dtype=np.float64)
        except (KeyError, ValueError, TypeError, ArithmeticError) as exc:
            return f"reward failed on recent steps: {exc}"
        if not np.all(np.isfinite(values)):
            return "reward is NaN/inf on recent steps"
        if values.size > 1 and float(np.ptp(values)) == 0.0:
            return "reward is constant on recent steps (ES would get no signal)"
        return ""

    def _feature_sample(self, n: int) -> dict[str, np.ndarray]:
        """Recent training steps of every slot (ES has no buffer), subsampled to ``n`` rows."""
        parts = self.backend.feature_samples(max(1, n // max(self.num_slots, 1)))
        keys = [k for k in (parts[0] if parts else {}) if not (k == HUMAN_REWARD_FEATURE and
                                                              self.config.setting == "scratch")]
        return {k: np.concatenate([p[k] for p in parts]).astype(np.float64) for k in keys}

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Counters, RNG, every learner (ES state, obs statistics, RNG) and every reward as JSON."""
        return {
            "version": STATE_VERSION, "learner": "es", "task": self.task.name, "config": self.config.to_json(),
            "counters": {"env_steps": self.env_steps, "generation": self.generation, "round": self.round,
                         "last_update_steps": self.last_update_steps,
                         "last_update_generation": self.last_update_generation,
                         "eval_episode_counter": self.eval_episode_counter, "best_slot": self.best_slot},
            "rng": self.rng.bit_generator.state,
            "learners": self.backend.state_dicts(),
            "rewards": [fn.to_json() for fn in self.rewards],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore counters, RNG and learners; ``self.rewards`` must already be the saved ones."""
        if state.get("version") != STATE_VERSION or state.get("learner") != "es":
            raise EngineError("checkpoint is not an ES engine state of this version")
        if state["task"] != self.task.name:
            raise EngineError(f"checkpoint is for task {state['task']!r}, not {self.task.name!r}")
        c = state["counters"]
        self.env_steps, self.generation, self.round = int(c["env_steps"]), int(c["generation"]), int(c["round"])
        self.last_update_steps = int(c["last_update_steps"])
        self.last_update_generation = int(c["last_update_generation"])
        self.eval_episode_counter, self.best_slot = int(c["eval_episode_counter"]), int(c["best_slot"])
        self.rng.bit_generator.state = state["rng"]
        self.backend.load_state_dicts(state["learners"])

    def save_checkpoint(self, name: str | None = None) -> Path | None:
        """Atomically checkpoint under ``run_dir/checkpoints`` (no-op without a run directory)."""
        if self.run_dir is None:
            return None
        periodic = name is None
        name = name or f"step-{self.env_steps:09d}"
        path = save_checkpoint(self.run_dir / "checkpoints", self.state_dict(), name,
                               prune_prefix="step-" if periodic else None)
        self._event({"event": "checkpoint", "name": name, "env_steps": self.env_steps, "round": self.round})
        return path

    @classmethod
    def restore(cls, checkpoint: str | Path, task: TaskSpec, load_reward: LoadReward | None = None,
                propose: ProposeFn | None = None, run_dir: str | Path | None = None,
                backend: str | None = None) -> ESEngine:
        """Rebuild an engine from a checkpoint (or a ``checkpoints/`` root: its latest); ``backend`` may
        switch between 'local' and 'ray' (the state is the same)."""
        state = load_checkpoint(checkpoint)
        data = dict(state["config"])
        if backend is not None:
            data["backend"] = backend
        return restored_engine(cls, state, task, ESSearchConfig.from_json(data), load_reward, propose, run_dir)

    # ------------------------------------------------------------------ logging
    def _event(self, record: dict[str, Any]) -> None:
        self.events.append(record)
        if self._events is not None:
            self._events.write(record)

    def close(self) -> None:
        """Close environments, Ray actors and log files."""
        self.backend.close()
        for w in (self._metrics, self._events):
            if w is not None:
                w.close()
