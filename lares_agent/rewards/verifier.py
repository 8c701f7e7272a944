"""The verifier: how a candidate reward orders the real episodes of the last reward update, before it is trained.

The pre-screen (`rewards/prescreen.py`) judges single transitions of the buffer sample. The verifier judges whole
episodes: the deterministic episodes every ranked learner played at the update (`UpdateContext.episodes`), where
the task's own verdict on each episode is known. Three numbers (docs/DESIGN.md, "The verifier"):

- `order_tau`: Kendall tau-b between the candidate's episode returns and the task's order of the episodes:
  success at any step first (the elite rule of `engine/rollouts/evaluation.py`), then the task's own return where
  the episodes carry `human_reward` (the init setting; from scratch it is dropped), else the share of the progress
  distance closed (`progress_closed`). A reward whose return ranks episodes as the task does scores 1, a reversed
  one -1 (CARD's trajectory-preference check).
- `progress_gain`: Kendall tau-b between episode return and progress closed: does the reward pay more along the
  episodes that got closer to the goal.
- `flooding`: the share of steps whose reward is within a small tolerance of its episode's maximum. A reward that
  sits at its maximum on most steps ("reward flooding") pays the policy whatever it does.

Tau-b, not Pearson: returns of different rewards live on unrelated scales and one long episode could otherwise
dominate. NaN where a number is undefined: fewer than two usable episodes, or one side all tied. By default the
verifier only measures; `--screen verifier` lets it pick among a round's valid candidates, which it earns as the
default only once its predictive value is shown (`experiments/sample_efficiency/verifier_signal.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lares_agent.engine.contracts import HUMAN_REWARD_FEATURE
from lares_agent.engine.rollouts.progress import SUCCESS_FEATURE, progress_closed

__all__ = ["FLOOD_RTOL", "VerifierScore", "kendall_tau_b", "verify"]

FLOOD_RTOL = 1e-3
"""A step floods when its reward is within this share of the reward's range (over all episodes) of its episode's
maximum: exact ties would miss a reward that saturates through a smooth function like tanh."""


@dataclass(frozen=True)
class VerifierScore:
    """The verifier's numbers for one reward on one set of episodes (NaN: undefined there)."""

    order_tau: float
    progress_gain: float
    flooding: float
    episodes: int  # the episodes with a finite return the numbers are over

    def describe(self) -> str:
        return (f"verifier tau {self.order_tau:.2f}, progress {self.progress_gain:.2f}, "
                f"flooding {self.flooding:.2f} over {self.episodes} episode(s)")


def _sign_matrix(values: np.ndarray) -> np.ndarray:
    """sign(v_i - v_j) for every pair (0: tied)."""
    return np.asarray(np.sign(values[:, None] - values[None, :]), np.float64)


def _tau_from_signs(sx: np.ndarray, sy: np.ndarray) -> float:
    """Kendall tau-b from two pair-sign matrices; NaN when either side has no untied pair."""
    den = float(np.sqrt(np.sum(sx * sx) * np.sum(sy * sy)))
    if den <= 0.0:
        return float("nan")
    return float(np.clip(np.sum(sx * sy) / den, -1.0, 1.0))


def kendall_tau_b(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Kendall tau-b of two equally long series over the pairs finite in both (NaN: fewer than two, or all tied)."""
    a, b = np.asarray(x, np.float64), np.asarray(y, np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if int(ok.sum()) < 2:
        return float("nan")
    return _tau_from_signs(_sign_matrix(a[ok]), _sign_matrix(b[ok]))


def _task_order(episodes: Sequence[Mapping[str, np.ndarray]], progress: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Per episode: success at any step, and the task's own return where every episode has one, else the progress
    closed (NaN where neither is there)."""
    success = np.array([float(np.any(np.asarray(ep[SUCCESS_FEATURE]) > 0.5)) if SUCCESS_FEATURE in ep else 0.0
                        for ep in episodes])
    if episodes and all(HUMAN_REWARD_FEATURE in ep for ep in episodes):
        second = np.array([float(np.sum(np.asarray(ep[HUMAN_REWARD_FEATURE], np.float64))) for ep in episodes])
    else:
        second = _progress(episodes, progress)
    return success, second


def _progress(episodes: Sequence[Mapping[str, np.ndarray]], progress: str | None) -> np.ndarray:
    return np.array([progress_closed(ep[progress]) if progress is not None and progress in ep else float("nan")
                     for ep in episodes])


def verify(
    reward: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    episodes: Sequence[Mapping[str, np.ndarray]],
    progress: str | None,
) -> VerifierScore:
    """Score `reward` (any vectorised callable on feature columns) on whole `episodes` (feature name -> per-step
    array, as `MemberEvaluation.rollouts` holds them); `progress` is the task's lower-is-better progress feature.

    Episodes on which the reward fails or is non-finite are left out. Never raises on a reward that fails."""
    per_step: list[np.ndarray] = []
    kept: list[Mapping[str, np.ndarray]] = []
    for ep in episodes:
        try:
            with np.errstate(all="ignore"):
                r = np.asarray(reward(ep), np.float64).reshape(-1)
        except (ValueError, TypeError, KeyError, ArithmeticError):
            continue
        if r.size and np.isfinite(r).all():
            per_step.append(r)
            kept.append(ep)
    n = len(kept)
    nan = float("nan")
    if n == 0:
        return VerifierScore(nan, nan, nan, 0)
    returns = np.array([float(r.sum()) for r in per_step])
    success, second = _task_order(kept, progress)
    sx = _sign_matrix(returns)
    # lexicographic: success decides, the return or progress only between episodes equal in success
    second_signs = np.nan_to_num(_sign_matrix(second), nan=0.0)
    first_signs = _sign_matrix(success)
    order_tau = _tau_from_signs(sx, np.where(first_signs != 0, first_signs, second_signs)) if n >= 2 else nan
    progress_gain = kendall_tau_b(returns, _progress(kept, progress))
    everything = np.concatenate(per_step)
    tol = FLOOD_RTOL * float(everything.max() - everything.min())
    flooded = sum(int(np.sum(r >= r.max() - tol)) for r in per_step)
    return VerifierScore(order_tau, progress_gain, flooded / everything.size, n)
