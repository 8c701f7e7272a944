"""Potential-based shaping (engine/replay/potential.py): the optimal policy of base + gamma*Phi(s') - Phi(s) is
base's (Ng, Harada and Russell 1999) on a chain MDP solved by value iteration, the buffer's relabel gives the formula
on the stored rows (episode boundaries, both add paths and a full ring), and a time-limit cut bootstraps through Phi
of the state it reached where a true terminal takes 0."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest

from lares_agent.engine.replay.buffer import ReplayBuffer
from lares_agent.engine.replay.potential import FIRST_STEP, PREV_PREFIX, TERMINATED, PotentialReward


class FnReward:
    """A minimal RewardFunction around a vectorised callable."""

    expression = None  # nothing written to show the LLM (RewardFunction.expression)

    def __init__(self, id: str, fn: Callable[[Mapping[str, np.ndarray]], np.ndarray]) -> None:
        self.id, self.key, self.complexity, self._fn = id, id, 1.0, fn

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self._fn(features), np.float64)

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"total": self(features)}

    def to_json(self) -> dict[str, object]:
        return {"id": self.id}


# ---------------------------------------------------------------------------------------------- a toy MDP
N_STATES, GOAL, GAMMA = 7, 6, 0.9
MOVES = (-1, 0, 1)  # left, stay, right on a chain; the goal at the right end is terminal


def _step(s: int, a: int) -> int:
    return int(min(max(s + MOVES[a], 0), N_STATES - 1))


def _table(values: np.ndarray) -> FnReward:
    """A reward (or potential) that looks a state's value up in a table by the `state` feature."""
    return FnReward("table", lambda f: values[np.asarray(f["state"], np.int64)])


SUCCESS = FnReward("success", lambda f: (np.asarray(f["state"]) == GOAL).astype(np.float64))


def _transition_reward(reward: Callable[[Mapping[str, np.ndarray]], np.ndarray]) -> np.ndarray:
    """R[s, a] of the deterministic chain, computed by `reward` on rows as the buffer hands them over."""
    s = np.repeat(np.arange(N_STATES), len(MOVES))
    a = np.tile(np.arange(len(MOVES)), N_STATES)
    s2 = np.array([_step(int(x), int(y)) for x, y in zip(s, a, strict=True)])
    rows = {"state": s2.astype(np.float64), PREV_PREFIX + "state": s.astype(np.float64),
            FIRST_STEP: np.zeros(s.size, bool), TERMINATED: s2 == GOAL}
    return np.asarray(reward(rows), np.float64).reshape(N_STATES, len(MOVES))


def _greedy(r: np.ndarray) -> np.ndarray:
    """The optimal action in every non-terminal state, by value iteration to convergence."""
    nxt = np.array([[_step(s, a) for a in range(len(MOVES))] for s in range(N_STATES)])
    v = np.zeros(N_STATES)
    for _ in range(2000):
        q = r + GAMMA * np.where(nxt == GOAL, 0.0, v[nxt])
        v = q.max(axis=1)
    q = r + GAMMA * np.where(nxt == GOAL, 0.0, v[nxt])
    assert np.all(np.sort(q[:GOAL], axis=1)[:, -1] - np.sort(q[:GOAL], axis=1)[:, -2] > 1e-6)  # one optimum
    return np.asarray(q[:GOAL].argmax(axis=1))


@pytest.mark.parametrize("seed", range(5))
def test_shaping_keeps_the_optimal_policy_of_the_base_reward(seed: int) -> None:
    rng = np.random.default_rng(seed)
    phi = _table(rng.normal(0.0, 10.0, N_STATES))  # large next to the base reward on purpose
    sample = {"state": np.arange(N_STATES, dtype=np.float64)}
    shaped = PotentialReward.fitted(SUCCESS, phi, GAMMA, sample)
    base_policy = _greedy(_transition_reward(SUCCESS))
    assert np.all(base_policy == 2)  # go right
    assert np.array_equal(_greedy(_transition_reward(shaped)), base_policy)


