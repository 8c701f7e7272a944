"""Derived facts of a run: headline numbers, the reward lineage over rounds, the final population.

Kept apart from the plots and the HTML so the numbers a person reads in the table and in the figures come
from one computation (and so the tests can check them against the synthetic data directly).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lares_agent.runs.coerce import as_float
from lares_agent.runs.handover import latest_handover
from lares_agent.runs.reader import Evaluation, RunData
from lares_agent.runs.slots import fitness_breakdown

__all__ = [
    "LineageCell", "Member", "RunSummary", "best_reward_id", "final_population", "fitness_breakdown", "fitness_rule",
    "grades_by_round", "lineage", "summarize",
]


@dataclass(frozen=True)
class LineageCell:
    """The reward held by one slot during one round, and what the reward update did with it."""

    round: int
    slot: int
    reward_id: str
    fitness: float
    complexity: float
    elite: bool
    replaced_by: str | None
    best: bool
    graded_by: str | None = None
    """What the fitness was graded on at this update: "success", "return", "progress" or "approach" (None: a run
    before graded fitness)."""
    graded: float = math.nan
    complexity_penalty: float = math.nan
    learner_success: tuple[float, ...] = ()
    """Each of the slot's learners' success (several learners per reward: the fitness used their mean)."""

    @property
    def breakdown(self) -> str:
        """What the fitness was made of, e.g. "progress 0.37" or "return 412.3" ("" when the
        run did not record it; ``runs.slots.fitness_breakdown``, the words `lares trace` uses too)."""
        return fitness_breakdown(self.graded_by, self.graded, self.complexity_penalty, self.learner_success,
                                 self.fitness)


@dataclass(frozen=True)
class Member:
    """One slot of the final reward population."""

    slot: int
    reward_id: str
    components: Mapping[str, str]
    complexity: float
    fitness: float | None
    last_success: float
    breakdown: str = ""
    """What the last recorded fitness was made of (``LineageCell.breakdown``)."""


@dataclass(frozen=True)
class RunSummary:
    """Headline numbers of a run (NaN / None where the run has no data for them yet)."""

    name: str
    task: str
    setting: str
    budget: int | None
    env_steps: int
    n_evaluations: int
    n_updates: int
    best_success: float  # max over evaluations of the population max (the paper's optimistic metric)
    best_success_steps: int | None
    final_best_success: float  # population max at the last evaluation
    # the population's mean at the last evaluation (docs/lares-reference.md §12 item 16: report more than the max)
    final_mean_success: float
    best_task_return: float
    wall_s: float
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_seconds: float
    n_accepted: int
    n_rejected: int
    best_reward_id: str | None
    population: tuple[Member, ...]
    fitness_rule: str = "?"
    """The run's fitness rule (config.json's ``fitness``; a run from before the option: success-then-progress)."""
    grades: tuple[tuple[int, str], ...] = ()
    """(round, what the update graded fitness on) for each reward update that recorded a grade."""
    final_human_success: float = math.nan
    """The init setting's learner on the task's own reward at the last evaluation (NaN: the run kept none)."""
    handed_over: str = ""
    """Which reward the policy the run hands over trained on, in words (`runs/selected.py`)."""
    handover: str = ""
    """How the newest policy handed over was chosen: each candidate's success on the fresh episodes and which won
    (`runs/handover.py`; empty where the run handed over the policy ranked first)."""
    shaping: str = ""
    """What form the searched rewards have, in words (`reward_form`)."""


def _holders_from(ev: Evaluation) -> dict[int, str]:
    return {s.slot: s.reward_id for s in ev.slots if s.reward_id != "?"}


def _initial_holders(run: RunData) -> dict[int, str]:
    """Slot -> reward id before the first update: first evaluation, else the earliest accepted candidates."""
    if run.evaluations:
        return _holders_from(run.evaluations[0])
    accepted = [c for c in run.candidates if c.accepted and c.slot is not None]
    if not accepted:
        return {}
    first = min(c.round if c.round is not None else 0 for c in accepted)
    return {c.slot: c.id for c in accepted if (c.round if c.round is not None else 0) == first and c.slot is not None}


def _complexity(run: RunData, reward_id: str) -> float:
    cand = run.candidate(reward_id)
    return cand.complexity if cand is not None else math.nan


def _walk(run: RunData) -> tuple[list[LineageCell], dict[int, str]]:
    """Replay the reward updates over the slots; returns the lineage cells and the holders after the last one."""
    holders = _initial_holders(run)
    cells: list[LineageCell] = []
    steps = np.array([e.env_steps for e in run.evaluations], dtype=np.int64)
    for u in run.updates:
        # Who was judged: the update's own per-slot list if it has one; else the last evaluation strictly
        # before it (the engine may log the update's evaluation after the swap, under the new ids).
        i = int(np.searchsorted(steps, u.env_steps, side="left")) - 1
        if i >= 0:
            holders.update(_holders_from(run.evaluations[i]))
        holders.update(u.judged)
        for slot in sorted(set(holders) | set(u.fitness) | set(u.replaced)):
            rid = holders.get(slot, "?")
            cx = u.complexity.get(slot, math.nan)
            cells.append(
                LineageCell(
                    round=u.round,
                    slot=slot,
                    reward_id=rid,
                    fitness=u.fitness.get(slot, math.nan),
                    complexity=cx if math.isfinite(cx) else _complexity(run, rid),
                    elite=slot in u.elites,
                    replaced_by=u.replaced.get(slot),
                    best=slot == u.best_slot,
                    graded_by=u.graded_by.get(slot),
                    graded=u.graded.get(slot, math.nan),
                    complexity_penalty=u.complexity_penalty.get(slot, math.nan),
                    learner_success=u.learner_success.get(slot, ()),
                )
            )
        holders.update(u.replaced)
    last_update_steps = run.updates[-1].env_steps if run.updates else -1
    if run.evaluations and run.evaluations[-1].env_steps > last_update_steps:
        holders.update(_holders_from(run.evaluations[-1]))
    return cells, holders


def lineage(run: RunData) -> list[LineageCell]:
    """One cell per (round, slot) over all reward updates, in order."""
    return _walk(run)[0]


def _last_fitness(run: RunData, reward_id: str) -> float | None:
    """Fitness of a reward: the candidate record if it has one, else its last reward-update fitness."""
    cand = run.candidate(reward_id)
    if cand is not None and cand.fitness is not None and math.isfinite(cand.fitness):
        return cand.fitness
    found: float | None = None
    for cell in lineage(run):
        if cell.reward_id == reward_id and math.isfinite(cell.fitness):
            found = cell.fitness
    return found


def _last_breakdown(run: RunData, reward_id: str) -> str:
    found = ""
    for cell in lineage(run):
        if cell.reward_id == reward_id and cell.breakdown:
            found = cell.breakdown
    return found


def final_population(run: RunData) -> tuple[Member, ...]:
    """The rewards held by the slots at the end of the run, with expressions and complexity."""
    _, holders = _walk(run)
    last = {s.slot: s.success for s in run.evaluations[-1].slots} if run.evaluations else {}
    out = []
    for slot in sorted(holders):
        rid = holders[slot]
        cand = run.candidate(rid)
        out.append(
            Member(
                slot=slot,
                reward_id=rid,
                components=dict(cand.components) if cand is not None else {},
                complexity=cand.complexity if cand is not None else math.nan,
                fitness=_last_fitness(run, rid),
                last_success=last.get(slot, math.nan),
                breakdown=_last_breakdown(run, rid),
            )
        )
    return tuple(out)


def best_reward_id(run: RunData) -> str | None:
    """The run's best reward: best slot of the last update, else the best learner of the last evaluation,
    else the accepted candidate with the highest recorded fitness."""
    if run.updates and run.updates[-1].best_slot is not None:
        u = run.updates[-1]
        cells = [c for c in lineage(run) if c.round == u.round and c.slot == u.best_slot]
        if cells and cells[-1].reward_id != "?":
            return cells[-1].reward_id
    if run.evaluations and run.evaluations[-1].slots:
        slots = run.evaluations[-1].slots
        # success first, task return breaks ties (the reference has none: docs/lares-reference.md §12 item 15)
        key = [(_nan_low(s.success), _nan_low(s.task_return)) for s in slots]
        best = slots[max(range(len(slots)), key=key.__getitem__)]
        if best.reward_id != "?":
            return best.reward_id
    scored = [c for c in run.candidates if c.accepted and c.fitness is not None and math.isfinite(c.fitness)]
    if scored:
        return max(scored, key=lambda c: c.fitness or 0.0).id
    return None


def _nan_low(x: float) -> float:
    return x if math.isfinite(x) else -math.inf


def _nanmax(a: np.ndarray) -> float:
    return float(np.nanmax(a)) if a.size and np.isfinite(a).any() else math.nan


def fitness_rule(run: RunData) -> str:
    """The rule the run's reward updates graded by: config.json's ``fitness`` (`start_run` writes the rule "auto"
    resolved to); a config without one is from before the option, which graded success, then progress."""
    rule = run.config.get("fitness")
    return str(rule) if isinstance(rule, str) and rule else "success-then-progress"


def grades_by_round(run: RunData) -> tuple[tuple[int, str], ...]:
    """(round, grade) per reward update; an update's slots share one grade (``setup/fitness.py``)."""
    out = []
    for u in run.updates:
        grades = sorted(set(u.graded_by.values()))
        if grades:
            out.append((u.round, "/".join(grades)))
    return tuple(out)


