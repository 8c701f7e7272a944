"""Truncation and tournament selection properties; reward-population diversity and the explore decision."""

from __future__ import annotations

import numpy as np
import pytest

from lares_agent.engine.loop.selection import select_elites, tournament_select, truncation_select
from lares_agent.engine.setup.diversity import (
    DiversityConfig,
    behaviour_distance,
    distinct_fraction,
    measure_diversity,
    should_explore,
)
from lares_agent.engine.setup.selection import SelectionConfig


def test_truncation_picks_the_best_in_order_with_stable_ties() -> None:
    f = np.array([0.2, 0.9, 0.5, 0.9, np.nan])
    assert truncation_select(f, 3).tolist() == [1, 3, 2]
    assert truncation_select(f, 5).tolist()[-1] == 4  # NaN ranks last
    with pytest.raises(ValueError):
        truncation_select(f, 6)


@pytest.mark.parametrize("seed", range(20))
def test_tournament_returns_distinct_valid_indices_best_first(seed: int) -> None:
    rng = np.random.default_rng(seed)
    f = rng.normal(size=7)
    out = tournament_select(f, 4, 3, rng)
    assert len(out) == 4 and len(set(out.tolist())) == 4
    assert all(0 <= i < 7 for i in out)
    assert np.all(np.diff(f[out]) <= 0)  # returned best first
    assert int(np.argmax(f)) in out  # keep_best


def test_tournament_of_full_size_equals_truncation() -> None:
    rng = np.random.default_rng(0)
    for _ in range(10):
        f = rng.normal(size=6)
        assert tournament_select(f, 3, 6, rng).tolist() == truncation_select(f, 3).tolist()


def test_larger_tournaments_select_fitter_candidates() -> None:
    f = np.arange(10.0)  # fitness = index

    def mean_selected(size: int) -> float:
        rng = np.random.default_rng(123)
        return float(np.mean([f[tournament_select(f, 3, size, rng, keep_best=False)].mean() for _ in range(300)]))

    m1, m2, m4 = mean_selected(1), mean_selected(2), mean_selected(4)
    assert m1 < m2 < m4
    assert abs(m1 - f.mean()) < 0.5  # size 1 is uniform random selection


def test_tournament_without_elitism_can_drop_the_best() -> None:
    f = np.arange(8.0)
    rng = np.random.default_rng(0)
    picks = [tournament_select(f, 2, 1, rng, keep_best=False) for _ in range(50)]
    assert any(7 not in p for p in picks)


def test_select_elites_dispatches_and_is_reproducible() -> None:
    f = np.array([0.1, 0.4, 0.3, 0.8, 0.2])
    trunc = select_elites(f, 2, SelectionConfig(), np.random.default_rng(0))
    assert trunc.tolist() == [3, 1]
    cfg = SelectionConfig(method="tournament", tournament_size=2)
    a = select_elites(f, 3, cfg, np.random.default_rng(5))
    b = select_elites(f, 3, cfg, np.random.default_rng(5))
    assert a.tolist() == b.tolist() and a[0] == 3
    with pytest.raises(ValueError):
        SelectionConfig(method="roulette")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- diversity
class _Reward:
    """Only what diversity reads: the reward's identity `key` (rewards.reward_key in a real run)."""

    def __init__(self, id: str, key: str) -> None:
        self.id, self.key = id, key


def test_diversity_counts_distinct_keys_not_ids() -> None:
    a, b, c = _Reward("a", "-dist - 0.1*u"), _Reward("b", "-dist - 0.1*u"), _Reward("c", "-2*dist")
    assert distinct_fraction([r.key for r in (a, b, c)]) == pytest.approx(2 / 3)
    feats = [{"dist": np.full(4, float(i))} for i in range(3)]
    assert measure_diversity([a, b, c], feats, ["dist"], DiversityConfig()).distinct == 2


def test_behaviour_distance_zero_for_identical_policies_and_grows_with_difference() -> None:
    rng = np.random.default_rng(0)
    base = {"dist": rng.uniform(0, 1, 100), "speed": rng.uniform(0, 2, 100)}
    same = [base, dict(base), dict(base)]
    assert behaviour_distance(same, ["dist", "speed"]) == pytest.approx(0.0)
    near = [base, {"dist": base["dist"] + 0.05, "speed": base["speed"]}]
    far = [base, {"dist": base["dist"] + 2.0, "speed": base["speed"]}]
    assert 0 < behaviour_distance(near, ["dist", "speed"]) < behaviour_distance(far, ["dist", "speed"])
    # units do not matter: the same behaviour in centimetres gives the same distance
    cm = [{k: 100 * v for k, v in f.items()} for f in far]
    assert behaviour_distance(cm, ["dist", "speed"]) == pytest.approx(behaviour_distance(far, ["dist", "speed"]))
    assert behaviour_distance([base], ["dist"]) == 0.0


def test_explore_when_rewards_or_behaviours_collapse() -> None:
    cfg = DiversityConfig(min_distinct_fraction=0.6, min_behaviour_distance=0.1)
    assert should_explore(0.4, 1.0, cfg) and should_explore(1.0, 0.05, cfg) and not should_explore(1.0, 1.0, cfg)
    rng = np.random.default_rng(1)
    feats = [{"dist": rng.uniform(0, 1, 50) + i} for i in range(3)]
    distinct = [_Reward(str(i), f"-{i + 1}*dist") for i in range(3)]
    clones = [_Reward(str(i), "-dist") for i in range(3)]
    ok = measure_diversity(distinct, feats, ["dist"], cfg)
    assert ok.distinct == 3 and not ok.explore and ok.behaviour_distance > 0.1
    collapsed = measure_diversity(clones, feats, ["dist"], cfg)
    assert collapsed.distinct == 1 and collapsed.explore
    same_behaviour = measure_diversity(distinct, [feats[0]] * 3, ["dist"], cfg)
    assert same_behaviour.explore and same_behaviour.to_json()["behaviour_distance"] == pytest.approx(0.0)
