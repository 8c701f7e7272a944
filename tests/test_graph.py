"""The round graph with a scripted chat model: routing, retries, bounds, partial updates, trace and replay.

No real model here (tests/test_graph_local_model.py has one); the scripted model answers in call order, so
each test states exactly which answers the graph gets and checks what it made of them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import described_task, scripted_client
from langgraph.runtime import Runtime

from lares_agent.graphs import nodes
from lares_agent.graphs.build import build_graph, open_trace
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.prompting import AnswerError, extract_candidates
from lares_agent.graphs.round import run_round
from lares_agent.graphs.routing import route_after_validate, route_start
from lares_agent.llm import LLMConfig, make_client
from lares_agent.memory.cases import Case, CaseStore
from lares_agent.rewards import compile_record, scale_bounds
from lares_agent.tools.trajectory import Rollout

TASK = described_task(
    "reach-v3", "tcp_to_goal",
    {"tcp_to_goal": ("gripper to goal", "m"), "tcp_speed": ("gripper speed", "m/s"),
     "action_norm": ("action size", "1"), "success": ("goal reached", "bool")},
    description="Move the gripper to the goal position.", horizon=150,
)


def cand(**components: str) -> str:
    return json.dumps({"components": components, "rationale": "test"})


GOOD = cand(approach="-2*tcp_to_goal", bonus="5*success")
GOOD2 = cand(approach="exp(-tcp_to_goal/0.1)", effort="-0.01*action_norm")
ELITE = {"id": "e1", "components": {"d": "-tcp_to_goal"}, "fitness": 0.5, "success": 0.5, "complexity": 2.0,
         "stats": {"d": {"mean": -0.2, "std": 0.1}}}


LLM_ANALYSIS = GraphLimits(analysis="llm")  # the tests that script the analyse and critique answers


def make_deps(script: list[Any], tmp_path: Path | None = None, **kw: Any) -> RunContext:
    rng = np.random.default_rng(0)
    sample = {"tcp_to_goal": rng.uniform(0, 0.5, 128), "tcp_speed": rng.uniform(0, 1, 128),
              "action_norm": rng.uniform(0, 1, 128), "success": rng.integers(0, 2, 128).astype(float)}
    llm = scripted_client(script, tmp_path / "llm_calls.jsonl" if tmp_path else None)
    return RunContext(llm=llm, task=TASK, sample=sample, **kw)


def seen(deps: RunContext) -> list[list[Any]]:
    return deps.llm.chat_model.seen  # type: ignore[attr-defined]


def test_initial_round_goes_straight_to_propose_and_compiles_the_accepted_reward() -> None:
    deps = make_deps([GOOD])
    result = run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", deps)
    assert [s["node"] for s in result.steps] == ["propose", "validate"]
    (rec,) = result.accepted
    assert rec["components"] == {"approach": "-2*tcp_to_goal", "bonus": "5*success"}
    assert rec["complexity"] and rec["parent_id"] is None and not result.rejected
    values = compile_record(rec, deps.task)({k: v[:4] for k, v in deps.sample.items()})
    assert values.shape == (4,)
    assert deps.llm.usage["by_tag"]["propose"]["calls"] == 1


def test_full_round_reads_rollouts_then_critiques_then_proposes_from_the_elite() -> None:
    t = np.arange(20.0)
    rollout = Rollout({"tcp_to_goal": 0.3 - 0.01 * t, "success": 0 * t}, {"d": -(0.3 - 0.01 * t)})
    deps = make_deps(["- it stalls at 0.1 m", "- the distance term is too flat: scale it", GOOD],
                     rollouts={"p0": rollout}, limits=LLM_ANALYSIS)
    result = run_round(build_graph(), {"round": 2, "elites": [ELITE], "rollout_ids": ["p0"], "n_wanted": 1}, "r2", deps)
    assert [s["node"] for s in result.steps] == ["analyse", "critique", "propose", "validate"]
    assert result.analysis == "- it stalls at 0.1 m" and "too flat" in result.critique
    (rec,) = result.accepted
    assert rec["parent_id"] == "e1" and rec["critique_id"] == result.critique_id == "r2-critique"
    analyse_prompt, critique_prompt, propose_prompt = (m[1].content for m in seen(deps))
    assert "tcp_to_goal went from 0.3 to 0.11" in analyse_prompt  # the computed facts, not an LLM's
    assert "stalls at 0.1 m" in critique_prompt and "e1.d: mean -0.2" in critique_prompt
    assert "too flat" in propose_prompt and "Improve the elite e1" in propose_prompt
    systems = {m[0].content for m in seen(deps)}
    assert len(systems) == 1  # one fixed system prefix for every call (llama.cpp prefix cache)


def test_elites_without_rollouts_skip_analyse() -> None:
    assert route_start({"n_wanted": 1, "elites": [ELITE]}) == "critique"
    assert route_start({"round": 0, "n_wanted": 1, "elites": [ELITE]}) == "propose"  # init's round 0: refine at once
    assert route_start({"n_wanted": 1, "elites": [ELITE], "rollout_ids": ["p"]}) == "analyse"
    assert route_start({"n_wanted": 1}) == "propose"
    assert route_start({"n_wanted": 0}) == "__end__"


HOSTILE = [
    "",
    "Sure! A good reward would be the negative distance.",
    '{"components": {"d": "-tcp_to_goal"',
    '{"candidates": [{"reward": "-tcp_to_goal"}]}',
    cand(x="__import__('os').system('echo hacked')"),
    cand(x="tcp_to_goal.__class__"),
    cand(x="-gripper_to_puck"),
    cand(x="2*tcp_to_goal"),
    cand(x="log(tcp_to_goal - 1)"),
    cand(x="-action_norm"),
    cand(x="-tcp_to_goal"),
]


def test_malformed_and_hostile_answers_are_rejected_with_reasons_then_a_retry_succeeds() -> None:
    deps = make_deps([*HOSTILE, GOOD], limits=GraphLimits(retry_budget=len(HOSTILE)))  # computed critique
    result = run_round(build_graph(), {"round": 1, "elites": [ELITE], "n_wanted": 1}, "r1", deps)
    assert len(result.accepted) == 1 and result.attempts == len(HOSTILE) + 1
    reasons = [r["reason"] for r in result.rejected]
    assert len(reasons) == len(HOSTILE)
    for fragment in ("empty answer", "no JSON", "not valid JSON", "no 'components'", "gripper_to_puck",
                     "lower-is-better", "nan/inf", "never uses tcp_to_goal", "duplicate"):
        assert any(fragment in r for r in reasons), fragment
    assert all(r for r in reasons)
    last_prompt = seen(deps)[-1][1].content
    assert "lower-is-better" in last_prompt  # the reasons went back to propose


def test_retry_budget_bounds_the_loop_when_nothing_is_acceptable() -> None:
    deps = make_deps(["no json here"], limits=GraphLimits(retry_budget=2))
    result = run_round(build_graph(), {"round": 1, "n_wanted": 2}, "r1", deps)
    assert result.accepted == () and result.attempts == 3
    assert len(result.rejected) == 6 and len(seen(deps)) == 6


def test_llm_errors_become_reasons_and_never_crash() -> None:
    deps = make_deps([RuntimeError("connection reset"), GOOD], limits=GraphLimits(retry_budget=1))
    result = run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", deps)
    assert "connection reset" in result.rejected[0]["reason"] and len(result.accepted) == 1


def test_analyse_and_critique_fall_back_when_the_model_fails() -> None:
    deps = make_deps([RuntimeError("down"), "", GOOD], limits=LLM_ANALYSIS)
    deps = replace(deps, rollouts={"p0": Rollout({"tcp_to_goal": np.linspace(0.3, 0.1, 10)})})
    result = run_round(build_graph(), {"round": 1, "elites": [ELITE], "rollout_ids": ["p0"], "n_wanted": 1}, "r", deps)
    assert "no LLM analysis" in result.analysis and "tcp_to_goal went from 0.3 to 0.1" in result.analysis
    # the computed defects stand in for the failed critique call
    assert result.critique.startswith("- ") and result.critique_id == "r1-critique" and len(result.accepted) == 1
    assert "no critique (empty answer)" in result.steps[1]["summary"]


def test_several_candidates_one_call_each_and_later_calls_see_earlier_proposals() -> None:
    deps = make_deps([GOOD, GOOD2])
    result = run_round(build_graph(), {"round": 0, "n_wanted": 2}, "r0", deps)
    assert len(result.accepted) == 2 and result.attempts == 1
    assert "-2*tcp_to_goal" in seen(deps)[1][1].content  # "already proposed" lists the first one
    assert len({r["id"] for r in result.accepted}) == 2


def test_duplicates_within_a_round_are_rejected() -> None:
    deps = make_deps([GOOD, cand(a="5*success", b="-2*tcp_to_goal"), GOOD2])
    result = run_round(build_graph(), {"round": 0, "n_wanted": 2}, "r0", deps)
    assert len(result.accepted) == 2 and result.rejected[0]["reason"].startswith("duplicate")


def test_nodes_return_partial_updates_and_do_not_mutate_the_state() -> None:
    runtime = Runtime(context=make_deps([GOOD]))
    state = {"round": 0, "n_wanted": 1, "elites": [], "accepted": [], "rejected": [], "attempts": 0}
    before = json.dumps(state, sort_keys=True)
    update = nodes.propose(state, runtime)
    assert json.dumps(state, sort_keys=True) == before
    assert set(update) == {"pending", "attempts", "cases", "node", "summary", "steps"} and update["attempts"] == 1
    assert update["pending"][0]["candidate"] == json.loads(GOOD)  # the decoded answer, not re-encoded text
    verdict = nodes.validate({**state, **update, "attempts": 1}, runtime)
    assert set(verdict) == {"accepted", "rejected", "pending", "node", "summary", "steps"}
    assert verdict["pending"] == [] and len(verdict["accepted"]) == 1
    assert "candidate" not in verdict["accepted"][0]  # the state keeps expressions, not the LLM's answer


def test_router_is_pure_and_bounded() -> None:
    assert route_after_validate({"n_wanted": 2, "accepted": [{}], "attempts": 1}, max_attempts=3) == "propose"
    assert route_after_validate({"n_wanted": 2, "accepted": [{}], "attempts": 3}, max_attempts=3) == "__end__"
    assert route_after_validate({"n_wanted": 1, "accepted": [{}], "attempts": 1}, max_attempts=3) == "__end__"


def test_retrieved_cases_reach_the_prompt_and_no_retrieval_says_so(tmp_path: Path) -> None:
    store = CaseStore(tmp_path / "cases.sqlite")
    store.add(Case("reach-v3", "reach", {"r": "-3*tcp_to_goal"}, 2.0, "old-run", "c9", fitness=0.8))
    deps = make_deps([GOOD], cases=store)
    run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", deps)
    assert "-3*tcp_to_goal" in seen(deps)[0][1].content
    off = make_deps([GOOD])
    run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", off)
    assert "retrieval off" in seen(off)[0][1].content


def test_sqlite_trace_stores_every_step_and_a_finished_round_is_not_rerun(tmp_path: Path) -> None:
    deps = make_deps(["no json", GOOD], tmp_path)
    saver = open_trace(tmp_path)
    graph = build_graph(checkpointer=saver)
    config = {"configurable": {"thread_id": "round-1"}}
    first = run_round(graph, {"round": 1, "n_wanted": 1}, "round-1", deps)
    history = list(graph.get_state_history(config))[::-1]  # oldest first: one checkpoint per step
    nodes = [h.values.get("node") for h in history if h.values.get("node")]
    assert nodes == ["propose", "validate", "propose", "validate"]
    assert "accepted 1" in history[-1].values["summary"]
    again = run_round(graph, {"round": 1, "n_wanted": 1}, "round-1", deps)
    assert again == first and len(seen(deps)) == 2  # no new LLM call
    rows = [json.loads(line) for line in (tmp_path / "llm_calls.jsonl").read_text().splitlines()]
    tags = [(r["tag"], r["meta"]["round"], r["meta"]["attempt"]) for r in rows]
    assert tags == [("propose", 1, 1), ("propose", 1, 2)]
    saver.conn.close()
    assert (tmp_path / "trace.sqlite").stat().st_size > 0


def test_replay_reproduces_a_recorded_round(tmp_path: Path) -> None:
    t = np.arange(20.0)
    rollouts = {"p0": Rollout({"tcp_to_goal": 0.3 - 0.01 * t, "success": 0 * t})}
    deps = make_deps(["analysis", "critique", "bad", GOOD, GOOD2], tmp_path,
                     limits=GraphLimits(retry_budget=2, analysis="llm"))
    deps = replace(deps, rollouts=rollouts)
    round_input = {"round": 3, "elites": [ELITE], "rollout_ids": ["p0"], "n_wanted": 2}
    recorded = run_round(build_graph(), round_input, "r3", deps)
    client = make_client(LLMConfig(backend="replay"), run_dir=None, replay_from=tmp_path)
    replay_deps = RunContext(llm=client, task=TASK, sample=deps.sample, rollouts=rollouts, limits=deps.limits)
    replayed = run_round(build_graph(), round_input, "r3", replay_deps)
    assert replayed == recorded and len(recorded.accepted) == 2
    assert {compile_record(r, replay_deps.task).id for r in replayed.accepted} == {r["id"] for r in recorded.accepted}


def test_accepted_records_compile_to_their_reward_in_a_new_process() -> None:
    """The round hands back records only; compile_record (also after a resume) gives the reward they name."""
    deps = make_deps([GOOD])
    result = run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", deps)
    (rec,) = result.accepted
    reward = compile_record(dict(json.loads(json.dumps(rec))), TASK)  # as read back from the trace
    assert reward.id == rec["id"] and reward.key == rec["key"] == "5*success - 2*tcp_to_goal"


def test_the_reward_key_finds_reordered_factors_and_renamed_components_as_duplicates() -> None:
    same = [cand(a="-tcp_to_goal*2", b="success*5"),  # 2*d vs d*2, renamed
            cand(total="5*success - 2*tcp_to_goal")]  # one component instead of two
    deps = make_deps([GOOD, *same, GOOD2], limits=GraphLimits(retry_budget=3))
    result = run_round(build_graph(), {"round": 0, "n_wanted": 2}, "r0", deps)
    assert [r["reason"] for r in result.rejected] == ["duplicate of a candidate already in the population"] * 2
    assert len(result.accepted) == 2 and len({r["key"] for r in result.accepted}) == 2
    elite = {"id": "e9", "components": {"x": "5*success", "y": "-tcp_to_goal*2"}}
    again = run_round(build_graph(), {"round": 1, "n_wanted": 1, "elites": [elite]}, "r1",
                      make_deps([GOOD, GOOD2]))
    assert again.rejected[0]["reason"].startswith("duplicate") and again.accepted[0]["key"] != elite_key(GOOD)


def elite_key(text: str) -> str:
    return compile_record({"id": "x", **json.loads(text)}, TASK).key


def test_a_decoded_answer_over_the_size_limit_is_rejected_with_its_size() -> None:
    """Each part within its own limit (expressions <= 1000, rationale <= 4000 characters), the whole over 8000."""
    long = {f"c{i}": " + ".join(["0.001*tcp_to_goal"] * 50) for i in range(8)}  # 8 x 997 characters
    answer = json.dumps({"components": long, "rationale": "r" * 1000})
    deps = make_deps([answer, GOOD], limits=GraphLimits(retry_budget=1))
    result = run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", deps)
    (too_long,) = result.rejected
    assert too_long["reason"] == ("candidate too long: 8992 characters in its names, expressions and rationale, "
                                  "limit 8000")
    assert len(result.accepted) == 1


def test_bad_round_input_is_refused() -> None:
    graph, deps = build_graph(), make_deps([GOOD])
    with pytest.raises(ValueError, match="n_wanted"):
        run_round(graph, {"round": 0}, "x", deps)
    with pytest.raises(ValueError, match="unknown round input"):
        run_round(graph, {"round": 0, "n_wanted": 1, "elitez": []}, "x", deps)


@pytest.mark.parametrize(
    ("text", "reason"),
    [("", "empty"), ("prose", "no JSON"), ("[]", "empty candidates"), ('{"candidates": [1]}', "no 'components'")],
)
def test_extractor_reasons(text: str, reason: str) -> None:
    with pytest.raises(AnswerError, match=reason):
        extract_candidates(text)


def test_extractor_accepts_fenced_wrapped_and_bare_forms() -> None:
    assert extract_candidates("```json\n" + GOOD + "\n```")[0]["components"]["bonus"] == "5*success"
    assert len(extract_candidates(json.dumps({"candidates": [json.loads(GOOD), json.loads(GOOD2)]}))) == 2


def test_edits_rotate_from_the_fittest_every_second_call_writes_anew_and_explore_asks_for_something_else() -> None:
    unscored = {**ELITE, "id": "e0", "fitness": None}
    best = {**ELITE, "id": "e2", "components": {"d": "-3*tcp_to_goal"}, "fitness": 0.9}
    deps = make_deps([GOOD, GOOD2, cand(a="-tcp_to_goal**2")], limits=GraphLimits(oversample=1.5))
    result = run_round(build_graph(), {"round": 1, "elites": [unscored, ELITE, best], "n_wanted": 2,
                                           "explore": True}, "r1", deps)
    assert {r["parent_id"] for r in result.accepted} <= {"e2", None, "e1"} and len(result.accepted) == 2
    prompts = [m[1].content for m in seen(deps)]
    assert len(prompts) == 3 and all("lost diversity" in p for p in prompts)
    # edit the best, then a reward from scratch, then edit the next elite
    assert "Improve the elite e2" in prompts[0] and "from scratch" in prompts[1]
    assert "Improve the elite e1" in prompts[2]


def test_temperature_warms_within_a_round_and_the_grammar_reaches_the_backend() -> None:
    deps = make_deps([GOOD, GOOD2, cand(a="-tcp_to_goal**2")], limits=GraphLimits(temperature=0.4))
    deps.llm.kind = "local"  # the llama.cpp option path: temperature and the answer grammar are passed on
    run_round(build_graph(), {"round": 0, "n_wanted": 3}, "r0", deps)
    options = deps.llm.chat_model.options  # type: ignore[attr-defined]
    assert [round(o["temperature"], 2) for o in options] == [0.4, 0.55, 0.7]
    assert "response_format" not in options[0] and '"tcp_to_goal"' in options[0]["grammar"]
    # From scratch the answer must open with a progress term on tcp_to_goal; refining the task's own reward, not.
    assert 'progressterm ::= "-" (num sp "*" sp)? "tcp_to_goal"' in options[0]["grammar"]
    low, high = scale_bounds(deps.sample["tcp_to_goal"])  # its scale follows the round's sampled distances
    (scale,) = [r for r in options[0]["grammar"].splitlines() if r.startswith("progresstermscale ::= ")]
    assert f'"{low:.2f}"' in scale and f'"{high:.2f}"' in scale and '"0.05"' not in scale and low < 0.3 < high
    refine = make_deps([GOOD], human_reward={"d": "-tcp_to_goal"})
    refine.llm.kind = "local"
    run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", refine)
    assert "progressterm" not in refine.llm.chat_model.options[0]["grammar"]  # type: ignore[attr-defined]
    schema = make_deps([GOOD], limits=GraphLimits(grammar=False))
    schema.llm.kind = "local"  # without the grammar, the JSON schema constrains the shape alone
    run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", schema)
    options = schema.llm.chat_model.options  # type: ignore[attr-defined]
    assert options[0]["response_format"]["schema"]["required"] == ["components", "rationale"]
    assert "grammar" not in options[0]
    explore = make_deps([GOOD])
    explore.llm.kind = "local"
    run_round(build_graph(), {"round": 0, "n_wanted": 1, "explore": True}, "r0", explore)
    assert explore.llm.chat_model.options[0]["temperature"] == explore.limits.explore_temperature  # type: ignore[attr-defined]
