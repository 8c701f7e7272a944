"""Fitness of reward candidates and the ranking of slots that elite selection works on.

A candidate is judged by how well the policy trained on it solves the task (LaRes, docs/lares-reference.md §3):
fitness = success rate - lambda * complexity. Ties are broken by the task return where the setting may use
the human reward, otherwise by the negative final progress feature: the reference fell back to MetaWorld's
dense reward even in the from-scratch setting (§12 item 14) and had no tie-break on equal success (§12
item 15). A final tie prefers the simpler reward, then the lower slot index (stable, reproducible).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lares_agent.engine.contracts import MemberEvaluation, RewardFunction, SlotEvaluation

__all__ = ["rank_slots", "slot_evaluation"]


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
