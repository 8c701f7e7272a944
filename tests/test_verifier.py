"""The verifier on hand-made episodes (rewards/verifier.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytest

from lares_agent.rewards.verifier import kendall_tau_b, verify


def _episode(start: float, end: float, success: bool = False, steps: int = 10,
             human: float | None = None) -> dict[str, np.ndarray]:
    dist = np.linspace(start, end, steps)
    ep = {"dist": dist, "success": np.zeros(steps), "effort": np.full(steps, 0.5)}
    if success:
        ep["success"][-1] = 1.0
    if human is not None:
        ep["human_reward"] = np.full(steps, human / steps)
    return ep


def _neg_dist(f: Mapping[str, np.ndarray]) -> np.ndarray:
    return -np.asarray(f["dist"])


def _closer(f: Mapping[str, np.ndarray]) -> np.ndarray:
    """Pays each step by how much distance the episode has closed so far: higher return where more was closed."""
    d = np.asarray(f["dist"])
    return d[0] - d


def _far(f: Mapping[str, np.ndarray]) -> np.ndarray:
    return -_closer(f)


EPISODES = [_episode(1.0, 0.9), _episode(1.0, 0.5), _episode(1.0, 0.2), _episode(1.0, 0.0, success=True)]


def test_a_reward_that_orders_episodes_as_the_task_scores_one() -> None:
    score = verify(_closer, EPISODES, "dist")
    assert score.episodes == 4
    assert score.order_tau == pytest.approx(1.0)
    assert score.progress_gain == pytest.approx(1.0)


def test_a_reversed_reward_scores_minus_one() -> None:
    score = verify(_far, EPISODES, "dist")
    assert score.order_tau == pytest.approx(-1.0)
    assert score.progress_gain == pytest.approx(-1.0)


def test_success_comes_before_the_progress() -> None:
    # the successful episode closed less distance than another, yet the task ranks it first
    episodes = [_episode(1.0, 0.4, success=True), _episode(1.0, 0.1), _episode(1.0, 0.8)]
    pays_success = verify(lambda f: np.asarray(f["success"]) * 100.0 + _closer(f), episodes, "dist")
    assert pays_success.order_tau == pytest.approx(1.0)
    assert pays_success.progress_gain < 1.0
    assert verify(_closer, episodes, "dist").order_tau == pytest.approx(1.0 / 3.0)


def test_the_task_return_orders_where_the_episodes_carry_it() -> None:
    # the human return disagrees with the progress: the tau follows the human return
    episodes = [_episode(1.0, 0.9, human=3.0), _episode(1.0, 0.5, human=2.0), _episode(1.0, 0.2, human=1.0)]
    assert verify(_closer, episodes, "dist").order_tau == pytest.approx(-1.0)
    assert verify(_closer, [{k: v for k, v in ep.items() if k != "human_reward"} for ep in episodes],
                  "dist").order_tau == pytest.approx(1.0)


def test_flooding_is_the_share_of_steps_at_the_episode_maximum() -> None:
    def saturates(f: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.minimum(_closer(f) * 100.0, 1.0)

    flooded = verify(saturates, [_episode(1.0, 0.0)], "dist")
    assert flooded.flooding > 0.8
    assert math.isnan(flooded.order_tau)  # one episode: no order
    dense = verify(_closer, [_episode(1.0, 0.0)], "dist")
    assert dense.flooding == pytest.approx(0.1)  # the last step alone is at its maximum
    assert verify(lambda f: np.ones(len(f["dist"])), EPISODES, "dist").flooding == 1.0


def test_undefined_is_nan() -> None:
    constant = verify(lambda f: np.zeros(len(f["dist"])), EPISODES, "dist")
    assert math.isnan(constant.order_tau) and math.isnan(constant.progress_gain)
    assert constant.episodes == 4
    empty = verify(_closer, [], "dist")
    assert empty.episodes == 0 and math.isnan(empty.flooding)
    tied_task = verify(_closer, [_episode(1.0, 0.5), _episode(2.0, 1.0)], "dist")
    assert math.isnan(tied_task.order_tau)  # both closed half their distance, neither succeeded


def test_failing_or_nonfinite_episodes_are_left_out() -> None:
    def breaks(f: Mapping[str, np.ndarray]) -> np.ndarray:
        if f["dist"][-1] < 0.1:
            raise KeyError("nope")
        return _closer(f)

    assert verify(breaks, EPISODES, "dist").episodes == 3
    inf = verify(lambda f: _closer(f) / (f["dist"] - 0.5), EPISODES, "dist")
    assert inf.episodes < 4
    assert verify(lambda f: f["missing"], EPISODES, "dist").episodes == 0


def test_kendall_tau_b_with_ties() -> None:
    assert kendall_tau_b([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # scipy.stats.kendalltau([1, 1, 2, 3], [1, 2, 2, 3]) (tau-b)
    assert kendall_tau_b([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(0.8)
    assert math.isnan(kendall_tau_b([1, float("nan")], [1, 2]))
