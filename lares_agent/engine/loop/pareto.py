"""Non-dominated sorting and crowding distance (NSGA-II, Deb et al. 2002), pure numpy.

Pareto selection (``SelectionConfig(method="pareto")``) keeps the reward candidates that no other candidate beats
on every objective at once: the seed's "fast and smooth" case, where a policy that succeeds a little less often
but moves much more smoothly, or a much simpler reward, is worth keeping. Every objective here is MAXIMISED
(negate what should be small). Survivors are taken front by front; the front that does not fit whole is cut by
crowding distance (the candidates in the emptiest part of the front first), then by the caller's priority (its
fitness ranking), so the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["crowding_distance", "dominates", "non_dominated_fronts", "pareto_select"]


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """a is at least as good as b on every objective and better on one (maximised)."""
    return bool(np.all(a >= b) and np.any(a > b))


def _check(objectives: np.ndarray) -> np.ndarray:
    obj = np.asarray(objectives, dtype=np.float64)
    if obj.ndim != 2 or obj.shape[0] == 0 or obj.shape[1] == 0:
        raise ValueError(f"objectives must be a non-empty [N, M] array, got shape {obj.shape}")
    if not np.isfinite(obj).all():
        raise ValueError("objectives must be finite (map a missing value to the worst one first)")
    return obj


def non_dominated_fronts(objectives: np.ndarray) -> list[np.ndarray]:
    """Indices of each front, best first (front 0 is the non-dominated set); indices ascending in a front.

    O(M N^2): N is a reward population (a handful to a few dozen), never the ES policy population."""
    obj = _check(objectives)
    n = obj.shape[0]
    ge = np.all(obj[:, None, :] >= obj[None, :, :], axis=-1)
    gt = np.any(obj[:, None, :] > obj[None, :, :], axis=-1)
    dom = ge & gt  # dom[i, j]: i dominates j
    count = dom.sum(axis=0)  # how many dominate j
    fronts: list[np.ndarray] = []
    left = np.ones(n, bool)
    while left.any():
        front = np.flatnonzero(left & (count == 0))
        fronts.append(front)
        left[front] = False
        count = count - dom[front].sum(axis=0)
        count[~left] = -1
    return fronts


def crowding_distance(objectives: np.ndarray) -> np.ndarray:
    """NSGA-II crowding distance of every row of one front: the sum over objectives of the gap between its two
    neighbours, over that objective's range; the two ends of every objective get +inf. An objective on which the
    whole front is equal adds nothing. Sorting is stable (ties keep index order), so values are reproducible."""
    obj = _check(objectives)
    n, m = obj.shape
    dist = np.zeros(n)
    if n <= 2:
        dist[:] = np.inf
        return dist
    for j in range(m):
        order = np.argsort(obj[:, j], kind="stable")
        col = obj[order, j]
        span = col[-1] - col[0]
        dist[order[0]] = dist[order[-1]] = np.inf
        if span > 0:
            dist[order[1:-1]] += (col[2:] - col[:-2]) / span
    return dist


def pareto_select(objectives: np.ndarray, n: int, priority: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """Exactly ``n`` row indices: whole fronts in order, then the cut front by crowding distance (largest first),
    then ``priority`` (lower first; default the row index). Returned in the order chosen."""
    obj = _check(objectives)
    size = obj.shape[0]
    if not 0 <= n <= size:
        raise ValueError(f"cannot select {n} of {size} candidates")
    prio = np.arange(size) if priority is None else np.asarray(priority)
    if prio.shape != (size,):
        raise ValueError(f"priority must have {size} entries, got shape {prio.shape}")
    chosen: list[int] = []
    for front in non_dominated_fronts(obj):
        if len(chosen) >= n:
            break
        crowd = crowding_distance(obj[front])
        # lexsort: last key first -> crowding descending, then priority ascending
        ranked = front[np.lexsort((prio[front], -crowd))]
        chosen.extend(int(i) for i in ranked[: n - len(chosen)])
    return np.asarray(chosen, dtype=np.int64)
