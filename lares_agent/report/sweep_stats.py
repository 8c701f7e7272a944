"""The numbers of the sweep comparison table, as pure functions of success curves (no files, no plotting).

A curve is the evaluations of one run: env steps (increasing) and the success rate at each. Randomness (the
bootstrap) comes in as a `np.random.Generator`, so a table is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["bootstrap_difference", "bootstrap_interval", "mean_std", "steps_to_threshold", "success_auc"]


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation (NaN, NaN for no values; std 0 for one)."""
    xs = _finite(values)
    if xs.size == 0:
        return math.nan, math.nan
    return float(xs.mean()), float(xs.std())


def _finite(values: Sequence[float]) -> np.ndarray:
    return np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)


def _resampled_means(xs: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """`resamples` means of n values drawn with replacement (one value: itself, drawing nothing)."""
    if xs.size == 1:
        return np.full(resamples, xs[0])
    return np.asarray(xs[rng.integers(0, xs.size, size=(resamples, xs.size))].mean(axis=1), dtype=np.float64)


def _quantiles(draws: np.ndarray, level: float) -> tuple[float, float]:
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _check(level: float, resamples: int) -> None:
    if not 0 < level < 1 or resamples < 1:
        raise ValueError("level must be in (0, 1) and resamples at least 1")


def bootstrap_interval(values: Sequence[float], rng: np.random.Generator, level: float = 0.95,
                       resamples: int = 2000) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean: `resamples` draws of n values with replacement, the
    (1 - level) / 2 and (1 + level) / 2 quantiles of their means. One value gives (v, v); none (NaN, NaN)."""
    _check(level, resamples)
    xs = _finite(values)
    if xs.size == 0:
        return math.nan, math.nan
    if xs.size == 1:
        return float(xs[0]), float(xs[0])
    return _quantiles(_resampled_means(xs, rng, resamples), level)


def bootstrap_difference(a: Sequence[float], b: Sequence[float], rng: np.random.Generator, level: float = 0.95,
                         resamples: int = 2000) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) - mean(b), each side's values resampled on their own (two
    methods' seeds are independent runs, not pairs). One value a side gives (a - b, a - b); an empty side
    (NaN, NaN)."""
    _check(level, resamples)
    xa, xb = _finite(a), _finite(b)
    if xa.size == 0 or xb.size == 0:
        return math.nan, math.nan
    return _quantiles(_resampled_means(xa, rng, resamples) - _resampled_means(xb, rng, resamples), level)


def steps_to_threshold(steps: Sequence[int], success: Sequence[float], level: float) -> int | None:
    """Env steps of the first evaluation whose success is at least `level` (None: never reached)."""
    for s, v in zip(steps, success, strict=True):
        if v is not None and math.isfinite(v) and v >= level - 1e-9:
            return int(s)
    return None


def success_auc(steps: Sequence[int], success: Sequence[float]) -> float:
    """Area under the success curve (trapezoids over env steps) divided by the steps it spans: the curve's
    mean height, in [0, 1] for a success rate (1 for a run that succeeds at every evaluation). One evaluation
    gives its value; none gives NaN."""
    xs = np.asarray(steps, dtype=np.float64)
    ys = np.asarray(success, dtype=np.float64)
    if xs.shape != ys.shape:
        raise ValueError("steps and success must have the same length")
    keep = np.isfinite(ys)
    xs, ys = xs[keep], ys[keep]
    if xs.size == 0:
        return math.nan
    if xs.size == 1 or xs[-1] == xs[0]:
        return float(ys.mean())
    area = float(np.sum((xs[1:] - xs[:-1]) * (ys[1:] + ys[:-1]) / 2.0))
    return area / float(xs[-1] - xs[0])
