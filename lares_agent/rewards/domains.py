"""Poles and domains: a division by, or a log of, an expression that can reach 0 over the features' declared ranges.

The numeric checks (`numeric.py`) see only sample values, and a pole that sits exactly where the task wants the
robot to be (`1/tcp_to_target` at the goal) is never on a sample of random or early states: the reward then
explodes the moment a policy succeeds (docs/lares-reference.md §12 lists the reference's unchecked reward code).
Here every denominator and every log argument is evaluated on the sample plus probe states built from each
feature's declared range (`sampling.feature_range`: its lower and upper bound, then the corners of the box of
the features it reads); one that reaches 0 there, or changes sign, is a pole the candidate must remove.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import sympy

from lares_agent.rewards.candidate import ParsedReward
from lares_agent.rewards.compile import compile_reward
from lares_agent.rewards.sampling import feature_range
from lares_agent.rewards.task import TaskFeature

__all__ = ["domain_reason", "pole_sites"]

_MAX_CORNER_FEATURES = 6  # 2**6 corners; beyond that only the one-feature-at-a-bound probes are used
_ZERO = 1e-12


def pole_sites(expr: sympy.Expr) -> Iterator[tuple[str, sympy.Expr]]:
    """("division by" | "log of", the expression) for each denominator and log argument that reads a feature."""
    for kind, site, _ in _sites(expr):
        yield kind, site


def _sites(expr: sympy.Expr) -> Iterator[tuple[str, sympy.Expr, float]]:
    """`pole_sites` with the power a denominator is raised to (1 for `1/x`, 0.5 for `1/sqrt(x)`; 0 for a log)."""
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Pow) and node.exp.is_Number and node.exp < 0 and node.base.free_symbols:
            yield "division by", node.base, float(-node.exp)
        elif isinstance(node, sympy.log) and node.args[0].free_symbols:
            yield "log of", node.args[0], 0.0


def _probes(
    names: Sequence[str], ranges: Mapping[str, tuple[float, float]], sample: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The sample's rows, then rows with one feature at a bound (others from the sample's first rows), then the
    corners of the declared box."""
    n = min(len(next(iter(sample.values()))) if sample else 0, 64)
    columns: dict[str, list[np.ndarray]] = {k: [] for k in names}

    def add(block: Mapping[str, np.ndarray]) -> None:
        for k in names:
            columns[k].append(np.asarray(block[k], dtype=np.float64))

    base = {k: np.asarray(sample[k], dtype=np.float64)[:n] if k in sample and n else
            np.full(max(n, 1), np.mean(ranges[k])) for k in names}
    size = len(next(iter(base.values())))
    if n:
        add({k: np.asarray(sample[k], dtype=np.float64) for k in names})
    for k in names:
        for bound in ranges[k]:
            add({**base, k: np.full(size, bound)})
    if len(names) <= _MAX_CORNER_FEATURES:
        corners = np.array(list(itertools.product(*(ranges[k] for k in names))), dtype=np.float64)
        add({k: corners[:, i] for i, k in enumerate(names)})
    return {k: np.concatenate(v) for k, v in columns.items()}


def _site_values(site: sympy.Expr, probes: Mapping[str, np.ndarray]) -> np.ndarray:
    names = frozenset(s.name for s in site.free_symbols)
    parsed = ParsedReward(components={"site": site}, canonical={"site": str(site)}, complexity=0.0,
                          features_used=names)
    return compile_reward(parsed, "site")(probes)


def _unit(feature: TaskFeature | None) -> str:
    return str(getattr(feature, "unit", "")).strip().lower()


def _fix(kind: str, site: sympy.Expr, feature: str) -> str:
    if kind == "log of":
        return f"use log(1 + {site}) or add an epsilon inside the log, or a bounded shape such as exp(-{feature}/0.1)"
    return f"add an epsilon ({site} + 0.01) or use a bounded shape such as exp(-{feature}/0.1)"


def domain_reason(
    parsed: ParsedReward, features: Sequence[TaskFeature], sample: Mapping[str, np.ndarray], max_abs: float = 1e4
) -> str | None:
    """The reason the candidate has a pole or leaves a log's domain over the declared feature ranges, or None.

    A near-pole counts too: `1/(1e-9 + d)` never reaches 0, but its reciprocal passes `max_abs` (the numeric
    check's magnitude limit, `NumericThresholds.max_abs`) at the goal, where no early sample state lies. So does a
    component whose value passes `max_abs` anywhere on the probe states (`_bound_reason`): `exp(0.004/(0.0002 + d))`
    has no pole and a denominator of at least 2e-4, yet is 4.9e8 at d = 0."""
    declared = {f.name: f for f in features}
    for name, expr in parsed.components.items():
        for kind, site, power in _sites(expr):
            used = sorted(s.name for s in site.free_symbols)
            ranges = {k: feature_range(declared[k]) if k in declared else (0.0, 1.0) for k in used}
            values = _site_values(site, _probes(used, ranges, sample))
            finite = values[np.isfinite(values)]
            if finite.size == 0:
                continue  # nan/inf everywhere is the numeric check's to report
            low, high = float(finite.min()), float(finite.max())
            touches = bool(np.any(np.abs(finite) <= _ZERO))
            crosses = low < 0.0 < high
            negative_log = kind == "log of" and low < 0.0
            span = ", ".join(f"{k} in [{ranges[k][0]:g}, {ranges[k][1]:g}]" for k in used)
            nearest = float(np.min(np.abs(finite)))
            if power > 0 and not (touches or crosses) and nearest ** -power > max_abs:
                return (f"component '{name}': division by {site}, which comes within {nearest:.3g} of 0 over the "
                        f"declared range ({span}), so the term reaches {nearest ** -power:.3g} in magnitude, limit "
                        f"{max_abs:g}: {_fix(kind, site, used[0])}")
            if not (touches or crosses or negative_log):
                continue
            where = "reaches 0" if touches else "changes sign (so passes through 0)"
            if negative_log and not (touches or crosses):
                where = "is negative"
            goal = "; a distance is 0 at the goal" if any(_unit(declared.get(k)) == "m" for k in used) else ""
            return (f"component '{name}': {kind} {site}, which {where} over the declared range ({span}{goal}): "
                    f"{_fix(kind, site, used[0])}")
    return _bound_reason(parsed, declared, sample, max_abs)


def _bound_reason(parsed: ParsedReward, declared: Mapping[str, TaskFeature], sample: Mapping[str, np.ndarray],
                  max_abs: float) -> str | None:
    """The first component that passes `max_abs` in magnitude (or overflows) on the probe states of the features it
    reads, naming one such state; None where every one stays within it."""
    for name, expr in parsed.components.items():
        used = sorted(s.name for s in expr.free_symbols)
        if not used:
            continue
        ranges = {k: feature_range(declared[k]) if k in declared else (0.0, 1.0) for k in used}
        probes = _probes(used, ranges, sample)
        with np.errstate(all="ignore"):
            values = _site_values(expr, probes)
            huge = np.flatnonzero(~np.isnan(values) & (np.abs(values) > max_abs))
        if huge.size:
            i = int(huge[np.argmax(np.abs(values[huge]))])
            state = ", ".join(f"{k} = {probes[k][i]:g}" for k in used)
            span = ", ".join(f"{k} in [{ranges[k][0]:g}, {ranges[k][1]:g}]" for k in used)
            return (f"component '{name}' reaches {abs(values[i]):.3g} in magnitude at {state} (declared range "
                    f"{span}), limit {max_abs:g}: bound it, e.g. a smaller scale inside exp or an epsilon of 0.01 "
                    "or more in a denominator")
    return None
