"""Fitness of reward candidates and the ranking of slots that elite selection works on.

A candidate is judged by how well the policy trained on it solves the task (LaRes, docs/lares-reference.md §3),
graded so that a search has a signal before the first success (docs/DESIGN.md, "Graded fitness"). Two rules
(``EngineConfig.fitness``; "auto" picks one per task, ``fitness_rule``):

    fitness = graded value

    success-then-return (the reference's "key <- succ if mean(succ) > 0 else envret"; tasks with a human reward):
    graded value = success rate                          if any slot of this update succeeds
                 = mean task return per episode          otherwise (the environment's own, hand-shaped reward)

    success-then-progress (tasks without a human reward, or by choice):
    graded value = success rate                          if any slot of this update succeeds
                 = share of the start distance closed    otherwise, of the progress feature (lower is better)
                   ... of the approach feature instead   when the progress shares of all slots lie within
                                                         PROGRESS_TIE of each other and the task has one

Every slot of one update is graded the same way, so fitness values of one update always compare. The task return
grades what the share closed cannot: a hand that comes nearer the object, a grasp, an object lifted but not yet
moved toward the goal all earn MetaWorld's staged reward, while the share closed stays at what the object did by
itself (on door-close-v3 the door swings partly shut after every reset, so every slot closed the same share at
every update: docs/results-archive.md, "Sample efficiency on five MetaWorld tasks"). The approach grade was the progress
rule's answer to that; the return grade is the reference's, and it uses the human reward in the scratch setting
too, as the reference did (a score, never an expression the LLM could copy).

One ranking rule for every slot, the init setting's learner on the task's own reward included (``rank_slots``):
fitness, then the tie-break, then the complexity penalty (``complexity_lambda * complexity``), then the lower slot
index (stable, reproducible). The tie-break is the task return where the setting may use the human reward,
otherwise the negative final progress feature: the reference fell back to MetaWorld's dense reward even in the
from-scratch setting (§12 item 14) and had no tie-break on equal success (§12 item 15). The penalty only orders
slots equal in both, so with any lambda > 0 the simpler reward wins an exact tie and with lambda 0 (the
reference, which has no penalty) complexity plays no part. The penalty was once subtracted from the fitness; the
task's own reward then carried complexity 0, so at equal success (5-episode rates move in steps of 0.2) its
learner always ranked first, whatever its return (docs/RESULTS.md, "One ranking rule for every slot"). It now
carries its expression's own complexity (``HumanReward.complexity``) and is ranked like any other slot.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from lares_agent.engine.contracts import (
    FITNESS_RULES,
    FitnessRule,
    Grade,
    MemberEvaluation,
    RewardFunction,
)
from lares_agent.engine.setup.groups import LearnerGroups
from lares_agent.errors import ConfigError
from lares_agent.runs.slots import SlotRecord

__all__ = ["PROGRESS_TIE", "Ranking", "Rule", "fitness_rule", "grade_of", "grading", "leaders", "rank", "rank_slots",
           "slot_evaluation", "slot_evaluations", "slot_view", "tie_break"]

Rule = Literal["success-then-return", "success-then-progress"]
"""A fitness rule as it runs ("auto" resolved against the task, ``fitness_rule``)."""

PROGRESS_TIE = 0.01
"""Progress shares this close (1% of the start distance) do not separate slots. Window-close-v3's first updates
(shares within +-0.013 of each other) would still be graded on progress."""


def fitness_rule(choice: FitnessRule | str, has_human_reward: bool) -> Rule:
    """The rule an update grades by: "auto" is success-then-return for a task with a human reward (the reference's
    rule) and success-then-progress for one without (there is no return to grade); an explicit choice is kept.
    success-then-return on a task without a human reward is a ConfigError: every slot's return would be NaN."""
    if choice not in FITNESS_RULES:
        raise ConfigError(f"unknown fitness rule {choice!r}; choose one of {', '.join(FITNESS_RULES)}")
    if choice == "auto":
        return "success-then-return" if has_human_reward else "success-then-progress"
    if choice == "success-then-return" and not has_human_reward:
        raise ConfigError("fitness 'success-then-return' grades the task's own (human) reward, and this task has "
                          "none; use 'success-then-progress' (or 'auto')")
    return "success-then-return" if choice == "success-then-return" else "success-then-progress"


