"""Numeric checks of a compiled reward on sample states: finite, bounded, not constant.

The reference validates by running LLM code over every stored info dict in a subprocess with no timeout
(docs/lares-reference.md §12 item 20); here a candidate is checked vectorised on a bounded sample of states
before any policy trains on it, and each failure names the component to fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lares_agent.rewards.compile import CompiledReward
from lares_agent.rewards.verdict import ComponentStats, Verdict

__all__ = ["NumericThresholds", "check_numeric"]


@dataclass(frozen=True)
class NumericThresholds:
    """What a usable reward looks like on a sample of states.

    max_abs is loose on purpose: a LaRes rescale to the best elite's mean/std follows acceptance, so only
    values that signal a bug (1/distance blowing up, exp of a large number) are refused.
    """

    min_std: float = 1e-8  # the total must vary over the sample
    max_abs: float = 1e4
    max_nonfinite_share: float = 0.0  # any nan/inf state rejects: it would poison the critic


def _stats(values: np.ndarray) -> ComponentStats:
    with np.errstate(all="ignore"):  # std of huge values overflows to inf: the magnitude check reports it
        return _stats_of(values)


def _stats_of(values: np.ndarray) -> ComponentStats:
    finite = np.isfinite(values)
    share = float(1.0 - finite.mean()) if values.size else 0.0
    good = values[finite]
    if good.size == 0:
        return ComponentStats(float("nan"), float("nan"), float("nan"), float("nan"), share)
    return ComponentStats(float(good.mean()), float(good.std()), float(good.min()), float(good.max()), share)


def check_numeric(
    reward: CompiledReward,
    sample: Mapping[str, np.ndarray],
    thresholds: NumericThresholds = NumericThresholds(),
) -> Verdict:
    """Finite, not constant, bounded: evaluated once on the sample, the first failure is the reason.

    A component that is constant on the sample is only a warning (a success bonus never fires on random
    states), but the total must vary: a constant reward teaches nothing.
    """
    canonical = dict(reward.parsed.canonical)

    def reject(reason: str, stats: Mapping[str, ComponentStats] | None = None) -> Verdict:
        return Verdict(False, reason, reward.complexity, canonical, dict(stats or {}), key=reward.key)

    missing = [name for name in reward.feature_names if name not in sample]
    if missing:
        return reject(f"sample lacks feature(s) {', '.join(missing)}")
    try:
        total, parts = reward.evaluate(sample)
    except (KeyError, ValueError) as err:
        return reject(f"cannot evaluate on the sample: {err}")
    if total.size == 0:
        return reject("the sample is empty")
    stats = {name: _stats(values) for name, values in parts.items()}
    stats["total"] = _stats(total)
    for name, s in stats.items():
        if name != "total" and s.nonfinite_share > thresholds.max_nonfinite_share:
            return reject(
                f"component '{name}' is nan/inf on {100 * s.nonfinite_share:.3g}% of sample states "
                "(log/sqrt of a negative, division by zero?)",
                stats,
            )
    for name, s in stats.items():
        if name != "total" and max(abs(s.min), abs(s.max)) > thresholds.max_abs:
            return reject(
                f"component '{name}' reaches {max(abs(s.min), abs(s.max)):.3g} in magnitude, "
                f"limit {thresholds.max_abs:g} (a near-zero denominator or a large exp?)",
                stats,
            )
    if stats["total"].nonfinite_share > thresholds.max_nonfinite_share:  # finite parts can overflow the sum
        return reject("the total reward is nan/inf on some sample states", stats)
    if max(abs(stats["total"].min), abs(stats["total"].max)) > thresholds.max_abs:
        return reject(f"the total reward exceeds {thresholds.max_abs:g} in magnitude", stats)
    constant = [name for name, s in stats.items() if name != "total" and not s.std > thresholds.min_std]
    frozen = [n for n in reward.feature_names if not np.nanstd(np.asarray(sample[n], dtype=np.float64)) > 0]
    unjudgeable = bool(frozen) and len(frozen) == len(reward.feature_names)
    if not stats["total"].std > thresholds.min_std and not unjudgeable:
        names = ", ".join(f"'{n}'" for n in constant)
        return reject(
            f"the reward is constant ({stats['total'].mean:.6g}) on the sample; constant components: {names}",
            stats,
        )
    # Every feature the reward reads is frozen on this sample (round 0's random steps never move a window, say):
    # the sample cannot tell, so a constant total is a warning, not a verdict.
    warnings = tuple(f"component '{n}' is constant ({stats[n].mean:.6g}) on the sample" for n in constant)
    if unjudgeable:
        warnings += (f"every feature it reads ({', '.join(frozen)}) is constant on the sample; not judged",)
    return Verdict(True, "accepted", reward.complexity, canonical, stats, warnings, key=reward.key)
