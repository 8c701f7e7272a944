"""Thompson sampling: a true sliding window (docs/lares-reference.md §12 item 3), selection, reset, checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

from lares_agent.engine.populations.thompson import ThompsonSampler


def test_window_order_matters_reference_counterexample() -> None:
    # The reference caps counts: 100 successes then 100 failures and the reverse both end at Beta(21, 21)
    # for W = 20. A real window remembers only the last 20 outcomes.
    ts = ThompsonSampler(num_arms=2, window=20)
    ts.record_many([0] * 100, [True] * 100)
    ts.record_many([0] * 100, [False] * 100)
    ts.record_many([1] * 100, [False] * 100)
    ts.record_many([1] * 100, [True] * 100)
    a, b = ts.posterior()
    assert (a[0], b[0]) == (1.0, 21.0)
    assert (a[1], b[1]) == (21.0, 1.0)
    assert (a[0], b[0]) != (a[1], b[1])


def test_window_keeps_exactly_last_w_outcomes() -> None:
    rng = np.random.default_rng(3)
    outcomes = rng.random(137) < 0.4
    ts = ThompsonSampler(num_arms=1, window=25)
    ts.record_many([0] * outcomes.size, outcomes.tolist())
    succ, fail = ts.counts()
    assert succ[0] == int(outcomes[-25:].sum())
    assert fail[0] == 25 - int(outcomes[-25:].sum())


def test_select_returns_distinct_arms_and_prefers_successful() -> None:
    ts = ThompsonSampler(num_arms=5, window=50)
    for arm in range(5):
        ts.record_many([arm] * 50, [arm == 3] * 50)
    rng = np.random.default_rng(0)
    picks = [ts.select(5, rng) for _ in range(200)]
    for p in picks:
        assert len(p) == len(set(p)) and 1 <= len(p) <= 5
    assert sum(p[0] == 3 for p in picks) > 190


def test_select_is_reproducible_from_generator_state() -> None:
    ts = ThompsonSampler(num_arms=4, window=10)
    ts.record_many([0, 1, 2, 3, 1], [True, False, True, False, True])
    r1, r2 = np.random.default_rng(11), np.random.default_rng(11)
    assert [ts.select(4, r1) for _ in range(20)] == [ts.select(4, r2) for _ in range(20)]


def test_block_excludes_arm_and_reset_clears() -> None:
    ts = ThompsonSampler(num_arms=3, window=5)
    ts.record_many([1] * 5, [True] * 5)
    ts.block(1)
    rng = np.random.default_rng(1)
    assert all(1 not in ts.select(3, rng) for _ in range(50))
    ts.block(0)
    ts.block(2)
    assert ts.select(3, rng) == []
    ts.reset()
    assert ts.blocked == frozenset()
    a, b = ts.posterior()
    assert np.all(a == 1.0) and np.all(b == 1.0)


def test_state_dict_roundtrip() -> None:
    ts = ThompsonSampler(num_arms=3, window=4)
    ts.record_many([0, 0, 0, 0, 0, 2], [True, False, True, True, False, True])
    ts.block(1)
    other = ThompsonSampler(num_arms=3, window=4)
    other.load_state_dict(ts.state_dict())
    assert np.array_equal(other.posterior()[0], ts.posterior()[0])
    assert other.blocked == {1}
    other.record(0, False)
    ts.record(0, False)
    assert np.array_equal(other.counts()[1], ts.counts()[1])
    with pytest.raises(ValueError):
        ThompsonSampler(num_arms=2, window=4).load_state_dict(ts.state_dict())


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        ThompsonSampler(num_arms=0, window=3)
    with pytest.raises(ValueError):
        ThompsonSampler(num_arms=2, window=0)
    with pytest.raises(IndexError):
        ThompsonSampler(num_arms=2, window=3).record(2, True)