def summarize(run: RunData) -> RunSummary:
    """Compute the headline numbers shown in the report table."""
    steps, success, _ = run.slot_matrix("success")
    _, ret, _ = run.slot_matrix("task_return")
    best_success = _nanmax(success)
    best_steps: int | None = None
    if math.isfinite(best_success):
        pop_max = np.where(np.isfinite(success), success, -np.inf).max(axis=1)
        best_steps = int(steps[int(np.argmax(pop_max))])
    final = success[-1] if len(steps) else np.array([])
    walls = [e.wall_s for e in run.evaluations if math.isfinite(e.wall_s)]
    ends = [as_float(ev.get("wall_s")) for ev in run.events if ev.event == "run_end"]
    walls += [w for w in ends if math.isfinite(w)]
    seconds = [c.seconds for c in run.llm_calls if math.isfinite(c.seconds)]
    return RunSummary(
        name=run.name,
        task=run.task,
        setting=run.setting,
        budget=run.budget,
        env_steps=int(steps[-1]) if len(steps) else 0,
        n_evaluations=len(run.evaluations),
        n_updates=len(run.updates),
        best_success=best_success,
        best_success_steps=best_steps,
        final_best_success=_nanmax(final),
        final_mean_success=float(np.nanmean(final)) if final.size and np.isfinite(final).any() else math.nan,
        best_task_return=_nanmax(ret),
        wall_s=max(walls) if walls else math.nan,
        llm_calls=len(run.llm_calls),
        prompt_tokens=sum(c.prompt_tokens for c in run.llm_calls),
        completion_tokens=sum(c.completion_tokens for c in run.llm_calls),
        llm_seconds=float(sum(seconds)),
        n_accepted=sum(1 for c in run.by_id.values() if c.accepted),
        n_rejected=sum(1 for c in run.by_id.values() if c.verdict == "rejected"),
        best_reward_id=best_reward_id(run),
        population=final_population(run),
        fitness_rule=fitness_rule(run) if run.setting != "baseline" else "–",
        grades=grades_by_round(run),
        final_human_success=_last_finite(run.human_series("success")[1]),
        handed_over=handed_over(run),
        handover=_handover(run),
        shaping=reward_form(run),
    )


