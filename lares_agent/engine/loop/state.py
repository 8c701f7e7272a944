"""Save and restore the whole LaRes engine state (docs/DESIGN.md §6: a killed run resumes with nothing lost).

The state holds learners with their optimisers, anchors and noise generators (``Population.state_dict``),
the buffer arrays and column maps, every reward function as ``to_json()``, Thompson windows, the engine's
numpy and torch generator states and every counter. Checkpoints are taken only at iteration boundaries, and
episode reset seeds are derived from (run seed, episode counter), so a restored engine with fresh
environments plays exactly the steps the original would have played next.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from lares_agent.engine.checkpoint import load_checkpoint, save_checkpoint
from lares_agent.engine.loop.config import EngineConfig, EngineError
from lares_agent.engine.contracts import HumanReward, RewardFunction

if TYPE_CHECKING:
    from lares_agent.engine.loop.sac_engine import LaResEngine, ProposeFn
    from lares_agent.engine.tasks import TaskSpec

__all__ = ["EngineStateMixin", "LoadReward", "restored_engine"]

LoadReward = Callable[[Mapping[str, Any]], RewardFunction]
STATE_VERSION = 1
Engine = TypeVar("Engine")


def _reward_from_json(data: Mapping[str, Any], load_reward: LoadReward | None) -> RewardFunction:
    if data.get("kind") == "human":
        return HumanReward()
    if load_reward is None:
        raise EngineError(f"checkpoint holds reward {data.get('id')!r} but no load_reward was given")
    return load_reward(data)


def restored_engine(cls: type[Engine], state: Mapping[str, Any], task: TaskSpec, config: Any,
                    load_reward: LoadReward | None, propose: Callable[..., Any] | None,
                    run_dir: str | Path | None) -> Engine:
    """An engine of class ``cls`` rebuilt from a loaded checkpoint ``state`` and its parsed ``config``.

    Shared by the SAC and ES engines (both implement ``_setup``, ``load_state_dict`` and ``_event``) so they
    restore rewards and log the ``resumed`` event alike. The human reward is rebuilt here (it has no loader);
    any other reward needs the caller's ``load_reward``.
    """
    rewards = [_reward_from_json(d, load_reward) for d in state["rewards"]]
    engine: Any = cls.__new__(cls)
    engine._setup(task, config, rewards, propose, run_dir)
    engine.load_state_dict(state)
    engine._event({"event": "resumed", "env_steps": engine.env_steps, "round": engine.round})
    return engine


class EngineStateMixin:
    """Checkpoint methods of :class:`LaResEngine` (kept apart so the loop module stays readable)."""

    def state_dict(self: LaResEngine) -> dict[str, Any]:
        """The full engine state as nested dicts of arrays, tensors and scalars."""
        return {
            "version": STATE_VERSION,
            "task": self.task.name,
            "config": self.config.to_json(),
            "counters": {
                "env_steps": self.env_steps,
                "train_episodes": self.train_episodes,
                "eval_episode_counter": self.eval_episode_counter,
                "round": self.round,
                "last_update_steps": self.last_update_steps,
                "next_eval": None if self.next_eval == float("inf") else int(self.next_eval),
                "next_checkpoint": None if self.next_checkpoint == float("inf") else int(self.next_checkpoint),
                "warmed_up": self.warmed_up,
                "best_slot": self.best_slot,
                "loss_count": self._loss_count,
            },
            "quarantined": sorted(self.quarantined),
            "acted": self.acted.copy(),
            "loss_sum": {k: v.copy() for k, v in self._loss_sum.items()},
            "rng": self.rng.bit_generator.state,
            "torch_gen": self.torch_gen.get_state(),
            "ts": self.ts.state_dict(),
            "population": self.population.state_dict(),
            "buffer": self.buffer.state_dict(),
            "rewards": [fn.to_json() for fn in self.rewards],
        }

    def load_state_dict(self: LaResEngine, state: Mapping[str, Any]) -> None:
        """Restore counters, RNGs, TS, learners and buffer; ``self.rewards`` must already be the saved ones."""
        if state.get("version") != STATE_VERSION:
            raise EngineError(f"engine state version {state.get('version')} != {STATE_VERSION}")
        if state["task"] != self.task.name:
            raise EngineError(f"checkpoint is for task {state['task']!r}, not {self.task.name!r}")
        c = state["counters"]
        self.env_steps = int(c["env_steps"])
        self.train_episodes = int(c["train_episodes"])
        self.eval_episode_counter = int(c["eval_episode_counter"])
        self.round = int(c["round"])
        self.last_update_steps = int(c["last_update_steps"])
        self.next_eval = float("inf") if c["next_eval"] is None else int(c["next_eval"])
        self.next_checkpoint = float("inf") if c["next_checkpoint"] is None else int(c["next_checkpoint"])
        self.warmed_up = bool(c["warmed_up"])
        self.best_slot = int(c["best_slot"])
        self._loss_count = int(c["loss_count"])
        self.quarantined = {int(q) for q in state["quarantined"]}
        self.acted[:] = np.asarray(state["acted"])
        for key, value in state["loss_sum"].items():
            self._loss_sum[key][:] = np.asarray(value)
        self.rng.bit_generator.state = state["rng"]
        self.torch_gen.set_state(state["torch_gen"])
        self.ts.load_state_dict(state["ts"])
        self.population.load_state_dict(state["population"])
        columns = self.rewards if self.warmed_up else None
        self.buffer.load_state_dict(state["buffer"], columns)

    def save_checkpoint(self: LaResEngine, name: str | None = None) -> Path | None:
        """Atomically checkpoint under ``run_dir/checkpoints`` (no-op without a run directory).

        Default name ``step-<env_steps>`` (only the newest periodic one is kept); reward updates use
        ``round-<n>`` names, which are kept.
        """
        if self.run_dir is None:
            return None
        periodic = name is None
        name = name or f"step-{self.env_steps:09d}"
        path = save_checkpoint(
            self.run_dir / "checkpoints", self.state_dict(), name, prune_prefix="step-" if periodic else None
        )
        self._event({"event": "checkpoint", "name": name, "env_steps": self.env_steps, "round": self.round})
        return path

    @classmethod
    def restore(
        cls,
        checkpoint: str | Path,
        task: TaskSpec,
        load_reward: LoadReward | None = None,
        propose: ProposeFn | None = None,
        run_dir: str | Path | None = None,
    ) -> LaResEngine:
        """Rebuild an engine from a checkpoint directory (or a ``checkpoints/`` root: its latest).

        ``load_reward(dict)`` rebuilds each saved candidate from its ``to_json()``; the human reward is
        rebuilt here. Logging continues in ``run_dir`` (metrics lines after the checkpoint may repeat; a
        ``resumed`` event marks where).
        """
        state = load_checkpoint(checkpoint)
        return restored_engine(cls, state, task, EngineConfig.from_json(state["config"]), load_reward, propose,
                               run_dir)
