"""The validate node's tools: parse, complexity cap, numeric checks, progress direction, duplicates.

Thin over `lares_agent.rewards`: the reward language does the parsing and the numeric verdict; this module
adds the checks that need the task and the population:
- the sign of the reward along the task's main progress feature (a wrong-signed distance term is the small
  model's most common mistake, docs/feasibility.md §4.2), and progress terms that cancel out;
- an approach term where the task names one (without it no learner gets a signal until the object happens to
  be touched: no button-press reward of the experiment's second sitting used `tcp_to_obj`, docs/RESULTS.md);
- duplicates of candidates already in the population (canonical sympy text, so `2*d` and `d*2` match).
Every rejection carries a one-line reason that goes back to the LLM, replacing the reference's silent
unbounded regeneration loop (docs/lares-reference.md §12 item 28).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lares_agent.rewards import (
    CompiledReward,
    Limits,
    ParsedReward,
    RewardRejected,
    check_numeric,
    compile_reward,
    feature_names_of,
    parse_candidate,
)

__all__ = [
    "CheckConfig",
    "CheckResult",
    "allowed_features",
    "canonical_key",
    "check_candidate",
    "elite_keys",
    "progress_monotonicity",
]


@dataclass(frozen=True)
class CheckConfig:
    """What a candidate must satisfy besides parsing: a complexity cap and the progress sign."""

    complexity_cap: float = 60.0
    require_progress_use: bool = True  # a reward that ignores the main progress measure cannot guide the task
    require_progress_sign: bool = True
    require_approach_use: bool = True  # progress cannot move before the hand reaches the object
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class CheckResult:
    """Verdict on one candidate; `reward` is the compiled function when accepted."""

    accepted: bool
    reason: str
    canonical: Mapping[str, str] = field(default_factory=dict)
    complexity: float | None = None
    key: str | None = None
    reward: CompiledReward | None = None


def allowed_features(task: Any) -> list[str]:
    """Names a reward expression may use: the task's declared features (never `human_reward`)."""
    return [name for name in feature_names_of(task) if name != "human_reward"]


def canonical_key(parsed: ParsedReward) -> str:
    """Duplicate key: sympy's text of the total reward, so renamed or re-split components still match."""
    import sympy

    return str(sympy.Add(*parsed.components.values()))


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


def _check_compiled(
    parsed: ParsedReward,
    reward: CompiledReward,
    sample: Mapping[str, np.ndarray],
    progress_feature: str | None,
    config: CheckConfig,
    approach_feature: str | None = None,
) -> str | None:
    """The reason the compiled candidate fails, or None."""
    if config.require_progress_use and progress_feature and progress_feature not in parsed.features_used:
        return (f"the reward never uses {progress_feature}, the task's main progress measure: add a term that "
                f"grows as {progress_feature} shrinks")
    if config.require_approach_use and approach_feature and approach_feature not in parsed.features_used:
        return (f"the reward never uses {approach_feature}: {progress_feature or 'progress'} cannot change before the "
                f"robot reaches the object, so add an approach term such as -w*{approach_feature} or "
                f"w*exp(-{approach_feature}/s)")
    verdict = check_numeric(reward, sample)
    if not verdict.accepted:
        return verdict.reason
    if config.require_progress_sign and progress_feature and progress_feature in sample:
        rises, falls = progress_monotonicity(reward, sample, progress_feature)
        if rises > 0.5 and rises > falls:
            return (
                f"the reward increases as {progress_feature} grows on {rises:.0%} of samples, but {progress_feature} "
                f"is lower-is-better: use -w*{progress_feature} or w*exp(-{progress_feature}/s)"
            )
        if rises == 0.0 and falls == 0.0:  # e.g. `obj_to_target + (1 - obj_to_target)`, seen in the experiment
            return (f"the reward does not change when {progress_feature} changes (its terms cancel, or only a "
                    f"threshold uses it): add a term that grows as {progress_feature} shrinks")
    return None


def check_candidate(
    data: str | Mapping[str, Any],
    *,
    feature_names: Collection[str],
    sample: Mapping[str, np.ndarray],
    candidate_id: str,
    progress_feature: str | None = None,
    taken: Collection[str] = (),
    config: CheckConfig = CheckConfig(),
    approach_feature: str | None = None,
) -> CheckResult:
    """Parse, cap complexity, check the approach term, numerics and direction, and reject duplicates of `taken` keys.

    Never raises on bad candidate text: every failure is a rejected `CheckResult` with its reason.
    """
    try:
        parsed = parse_candidate(data, feature_names, config.limits)
    except RewardRejected as exc:
        return CheckResult(False, exc.reason)
    except (ValueError, TypeError, RecursionError) as exc:  # defensive: a parser bug must not crash the graph
        return CheckResult(False, f"unparseable candidate ({type(exc).__name__})")
    canonical = dict(parsed.canonical)
    key = canonical_key(parsed)
    if parsed.complexity > config.complexity_cap:
        reason = f"complexity {parsed.complexity:.1f} exceeds the cap {config.complexity_cap:g}: use fewer or simpler terms"
        return CheckResult(False, reason, canonical, parsed.complexity, key)
    if key in taken:
        return CheckResult(False, "duplicate of a candidate already in the population", canonical, parsed.complexity, key)
    try:
        reward = compile_reward(parsed, candidate_id)
        reason = _check_compiled(parsed, reward, sample, progress_feature, config, approach_feature)
    except RewardRejected as exc:
        return CheckResult(False, exc.reason, canonical, parsed.complexity, key)
    except (ValueError, TypeError, ArithmeticError, KeyError) as exc:
        return CheckResult(False, f"evaluation failed on buffer samples ({type(exc).__name__})", canonical,
                           parsed.complexity, key)
    if reason is not None:
        return CheckResult(False, reason, canonical, parsed.complexity, key)
    return CheckResult(True, "ok", canonical, parsed.complexity, key, reward)


def elite_keys(elites: Collection[Mapping[str, Any]], feature_names: Collection[str], limits: Limits) -> set[str]:
    """Duplicate keys of the current elites (elites that do not parse, e.g. the task's own reward, are skipped)."""
    keys: set[str] = set()
    for elite in elites:
        components = elite.get("components") or {}
        if not components:
            continue
        try:
            keys.add(canonical_key(parse_candidate({"components": dict(components)}, feature_names, limits)))
        except (RewardRejected, ValueError, TypeError):
            continue
    return keys
