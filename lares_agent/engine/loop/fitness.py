"""Fitness of reward candidates and the ranking of slots that elite selection works on.

A candidate is judged by how well the policy trained on it solves the task (LaRes, docs/lares-reference.md §3),
graded so that a search has a signal before the first success (docs/DESIGN.md, "Graded fitness"):

    fitness = graded value - complexity_lambda * complexity
    graded value = success rate                          if any slot of this update succeeds
                 = share of the start distance closed    otherwise, of the progress feature (lower is better)
                   ... of the approach feature instead   when the progress shares of all slots lie within
                                                         PROGRESS_TIE of each other and the task has one

Every slot of one update is graded the same way, so fitness values of one update always compare. The approach
grade is for tasks whose object moves by itself or not at all until the hand gets there (on door-close-v3 the door
swings partly shut after every reset, so every slot closed the same share at every update: docs/RESULTS.md,
"Sample efficiency on five MetaWorld tasks"); how near the hand came is then the signal.

Ties are broken by the task return where the setting may use the human reward, otherwise by the negative final
progress feature: the reference fell back to MetaWorld's dense reward even in the from-scratch setting (§12 item
14) and had no tie-break on equal success (§12 item 15). A final tie prefers the simpler reward, then the lower
slot index (stable, reproducible).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lares_agent.engine.contracts import Grade, MemberEvaluation, RewardFunction, SlotEvaluation
from lares_agent.runs.events import graded_value

__all__ = ["PROGRESS_TIE", "grade_of", "rank_slots", "slot_evaluation", "slot_evaluations"]

PROGRESS_TIE = 0.01
"""Progress shares this close (1% of the start distance) do not separate slots. Window-close-v3's first updates
(shares within +-0.013 of each other) would still be graded on progress."""


def grade_of(evals: Sequence[MemberEvaluation], quarantined: Sequence[bool]) -> Grade:
    """"success" when any slot that is not quarantined succeeded in an evaluation episode; else "approach" when
    two or more such slots closed the same share of the progress distance (within ``PROGRESS_TIE``) and each
    has an approach share; else "progress"."""
    healthy = [e for e, q in zip(evals, quarantined, strict=True) if not (q or e.nonfinite)]
    if any(e.success_rate > 0 for e in healthy):
        return "success"
    closed = [e.progress_closed if math.isfinite(e.progress_closed) else 0.0 for e in healthy]
    tied = len(healthy) >= 2 and max(closed) - min(closed) < PROGRESS_TIE
    return "approach" if tied and all(math.isfinite(e.approach_closed) for e in healthy) else "progress"


def slot_evaluation(
    ev: MemberEvaluation,
    reward: RewardFunction,
    complexity_lambda: float,
    use_task_return: bool,
    quarantined: bool,
    graded_by: Grade = "success",
) -> SlotEvaluation:
    """Score one slot from its evaluation; a quarantined or non-finite member ranks below every other.

    ``graded_by`` must be the same for every slot of one update (``slot_evaluations`` sees to it). A slot without
    a finite share closed (no progress or approach data) grades as 0: it closed nothing that could be measured."""
    bad = quarantined or ev.nonfinite
    complexity = float(reward.complexity)
    penalty = complexity_lambda * complexity
    closed = ev.progress_closed
    graded = graded_value(graded_by, ev.success_rate, _or_zero(closed), _or_zero(ev.approach_closed))
    fitness = -math.inf if bad else graded - penalty
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
        graded_by=graded_by,
        progress_closed=closed,
        approach_closed=ev.approach_closed,
        complexity_penalty=penalty,
        action_jerk=ev.action_jerk,
        learner_success=ev.learner_success,
    )


def _or_zero(share: float) -> float:
    return share if math.isfinite(share) else 0.0


def slot_evaluations(
    evals: Sequence[MemberEvaluation],
    rewards: Sequence[RewardFunction],
    complexity_lambda: float,
    use_task_return: bool,
    quarantined: Sequence[bool],
) -> list[SlotEvaluation]:
    """Every slot of one update, all graded the same way (``grade_of``)."""
    grade = grade_of(evals, quarantined)
    return [slot_evaluation(e, r, complexity_lambda, use_task_return, q, grade)
            for e, r, q in zip(evals, rewards, quarantined, strict=True)]


def rank_slots(evals: Sequence[SlotEvaluation]) -> list[int]:
    """Slots from best to worst: fitness, then tie-break, then lower complexity, then lower slot index."""
    return [e.slot for e in sorted(evals, key=lambda e: (-e.fitness, -e.tie_break, e.complexity, e.slot))]
