"""The offline pre-screen's proxy on a buffer where the right answer is known."""

from __future__ import annotations

import numpy as np
from helpers import point_task

from lares_agent.rewards import CompiledReward, validate
from lares_agent.rewards.prescreen import NEXT_PREFIX, proxy_score


def episodes(seed: int = 0, n: int = 60, t: int = 30, success_below: float | None = None) -> dict[str, np.ndarray]:
    """Random-walk distances (episodes of `t` steps) with each step's next distance, as the engine samples them."""
    rng = np.random.default_rng(seed)
    d = np.empty((n, t))
    d[:, 0] = rng.uniform(0.15, 0.6, n)
    for k in range(1, t):
        d[:, k] = np.clip(d[:, k - 1] + rng.normal(0, 0.02, n), 0.0, 1.0)
    a = rng.uniform(0, 1, (n, t))
    out = {"dist": d.ravel(), "action_norm": a.ravel()}
    for name, v in (("dist", d), ("action_norm", a)):
        nxt = np.full_like(v, np.nan)
        nxt[:, :-1] = v[:, 1:]
        out[NEXT_PREFIX + name] = nxt.ravel()
    if success_below is not None:
        out["success"] = (out["dist"] < success_below).astype(np.float64)
    return out


def compiled(expr: str, sample: dict[str, np.ndarray], **checks: bool) -> CompiledReward:
    from dataclasses import replace

    from lares_agent.rewards import CheckConfig

    verdict = validate({"components": {"r": expr}}, point_task(), sample, id=expr,
                       config=replace(CheckConfig(), **checks))
    assert verdict.reward is not None, verdict.reason
    return verdict.reward


def test_a_dense_distance_reward_ranks_above_a_flat_one_and_a_wrong_signed_one() -> None:
    sample = episodes()
    dense = proxy_score(compiled("-dist", sample), sample, "dist")
    smooth = proxy_score(compiled("exp(-dist/0.1)", sample), sample, "dist")
    flat = proxy_score(compiled("exp(-100*dist)", sample), sample, "dist")  # a candidate the 1.5B model wrote
    wrong = proxy_score(compiled("dist", sample, require_progress_sign=False), sample, "dist")
    assert dense.score > 0.95 and dense.shaping is not None and dense.pairs == 60 * 29
    assert dense.score > smooth.score > flat.score > wrong.score
    assert flat.score < 0.3 and wrong.score < -0.9
    # an effort term does not drown the distance signal (other features are held along the step)
    assert proxy_score(compiled("-dist - 0.1*action_norm", sample), sample, "dist").score > 0.95


def test_success_agreement_counts_where_success_was_seen_and_level_is_the_fallback() -> None:
    sample = episodes(success_below=0.2)
    bonus = proxy_score(compiled("-dist + 5*(dist < 0.2)", sample), sample, "dist")
    assert bonus.success is not None and bonus.success > 0.99
    assert abs(bonus.score - (0.7 * bonus.shaping + 0.3 * bonus.success)) < 1e-12  # type: ignore[operator]
    no_next = {k: v for k, v in sample.items() if not k.startswith(NEXT_PREFIX)}  # the ES engine's sample
    fallback = proxy_score(compiled("-dist", no_next), no_next, "dist")
    assert fallback.shaping is None and fallback.level is not None and fallback.level > 0.99 and fallback.pairs == 0


def test_a_reward_that_fails_on_the_sample_scores_lowest() -> None:
    def broken(features: object) -> np.ndarray:
        raise KeyError("needs a feature the sample lacks")

    assert proxy_score(broken, episodes(), "dist").score == -1.0
    assert proxy_score(lambda f: np.zeros(len(f["dist"])), episodes(), "dist").score == 0.0  # flat: no signal
