"""Graded fitness: success once any slot succeeds, before that the task return (success-then-return, the
reference's rule) or the start distance closed (success-then-progress; of the approach feature when the progress
shares tie); minus lambda x complexity; every slot of one update graded the same way; what it was made of reaches
the records."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from helpers import flat_config, point_task, three_rewards

from lares_agent.engine import EngineConfig, HumanReward, MemberEvaluation, SACConfig, make_engine
from lares_agent.engine.rollouts.episodes import EnvPool
from lares_agent.engine.rollouts.evaluation import action_jerk, evaluate_members, progress_closed
from lares_agent.engine.setup.fitness import (
    PROGRESS_TIE,
    fitness_rule,
    grade_of,
    leaders,
    rank_slots,
    slot_evaluations,
)
from lares_agent.engine.setup.groups import LearnerGroups
from lares_agent.engine.tasks import get_task
from lares_agent.errors import ConfigError
from lares_agent.runs import CandidateRow, RewardUpdateRecord, SlotRecord
from lares_agent.search.config import COMPLEXITY_LAMBDA, SearchConfig, engine_config


class Cx(HumanReward):
    """A reward of a given complexity (only `complexity` and `id` are read by the fitness)."""

    def __init__(self, complexity: float, rid: str) -> None:
        self.complexity, self.id, self.key = complexity, rid, rid


def ev(member: int, success: float, closed: float, final: float = 0.5, **kw: Any) -> MemberEvaluation:
    return MemberEvaluation(member, 4, success, math.nan, 0.0, final, final, 10.0, progress_closed=closed, **kw)


def test_progress_closed_and_action_jerk_of_one_episode() -> None:
    assert progress_closed(np.array([0.4, 0.3, 0.1])) == pytest.approx(0.75)
    assert progress_closed(np.array([0.2, 0.5, 0.9])) == -1.0  # moved away: clipped
    assert progress_closed(np.array([0.0, 0.0])) == 0.0  # started at the goal: nothing to close
    assert math.isnan(progress_closed(np.array([np.nan, 0.1])))
    a = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    assert action_jerk(a) == pytest.approx(1.0)  # two changes of squared norm 1
    assert action_jerk(a[:1]) == 0.0


def test_progress_grades_every_slot_when_none_succeeds() -> None:
    rewards = [Cx(5.0, "a"), Cx(5.0, "b"), Cx(20.0, "c")]
    evals = [ev(0, 0.0, 0.37), ev(1, 0.0, 0.10), ev(2, 0.0, 0.37)]
    slots = slot_evaluations(evals, rewards, 0.001, [False] * 3)
    assert {s.graded_by for s in slots} == {"progress"}
    assert slots[0].fitness == pytest.approx(0.37) and slots[0].complexity_penalty == pytest.approx(0.005)
    assert slots[0].fitness != slots[1].fitness  # different progress, different fitness (no hidden tie-break)
    assert slots[2].fitness == pytest.approx(0.37)  # the fitness is the graded value; the penalty breaks the tie
    assert rank_slots(slots, False) == [0, 2, 1]
    assert slots[0].graded == pytest.approx(0.37)


def test_success_grades_every_slot_once_any_succeeds() -> None:
    rewards = [Cx(1.0, "a"), Cx(1.0, "b")]
    evals = [ev(0, 0.0, 0.9), ev(1, 0.25, 0.1)]
    slots = slot_evaluations(evals, rewards, 0.0, [False, False])
    assert [s.graded_by for s in slots] == ["success", "success"]
    assert [s.fitness for s in slots] == [0.0, 0.25]  # progress no longer counts: fitness compares within the update
    assert rank_slots(slots, False) == [1, 0]


def test_quarantined_ranks_last_and_its_success_does_not_switch_the_grade() -> None:
    rewards = [Cx(1.0, "a"), Cx(1.0, "b"), Cx(1.0, "c")]
    evals = [ev(0, 0.5, 0.9), ev(1, 0.0, 0.2), ev(2, 0.0, -0.3)]
    assert grade_of(evals, [True, False, False]) == "progress"
    slots = slot_evaluations(evals, rewards, 0.01, [True, False, False])
    assert slots[0].fitness == -math.inf and slots[0].quarantined
    assert rank_slots(slots, False) == [1, 2, 0]
    assert slots[2].fitness == pytest.approx(-0.3)
    # a non-finite member is quarantined the same way
    bad = [ev(0, 0.0, 0.9, nonfinite=True), ev(1, 0.0, 0.2)]
    assert rank_slots(slot_evaluations(bad, rewards[:2], 0.0, [False, False]), False) == [1, 0]


def test_missing_progress_grades_as_nothing_closed() -> None:
    slots = slot_evaluations([ev(0, 0.0, math.nan), ev(1, 0.0, 0.1)], [Cx(0, "a"), Cx(0, "b")], 0.0,
                             [False, False])
    assert slots[0].fitness == 0.0 and rank_slots(slots, False) == [1, 0]


def test_approach_grades_when_the_progress_shares_tie() -> None:
    # door-close-v3 in the 92194cf grid (docs/results-archive.md): the door swings shut a little by itself, so every
    # slot closed the same share (0.132 here)
    rewards = [Cx(5.0, "a"), Cx(9.0, "b"), Cx(5.0, "c")]
    evals = [ev(0, 0.0, 0.132, approach_closed=0.2), ev(1, 0.0, 0.135, approach_closed=0.6),
             ev(2, 0.0, 0.132, approach_closed=0.4)]
    slots = slot_evaluations(evals, rewards, 0.001, [False] * 3)
    assert {s.graded_by for s in slots} == {"approach"}
    assert slots[1].fitness == slots[1].graded == 0.6
    assert rank_slots(slots, False) == [1, 2, 0]  # the penalty alone would have put the simpler slot 0 or 2 first
    # progress that separates the slots, a slot without an approach share, or any success: the old grades
    apart = [ev(0, 0.0, 0.132, approach_closed=0.2), ev(1, 0.0, 0.132 + PROGRESS_TIE, approach_closed=0.6)]
    assert grade_of(apart, [False, False]) == "progress"
    assert grade_of([evals[0], ev(1, 0.0, 0.132)], [False, False]) == "progress"
    assert grade_of([evals[0], ev(1, 0.1, 0.132, approach_closed=0.6)], [False, False]) == "success"
    # a quarantined slot's progress neither breaks nor makes the tie; one healthy slot has nothing to separate
    assert grade_of([*evals[:2], ev(2, 0.0, 0.9, approach_closed=0.1)], [False, False, True]) == "approach"
    assert grade_of(evals[:1], [False]) == "progress"


def test_evaluation_measures_the_approach_share_on_door_close() -> None:
    task = get_task("door-close-v3")
    pool = EnvPool(task.make_env, 0)
    try:
        evals = evaluate_members(pool, lambda obs, m: np.zeros((len(m), 4), np.float32), task.raw_state,
                                 task.features, [0, 1], [None, None], 1, 60, [7], task.progress_feature,
                                 approach_feature=task.approach_feature)
    finally:
        pool.close()
    # Still hands: the door closes its own 13% and the handle swings away from the hand (measured: -0.36, -0.27).
    assert all(0.05 < e.progress_closed < 0.3 for e in evals)
    assert all(-1.0 <= e.approach_closed < 0.0 for e in evals)
    assert grade_of(evals, [False, False]) == "approach"


def test_records_carry_what_the_fitness_was_made_of() -> None:
    (s,) = slot_evaluations([ev(0, 0.0, 0.4, action_jerk=0.2)], [Cx(10.0, "a")], 0.002, [False])
    js = s.to_json("events")
    assert (js["graded_by"], js["progress_closed"], js["complexity_penalty"], js["action_jerk"]) == (
        "progress", 0.4, pytest.approx(0.02), 0.2)
    rec = RewardUpdateRecord.from_json({"event": "reward_update", "round": 1, "env_steps": 10,
                                        "fitness": {"0": s.fitness}, "slots": [js]})
    assert rec is not None and rec.slots[0].graded_by == "progress"
    assert rec.slots[0].complexity_penalty == pytest.approx(0.02)
    assert rec.slots[0].to_json("events")["progress_closed"] == 0.4
    row = CandidateRow(id="a", verdict="evaluated", evaluated=SlotRecord(
        fitness=0.38, graded_by="progress", progress_closed=0.4, complexity_penalty=0.02))
    back = CandidateRow.from_json(row.to_json())
    assert back is not None and back.evaluated is not None
    assert (back.evaluated.graded_by, back.evaluated.progress_closed, back.evaluated.complexity_penalty) == (
        "progress", 0.4, 0.02)
    assert "graded_by" not in CandidateRow(id="old").to_json()  # optional: older rows stay as they were
    # an approach-graded update reads back with the approach share as its graded value
    tied = slot_evaluations([ev(0, 0.0, 0.1, approach_closed=0.3), ev(1, 0.0, 0.1, approach_closed=0.5)],
                            [Cx(10.0, "a"), Cx(10.0, "b")], 0.002, [False, False])
    back_rec = RewardUpdateRecord.from_json({"event": "reward_update", "round": 1, "env_steps": 10,
                                             "fitness": {"0": tied[0].fitness},
                                             "slots": [t.to_json("events") for t in tied]})
    assert back_rec is not None
    slot1 = back_rec.slots[1]
    assert (slot1.graded_by, slot1.approach_closed) == ("approach", 0.5)
    assert slot1.graded == 0.5
    row = CandidateRow(id="b", verdict="evaluated",
                       evaluated=SlotRecord(graded_by="approach", progress_closed=0.1, approach_closed=0.5))
    again = CandidateRow.from_json(row.to_json())
    assert again is not None and again.evaluated is not None and again.evaluated.approach_closed == 0.5


def test_complexity_lambda_flag_default_and_mapping() -> None:
    assert COMPLEXITY_LAMBDA > 0 and SearchConfig().complexity_lambda == COMPLEXITY_LAMBDA
    assert engine_config(SearchConfig(complexity_lambda=0.01)).complexity_lambda == 0.01
    assert EngineConfig().complexity_lambda == 0.0  # the engine keeps the reference's value
    from lares_agent.errors import ConfigError

    with pytest.raises(ConfigError, match="complexity-lambda"):
        SearchConfig(complexity_lambda=-1.0)


# ---------------------------------------------------------------------------------------------- success-then-return
def rev(member: int, success: float, task_return: float, closed: float = 0.132, **kw: Any) -> MemberEvaluation:
    return MemberEvaluation(member, 4, success, task_return, 0.0, 0.5, 0.5, 10.0, progress_closed=closed, **kw)


def test_return_grades_every_slot_when_none_succeeds() -> None:
    # door-close-v3's lost seeds: every slot closed the same share (the door swings shut by itself); the task
    # returns differ, because the human reward grades the hand's approach and grasp
    rewards = [Cx(5.0, "a"), Cx(20.0, "b"), Cx(5.0, "c")]
    evals = [rev(0, 0.0, 140.0), rev(1, 0.0, 412.3), rev(2, 0.0, 96.5)]
    slots = slot_evaluations(evals, rewards, 0.001, [False] * 3, "success-then-return")
    assert {s.graded_by for s in slots} == {"return"}
    assert slots[1].fitness == slots[1].graded == 412.3
    assert rank_slots(slots, False) == [1, 0, 2]  # the most complex reward first: its return is the highest
    # the same evaluations under success-then-progress: equal shares, so only the penalty and the index rank them
    old = slot_evaluations(evals, rewards, 0.001, [False] * 3)
    assert {s.graded_by for s in old} == {"progress"} and rank_slots(old, False) == [0, 2, 1]


def test_success_still_grades_first_under_the_return_rule() -> None:
    evals = [rev(0, 0.0, 900.0), rev(1, 0.25, 100.0)]
    slots = slot_evaluations(evals, [Cx(1.0, "a"), Cx(1.0, "b")], 0.0, [False, False], "success-then-return")
    assert [s.graded_by for s in slots] == ["success", "success"]
    assert [s.fitness for s in slots] == [0.0, 0.25] and rank_slots(slots, False) == [1, 0]


def test_return_grade_ranks_quarantined_and_returnless_slots_last() -> None:
    rewards = [Cx(1.0, "a"), Cx(1.0, "b"), Cx(1.0, "c")]
    evals = [rev(0, 0.5, 1000.0), rev(1, 0.0, -20.0), rev(2, 0.0, math.nan)]
    # a quarantined slot's success does not switch the grade
    assert grade_of(evals, [True, False, False], "success-then-return") == "return"
    slots = slot_evaluations(evals, rewards, 0.0, [True, False, False], "success-then-return")
    assert slots[1].fitness == -20.0  # a negative return is a value, not a missing one
    assert slots[2].fitness == -math.inf and not slots[2].quarantined
    assert slots[0].fitness == -math.inf and slots[0].quarantined
    assert rank_slots(slots, False) == [1, 2, 0]


def test_fitness_rule_resolves_auto_against_the_task_and_refuses_a_return_without_one() -> None:
    assert fitness_rule("auto", True) == "success-then-return"
    assert fitness_rule("auto", False) == "success-then-progress"
    assert fitness_rule("success-then-progress", True) == "success-then-progress"
    assert fitness_rule("success-then-return", True) == "success-then-return"
    with pytest.raises(ConfigError, match="human"):
        fitness_rule("success-then-return", False)
    with pytest.raises(ConfigError, match="unknown fitness rule"):
        fitness_rule("return-only", True)
    with pytest.raises(ConfigError, match="unknown fitness rule"):
        EngineConfig(fitness="return-only")  # type: ignore[arg-type]


def test_the_replay_leaders_grade_by_the_same_rule() -> None:
    groups = LearnerGroups(num_slots=2, per_reward=2)
    evals = [rev(i, 0.0, r) for i, r in enumerate([10.0, 50.0, 30.0, 20.0])]  # equal shares closed
    rewards = [Cx(1.0, "a"), Cx(1.0, "b")]
    assert leaders(groups, evals, rewards, 0.0, False, lambda i: False, "success-then-return") == [[1, 0], [2, 3]]
    assert leaders(groups, evals, rewards, 0.0, False, lambda i: False) == [[0, 1], [2, 3]]  # tied: index order


def test_return_grade_reaches_the_records_and_old_records_still_read() -> None:
    slots = slot_evaluations([rev(0, 0.0, 412.3), rev(1, 0.0, 96.5)], [Cx(10.0, "a"), Cx(5.0, "b")], 0.001,
                             [False, False], "success-then-return")
    rec = RewardUpdateRecord.from_json({"event": "reward_update", "round": 2, "env_steps": 10,
                                        "fitness": {"0": slots[0].fitness, "1": slots[1].fitness},
                                        "slots": [s.to_json("events") for s in slots]})
    assert rec is not None
    first = rec.slots[0]
    assert (first.graded_by, first.graded, first.task_return) == ("return", 412.3, 412.3)
    assert first.breakdown == "return 412.3" and rec.slots[1].breakdown == "return 96.5"
    assert SlotRecord.value_graded("return", 0.0, 0.1, 0.2, 412.3) == 412.3
    # lines written before the return grade: a progress grade reads its share, no grade reads the success rate
    assert SlotRecord.value_graded("progress", 0.0, 0.1, 0.2) == 0.1
    assert SlotRecord.value_graded(None, 0.4, 0.1, 0.2) == 0.4
    old = SlotRecord.from_json({"slot": 0, "reward_id": "x", "fitness": 0.3, "success": 0.3, "task_return": 7.0},
                               "events")
    assert old.graded_by is None and old.breakdown == "" and math.isnan(old.graded)
    row = CandidateRow(id="a", verdict="evaluated",
                       evaluated=SlotRecord(fitness=412.29, graded_by="return", task_return=412.3))
    back = CandidateRow.from_json(row.to_json())
    assert back is not None and back.evaluated is not None
    assert (back.evaluated.graded_by, back.evaluated.task_return) == ("return", 412.3)
    assert "task_return" not in CandidateRow(id="old").to_json()


@pytest.mark.parametrize(("human", "fitness", "rule", "grade"), [
    (True, "auto", "success-then-return", "return"),
    (False, "auto", "success-then-progress", "progress"),
    (True, "success-then-progress", "success-then-progress", "progress"),
])
def test_the_engine_grades_an_update_by_the_rule_it_resolved(human: bool, fitness: Any, rule: str,
                                                            grade: str) -> None:
    cfg = flat_config(population=3, elites=1, total_steps=130, warmup_steps=60, reward_period=120, eval_every=0,
                      eval_episodes=1, update_eval_episodes=2, ts_window=10, buffer_capacity=3000, seed=2,
                      feature_sample=100, sac=SACConfig(hidden=(16, 16), batch_size=32, utd_ratio=0.1),
                      fitness=fitness, complexity_lambda=0.001)
    engine = make_engine(point_task(has_human_reward=human), cfg, three_rewards())
    try:
        assert engine.grading[1] == rule
        slots = engine._start_update().ctx.slots  # untrained policies: no success on the point mass
    finally:
        engine.close()
    assert {s.graded_by for s in slots} == {grade}
    for s in slots:
        value = s.task_return if grade == "return" else s.progress_closed
        assert s.fitness == pytest.approx(value) and s.complexity_penalty > 0


def test_the_engine_refuses_a_return_rule_for_a_task_without_a_human_reward() -> None:
    cfg = flat_config(population=3, elites=1, total_steps=130, warmup_steps=60, reward_period=120,
                      sac=SACConfig(hidden=(16, 16), batch_size=32), fitness="success-then-return")
    with pytest.raises(ConfigError, match="human"):
        make_engine(point_task(has_human_reward=False), cfg, three_rewards()).close()