def grading(setting: str, fitness: FitnessRule | str, has_human_reward: bool) -> tuple[bool, Rule]:
    """How one run grades slots, from its config and task: whether ties break by the task return (the setting may
    use the human reward and the task has one) and the resolved ``fitness_rule``. ``rank`` grades each slot's
    learners and the slots with the same pair."""
    return setting != "scratch" and has_human_reward, fitness_rule(fitness, has_human_reward)


def grade_of(evals: Sequence[MemberEvaluation], quarantined: Sequence[bool],
             rule: Rule = "success-then-progress") -> Grade:
    """"success" when any slot that is not quarantined succeeded in an evaluation episode; else, under
    success-then-return, "return"; under success-then-progress, "approach" when two or more such slots closed the
    same share of the progress distance (within ``PROGRESS_TIE``) and each has an approach share, else "progress"."""
    healthy = [e for e, q in zip(evals, quarantined, strict=True) if not (q or e.nonfinite)]
    if any(e.success_rate > 0 for e in healthy):
        return "success"
    if rule == "success-then-return":
        return "return"
    closed = [e.progress_closed if math.isfinite(e.progress_closed) else 0.0 for e in healthy]
    tied = len(healthy) >= 2 and max(closed) - min(closed) < PROGRESS_TIE
    return "approach" if tied and all(math.isfinite(e.approach_closed) for e in healthy) else "progress"


def slot_evaluation(
    ev: MemberEvaluation,
    reward: RewardFunction,
    complexity_lambda: float,
    quarantined: bool,
    graded_by: Grade = "success",
) -> SlotRecord:
    """Grade one slot's evaluation (its record with the grade); a quarantined or non-finite member ranks below every
    other.

    ``graded_by`` must be the same for every slot of one update (``slot_evaluations`` sees to it). A slot without
    a finite share closed (no progress or approach data) grades as 0: it closed nothing that could be measured. A
    slot without a finite task return grades as -inf under the return grade: a return has no neutral value, and
    such a slot ranks below every slot that has one (yet above a quarantined one, by the tie-break). The fitness is
    the graded value; the complexity penalty is recorded beside it and orders exact ties only (``rank_slots``)."""
    bad = quarantined or ev.nonfinite
    complexity = float(reward.complexity)
    task_return = ev.task_return if math.isfinite(ev.task_return) else -math.inf
    graded = SlotRecord.value_graded(graded_by, ev.success_rate, _or_zero(ev.progress_closed),
                                     _or_zero(ev.approach_closed), task_return)
    return dataclasses.replace(ev.record(reward.id), complexity=complexity, fitness=-math.inf if bad else graded,
                               quarantined=bad, graded_by=graded_by, complexity_penalty=complexity_lambda * complexity)


def tie_break(slot: SlotRecord, use_task_return: bool) -> float:
    """The secondary key of the ranking (higher is better): the task return where the setting may use the human
    reward (``use_task_return``) and the slot has one, else the negative final progress; -inf for a quarantined
    slot or one without either."""
    if slot.quarantined:
        return -math.inf
    if use_task_return and math.isfinite(slot.task_return):
        return slot.task_return
    return -slot.final_progress if math.isfinite(slot.final_progress) else -math.inf


def _or_zero(share: float) -> float:
    return share if math.isfinite(share) else 0.0


def slot_evaluations(
    evals: Sequence[MemberEvaluation],
    rewards: Sequence[RewardFunction],
    complexity_lambda: float,
    quarantined: Sequence[bool],
    rule: Rule = "success-then-progress",
) -> list[SlotRecord]:
    """Every slot of one update, all graded the same way (``grade_of`` under ``rule``, a resolved
    ``fitness_rule``)."""
    grade = grade_of(evals, quarantined, rule)
    return [slot_evaluation(e, r, complexity_lambda, q, grade)
            for e, r, q in zip(evals, rewards, quarantined, strict=True)]


def rank_slots(slots: Sequence[SlotRecord], use_task_return: bool) -> list[int]:
    """Slots from best to worst, every slot by the same rule: fitness (the graded value), then the tie-break
    (``tie_break``), then the lower complexity penalty (the simpler reward; no effect under lambda 0), then the lower
    slot index."""
    return [s.slot for s in sorted(slots, key=lambda s: (-s.fitness, -tie_break(s, use_task_return),
                                                          s.complexity_penalty, s.slot))]


# ---------------------------------------------------------------------------------------------- one pass
_MEANED = ("success_rate", "task_return", "own_return", "mean_progress", "final_progress", "episode_length",
           "start_progress", "progress_closed", "approach_closed", "action_jerk")


