"""Fitness of reward candidates, elite ranking and the context handed to the reward-proposal hook.

A candidate is judged by how well the policy trained on it solves the task (LaRes, docs/lares-reference.md §3):
fitness = success rate - lambda * complexity. Ties are broken by the task return where the setting may use
the human reward, otherwise by the negative final progress feature: the reference fell back to MetaWorld's
dense reward even in the from-scratch setting (§12 item 14) and had no tie-break on equal success (§12
item 15). A final tie prefers the simpler reward, then the lower slot index (stable, reproducible).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lares_agent.engine.rollouts.evaluation import ComponentStats, MemberEvaluation
from lares_agent.engine.contracts import RewardFunction

__all__ = ["SlotEvaluation", "UpdateContext", "rank_slots", "slot_evaluation"]


@dataclass(frozen=True)
class SlotEvaluation:
    """One population slot at a reward update: its reward candidate and how its policy did."""

    slot: int
    reward_id: str
    success_rate: float
    task_return: float
    """Mean sum of the human reward per evaluation episode (NaN when the task has none)."""
    own_return: float
    """Mean sum of the slot's own raw reward per evaluation episode."""
    final_progress: float
    """Mean progress feature at the last step (lower is better)."""
    complexity: float
    fitness: float
    """success_rate - complexity_lambda * complexity (-inf for a quarantined slot)."""
    tie_break: float
    """Secondary key (higher is better): task return or -final_progress, depending on the setting."""
    component_stats: Mapping[str, ComponentStats] = field(default_factory=dict)
    quarantined: bool = False

    def to_json(self) -> dict[str, object]:
        """JSON-ready view for events.jsonl and the graph state."""
        return {
            "slot": self.slot,
            "reward_id": self.reward_id,
            "success": self.success_rate,
            "task_return": self.task_return,
            "own_return": self.own_return,
            "final_progress": self.final_progress,
            "complexity": self.complexity,
            "fitness": self.fitness,
            "quarantined": self.quarantined,
            "components": {k: v.to_json() for k, v in self.component_stats.items()},
        }


def slot_evaluation(
    ev: MemberEvaluation,
    reward: RewardFunction,
    complexity_lambda: float,
    use_task_return: bool,
    quarantined: bool,
) -> SlotEvaluation:
    """Score one slot from its evaluation; a quarantined or non-finite member ranks below every other."""
    bad = quarantined or ev.nonfinite
    complexity = float(reward.complexity)
    fitness = -math.inf if bad else ev.success_rate - complexity_lambda * complexity
    if use_task_return and math.isfinite(ev.task_return):
        tie = ev.task_return
    else:
        tie = -ev.final_progress if math.isfinite(ev.final_progress) else -math.inf
    return SlotEvaluation(
        slot=ev.member,
        reward_id=reward.id,
        success_rate=ev.success_rate,
        task_return=ev.task_return,
        own_return=ev.own_return,
        final_progress=ev.final_progress,
        complexity=complexity,
        fitness=fitness,
        tie_break=-math.inf if bad else tie,
        component_stats=ev.component_stats,
        quarantined=bad,
    )


def rank_slots(evals: Sequence[SlotEvaluation]) -> list[int]:
    """Slots from best to worst: fitness, then tie-break, then lower complexity, then lower slot index."""
    return [e.slot for e in sorted(evals, key=lambda e: (-e.fitness, -e.tie_break, e.complexity, e.slot))]


@dataclass(frozen=True)
class UpdateContext:
    """What the reward-proposal hook sees at a reward update (ARCHITECTURE: search.py, graphs).

    The hook returns at most ``len(refill)`` reward functions, assigned to ``refill`` in order; returning
    fewer leaves the remaining slots with their current reward and learner.
    """

    round: int
    """Index of this reward update (1 for the first update after the initial population)."""
    env_steps: int
    setting: str
    slots: tuple[SlotEvaluation, ...]
    """Every slot, in slot order."""
    ranking: tuple[int, ...]
    """Slots from best to worst."""
    elites: tuple[int, ...]
    refill: tuple[int, ...]
    """Slots whose reward will be replaced, ascending (reference order)."""
    rewards: tuple[RewardFunction, ...]
    """Current reward function of every slot."""
    rollouts: Mapping[int, tuple[Mapping[str, np.ndarray], ...]]
    """For the best slots: a few deterministic episodes as feature arrays per step (name -> [T])."""
    feature_sample: Mapping[str, np.ndarray]
    """Random buffer rows of every feature (name -> [n]) for numeric validation of new candidates."""

    @property
    def best(self) -> int:
        """The best slot (its policy is what new slots inherit)."""
        return self.ranking[0]

    def slot(self, index: int) -> SlotEvaluation:
        """The evaluation of slot ``index``."""
        return self.slots[index]
