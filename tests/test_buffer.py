"""Replay buffer: storage, FIFO, per-column sampling, relabelling and scale consistency (docs/lares-reference.md
§12 items 4, 5, 12, 13)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest

from lares_agent.engine.contracts import HumanReward, RewardFunction
from lares_agent.engine.replay.buffer import (
    Affine,
    ConstantRewardError,
    NonFiniteRewardError,
    ReplayBuffer,
    RewardColumnError,
)

OBS, ACT = 3, 2
NAMES = ("dist", "speed", "human_reward")


class FnReward:
    """A minimal RewardFunction around a vectorised callable."""

    expression = None  # nothing written to show the LLM (RewardFunction.expression)

    def __init__(self, id: str, fn: Callable[[Mapping[str, np.ndarray]], np.ndarray]) -> None:
        self.id, self.key, self.complexity, self._fn = id, id, 1.0, fn

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        return self._fn(features)

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"total": self(features)}

    def to_json(self) -> dict[str, object]:
        return {"id": self.id}


NEG_DIST = FnReward("neg_dist", lambda f: -np.asarray(f["dist"], np.float64))
# A reward with a large offset: float32 storage must not lose its variation (centred storage).
OFFSET_SPEED = FnReward("offset_speed", lambda f: 1000.0 + 0.01 * np.asarray(f["speed"], np.float64))


def rows(rng: np.random.Generator, n: int, *, truncated: bool = False) -> dict[str, object]:
    return {
        "obs": rng.normal(size=(n, OBS)),
        "action": rng.uniform(-1, 1, (n, ACT)),
        "next_obs": rng.normal(size=(n, OBS)),
        "terminated": np.zeros(n, bool),
        "truncated": np.full(n, truncated),
        "features": {"dist": rng.uniform(0, 2, n), "speed": rng.normal(size=n),
                     "human_reward": rng.normal(size=n), "success": np.zeros(n)},
    }


def filled(capacity: int = 100, n: int = 60, seed: int = 0) -> ReplayBuffer:
    buf = ReplayBuffer(capacity, OBS, ACT, NAMES, num_columns=3)
    buf.add(**rows(np.random.default_rng(seed), n))  # type: ignore[arg-type]
    return buf


def test_reward_functions_satisfy_the_protocol() -> None:
    assert isinstance(NEG_DIST, RewardFunction)
    human = HumanReward()
    assert isinstance(human, RewardFunction)
    feats = {"human_reward": np.array([1.0, -2.0], np.float32)}
    np.testing.assert_array_equal(human(feats), [1.0, -2.0])
    assert human(feats).dtype == np.float64
    assert human.components(feats)["human_reward"].tolist() == [1.0, -2.0]
    assert human.to_json()["id"] == "human"
    with pytest.raises(KeyError, match="human_reward"):
        human({"dist": np.zeros(2)})


def test_add_and_sample_shapes_and_truncation_is_not_termination() -> None:
    buf = ReplayBuffer(50, OBS, ACT, NAMES, num_columns=2)
    data = rows(np.random.default_rng(1), 20, truncated=True)
    buf.add(**data)  # type: ignore[arg-type]
    buf.set_column(0, NEG_DIST, reference=None)
    buf.set_column(1, HumanReward(), reference=None)
    batch = buf.sample(8, [0, 1], np.random.default_rng(2))
    assert batch.obs.shape == (2, 8, OBS) and batch.next_obs.shape == (2, 8, OBS)
    assert batch.action.shape == (2, 8, ACT) and batch.reward.shape == (2, 8)
    assert batch.terminated.shape == (2, 8) and batch.obs.dtype == np.float32
    assert buf.truncated[:20].all() and not batch.terminated.any()  # time-limit cuts never terminate
    assert batch.column(1).obs.shape == (8, OBS)


def test_sampling_draws_independent_indices_per_column_and_reads_each_column() -> None:
    buf = filled(capacity=1000, n=1000)
    buf.set_column(0, NEG_DIST, reference=None)
    buf.set_column(1, HumanReward(), reference=None)
    batch = buf.sample(64, [0, 1, 0], np.random.default_rng(3))
    assert not np.array_equal(batch.indices[0], batch.indices[1])
    assert not np.array_equal(batch.indices[0], batch.indices[2])
    for c, col in enumerate([0, 1, 0]):
        np.testing.assert_allclose(batch.reward[c], buf.rewards(col)[batch.indices[c]], rtol=1e-6)
        np.testing.assert_array_equal(batch.obs[c], buf.obs[batch.indices[c]])


def test_ring_buffer_keeps_the_newest_rows() -> None:
    buf = ReplayBuffer(10, OBS, ACT, NAMES, num_columns=1)
    rng = np.random.default_rng(4)
    chunks = [rows(rng, n) for n in (4, 7, 6)]
    for chunk in chunks:
        buf.add(**chunk)  # type: ignore[arg-type]
    assert len(buf) == 10 and buf.ptr == 7
    all_obs = np.concatenate([c["obs"] for c in chunks]).astype(np.float32)  # type: ignore[misc]
    stored = np.concatenate([buf.obs[buf.ptr:], buf.obs[: buf.ptr]])  # oldest first
    np.testing.assert_array_equal(stored, all_obs[-10:])
    big = rows(rng, 25)
    buf.add(**big)  # type: ignore[arg-type]
    assert len(buf) == 10
    newest = np.asarray(big["obs"], np.float32)[-10:, 0]
    np.testing.assert_array_equal(np.sort(buf.obs[:, 0]), np.sort(newest))


def test_reference_scaling_matches_mean_and_std() -> None:
    buf = filled()
    buf.set_column(0, HumanReward(), reference=None)
    affine = buf.set_column(1, OFFSET_SPEED, reference=0)
    ref, new = buf.rewards(0).astype(np.float64), buf.rewards(1).astype(np.float64)
    assert new.mean() == pytest.approx(ref.mean(), abs=1e-4)
    assert new.std() == pytest.approx(ref.std(), rel=1e-3)
    raw = OFFSET_SPEED(buf.feature_view())
    np.testing.assert_allclose(new, raw * affine.scale + affine.shift, rtol=1e-4, atol=1e-4)
    # float32 storage is centred, so the 0.01-scale variation on a 1000 offset survives
    assert np.corrcoef(new, raw)[0, 1] > 0.9999


def test_scaling_stays_consistent_across_appends() -> None:
    """The map fixed at set_column applies to rows added later (no drift, docs/lares-reference.md §12 item 4)."""
    buf = filled(capacity=500, n=100)
    buf.set_column(0, HumanReward(), reference=None)
    affine = buf.set_column(1, NEG_DIST, reference=0)
    old = buf.rewards(1)[:100].copy()
    rng = np.random.default_rng(5)
    for _ in range(3):
        buf.add(**rows(rng, 50))  # type: ignore[arg-type]
        # re-labelling the reference later must not touch column 1's map either
        buf.set_column(0, OFFSET_SPEED, reference=None)
    assert buf.affine(1) == affine
    np.testing.assert_array_equal(buf.rewards(1)[:100], old)
    expected = NEG_DIST(buf.feature_view()) * affine.scale + affine.shift
    np.testing.assert_allclose(buf.rewards(1), expected, rtol=1e-5, atol=1e-5)


def test_constant_and_non_finite_columns_are_rejected_and_change_nothing() -> None:
    buf = filled()
    buf.set_column(0, NEG_DIST, reference=None)
    before = buf.raw_reward.copy()
    with pytest.raises(ConstantRewardError, match="constant"):
        buf.set_column(1, FnReward("const", lambda f: np.full(len(f["dist"]), 3.0)), reference=0)
    with pytest.raises(ConstantRewardError):
        buf.set_column(1, FnReward("scalar", lambda f: np.float64(2.0)), reference=None)
    with pytest.raises(NonFiniteRewardError, match="NaN or infinite"):
        buf.set_column(0, FnReward("log0", lambda f: np.log(f["dist"] * 0.0)), reference=None)
    with pytest.raises(RewardColumnError, match="no reward function"):
        buf.set_column(1, NEG_DIST, reference=2)
    with pytest.raises(RewardColumnError, match="shape"):
        buf.set_column(1, FnReward("bad", lambda f: np.zeros((3, 3))), reference=None)
    np.testing.assert_array_equal(buf.raw_reward, before)
    assert buf.reward_function(0) is NEG_DIST and buf.affine(1) is None


def test_non_finite_rewards_on_new_rows_are_neutralised_and_counted() -> None:
    buf = filled()
    inv = FnReward("inv", lambda f: 1.0 / np.asarray(f["dist"], np.float64))
    buf.set_column(0, HumanReward(), reference=None)
    buf.set_column(1, inv, reference=0)
    data = rows(np.random.default_rng(6), 4)
    data["features"]["dist"][2] = 0.0  # type: ignore[index]
    buf.add(**data)  # type: ignore[arg-type]
    assert buf.nonfinite_count[1] == 1 and buf.nonfinite_count[0] == 0
    assert np.isfinite(buf.rewards(1)).all()
    ref = buf.rewards(0)[:60].astype(np.float64)
    assert buf.rewards(1)[62] == pytest.approx(ref.mean(), abs=1e-3)  # the column's neutral value


def test_relabel_against_itself_and_sampling_unset_columns() -> None:
    buf = filled()
    buf.set_column(0, NEG_DIST, reference=None)
    before = buf.rewards(0).astype(np.float64)
    buf.set_column(0, OFFSET_SPEED, reference=0)
    after = buf.rewards(0).astype(np.float64)
    assert after.mean() == pytest.approx(before.mean(), abs=1e-4)
    assert after.std() == pytest.approx(before.std(), rel=1e-3)
    with pytest.raises(RewardColumnError, match="no reward function"):
        buf.sample(4, [2], np.random.default_rng(0))


def test_feature_view_is_a_view_and_missing_features_are_an_error() -> None:
    buf = filled(n=10)
    view = buf.feature_view()
    assert set(view) == set(NAMES) and view["dist"].shape == (10,)
    assert np.shares_memory(view["dist"], buf.features)
    assert buf.feature_view(3)["speed"].shape == (3,)
    data = rows(np.random.default_rng(7), 2)
    del data["features"]["speed"]  # type: ignore[attr-defined]
    with pytest.raises(KeyError, match="speed"):
        buf.add(**data)  # type: ignore[arg-type]


def test_state_dict_round_trip() -> None:
    buf = filled(capacity=80, n=90)  # wrapped ring
    buf.set_column(0, HumanReward(), reference=None)
    buf.set_column(2, NEG_DIST, reference=0)
    state = buf.state_dict()
    assert state["obs"].shape == (80, OBS) and state["column_ids"] == ["human", None, "neg_dist"]
    small = filled(capacity=200, n=5).state_dict()
    assert small["obs"].shape == (5, OBS)  # only the filled part is saved

    other = ReplayBuffer(80, OBS, ACT, NAMES, num_columns=3)
    with pytest.raises(ValueError, match="labelled by"):
        other.load_state_dict(state, [NEG_DIST, None, HumanReward()])
    other.load_state_dict(state, [HumanReward(), None, NEG_DIST])
    a = buf.sample(16, [0, 2], np.random.default_rng(8))
    b = other.sample(16, [0, 2], np.random.default_rng(8))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    new = rows(np.random.default_rng(9), 7)
    buf.add(**new)  # type: ignore[arg-type]
    other.add(**new)  # type: ignore[arg-type]
    np.testing.assert_array_equal(buf.rewards(2), other.rewards(2))
    assert other.affine(2) == buf.affine(2) and isinstance(other.affine(2), Affine)


def test_next_rows_follow_the_episode_and_stop_at_its_end_and_at_the_ring_seam() -> None:
    buf = ReplayBuffer(10, OBS, ACT, NAMES, num_columns=1)
    rng = np.random.default_rng(5)
    for n in (4, 4, 4):  # three whole episodes of 4 steps; the ring keeps rows 2-11 (ptr 2)
        ep = rows(rng, n)
        ep["truncated"] = np.arange(n) == n - 1  # type: ignore[index]  # each episode ends on its last step
        buf.add(**ep)  # type: ignore[arg-type]
    nxt, ok = buf.next_rows(np.arange(10))
    assert buf.ptr == 2 and nxt.tolist() == [1, 1, 3, 3, 5, 6, 7, 7, 9, 0]  # no next step: the row itself
    # rows 3 and 7 end episodes, row 1 is the newest (its successor is the oldest row)
    assert ok.tolist() == [True, False, True, False, True, True, True, False, True, True]
    half = ReplayBuffer(10, OBS, ACT, NAMES, num_columns=1)
    half.add(**rows(rng, 3))  # type: ignore[arg-type]  # an episode still running: no row after the newest
    assert half.next_rows(np.arange(3))[1].tolist() == [True, True, False]
    assert half.next_rows(np.arange(3))[0].tolist() == [1, 2, 2]  # always a filled row (feature_view indexes)


def test_feature_sample_copies_rows_drops_names_and_pairs_each_row_with_its_next_step() -> None:
    from lares_agent.engine import NEXT_PREFIX

    buf = ReplayBuffer(10, OBS, ACT, NAMES, num_columns=1)
    rng = np.random.default_rng(6)
    for n in (4, 4):
        ep = rows(rng, n)
        ep["truncated"] = np.arange(n) == n - 1  # type: ignore[index]
        buf.add(**ep)  # type: ignore[arg-type]
    whole = buf.feature_sample(100, np.random.default_rng(0), drop=frozenset({"human_reward"}))
    dist = buf.feature_view()["dist"]
    assert sorted(whole) == sorted(["dist", "speed", NEXT_PREFIX + "dist", NEXT_PREFIX + "speed"])
    np.testing.assert_array_equal(whole["dist"], dist)  # n above the size: every row once, in row order
    np.testing.assert_array_equal(whole[NEXT_PREFIX + "dist"][[0, 1, 2, 4, 5, 6]], dist[[1, 2, 3, 5, 6, 7]])
    assert np.isnan(whole[NEXT_PREFIX + "dist"][[3, 7]]).all()  # each episode's last step
    whole["dist"][0] = -1.0
    assert dist[0] != -1.0  # copies, not views of the buffer
    part = buf.feature_sample(3, np.random.default_rng(0))
    rows_drawn = [int(np.flatnonzero(dist == v)[0]) for v in part["dist"]]
    assert len(rows_drawn) == 3 and "human_reward" in part and rows_drawn == sorted(rows_drawn)  # in row order
    assert len(ReplayBuffer(10, OBS, ACT, NAMES, num_columns=1).feature_sample(5, rng)["dist"]) == 0


def test_random_sample_carries_each_features_next_step_within_its_episode() -> None:
    from lares_agent.engine import NEXT_PREFIX, random_feature_sample
    from lares_agent.rewards.prescreen import NEXT_PREFIX as READ_PREFIX
    from tests.helpers import point_task

    assert READ_PREFIX == NEXT_PREFIX  # the rewards layer reads the key the engine writes
    sample = random_feature_sample(point_task(), 40, seed=0)  # horizon 15: episodes of 15 steps
    dist, nxt = sample["dist"], sample[NEXT_PREFIX + "dist"]
    assert nxt.shape == dist.shape
    np.testing.assert_array_equal(nxt[:14], dist[1:15])
    assert np.isnan(nxt[14]) and np.isnan(nxt[29])  # an episode's last step has no next step
