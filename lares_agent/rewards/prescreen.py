"""Offline pre-screen of reward candidates on the buffer sample, before any training.

A round proposes more valid candidates than it has free slots; training one costs a whole reward period, ranking
one costs a vectorised pass over the sample. The proxy asks whether the reward *changes the right way along the
transitions the buffer holds*:

- shaping: the Pearson correlation, over consecutive steps of an episode, between the reward's response to the
  step's distance change, r(d', x) - r(d, x), and the task's improvement d - d', where d is the distance left
  (progress feature, plus the approach feature where the task names one: both are lower-is-better) and x the other
  features, held at their current value: on random-action data an effort term -0.1*action_norm changes far more
  from step to step than any distance and would otherwise drown the signal; a reward that is all effort is not
  caught here. A dense distance reward scores ~1, a wrong-signed
  one ~-1, a flat one ~0. Pearson, not a rank correlation, on purpose: `exp(-100*d)` changes with the right sign
  everywhere, but by ~0 except on the few steps next to the goal, which is what makes it useless to a learner that
  starts far away (the 1.5B model once wrote exactly that); ranks would score it as well as `-d`.
  A correlation of the reward itself (not its change) with the improvement would mislead: on random-action data
  distance reverts to its mean, so far states improve most and `-d` would correlate negatively.
- success: where the sample holds both successful and unsuccessful steps, 2*AUC - 1 of the reward separating them.

The score is shaping (0.7) and success (0.3) where both are measured, else the one measured. Samples without next
steps (`next:<name>`, written by the engine's `feature_sample`; the ES engine keeps no buffer) fall back to the
correlation of the reward with the negated distance (`level`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["NEXT_PREFIX", "ProxyScore", "proxy_score"]

NEXT_PREFIX = "next:"  # the engine writes it (engine/contracts.py NEXT_PREFIX); tests check that they agree
SUCCESS_FEATURE = "success"
SHAPING_WEIGHT = 0.7
MIN_PAIRS = 8


@dataclass(frozen=True)
class ProxyScore:
    """The proxy score of one reward on one sample, and its parts (None: not measurable on this sample)."""

    score: float
    shaping: float | None = None
    success: float | None = None
    level: float | None = None
    pairs: int = 0  # consecutive steps the shaping part used

    def describe(self) -> str:
        parts = [f"{name} {value:.2f}" for name, value in
                 (("shaping", self.shaping), ("success", self.success), ("level", self.level)) if value is not None]
        return f"proxy {self.score:.2f} ({', '.join(parts) or 'nothing measurable'})"


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation; 0 where either side is constant (a flat reward carries no signal)."""
    ok = np.isfinite(x) & np.isfinite(y)
    if int(ok.sum()) < 2:
        return 0.0
    x, y = x[ok] - x[ok].mean(), y[ok] - y[ok].mean()
    den = float(np.sqrt(np.dot(x, x) * np.dot(y, y)))
    if not np.isfinite(den) or den <= 1e-300:
        return 0.0
    return float(np.clip(np.dot(x, y) / den, -1.0, 1.0))


def _auc_sign(reward: np.ndarray, success: np.ndarray) -> float | None:
    """2*AUC - 1 of `reward` ranking successful steps above the others (ties count half); None if one class is
    missing."""
    ok = np.isfinite(reward) & np.isfinite(success)
    pos, neg = reward[ok & (success > 0.5)], np.sort(reward[ok & (success <= 0.5)])
    if pos.size == 0 or neg.size == 0:
        return None
    below = np.searchsorted(neg, pos, side="left")
    upto = np.searchsorted(neg, pos, side="right")
    auc = float(np.mean((below + upto) / 2.0) / neg.size)
    return 2.0 * auc - 1.0


def proxy_score(
    reward: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    sample: Mapping[str, np.ndarray],
    progress: str,
    approach: str | None = None,
) -> ProxyScore:
    """Score a reward (a compiled reward, or any vectorised callable on feature columns) on `sample`.

    The shaping part needs the distance features' `next:` columns. Never raises on a reward that fails on the
    sample: it scores -1.
    """
    distance = [f for f in (progress, approach) if f and f in sample]
    if not distance:
        return ProxyScore(0.0)
    try:
        with np.errstate(all="ignore"):
            r = np.asarray(reward(sample), np.float64)
            left = np.sum([np.asarray(sample[f], np.float64) for f in distance], axis=0)
            shaping = level = None
            pairs = 0
            if all(NEXT_PREFIX + f in sample for f in distance):
                nxt = {f: np.asarray(sample[NEXT_PREFIX + f], np.float64) for f in distance}
                has = np.logical_and.reduce([np.isfinite(v) for v in nxt.values()])
                pairs = int(has.sum())
                if pairs >= MIN_PAIRS:
                    moved = {k: np.asarray(v)[has] for k, v in sample.items() if not k.startswith(NEXT_PREFIX)}
                    moved.update({f: v[has] for f, v in nxt.items()})
                    r_next = np.asarray(reward(moved), np.float64)
                    left_next = np.sum([nxt[f][has] for f in distance], axis=0)
                    shaping = _pearson(r_next - r[has], left[has] - left_next)
            if shaping is None:
                level = _pearson(r, -left)
            success = _auc_sign(r, np.asarray(sample[SUCCESS_FEATURE], np.float64)) \
                if SUCCESS_FEATURE in sample else None
    except (ValueError, TypeError, KeyError, ArithmeticError):
        return ProxyScore(-1.0)
    main = shaping if shaping is not None else level
    assert main is not None
    score = main if success is None else SHAPING_WEIGHT * main + (1.0 - SHAPING_WEIGHT) * success
    return ProxyScore(float(score), shaping, success, level, pairs)