def reward_form(run: RunData) -> str:
    """What the LLM's rewards are (config.json `shaping`): the rewards themselves, or potentials shaping a base reward
    as gamma*Phi(s') - Phi(s) (engine/replay/potential.py), with the base and gamma of their `potential` events."""
    if run.setting == "baseline":
        return "–"
    if run.config.get("shaping") != "potential":
        return "additive: the LLM writes the reward"
    shaped = [e for e in run.events if e.event == "potential"]
    bases = sorted({str(e.get("base")) for e in shaped})
    gammas = sorted({str(e.get("gamma")) for e in shaped})
    return ("potential: the LLM writes Phi; the learners train on the base reward "
            f"({', '.join(bases) or '?'}) + gamma*Phi(s') - Phi(s), gamma {', '.join(gammas) or '?'}")


def _handover(run: RunData) -> str:
    record = latest_handover(run.events)
    return "" if record is None else f"{record.policy} {record.sentence()}"


def _last_finite(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else math.nan


def handed_over(run: RunData) -> str:
    """What the policy the run hands over trained on: the task's own reward (the baseline, or the init setting's
    kept learner ranked first), a searched reward by id, or a baseline's success indicator or given reward (with
    where it came from); empty before the run selected anything."""
    from lares_agent.runs.selected import HUMAN_REWARD_ID, selected_reward
    from lares_agent.search.found_reward import trained_on

    if run.setting == "baseline":
        if run.config.get("baseline_reward") == "success":
            return "the task's success indicator alone (sparse baseline)"
        return trained_on(run.config) or "the task's own reward (baseline)"  # or the reward given to it alone
    chosen = selected_reward(run.path, run)
    if chosen is None:
        return ""
    if chosen.reward_id == HUMAN_REWARD_ID:
        return f"the task's own reward ({chosen.why})"
    if run.config.get("shaping") == "potential":
        return f"a searched potential, {chosen.reward_id}, shaping the base reward ({chosen.why})"
    return f"a searched reward, {chosen.reward_id} ({chosen.why})"
