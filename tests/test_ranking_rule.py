"""One ranking rule for every slot (engine/setup/fitness.py): the fitness is the graded value, the task return (or
-final progress) breaks its ties, the complexity penalty only exact ties of both, then the slot index; the init
setting's learner on the task's own reward carries its expression's complexity like any other reward."""

from __future__ import annotations

import math

import pytest
from test_lares_engine import FeatureReward, Proposer, tiny_config, tiny_task

from lares_agent.engine import HumanReward, MemberEvaluation, make_engine
from lares_agent.engine.setup.fitness import rank_slots, slot_evaluations
from lares_agent.engine.state.schema import rewards_from_state
from lares_agent.engine.tasks import get_task
from lares_agent.prompts.loader import load_template
from lares_agent.rewards import human_reference
from lares_agent.runs.slots import SlotRecord, fitness_breakdown
from lares_agent.search.live_run import _human_complexity

LAMBDA = 0.001  # the search's default (search/config.py COMPLEXITY_LAMBDA)


def ev(member: int, success: float, task_return: float, final: float = 0.5) -> MemberEvaluation:
    return MemberEvaluation(member, 5, success, task_return, 0.0, final, final, 150.0)


def test_human_learner_at_equal_success_ranks_by_task_return_not_by_complexity() -> None:
    # door-close-v3's first update in the grid (init seed 0): every slot at 100%, the LLM rewards 26-28.5 complex
    rewards = [FeatureReward("dist", complexity=28.5), FeatureReward("dist", complexity=26.0), HumanReward(26.0)]
    llm_ahead = [ev(0, 1.0, 1030.8), ev(1, 1.0, 1001.2), ev(2, 1.0, 990.0)]
    slots = slot_evaluations(llm_ahead, rewards, LAMBDA, [False] * 3, "success-then-return")
    assert [s.fitness for s in slots] == [1.0, 1.0, 1.0]  # the fitness is the graded value ...
    assert slots[0].complexity_penalty == pytest.approx(0.0285)  # ... and the penalty is still recorded
    assert rank_slots(slots, True) == [0, 1, 2]  # the higher return wins; the simpler human reward does not
    human_ahead = [ev(0, 1.0, 1030.8), ev(1, 1.0, 1001.2), ev(2, 1.0, 1100.0)]
    assert rank_slots(slot_evaluations(human_ahead, rewards, LAMBDA, [False] * 3, "success-then-return"), True) == [
        2, 0, 1]
    # success still comes first: an LLM reward one episode better wins whatever the returns
    ahead = [ev(0, 0.8, 1030.8), ev(1, 0.6, 1200.0), ev(2, 0.6, 1100.0)]
    assert rank_slots(slot_evaluations(ahead, rewards, LAMBDA, [False] * 3), True)[0] == 0


def test_exact_tie_is_broken_by_complexity_then_slot_index() -> None:
    tied = [ev(0, 0.6, 500.0), ev(1, 0.6, 500.0), ev(2, 0.6, 500.0)]
    rewards = [FeatureReward("dist", complexity=9.0), FeatureReward("dist", complexity=4.0), HumanReward(17.5)]
    assert rank_slots(slot_evaluations(tied, rewards, LAMBDA, [False] * 3), True) == [1, 0, 2]  # simpler first
    plain = [FeatureReward("dist", complexity=9.0), FeatureReward("dist", complexity=4.0), HumanReward()]
    assert rank_slots(slot_evaluations(tied, plain, LAMBDA, [False] * 3), True) == [2, 1, 0]  # no expression: 0
    same = [FeatureReward("dist", complexity=4.0), FeatureReward("dist", complexity=4.0), HumanReward(4.0)]
    assert rank_slots(slot_evaluations(tied, same, LAMBDA, [False] * 3), True) == [0, 1, 2]
    # lambda 0, the reference's: complexity plays no part, the slot index decides
    assert rank_slots(slot_evaluations(tied, rewards, 0.0, [False] * 3), True) == [0, 1, 2]
    # a return one part in a million higher is not a tie: complexity does not override it
    near = [ev(0, 0.6, 500.0), ev(1, 0.6, 500.0), ev(2, 0.6, 500.0005)]
    assert rank_slots(slot_evaluations(near, rewards, LAMBDA, [False] * 3), True)[0] == 2


def test_the_human_reward_carries_its_expressions_complexity_into_the_engine() -> None:
    task = get_task("door-close-v3")
    reference = human_reference(task)
    assert reference is not None and reference[1] > 0
    assert _human_complexity(task) == reference[1]
    assert _human_complexity(tiny_task()) == 0.0  # a task without an expression written
    cfg = tiny_config(setting="init", total_steps=60, max_rounds=1)
    given = [FeatureReward("dist", 1.0), FeatureReward("dist", 2.0), FeatureReward("action_norm", 0.1)]
    engine = make_engine(tiny_task(), cfg, given, Proposer(), human_complexity=reference[1])
    human = engine.rewards[cfg.num_slots]
    assert isinstance(human, HumanReward) and human.complexity == reference[1]
    # a checkpoint keeps it (the state holds every reward's to_json)
    [back] = rewards_from_state({"rewards": [human.to_json()]}, None)
    assert isinstance(back, HumanReward) and back.complexity == reference[1]
    [old] = rewards_from_state({"rewards": [{"id": "human", "kind": "human"}]}, None)
    assert old.complexity == 0.0


def test_the_human_reward_carries_the_expression_the_search_gives_it() -> None:
    expression = {"reach": "-dist", "done": "5*success"}  # the init setting's: the proposer refines it
    cfg = tiny_config(setting="init", total_steps=60, max_rounds=1)
    given = [FeatureReward("dist", 1.0), FeatureReward("dist", 2.0), FeatureReward("action_norm", 0.1)]
    human = make_engine(tiny_task(), cfg, given, Proposer(), human_expression=expression).rewards[cfg.num_slots]
    assert isinstance(human, HumanReward) and human.expression == expression
    assert make_engine(tiny_task(), cfg, given, Proposer()).rewards[cfg.num_slots].expression is None  # none given
    # a checkpoint keeps no expression (it is the task's): a resume is given it again, as the start was
    assert "expression" not in human.to_json()
    [back] = rewards_from_state({"rewards": [human.to_json()]}, None, expression)
    assert back.expression == expression
    [bare] = rewards_from_state({"rewards": [human.to_json()]}, None)
    assert bare.expression is None


def test_the_prompt_states_the_rule() -> None:
    system, critique = load_template("system").text, load_template("critique").text
    assert "complexity lowers a candidate's fitness" not in system
    assert "the task's own included" in system and "less complexity" in system
    assert "minus a complexity penalty" not in critique and "complexity only breaks exact ties" in critique


def test_the_breakdown_says_what_the_fitness_was_made_of_under_either_rule() -> None:
    new = SlotRecord(0, "a", fitness=0.6, success=0.6, graded_by="success", complexity_penalty=0.02)
    old = SlotRecord(0, "a", fitness=0.58, success=0.6, graded_by="success", complexity_penalty=0.02)
    assert new.breakdown == "success 0.60"
    assert old.breakdown == "success 0.60 - 0.02 cx"  # a record of a run before the one rule
    assert fitness_breakdown("return", 412.3, 0.01, fitness=412.3) == "return 412.3"
    assert fitness_breakdown("progress", 0.37, 0.03, fitness=math.nan) == "progress 0.37"