def test_the_same_potential_added_as_a_reward_changes_the_optimal_policy() -> None:
    """What the invariance protects from: paid additively, a potential that peaks at state 1 keeps the agent there."""
    peak = np.zeros(N_STATES)
    peak[1] = 5.0
    additive = FnReward("additive", lambda f: SUCCESS(f) + peak[np.asarray(f["state"], np.int64)])
    shaped = PotentialReward.fitted(SUCCESS, _table(peak), GAMMA, {"state": np.arange(N_STATES, dtype=np.float64)})
    assert _greedy(_transition_reward(additive))[1] != 2
    assert np.all(_greedy(_transition_reward(shaped)) == 2)


# ---------------------------------------------------------------------------------------------- the buffer
OBS, ACT = 2, 1
NAMES = ("dist", "success")
DIST_PHI = FnReward("phi", lambda f: np.exp(-np.asarray(f["dist"], np.float64)))
BASE = FnReward("success", lambda f: np.asarray(f["success"], np.float64))


def _episode(rng: np.random.Generator, n: int, end: str) -> dict[str, object]:
    """One stored episode of n steps that ends by a true terminal, a time-limit cut, or not yet ("open")."""
    terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
    if end == "terminal":
        terminated[-1] = True
    elif end == "cut":
        truncated[-1] = True
    return {"obs": rng.normal(size=(n, OBS)), "action": rng.uniform(-1, 1, (n, ACT)),
            "next_obs": rng.normal(size=(n, OBS)), "terminated": terminated, "truncated": truncated,
            "features": {"dist": rng.uniform(0.0, 2.0, n), "success": (rng.uniform(size=n) < 0.3).astype(float)}}


def _by_hand(shaped: PotentialReward, dist: np.ndarray, success: np.ndarray, first: np.ndarray,
             terminal: np.ndarray) -> np.ndarray:
    """base + gamma*Phi(s') - Phi(s) row by row: Phi(s') from the row, Phi(s) from the row before it."""
    phi = (np.exp(-dist) - shaped.top) / shaped.spread
    out = np.zeros(dist.size)
    for i in range(dist.size):
        after = 0.0 if terminal[i] else phi[i]
        before = 0.0 if first[i] else phi[i - 1]
        out[i] = success[i] + shaped.gamma * after - before
    return out


def _stored(buf: ReplayBuffer) -> tuple[np.ndarray, np.ndarray]:
    view = buf.feature_view()
    return np.asarray(view["dist"], np.float64), np.asarray(view["success"], np.float64)


def test_relabel_over_the_buffer_is_the_formula_on_the_stored_rows() -> None:
    rng = np.random.default_rng(1)
    buf = ReplayBuffer(64, OBS, ACT, NAMES, num_columns=1)
    lengths, ends = (4, 3, 5, 2), ("cut", "terminal", "cut", "open")
    for n, end in zip(lengths, ends, strict=True):
        buf.add(**_episode(rng, n, end))  # type: ignore[arg-type]
    dist, success = _stored(buf)
    shaped = PotentialReward.fitted(BASE, DIST_PHI, 0.99, {"dist": dist, "success": success})
    buf.set_column(0, shaped, reference=None)
    first = np.zeros(dist.size, bool)
    first[np.cumsum((0, *lengths[:-1]))] = True  # each episode's first step
    terminal = buf.terminated[: buf.size].copy()
    assert terminal.sum() == 1 and buf.truncated[: buf.size].sum() == 2
    np.testing.assert_allclose(buf.rewards(0), _by_hand(shaped, dist, success, first, terminal), rtol=1e-5, atol=1e-5)
    # rows added later are rewarded alike, the first one continuing the open episode from the stored row before it
    buf.add(**_episode(rng, 3, "cut"))  # type: ignore[arg-type]
    dist, success = _stored(buf)
    terminal = buf.terminated[: buf.size].copy()
    first = np.concatenate([first, np.zeros(3, bool)])
    np.testing.assert_allclose(buf.rewards(0), _by_hand(shaped, dist, success, first, terminal), rtol=1e-5, atol=1e-5)
    # the components the evaluation reports: base and shaping apart, summing to the reward
    parts = shaped.components({"dist": dist[:4], "success": success[:4]})
    assert set(parts) == {"base", "shaping"}
    np.testing.assert_allclose(parts["base"], success[:4])


def test_a_time_limit_cut_bootstraps_and_a_terminal_does_not() -> None:
    rng = np.random.default_rng(2)
    columns = []
    for end in ("cut", "terminal"):
        buf = ReplayBuffer(16, OBS, ACT, NAMES, num_columns=1)
        episode = _episode(np.random.default_rng(3), 5, end)
        buf.add(**episode)  # type: ignore[arg-type]
        buf.add(**_episode(rng, 2, "open"))  # type: ignore[arg-type]
        shaped = PotentialReward(BASE, DIST_PHI, 0.99, top=1.0, spread=0.5)
        buf.set_column(0, shaped, reference=None)
        columns.append(buf.rewards(0).astype(np.float64))
        dist, success = _stored(buf)
        phi = (np.exp(-dist) - 1.0) / 0.5
        expected_last = success[4] + (0.99 * phi[4] if end == "cut" else 0.0) - phi[3]
        assert columns[-1][4] == pytest.approx(expected_last, abs=1e-5)
        assert columns[-1][5] == pytest.approx(success[5] + 0.99 * phi[5], abs=1e-5)  # next episode: Phi(s_0) = 0
    cut, terminal = columns
    np.testing.assert_allclose(cut[:4], terminal[:4], atol=1e-5)  # the same episode but its last row
    assert cut[4] != pytest.approx(terminal[4])


def test_the_oldest_row_of_a_full_ring_is_taken_as_a_first_step() -> None:
    rng = np.random.default_rng(4)
    buf = ReplayBuffer(8, OBS, ACT, NAMES, num_columns=1)
    buf.add(**_episode(rng, 6, "cut"))  # type: ignore[arg-type]
    buf.add(**_episode(rng, 5, "cut"))  # overwrites 3 rows: the oldest stored row (3) is mid-episode
    prev, has = buf.prev_rows(np.arange(8))
    assert buf.ptr == 3 and not has[3] and has[4] and prev[4] == 3 and not has[6]  # row 6 starts episode 2
    assert has[0] and prev[0] == 7  # the ring wraps inside episode 2


def test_one_episode_in_order_reads_its_previous_rows_itself() -> None:
    """The evaluation passes one episode's rows without transition keys: the same values as the buffer's form."""
    dist = np.array([1.0, 0.8, 0.5, 0.1])
    success = np.array([0.0, 0.0, 0.0, 1.0])
    shaped = PotentialReward(BASE, DIST_PHI, 0.9, top=0.5, spread=2.0)
    alone = shaped({"dist": dist, "success": success})
    first = np.array([True, False, False, False])
    np.testing.assert_allclose(alone, _by_hand(shaped, dist, success, first, np.zeros(4, bool)))


def test_fitted_standardises_on_the_sample_and_serialises() -> None:
    sample = {"dist": np.array([0.0, 1.0, 2.0, 3.0]), "success": np.zeros(4)}
    shaped = PotentialReward.fitted(BASE, DIST_PHI, 0.99, sample)
    values = np.exp(-sample["dist"])
    assert shaped.top == pytest.approx(values.max()) and shaped.spread == pytest.approx(values.std())
    assert shaped.phi(sample).max() == pytest.approx(0.0)
    data = shaped.to_json()
    assert data["kind"] == "potential" and data["gamma"] == 0.99 and data["base"] == {"id": "success"}
    assert (shaped.id, shaped.key) == ("phi", "phi")
    flat = PotentialReward.fitted(BASE, FnReward("flat", lambda f: np.ones_like(f["dist"])), 0.99, sample)
    assert flat.spread == 1.0
