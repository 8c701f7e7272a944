"""What fills a round's free slots besides the LLM's answers: numeric children of the elites, and the controls'
edits made in the LLM's place, at random (the random-edit control) or as the critique computed them (the
critique-edit control). Each is a list of `CandidateRecord`s the validate node checks like an LLM answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import product
from typing import Any

import numpy as np

from lares_agent.graphs.context import RunContext
from lares_agent.graphs.state import CandidateRecord, EliteInfo
from lares_agent.rewards import allowed_features, scale_bounds
from lares_agent.rewards.edits import random_reward, structural_edit
from lares_agent.rewards.limits import RewardRejected
from lares_agent.rewards.mutate import numeric_children, scales_within
from lares_agent.rewards.tuning import constants_label, tuned_children
from lares_agent.tools.critique_rules import Defect, apply_changes

__all__ = ["CRITIQUE_EDIT", "children", "critique_edits", "opening", "opening_bounds", "random_edits"]

CRITIQUE_EDIT = "critique's edit of "  # how a critique-edit candidate's rationale opens


def opening(ctx: RunContext) -> dict[str, str]:
    """The scratch grammar's opening components and their distance features."""
    return {name: feature for name, feature in (("progress", ctx.task.progress_feature),
                                                ("approach", ctx.task.approach_feature)) if feature}


def opening_bounds(ctx: RunContext, features: Iterable[str]) -> dict[str, tuple[float, float]]:
    """Each opening feature's scale bounds from the distances in the round's sample (`grammar.scale_bounds`)."""
    return {f: scale_bounds(ctx.sample.get(f)) for f in features}


def _keep_opening(ctx: RunContext) -> Callable[[Mapping[str, str]], bool] | None:
    """From scratch, the test that keeps a child's opening terms within the grammar's scale bounds; None in init."""
    if ctx.human_reward is not None:
        return None
    opening_ = opening(ctx)
    return scales_within(opening_, allowed_features(ctx.task), ctx.limits.checks.limits,
                         opening_bounds(ctx, opening_.values()))


def children(ctx: RunContext, elites: list[EliteInfo], round_: int, attempt: int, first: int,
             critique_id: str | None, count: int) -> list[CandidateRecord]:
    """Numeric children of the elites, best first in turn: structure from the LLM, constants drawn by TPE from the
    fitness measured for rewards of the elite's structure (rewards/tuning.py), or perturbed at random
    (rewards/mutate.py) where the elite has no constant to tune that way. Seeded by (seed, round, attempt): a
    resumed round makes the same ones."""
    limits = ctx.limits
    if count <= 0 or not elites:
        return []
    rng = np.random.default_rng([limits.seed, round_, attempt])
    keep = _keep_opening(ctx)
    share = [count // len(elites) + (1 if i < count % len(elites) else 0) for i in range(len(elites))]
    out: list[CandidateRecord] = []
    for elite, n in zip(elites, share, strict=True):
        comps = dict(elite.get("components") or {})
        made, trials = tuned_children(comps, ctx.task, n, ctx.measured, int(rng.integers(2**31)),
                                      limits=limits.checks.limits, keep=keep)
        how = constants_label(trials)
        if not made:
            made = numeric_children(comps, ctx.task, n, rng, sigma=limits.mutation_sigma,
                                    limits=limits.checks.limits, keep=keep)
            how = f"constants x exp(N(0, {limits.mutation_sigma:g}))"
        for child in made:
            rationale = f"numeric child of {elite.get('id', '?')}: {how}"
            out.append(CandidateRecord(
                id=f"{ctx.id_prefix}r{round_}-a{attempt}-{first + len(out)}", round=round_, attempt=attempt,
                parent_id=elite.get("id"), critique_id=critique_id, components=child, rationale=rationale,
                origin="child",
                candidate={"components": child, "rationale": rationale},
            ))
    return out


def random_edits(ctx: RunContext, elites: list[EliteInfo], round_: int, attempt: int, first: int,
                 critique_id: str | None, count: int) -> list[CandidateRecord]:
    """Structural edits of the elites made at random, in the LLM's place (the random-edit control,
    rewards/edits.py): best first in turn, or rewards drawn whole where there is no elite (round 0 from scratch);
    each edit's constants then set as a numeric child's (`tuned_children`). An edit that cannot be made is a
    rejected candidate with its reason. Seeded by (seed, round, attempt): a resumed round makes the same ones."""
    limits = ctx.limits
    rng = np.random.default_rng([limits.seed, round_, attempt, 1])  # apart from the children's draws
    keep = _keep_opening(ctx)
    offered = ctx.offered_features()  # the features the LLM would be offered (from scratch: no designer's)
    out: list[CandidateRecord] = []
    for i in range(count):
        parent = elites[i % len(elites)] if elites else None
        rec = CandidateRecord(id=f"{ctx.id_prefix}r{round_}-a{attempt}-{first + i}", round=round_, attempt=attempt,
                              parent_id=parent.get("id") if parent else None, critique_id=critique_id, origin="edit")
        try:
            edit = (structural_edit(dict(parent.get("components") or {}), ctx.task, rng, sample=ctx.sample,
                                    limits=limits.checks.limits, features=offered) if parent is not None
                    else random_reward(ctx.task, rng, sample=ctx.sample, limits=limits.checks.limits,
                                       features=offered))
        except RewardRejected as exc:
            out.append(CandidateRecord(**rec, components={}, rationale="", error=exc.reason))
            continue
        tuned, trials = tuned_children(edit.components, ctx.task, 1, ctx.measured, int(rng.integers(2**31)),
                                       limits=limits.checks.limits, keep=keep)
        comps = tuned[0] if tuned else edit.components
        how = constants_label(trials) if tuned else "constants as drawn"
        of = f"random edit of {parent.get('id', '?')}" if parent is not None else "random reward"
        rationale = f"{of}: {edit.what}; {how}"
        out.append(CandidateRecord(**rec, components=comps, rationale=rationale,
                                   candidate={"components": comps, "rationale": rationale}))
    return out


def critique_edits(ctx: RunContext, elites: list[EliteInfo], defects: Iterable[Mapping[str, Any]], round_: int,
                   attempt: int, first: int, critique_id: str | None, count: int) -> list[CandidateRecord]:
    """The critique's computed edits made in the LLM's place (the critique-edit control): each elite, best first in
    turn, with every computed defect's change made (`critique_rules.apply_changes`), then with each alone; constants
    as the critique computed them, as the model's answers copy them. Nothing where no computed defect has a change
    that applies (round 0, or a critique that found none): the numeric children fill the slots then."""
    rules = [d for d in map(Defect.from_json, defects) if d.source == "rules" and d.change]
    plans: list[Sequence[Defect]] = [rules, *([d] for d in rules)] if len(rules) > 1 else [rules]
    out: list[CandidateRecord] = []
    seen: list[dict[str, str]] = []
    for plan, parent in product(plans, elites):
        if len(out) >= count:
            break
        comps, made = apply_changes(dict(parent.get("components") or {}), plan)
        if not made or comps in seen:
            continue
        seen.append(comps)
        rationale = (f"{CRITIQUE_EDIT}{parent.get('id', '?')}: " + "; ".join(d.edit for d in made))[:300]
        out.append(CandidateRecord(
            id=f"{ctx.id_prefix}r{round_}-a{attempt}-{first + len(out)}", round=round_, attempt=attempt,
            parent_id=parent.get("id"), critique_id=critique_id, origin="rule", components=comps,
            rationale=rationale, candidate={"components": comps, "rationale": rationale}))
    return out
