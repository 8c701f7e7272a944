"""The init setting in the graph: the task's own reward is shown as the starting point, round 0 refines it (the
elite `human`, with numeric children of its constants), and a human-reward learner among the elites of a later
round brings its expression back. Scripted model, real graph, validator and proposer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import described_task, scripted_client
from test_graph_candidates import episodes_sample

from lares_agent.engine import HumanReward, MemberEvaluation, UpdateContext
from lares_agent.engine.setup.fitness import slot_evaluations
from lares_agent.graphs.build import build_graph
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.state import HUMAN_ELITE
from lares_agent.runs import RunLayout, RunLog
from lares_agent.search.proposer import GraphProposer

TASK = described_task(
    "reach-v3", "tcp_to_goal",
    {"tcp_to_goal": ("gripper to goal", "m"), "action_norm": ("action size", "1"), "success": ("goal reached", "bool")},
    description="Move the gripper to the goal position.", horizon=150,
)
HUMAN = {"reach": "10*exp(-tcp_to_goal/0.2)", "done": "5*success"}


def _proposer(tmp_path: Path, script: list[Any], human: dict[str, str] | None, **limits: Any) -> GraphProposer:
    llm = scripted_client(script)
    llm.kind = "local"
    ctx = RunContext(llm=llm, task=TASK, limits=GraphLimits(reflect=False, **limits), human_reward=human)
    run = RunLayout.create(tmp_path, "reach-v3", "run")
    return GraphProposer(build_graph(), ctx, RunLog(run), TASK.name)


def _seen(proposer: GraphProposer) -> list[str]:
    """Every message text the scripted model was sent."""
    return [str(m.content) for call in proposer.context.llm.chat_model.seen for m in call]  # type: ignore[attr-defined]


def test_round_zero_refines_the_human_reward(tmp_path: Path) -> None:
    refined = {"components": {"reach": "12*exp(-tcp_to_goal/0.15)", "done": "5*success"}, "rationale": "sharper"}
    proposer = _proposer(tmp_path, [refined], HUMAN, oversample=1.0, numeric_children=2)
    rewards = proposer.initial(3, episodes_sample())
    assert len(rewards) == 3
    texts = _seen(proposer)
    system, user = texts[0], texts[1]
    assert "The task's own reward, written by its designer" in system and "10*exp(-tcp_to_goal/0.2)" in system
    assert "For this task:" not in system  # no example reward of this task besides its own
    assert "Refine the task's own reward" in user and f"- {HUMAN_ELITE} " in user
    rows = [r for r in proposer.log.candidates.read() if r.verdict == "accepted"]
    assert {r.parent_id for r in rows} == {HUMAN_ELITE}  # the LLM's refinement and the numeric children
    assert any(r.origin == "child" for r in rows)


def test_scratch_never_shows_the_human_reward(tmp_path: Path) -> None:
    answer = {"components": {"reach": "-tcp_to_goal", "done": "5*success"}, "rationale": "dense"}
    proposer = _proposer(tmp_path, [answer], None, oversample=1.0)
    proposer.initial(1, episodes_sample())
    assert not any("10*exp(-tcp_to_goal/0.2)" in t or "Refine the task's own" in t for t in _seen(proposer))


def test_a_ranked_first_human_learner_is_refined_again(tmp_path: Path) -> None:
    answer = {"components": {"reach": "8*exp(-tcp_to_goal/0.25)", "done": "6*success"}, "rationale": "retuned"}
    later = {"components": {"reach": "9*exp(-tcp_to_goal/0.3)", "done": "4*success"}, "rationale": "retuned again"}
    proposer = _proposer(tmp_path, [answer, later], HUMAN, oversample=1.0)
    given = proposer.initial(1, episodes_sample())
    rewards = [*given, HumanReward(expression=HUMAN)]  # as the search builds it in the init setting
    evals = [MemberEvaluation(i, 2, s, 10.0 * s, 0.0, 0.2, 0.2, 150.0) for i, s in enumerate((0.0, 0.5))]
    slots = slot_evaluations(evals, rewards, 0.0, [False, False])
    ctx = UpdateContext(round=1, env_steps=1000, setting="init", slots=tuple(slots), ranking=(1, 0), elites=(1,),
                        refill=(0,), rewards=tuple(rewards), rollouts={}, feature_sample=episodes_sample())
    new = proposer(ctx)
    assert len(new) == 1
    last_user = _seen(proposer)[-1]
    assert "Refine the task's own reward" in last_user and "10*exp(-tcp_to_goal/0.2)" in last_user


def test_a_copy_of_the_tasks_own_reward_is_a_duplicate_when_it_is_no_elite(tmp_path: Path) -> None:
    """Its learner is kept beside the slots: a refinement that restates it (renamed, re-split) would train a second
    learner on the same reward, so it is rejected as one even in a round whose elites are other rewards."""
    first = {"components": {"reach": "8*exp(-tcp_to_goal/0.25)", "done": "6*success"}, "rationale": "retuned"}
    second = {"components": {"reach": "7*exp(-tcp_to_goal/0.3)", "done": "5*success"}, "rationale": "softer"}
    copy = {"components": {"near": "exp(-tcp_to_goal/0.2)*10", "bonus": "5*success"}, "rationale": "restated"}
    fresh = {"components": {"reach": "9*exp(-tcp_to_goal/0.3)", "done": "4*success"}, "rationale": "retuned again"}
    proposer = _proposer(tmp_path, [first, second, copy, fresh], HUMAN, oversample=1.0)
    given = proposer.initial(2, episodes_sample())
    rewards = [*given, HumanReward(expression=HUMAN)]
    evals = [MemberEvaluation(i, 2, s, 10.0 * s, 0.0, 0.2, 0.2, 150.0) for i, s in enumerate((0.5, 0.0, 0.2))]
    slots = slot_evaluations(evals, rewards, 0.0, [False, False, False])
    ctx = UpdateContext(round=1, env_steps=1000, setting="init", slots=tuple(slots), ranking=(0, 2, 1), elites=(0,),
                        refill=(1,), rewards=tuple(rewards), rollouts={}, feature_sample=episodes_sample())
    assert len(proposer(ctx)) == 1
    later = [r for r in proposer.log.candidates.read() if r.round == 1]
    assert [r.rationale for r in later if r.verdict == "rejected"] == ["restated"]
    assert "duplicate" in (next(r for r in later if r.verdict == "rejected").reason or "")
    assert [r.rationale for r in later if r.verdict == "accepted"] == ["retuned again"]
