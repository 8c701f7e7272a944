"""The validator's sign rules (checks 8 and 9 of `rewards/validate.py`): a reward must pay for closing the task's
lower-is-better distances, the progress and the approach distance, never for opening them.

A wrong-signed distance term is the small model's most common mistake (docs/feasibility.md §4.2). Both rules read
forward differences on the sample, so they hold on the states the learners visit, and check 9 also reads each
additive term of a component: a term that pays for the distance hides in a component whose other term pays for
closing it near the goal (`-near_object + obj_to_target + 10*hamacher(...)`, a window-open-v3 refinement that an
in-run sample of states near the goal let through, docs/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import sympy

from lares_agent.rewards.candidate import ParsedReward
from lares_agent.rewards.compile import CompiledReward, compile_reward
from lares_agent.rewards.task import RewardTask

__all__ = ["component_sign_reason", "distances", "progress_monotonicity", "sign_reason", "sign_verdict",
           "wrong_signed"]


def progress_monotonicity(
    reward: CompiledReward, sample: Mapping[str, np.ndarray], feature: str
) -> tuple[float, float]:
    """(share of samples where the reward rises, share where it falls) when `feature` grows a little.

    A forward difference per sample, with a step of 1e-3 of the feature's spread; ties (flat regions,
    Piecewise plateaus) count in neither share.
    """
    x = np.asarray(sample[feature], dtype=np.float64)
    step = 1e-3 * max(float(np.std(x)), 1e-2)
    moved = dict(sample)
    moved[feature] = x + step
    base = np.asarray(reward(sample), dtype=np.float64)
    diff = np.asarray(reward(moved), dtype=np.float64) - base
    tol = 1e-9 * (1.0 + np.abs(base))
    ok = np.isfinite(diff)
    n = max(int(ok.sum()), 1)
    return float(np.sum(ok & (diff > tol)) / n), float(np.sum(ok & (diff < -tol)) / n)


def sign_reason(reward: CompiledReward, sample: Mapping[str, np.ndarray], progress: str) -> str | None:
    """Check 8: the reward must rise as the progress distance shrinks."""
    return sign_verdict(*progress_monotonicity(reward, sample, progress), progress)


def sign_verdict(rises: float, falls: float, progress: str) -> str | None:
    """`sign_reason` from the shares `progress_monotonicity` measured."""
    if rises > 0.5 and rises > falls:
        return (f"the reward increases as {progress} grows on {rises:.0%} of samples, but {progress} "
                f"is lower-is-better: use -w*{progress} or w*exp(-{progress}/s)")
    if rises == 0.0 and falls == 0.0:  # e.g. `obj_to_target + (1 - obj_to_target)`, seen in the experiment
        return (f"the reward does not change when {progress} changes (its terms cancel, or only a "
                f"threshold uses it): add a term that grows as {progress} shrinks")
    return None


def _at_goal(reward: CompiledReward, sample: Mapping[str, np.ndarray], feature: str) -> tuple[float, float]:
    """(share of rows where the reward pays less with `feature` at 0 than where the row is, share where it pays
    more), over the rows where the two differ; (0, 0) where under a tenth of the rows differ."""
    goal = dict(sample)
    goal[feature] = np.zeros_like(np.asarray(sample[feature], dtype=np.float64))
    base = np.asarray(reward(sample), dtype=np.float64)
    diff = np.asarray(reward(goal), dtype=np.float64) - base
    tol = 1e-9 * (1.0 + np.abs(base))
    moved = np.isfinite(diff) & (np.abs(diff) > tol)
    n = int(moved.sum())
    if n < 0.1 * diff.size:
        return 0.0, 0.0
    return float(np.sum(moved & (diff < 0)) / n), float(np.sum(moved & (diff > 0)) / n)


def _pays_for(expr: sympy.Expr, text: str, sample: Mapping[str, np.ndarray], feature: str) -> str | None:
    """How `expr` pays for the distance `feature`, in words, or None: it grows with it on (nearly) every sample
    and never falls with it (`0.5*d`), or, reading it alone, pays less at the goal than where (nearly) every
    sample is and never more, which a local slope misses in a capped or a stepped term (`5*Min(0.02, d)`,
    `where(d < 0.05, 0, 1)`: both in refinements of the evidence grid, docs/RESULTS.md). "right" where it pays
    for closing it more than for opening it."""
    used = frozenset(str(s) for s in expr.free_symbols)
    alone = compile_reward(ParsedReward({"t": expr}, {"t": text}, 0.0, used))
    rises, falls = progress_monotonicity(alone, sample, feature)
    lower, higher = _at_goal(alone, sample, feature) if used == {feature} else (0.0, 0.0)
    if rises >= 0.9 and falls == 0.0:
        return f"on {rises:.0%} of the sample states"
    if lower >= 0.9 and higher == 0.0:
        return f"it pays less at {feature} = 0 than at {lower:.0%} of the sample states"
    return "right" if falls > rises or higher > lower else None


def _paying(parsed: ParsedReward, sample: Mapping[str, np.ndarray], feature: str,
            terms: bool = False) -> tuple[dict[str, str], list[str]]:
    """The components that pay for the distance `feature` ({name: how, as words}) and those that pay for closing
    it (`_pays_for`). With `terms`, a component also pays for it where one of its additive terms does, though the
    component as a whole does not (its other terms outweigh it on this sample)."""
    wrong: dict[str, str] = {}
    right: list[str] = []
    for name, expr in parsed.components.items():
        if feature not in {str(s) for s in expr.free_symbols}:
            continue
        how = _pays_for(expr, parsed.canonical[name], sample, feature)
        if terms and how in (None, "right"):
            how = _paying_term(expr, sample, feature) or how
        if how == "right":
            right.append(name)
        elif how is not None:
            wrong[name] = how
    return wrong, right


def _paying_term(expr: sympy.Expr, sample: Mapping[str, np.ndarray], feature: str) -> str | None:
    """How the first additive term of `expr` that pays for the distance `feature` does, or None."""
    for term in sympy.Add.make_args(expr):
        if term is expr or feature not in {str(s) for s in term.free_symbols}:
            continue
        how = _pays_for(term, str(term), sample, feature)
        if how not in (None, "right"):
            return f"its term {term} grows with it {how}" if how.startswith("on ") else f"its term {term}: {how}"
    return None


def wrong_signed(parsed: ParsedReward, sample: Mapping[str, np.ndarray], feature: str) -> list[str]:
    """The components that pay for the distance `feature` (`_paying`) where another component already pays for
    closing it: a reward that is all wrong-signed distance shows no intent to restore. The repair negates them
    (`rewards/validate.py`), so a component counts only as a whole here."""
    wrong, right = _paying(parsed, sample, feature)
    return list(wrong) if right else []


def distances(task: RewardTask, sample: Mapping[str, np.ndarray]) -> list[str]:
    """The lower-is-better distances the sign rules read: the progress and the approach feature, where sampled."""
    return [f for f in dict.fromkeys((task.progress_feature, task.approach_feature)) if f is not None and f in sample]


def component_sign_reason(parsed: ParsedReward, task: RewardTask, sample: Mapping[str, np.ndarray]) -> str | None:
    """Check 9: a component, or an additive term of one, that pays for the progress or the approach distance, as
    a reason; first one that no other component shows the intent to close (`wrong_signed`), which the repair
    cannot mend."""
    found = []
    for feature in distances(task, sample):
        wrong, right = _paying(parsed, sample, feature, terms=True)
        found += [(bool(right), name, feature, how) for name, how in wrong.items()]
    for _, name, feature, how in sorted(found, key=lambda item: item[0]):
        return (f"component '{name}' pays more as {feature} grows ({how}), but {feature} is lower-is-better: "
                f"write it as -w*{feature} or w*exp(-{feature}/s)")
    return None
