"""The pre-screen's proxy against the fitness candidates later earned: is the offline ranking worth anything?

The round keeps the valid candidates with the best proxy score (rewards/prescreen.py); whether that score predicts
what training then shows must be measured per run, not assumed. Only candidates that got a slot are
evaluated, so the correlation is over the accepted ones: it says whether the proxy orders them like training does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lares_agent.runs.reader import RunData

__all__ = ["ProxyRow", "proxy_rows", "spearman"]


@dataclass(frozen=True)
class ProxyRow:
    id: str
    round: int | None
    proxy: float
    fitness: float | None  # the last fitness its slot was evaluated at (None: never evaluated)


def proxy_rows(run: RunData, score: str = "proxy") -> list[ProxyRow]:
    """Every candidate with a proxy score (its lines merged: the proposal and its later evaluations), by round
    then id. ``score``: the `Candidate` field read as the proxy (``verifier_tau``: the verifier's order tau,
    rewards/verifier.py, measured the same way)."""
    rows = []
    for c in run.by_id.values():
        value = getattr(c, score)
        if value is not None and math.isfinite(value):
            rows.append(ProxyRow(c.id, c.round, float(value),
                                 c.fitness if c.fitness is None or math.isfinite(c.fitness) else None))
    return sorted(rows, key=lambda r: (r.round if r.round is not None else -1, r.id))


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged (Spearman's convention)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), np.float64)
    ranks[order] = np.arange(len(x), dtype=np.float64)
    for value in np.unique(x):
        tie = x == value
        ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(rows: list[ProxyRow]) -> tuple[float | None, int]:
    """Spearman correlation of proxy and later fitness over the rows that have both, and their count (None
    below 3 rows or where either side is constant)."""
    pairs = [(r.proxy, r.fitness) for r in rows if r.fitness is not None]
    if len(pairs) < 3:
        return None, len(pairs)
    a, b = (_ranks(np.asarray(v, np.float64)) for v in zip(*pairs, strict=True))
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float(a @ a) * float(b @ b))
    return (float(a @ b) / den if den > 0 else None), len(pairs)