@dataclass(frozen=True)
class Ranking:
    """One reward update graded and ranked (``rank``): the learners within each slot, then the slots."""

    leaders: tuple[tuple[int, ...], ...]
    """Every column's learners, best first (the K slots, then the init setting's extra learner alone): each slot's
    first is the policy it hands over and the one replaced slots inherit."""
    evals: tuple[MemberEvaluation, ...]
    """One evaluation per slot (``slot_view`` by these leaders), then the extra learner's."""
    slots: tuple[SlotRecord, ...]
    """Every ranked slot graded (the extra learner's last, where it is ranked), in slot order."""
    order: tuple[int, ...]
    """The ranked slots, best first (``rank_slots``)."""


def rank(evals: Sequence[MemberEvaluation], groups: LearnerGroups, rewards: Sequence[RewardFunction],
         complexity_lambda: float, grading: tuple[bool, Rule], quarantined: Callable[[int], bool]) -> Ranking:
    """Grade and rank one reward update in one pass: each slot's learners by the run's ``grading`` (``leaders``),
    each slot by the mean of its healthy learners (``slot_view``), then the slots (``slot_evaluations``,
    ``rank_slots``). ``evals`` are every learner's, in learner order; ``rewards`` every ranked column's (the K slots,
    then the extra learner's where it is ranked); ``quarantined`` says which learners are out. A slot is out when
    every learner of it is."""
    use_task_return, rule = grading
    ranked = [*leaders(groups, evals, rewards, complexity_lambda, use_task_return, quarantined, rule),
              *([[groups.slot_learners]] if groups.extra else [])]
    view = slot_view(groups, evals, ranked[: groups.num_slots], quarantined)
    n = len(rewards)
    out = [all(quarantined(i) for i in groups.learners(s)) for s in range(n)]
    slots = slot_evaluations(view[:n], rewards[:n], complexity_lambda, out, rule)
    return Ranking(tuple(tuple(order) for order in ranked), tuple(view), tuple(slots),
                   tuple(rank_slots(slots, use_task_return)))


def leaders(
    groups: LearnerGroups,
    evals: Sequence[MemberEvaluation],
    rewards: Sequence[RewardFunction],
    complexity_lambda: float,
    use_task_return: bool,
    quarantined: Callable[[int], bool],
    rule: Rule = "success-then-progress",
) -> list[list[int]]:
    """Every slot's learners, best first, graded as slots are (``slot_evaluations`` over the slot learners under the
    run's ``rule``: success, or the task return or start distance closed before any success, then the tie-break);
    quarantined last. ``evals`` are every learner's, in learner order; ``rewards`` every column's."""
    n = groups.slot_learners
    col = groups.column_of
    graded = slot_evaluations(evals[:n], [rewards[int(col[i])] for i in range(n)], complexity_lambda,
                              [quarantined(i) for i in range(n)], rule)
    order = rank_slots(graded, use_task_return)
    return [[i for i in order if int(col[i]) == s] for s in range(groups.num_slots)]


def slot_view(groups: LearnerGroups, evals: Sequence[MemberEvaluation], ranked: Sequence[Sequence[int]],
              quarantined: Callable[[int], bool]) -> list[MemberEvaluation]:
    """One evaluation per slot (member = slot), then the extra learner's (member = K): the mean over the slot's
    healthy learners (all of them when none is), with the leader's rollouts and component statistics and
    ``learner_success`` listing every learner's success rate (the spread the report shows). ``ranked``: each slot's
    learners, best first. One learner per reward: the evaluations as they are."""
    if groups.per_reward == 1:
        return list(evals)
    out = []
    for s, order in enumerate(ranked):
        members = [evals[i] for i in order]
        healthy = [e for i, e in zip(order, members, strict=True) if not (quarantined(i) or e.nonfinite)]
        pool = healthy or members
        lead = pool[0]
        means: dict[str, Any] = {name: _nanmean([getattr(e, name) for e in pool]) for name in _MEANED}
        out.append(dataclasses.replace(
            lead, member=s, episodes=sum(e.episodes for e in pool), nonfinite=not healthy,
            learner_success=tuple(evals[i].success_rate for i in groups.learners(s)), **means))
    if groups.extra:
        out.append(dataclasses.replace(evals[groups.slot_learners], member=groups.num_slots))
    return out


def _nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan
