"""What the SAC engine (``population_engine.py``) and the ES engine (``es_engine.py``) share, written once.

Both keep their rewards in ``RewardSlots``, count in a ``Counters``, log through ``EngineLog`` and run reward
updates through ``UpdateSchedule``; this base holds the read-only views over those, the reward update's entry
points and the checkpoint naming. Each engine sets the attributes below in its ``__init__`` and defines its
own ``state_dict`` and ``save_policy``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from lares_agent.engine.contracts import ProposeFn, RewardFunction, UpdateContext
from lares_agent.engine.loop.slots import RewardSlots
from lares_agent.engine.loop.state import Counters, EngineLog
from lares_agent.engine.loop.update_schedule import UpdateSchedule

__all__ = ["RewardLoopEngine"]


class _Budget(Protocol):
    @property
    def total_steps(self) -> int: ...


class RewardLoopEngine:
    """The shared part of an engine over a population of reward slots (subclassed by both engines)."""

    config: _Budget
    counters: Counters
    slots: RewardSlots
    log: EngineLog
    updates: UpdateSchedule
    propose: ProposeFn | None

    # ------------------------------------------------------------------ views
    @property
    def rewards(self) -> list[RewardFunction]:
        """Every learner's reward: the K slots, then the ``init`` setting's extra learner."""
        return self.slots.rewards

    @property
    def env_steps(self) -> int:
        return self.counters.env_steps

    @property
    def round(self) -> int:
        return self.counters.round

    @property
    def best_slot(self) -> int:
        return self.counters.best_slot

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every event logged so far (also in ``events.jsonl`` with a run directory)."""
        return self.log.events

    @property
    def run_dir(self) -> Path | None:
        return self.log.run_dir

    @property
    def done(self) -> bool:
        """True once the counted env-step budget is spent."""
        return self.counters.env_steps >= self.config.total_steps

    # ------------------------------------------------------------------ reward update (update_schedule.py)
    def reward_update(self) -> UpdateContext:
        """Evaluate, rank, select elites, refill the other slots via ``propose`` and install them (the engine's
        hooks: relabel + rescale + inherit for SAC, §3, §5-7), with the learners waiting for ``propose`` (a
        proposal in flight is installed first)."""
        return self.updates.blocking(self.propose)

    @property
    def update_in_flight(self) -> bool:
        """Whether a reward proposal is running in the background (never for ES)."""
        return self.updates.in_flight

    @property
    def llm_wait(self) -> dict[str, float]:
        """Seconds the learners waited for ``propose`` (``waited_s``) and that it ran (``llm_s``), this session."""
        return self.updates.wait

    def finish_update(self) -> UpdateContext | None:
        """Install the proposal in flight (waiting for it if needed); None when there is none."""
        return self.updates.finish()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def save_policy(self, name: str, every_slot: bool = False) -> Path | None:
        raise NotImplementedError

    def save_checkpoint(self, name: str | None = None) -> Path | None:
        """Atomically checkpoint under ``run_dir/checkpoints`` (no-op without a run directory).

        Default name ``step-<env_steps>`` (only the newest periodic one is kept); reward updates use
        ``round-<n>`` names, which are kept.
        """
        return self.log.checkpoint(self.state_dict, name, self.counters)

    def _round_checkpoint(self, name: str) -> None:
        """A reward update's checkpoint, then the selected policy under the same name (issue 15)."""
        if self.save_checkpoint(name) is not None:
            self.save_policy(name)
