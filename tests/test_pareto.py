"""Pareto selection: NSGA-II fronts and crowding on hand-made cases, the elites it picks from
slot evaluations, and its wiring into both engines and the configs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from helpers import flat_config, point_task, three_rewards

from lares_agent.engine import EngineConfig, SACConfig, make_engine
from lares_agent.engine.es import strategy as es
from lares_agent.engine.loop.pareto import crowding_distance, dominates, non_dominated_fronts, pareto_select
from lares_agent.engine.loop.selection import choose_elites, select_elites
from lares_agent.engine.setup.fitness import rank_slots
from lares_agent.engine.setup.selection import SelectionConfig
from lares_agent.errors import ConfigError
from lares_agent.runs.slots import SlotRecord
from lares_agent.search.config import SearchConfig, engine_config

# maximised; A..D are the non-dominated set, E is dominated by B (and C), F by E
FRONT = np.array([[1.0, 5.0], [2.0, 4.0], [3.0, 3.0], [4.0, 1.0], [2.0, 2.0], [1.0, 1.0]])
PARETO = SelectionConfig(method="pareto")


def test_fronts_of_a_hand_made_set() -> None:
    fronts = non_dominated_fronts(FRONT)
    assert [f.tolist() for f in fronts] == [[0, 1, 2, 3], [4], [5]]
    assert dominates(FRONT[1], FRONT[4]) and not dominates(FRONT[0], FRONT[3])
    assert not dominates(FRONT[2], FRONT[2])  # equal is not better
    same = np.array([[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    assert [f.tolist() for f in non_dominated_fronts(same)] == [[0, 1], [2]]  # duplicates share a front


def test_crowding_distance_of_a_known_front() -> None:
    d = crowding_distance(FRONT[:4])
    # objective 0 spans 3: B and C each see a gap of 2; objective 1 spans 4: B sees 5-3, C sees 4-1
    assert np.isinf(d[0]) and np.isinf(d[3])
    assert d[1] == pytest.approx(2 / 3 + 2 / 4) and d[2] == pytest.approx(2 / 3 + 3 / 4)
    assert np.isinf(crowding_distance(FRONT[:2])).all()  # two points: both are ends
    flat = crowding_distance(np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]]))
    assert flat[1] == pytest.approx(1.0)  # the constant objective adds nothing


def test_pareto_select_returns_exactly_n_in_a_deterministic_order() -> None:
    for n in range(FRONT.shape[0] + 1):
        assert len(pareto_select(FRONT, n)) == n
    assert set(pareto_select(FRONT, 4).tolist()) == {0, 1, 2, 3}  # exactly the non-dominated set
    assert pareto_select(FRONT, 3).tolist() == [0, 3, 2]  # the ends (inf, index order), then the most crowded-apart
    assert pareto_select(FRONT, 5).tolist() == [0, 3, 2, 1, 4]  # whole first front, then the next
    assert pareto_select(FRONT, 3, priority=[5, 4, 3, 2, 1, 0]).tolist() == [3, 0, 2]  # priority breaks the inf tie
    with pytest.raises(ValueError):
        pareto_select(FRONT, 7)
    with pytest.raises(ValueError):
        pareto_select(np.array([[np.nan, 1.0]]), 1)


def _slot(i: int, fitness: float, jerk: float, cx: float, tie: float = 0.0, bad: bool = False) -> SlotRecord:
    """A graded slot whose tie-break (ranked with the task return) is ``tie``."""
    return SlotRecord(slot=i, reward_id=f"r{i}", success=0.0, task_return=tie, own_return=0.0, final_progress=0.5,
                      complexity=cx, fitness=-math.inf if bad else fitness, graded_by="success", quarantined=bad,
                      action_jerk=jerk)


def test_choose_elites_keeps_the_smooth_and_the_simple() -> None:
    slots = [_slot(0, 0.5, 0.5, 10), _slot(1, 0.4, 0.1, 10), _slot(2, 0.3, 0.6, 12), _slot(3, 0.2, 0.2, 4),
             _slot(4, 0.0, math.nan, 1, bad=True)]  # quarantined, though its reward is the simplest
    ranking = rank_slots(slots, True)
    rng = np.random.default_rng(0)
    assert ranking == [0, 1, 2, 3, 4]
    assert choose_elites(ranking, slots, 3, SelectionConfig(), rng) == [0, 1, 2]  # truncation
    assert choose_elites(ranking, slots, 3, PARETO, rng) == [0, 1, 3]  # slot 2 is dominated by slot 0
    assert choose_elites(ranking, slots, 4, PARETO, rng) == [0, 1, 2, 3]
    assert choose_elites(ranking, slots, 5, PARETO, rng) == [0, 1, 2, 3, 4]  # the quarantined one only to fill
    with pytest.raises(ValueError):
        select_elites([1.0, 2.0], 1, PARETO, rng)  # one fitness value is not enough for Pareto


def test_pareto_keeps_the_best_even_when_an_equal_fitness_dominates_it() -> None:
    slots = [_slot(0, 0.5, 0.5, 10, tie=1.0), _slot(1, 0.5, 0.1, 5, tie=0.0)]  # 1 dominates 0; 0 wins the tie-break
    ranking = rank_slots(slots, True)
    rng = np.random.default_rng(0)
    assert ranking == [0, 1]
    assert choose_elites(ranking, slots, 1, PARETO, rng) == [0]
    assert choose_elites(ranking, slots, 1, SelectionConfig(method="pareto", keep_best=False), rng) == [1]


def test_configs_accept_pareto_for_every_learner_and_refuse_tournament_for_gradients() -> None:
    for learner in ("sac", "crossq", "es"):
        cfg = engine_config(SearchConfig(learner=learner, selection="pareto"))  # type: ignore[arg-type]
        assert cfg.selection.method == "pareto"
    with pytest.raises(ConfigError, match="tournament"):
        SearchConfig(learner="sac", selection="tournament")
    with pytest.raises(ConfigError, match="tournament"):
        EngineConfig(selection=SelectionConfig(method="tournament"))
    saved = SearchConfig(learner="crossq", selection="pareto").to_json()
    assert SearchConfig.from_json(saved).selection == "pareto"  # a resumed run selects as it did
    back = EngineConfig.from_json(EngineConfig(selection=PARETO).to_json())
    assert back.selection == PARETO


def _tiny_sac(**kw: Any) -> EngineConfig:
    return flat_config(population=3, elites=2, total_steps=120, warmup_steps=60, reward_period=120,
                        eval_every=0, eval_episodes=2, update_eval_episodes=2, ts_window=10, buffer_capacity=2000,
                        seed=1, max_rounds=1, feature_sample=50,
                        sac=SACConfig(hidden=(16, 16), batch_size=16, utd_ratio=0.25), **kw)


def test_both_engines_select_by_pareto() -> None:
    proposals = lambda ctx: []  # noqa: E731 - keep every reward; the update's choice is what is checked
    engine = make_engine(point_task(), _tiny_sac(selection=PARETO), three_rewards(), proposals)
    engine.run(until_steps=120)
    ctx = engine.reward_update()
    assert len(ctx.elites) == 2 and ctx.best in ctx.elites
    assert all(math.isfinite(s.action_jerk) and s.action_jerk >= 0 for s in ctx.slots)
    (update,) = [e for e in engine.events if e["event"] == "reward_update"]
    assert update["selection"] == "pareto" and update["slots"][0]["graded_by"] in ("success", "progress")
    cfg = flat_config(es=True, population=3, elites=2, total_steps=4 * 12 * 3 * 2, reward_period=4 * 12 * 3,
                      eval_every=0, eval_episodes=1, update_eval_episodes=2, rollouts_kept=1,
                      selection=PARETO, es_config=es.ESConfig(population_size=4, total_generations=4))
    es_engine = make_engine(point_task(), cfg, three_rewards(), proposals)
    try:
        es_engine.step()
        es_ctx = es_engine.reward_update()
    finally:
        es_engine.close()
    assert len(es_ctx.elites) == 2 and es_ctx.best in es_ctx.elites
    assert any(e.get("selection") == "pareto" for e in es_engine.events if e["event"] == "reward_update")
