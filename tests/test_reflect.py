"""Computed diagnosis, the fact checker, critique rules and votes, and the reflect nodes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from helpers import described_task, scripted_client
from langgraph.runtime import Runtime

from lares_agent.errors import LaresError
from lares_agent.graphs.build import build_graph
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.reflect import analyse, critique
from lares_agent.graphs.round import run_round
from lares_agent.prompts.loader import load_persona
from lares_agent.tools.critique_rules import (
    Defect,
    apply_changes,
    defects_from_facts,
    defects_from_text,
    merge_defects,
    vote,
)
from lares_agent.tools.diagnosis import diagnose
from lares_agent.tools.fact_check import check_text
from lares_agent.tools.facts import Fact
from lares_agent.tools.trajectory import Rollout

TASK = described_task(
    "reach-v3", "d",
    {"d": ("gripper to goal", "m"), "tcp_speed": ("gripper speed", "m/s"), "action_norm": ("action size", "1"),
     "grasped": ("holds the object", "bool"), "success": ("goal reached", "bool")},
    description="Move the gripper to the goal.", horizon=40,
)
T = np.arange(40.0)
RNG = np.random.default_rng(0)
SAMPLE = {"d": RNG.uniform(0.1, 0.3, 256), "tcp_speed": RNG.uniform(0, 1, 256), "action_norm": RNG.uniform(0, 1, 256),
          "grasped": np.zeros(256), "success": np.zeros(256)}


def rollout(d: np.ndarray, success: np.ndarray | None = None, speed: np.ndarray | None = None,
            grasped: np.ndarray | None = None, rid: str = "e1") -> Rollout:
    feats = {"d": d, "tcp_speed": speed if speed is not None else 0.1 + 0 * d, "action_norm": 0.5 + 0 * d,
             "grasped": grasped if grasped is not None else 0 * d,
             "success": success if success is not None else 0 * d}
    return Rollout(feats, policy_id="p", reward_id=rid)


def kinds(facts: list[Fact]) -> dict[str, list[Fact]]:
    out: dict[str, list[Fact]] = {}
    for f in facts:
        out.setdefault(f.kind, []).append(f)
    return out


def elite(components: dict[str, str], stats: dict[str, Any] | None = None, id: str = "e1") -> dict[str, Any]:
    return {"id": id, "components": components, "fitness": 0.2, "success": 0.0, "complexity": 3.0,
            "stats": stats or {}}


# ---------------------------------------------------------------------------------------------- facts
def test_steady_progress_gives_progress_and_nothing_else_about_the_trajectory() -> None:
    facts = kinds(diagnose([rollout(0.3 - 0.0025 * T)], [], {}, TASK))
    (p,) = facts["progress"]
    assert p.numbers["start"] == pytest.approx(0.3) and p.numbers["closed"] == pytest.approx(0.325, abs=1e-3)
    assert "32% of the start distance closed" in p.text
    assert {"regressed", "stall", "oscillation", "jerk"}.isdisjoint(facts)
    assert facts["success"][0].numbers["rate"] == 0 and "never" in facts["success"][0].text
    assert facts["contact"][0].numbers["share"] == 0 and facts["speed"][0].subject == "tcp_speed"


def test_regress_stall_oscillation_jerk_and_success_levels_appear_when_they_happen() -> None:
    back = np.concatenate([0.3 - 0.01 * T[:20], 0.1 + 0.005 * T[:20]])  # best 0.1 at t20, then away
    stall = np.concatenate([0.3 - 0.01 * T[:10], np.full(30, 0.2)])
    wobble = 0.2 + 0.02 * (-1.0) ** T
    jerky = 0.2 + 0.8 * (T % 2)  # speed jumps every step
    hits = (T > 30).astype(float)
    facts = diagnose([rollout(back, success=hits), rollout(stall), rollout(wobble, speed=jerky)], [], {}, TASK)
    got = kinds(facts)
    (r,) = got["regressed"]
    assert r.numbers["best_step"] == 20 and r.numbers["best"] == pytest.approx(0.1)
    (s,) = got["stall"]
    assert s.numbers["value"] == pytest.approx(0.2) and s.numbers["steps"] >= 29 and s.numbers["near_goal"] == 0
    assert got["oscillation"][0].numbers["reversals"] >= 30
    assert got["jerk"][0].subject == "tcp_speed"
    (succ,) = got["success"]
    assert succ.numbers["rate"] == pytest.approx(1 / 3) and "sometimes" in succ.text
    always = kinds(diagnose([rollout(0.1 + 0 * T, success=1 + 0 * T)], [], {}, TASK))["success"][0]
    assert "always" in always.text and "stall" not in kinds(diagnose([rollout(0.1 + 0 * T, success=1 + 0 * T)],
                                                                      [], {}, TASK))  # done, not stuck


def test_the_steep_exp_is_flat_on_a_sample_at_d_near_0_2_and_a_scaled_one_is_not() -> None:
    steep = elite({"near": "exp(-100*d)", "shaped": "exp(-d/0.2)", "cost": "-d"})
    got = kinds(diagnose([], [steep], SAMPLE, TASK))
    flat = got["flat"]
    assert [f.subject for f in flat] == ["near"] and flat[0].feature == "d"
    assert flat[0].numbers["flat_share"] == 1.0 and flat[0].numbers["change"] < 1e-6
    assert flat[0].numbers["median"] == pytest.approx(np.median(SAMPLE["d"]))
    assert "wrong_sign" not in got and "effort" not in got


def test_component_facts_dominant_silent_effort_and_wrong_sign() -> None:
    e = elite({"progress": "-d", "effort": "-1*action_norm", "bonus": "5*success", "odd": "0.1*d"},
              stats={"progress": {"mean": -0.2, "std": 0.05, "share": 0.05},
                     "effort": {"mean": -0.5, "std": 0.3, "share": 0.9},
                     "bonus": {"mean": 0.0, "std": 0.0, "share": 0.0},
                     "odd": {"mean": 0.02, "std": 0.005, "share": 0.05}})
    got = kinds(diagnose([], [e], SAMPLE, TASK))
    assert [f.subject for f in got["dominant"]] == ["effort"] and got["dominant"][0].numbers["share"] == 0.9
    assert [f.subject for f in got["silent"]] == ["bonus"]
    assert [f.subject for f in got["effort"]] == ["effort"] and got["effort"][0].numbers["ratio"] > 1
    assert [f.subject for f in got["wrong_sign"]] == ["odd"]
    assert got["shares"][0].numbers["effort"] == 0.9
    calm = elite({"progress": "-d", "effort": "-0.01*action_norm"},
                 stats={"progress": {"mean": -0.2, "std": 0.05, "share": 0.6},
                        "effort": {"mean": -0.005, "std": 0.003, "share": 0.4}})
    assert {"dominant", "silent", "effort", "wrong_sign", "flat"}.isdisjoint(kinds(diagnose([], [calm], SAMPLE, TASK)))


def test_the_tasks_own_reward_and_an_empty_sample_give_no_reward_facts_and_no_error() -> None:
    assert diagnose([], [elite({"reward": "human"})], SAMPLE, TASK) == []
    assert [f.kind for f in diagnose([], [elite({"p": "-d"})], {}, TASK)] == []


# ---------------------------------------------------------------------------------------------- fact check
FACTS = [
    Fact("progress", "d", {"start": 0.3, "end": 0.2, "best": 0.2, "closed": 0.34}, "d went from 0.3 to 0.2"),
    Fact("success", "success", {"rate": 0.4, "episodes": 5}, "success sometimes"),
    Fact("contact", "grasped", {"share": 0.0, "episodes_with": 0.0}, "grasped: never on"),
    Fact("shares", "e1", {"approach": 0.02, "effort": 0.9, "bonus": 0.08}, "shares", "e1"),
]


def test_checker_drops_contradictions_keeps_consistent_statements_and_counts() -> None:
    text = "\n".join([
        "- The robot never gets closer to the goal.",  # progress closed 34%
        "- It reduces d from 0.3 to 0.2. It never succeeds.",  # second sentence: success 40%
        "- It grasps the object firmly.",  # grasped never
        "- approach dominates the reward.",  # approach has 2%
        "- effort dominates the reward.",  # true
        "- The robot does not grasp the object.",  # true
        "- It succeeds in some episodes.",  # true
        "- It should get closer faster.",  # advice: never checked
    ])
    result = check_text(text, FACTS)
    assert result.count == 4
    assert [d.statement for d in result.dropped] == ["The robot never gets closer to the goal.", "It never succeeds.",
                                                     "It grasps the object firmly.", "approach dominates the reward."]
    assert result.dropped[0].reason.startswith("progress") and result.dropped[3].reason.startswith("component")
    assert result.text.splitlines() == ["- It reduces d from 0.3 to 0.2.", "- effort dominates the reward.",
                                        "- The robot does not grasp the object.", "- It succeeds in some episodes.",
                                        "- It should get closer faster."]
    assert result.to_json()["dropped"] == 4 and result.to_json()["checked"] == 9


def test_checker_judges_the_component_a_claim_is_about_and_ignores_markdown_labels() -> None:
    """Seen with the 1.5B model (experiments/analysis/run.py): these are consistent and must stay."""
    shares = [Fact("shares", "e1", {"progress": 0.98, "effort": 0.02}, ""),
              Fact("success", "success", {"rate": 0.0}, "")]
    for text in ("- **Reward Component:** Progress drives the robot's movement, while effort costs are minimized.",
                 "- **Succeeds**: tcp_to_target went from 0.3 to 0.203, but stalled."):
        assert check_text(text, shares).count == 0, text
    assert check_text("- Progress is small, effort drives the robot.", shares).count == 1


def test_checker_drops_nothing_where_the_facts_agree() -> None:
    facts = [Fact("progress", "d", {"closed": 0.02}, ""), Fact("success", "success", {"rate": 0.0}, "")]
    result = check_text("- The robot never gets closer.\n- It never succeeds.\n- It stalls.", facts)
    assert result.count == 0 and len(result.kept) == 3
    assert check_text("- It always succeeds.", [Fact("success", "success", {"rate": 0.5}, "")]).count == 1
    # Found by experiments/analysis/run.py: a negated "always" is no claim of success, and an oscillating feature did
    # move away at times.
    never = [Fact("success", "success", {"rate": 0.0}, "")]
    assert check_text("- It gets closer, but it does not always reach it.", never).count == 0
    swings = [Fact("progress", "d", {"closed": 0.37}, ""), Fact("oscillation", "d", {"reversals": 4.0}, "")]
    assert check_text("- The robot sometimes regresses, moving away from the goal.", swings).count == 0
    assert check_text("- The robot moves away from the goal.", swings[:1]).count == 1


# ---------------------------------------------------------------------------------------------- defects
def test_each_defect_comes_from_its_fact_with_a_concrete_edit() -> None:
    e = elite({"near": "exp(-100*d)", "effort": "-1*action_norm"})
    stall = np.concatenate([0.3 - 0.025 * T[:10], np.full(30, 0.05)])
    facts = diagnose([rollout(stall)], [e], SAMPLE, TASK)
    defects = {d.kind: d for d in defects_from_facts(facts, [e], "d", list(SAMPLE), ["neutral"])}
    median = float(np.median(SAMPLE["d"]))
    assert defects["scale"].subject == "near" and f"exp(-d/{median:.3g})" in defects["scale"].edit
    assert defects["scale"].facts[0]["kind"] == "flat"
    assert defects["weight"].edit.endswith("-1*action_norm -> 0.1*(-1*action_norm)")
    assert defects["near_goal"].subject == "d" and "near = 2*exp(-d/0.05)" in defects["near_goal"].edit
    assert "5*(d < 0.075)" in defects["bonus"].edit  # a threshold the policy reaches (best 0.05), not success
    assert all(d.voters == ("neutral",) for d in defects.values())
    # The two kept episodes never succeeded, but the elite's evaluation did: no bonus is asked for.
    lucky = {**e, "success": 0.4}
    assert "bonus" not in {d.kind for d in defects_from_facts(facts, [lucky], "d", list(SAMPLE), ["neutral"])}
    # The fact itself says so, and the checker takes the evaluation's rate as the policy's.
    (kept,) = [f for f in diagnose([rollout(stall)], [lucky], SAMPLE, TASK) if f.kind == "success"]
    assert kept.numbers == {**kept.numbers, "rate": 0.0, "evaluated": 0.4} and "the evaluation: 40%" in kept.text
    assert check_text("- It never succeeds.", [kept]).count == 1
    assert check_text("- It succeeds sometimes.", [kept]).count == 0
    (plain,) = [f for f in diagnose([rollout(stall)], [e], SAMPLE, TASK) if f.kind == "success"]
    assert plain.numbers["evaluated"] == 0.0 and check_text("- It never succeeds.", [plain]).count == 0
    # A bonus threshold stays below where the episodes start: 1.5x a best of 0.486 would fire from the start (0.56).
    door = [Fact("progress", "d", {"start": 0.56, "end": 0.486, "best": 0.486, "closed": 0.13}, "d went ..."),
            Fact("success", "success", {"rate": 0.0}, "success never")]
    (bonus,) = [d for d in defects_from_facts(door, [e], "d", list(SAMPLE), ["neutral"]) if d.kind == "bonus"]
    assert "5*(d < 0.523)" in bonus.edit


def test_each_computed_edit_is_also_a_change_that_makes_it() -> None:
    """The critique-edit control makes the edits the critique writes out: each computed defect's `change` gives the
    expression its text names, and survives the state's JSON."""
    e = elite({"near": "exp(-100*d)", "effort": "-1*action_norm"})
    stall = np.concatenate([0.3 - 0.025 * T[:10], np.full(30, 0.05)])
    facts = diagnose([rollout(stall)], [e], SAMPLE, TASK)
    defects = {d.kind: d for d in defects_from_facts(facts, [e], "d", list(SAMPLE), ["neutral"])}
    comps = e["components"]
    median = float(np.median(SAMPLE["d"]))
    assert apply_changes(comps, [defects["scale"]])[0] == {**comps, "near": f"exp(-d/{median:.3g})"}
    assert apply_changes(comps, [defects["weight"]])[0] == {**comps, "effort": "0.1*(-1*action_norm)"}
    assert apply_changes(comps, [defects["near_goal"]])[0] == {**comps, "near": "2*exp(-d/0.05)"}
    assert apply_changes(comps, [defects["bonus"]])[0] == {**comps, "bonus": "5*(d < 0.075)"}
    assert all(Defect.from_json(d.to_json()) == d for d in defects.values())
    # made in turn; one touching a component an earlier one changed is skipped whole, so each made one shows
    both, made = apply_changes(comps, [defects["near_goal"], defects["scale"], defects["weight"]])
    assert made == [defects["near_goal"], defects["weight"]] and both["near"] == "2*exp(-d/0.05)"
    # a change that needs a component the reward lacks is not made
    assert apply_changes({"progress": "-d"}, [defects["weight"]]) == ({"progress": "-d"}, [])
    flip = Defect("sign", "p", "p", "flip", change=(("negate", "p", ""),))
    drop = Defect("other", "p", "p", "drop", change=(("drop", "p", ""),))
    assert apply_changes({"p": "d", "q": "-d"}, [flip]) == ({"p": "-(d)", "q": "-d"}, [flip])
    assert apply_changes({"p": "d", "q": "-d"}, [drop]) == ({"q": "-d"}, [drop])
    assert apply_changes({"p": "d"}, [drop]) == ({"p": "d"}, [])  # it would leave no component


def test_duplicates_of_the_same_fix_merge_with_their_facts_and_voters() -> None:
    back = np.concatenate([0.3 - 0.025 * T[:10], 0.05 + 0.001 * T[:30]])
    stall = np.concatenate([0.3 - 0.025 * T[:10], np.full(30, 0.05)])
    facts = diagnose([rollout(back, rid="a"), rollout(stall, rid="b")], [], {}, TASK)
    near = [d for d in defects_from_facts(facts, [], "d", list(SAMPLE), ["x"]) if d.kind == "near_goal"]
    assert len(near) == 1 and {f["kind"] for f in near[0].facts} == {"regressed", "stall"}
    a = Defect("weight", "effort", "p", "lower it", voters=("a",), source="llm")
    b = Defect("weight", "effort", "p2", "lower it tenfold", voters=("b",), source="rules")
    (merged,) = merge_defects([a, b])
    assert merged.edit == "lower it tenfold" and merged.voters == ("a", "b") and merged.source == "rules"


def test_critic_bullets_become_defects_and_the_vote_keeps_what_half_the_critics_name() -> None:
    critics = ["neutral", "strict-coach", "safety-reviewer"]
    one = defects_from_text("- effort outweighs progress: lower its weight\n- add a bonus for success", "neutral",
                            ["effort", "bonus"], ["d"])
    assert [(d.kind, d.subject) for d in one] == [("weight", "effort"), ("bonus", "bonus")]
    two = defects_from_text("- the effort term is too strong, reduce it", "strict-coach", ["effort"], ["d"])
    three = defects_from_text("- jerky motion: add a smoothness cost", "safety-reviewer", ["effort"], ["d"])
    kept = vote([*one, *two, *three], critics)
    assert [(d.kind, d.subject, d.voters) for d in kept] == [("weight", "effort", ("neutral", "strict-coach"))]
    assert [d.kind for d in vote([*one, *two, *three], ["neutral"])] == ["weight", "bonus", "smooth"]


# ---------------------------------------------------------------------------------------------- nodes
def context(script: list[Any], analysis: str = "facts", critics: tuple[str, ...] = (),
            task_examples: str = "own") -> RunContext:
    stall = np.concatenate([0.3 - 0.025 * T[:10], np.full(30, 0.05)])
    return RunContext(llm=scripted_client(script), task=TASK, sample=SAMPLE, rollouts={"p0": rollout(stall)},
                      limits=GraphLimits(analysis=analysis, task_examples=task_examples),  # type: ignore[arg-type]
                      critics=tuple(load_persona(c) for c in critics))


STATE: dict[str, Any] = {"round": 1, "n_wanted": 1, "rollout_ids": ["p0"],
                         "elites": [elite({"near": "exp(-100*d)", "effort": "-1*action_norm"})]}
GOOD = '{"components": {"progress": "-2*d", "bonus": "5*success"}, "rationale": "t"}'


def test_facts_mode_makes_no_llm_call_in_analyse_or_critique() -> None:
    ctx = context([], critics=("neutral", "strict-coach"))
    a = analyse(STATE, Runtime(context=ctx))
    c = critique({**STATE, **a}, Runtime(context=ctx))
    assert ctx.llm.chat_model.calls == 0  # type: ignore[attr-defined]
    assert a["analysis"].startswith("- ") and {f["kind"] for f in a["facts"]} >= {"progress", "stall", "flat"}
    assert "no LLM call" in a["summary"] and "fact_check" not in a
    assert {d["kind"] for d in c["defects"]} >= {"scale", "weight", "near_goal", "bonus"}
    assert all(d["voters"] == ["neutral", "strict-coach"] for d in c["defects"])  # same rules: unanimous
    assert "Fix: near = 2*exp" not in c["critique"] and "near = 2*exp(-d/0.05)" in c["critique"]
    result = run_round(build_graph(), STATE, "r1", context([GOOD]))
    assert [s["node"] for s in result.steps] == ["analyse", "critique", "propose", "validate"]
    assert len(result.accepted) == 1 and "exp(-d/" in result.critique


def test_the_critique_edit_control_fills_the_slots_with_the_computed_edits_and_asks_nothing() -> None:
    """Without the LLM, analyse and critique still run (computed), and each slot gets the elite with the critique's
    edits made: all of them first, then each alone; with none that applies, the numeric children fill the slots."""
    limits = GraphLimits(llm_proposals=False, edits="critique", numeric_children=0)
    ctx = context([])
    result = run_round(build_graph(), {**STATE, "n_wanted": 3}, "r1", replace(ctx, limits=limits))
    assert ctx.llm.chat_model.calls == 0  # type: ignore[attr-defined]
    assert [s["node"] for s in result.steps] == ["analyse", "critique", "propose", "validate"]
    assert len(result.accepted) == 3
    assert all(r["origin"] == "rule" and r["parent_id"] == "e1" for r in result.accepted)
    assert all(r["rationale"].startswith("critique's edit of e1: ") for r in result.accepted)
    first = result.accepted[0]["components"]
    assert first["near"] == "2*exp(-20.0*d)" and first["effort"] == "-0.1*action_norm" and "bonus" in first
    alone = [r["rationale"].removeprefix("critique's edit of e1: ") for r in result.accepted]
    assert alone[0] not in result.critique and all(a in result.critique for a in alone[1:])  # then each alone
    bare = replace(ctx, rollouts={}, limits=replace(limits, numeric_children=2))
    fine = {**STATE, "rollout_ids": [], "n_wanted": 2, "elites": [elite({"progress": "-2*d"})]}
    plain = run_round(build_graph(), fine, "r2", bare)
    assert len(plain.accepted) == 2 and all(r["origin"] == "child" for r in plain.accepted)
    with pytest.raises(LaresError, match="reflect=True"):
        GraphLimits(llm_proposals=False, edits="critique", reflect=False)
    with pytest.raises(LaresError, match="edits must be one of"):
        GraphLimits(llm_proposals=False, edits="nonsense")  # type: ignore[arg-type]


def test_llm_mode_checks_the_summary_and_records_the_drop_count_with_the_call(tmp_path: Any) -> None:
    summary = "- The robot never gets closer to the goal.\n- It stalls at d = 0.05."
    llm = scripted_client([summary], tmp_path / "calls.jsonl")
    ctx = context([])
    ctx = RunContext(llm=llm, task=TASK, sample=SAMPLE, rollouts=ctx.rollouts, limits=GraphLimits(analysis="llm"))
    a = analyse(STATE, Runtime(context=ctx))
    assert a["analysis"] == "- It stalls at d = 0.05." and a["fact_check"]["dropped"] == 1
    import json

    (row,) = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert row["meta"]["fact_check"] == {"checked": 2, "dropped": 1} and row["meta"]["node"] == "analyse"


def test_critics_call_once_each_their_defects_merge_by_vote_and_the_system_message_never_changes() -> None:
    answers = ["- the effort term is too strong: lower its weight", "- effort outweighs progress, reduce it",
               "- jerky motion: add a smoothness cost on tcp_speed"]
    ctx = context(["- it stalls near the goal", *answers, GOOD], analysis="llm",
                  critics=("neutral", "strict-coach", "safety-reviewer"))
    result = run_round(build_graph(), STATE, "r1", ctx)
    seen = ctx.llm.chat_model.seen  # type: ignore[attr-defined]
    assert len(seen) == 5 and len({m[0].content for m in seen}) == 1  # analyse, 3 critics, propose: one system
    personas = [m[1].content.split("# Your persona\n")[1] for m in seen[1:4]]
    assert personas == [load_persona(p).text for p in ("neutral", "strict-coach", "safety-reviewer")]
    assert "persona" not in seen[0][0].content.lower()
    step = result.steps[1]
    assert "3 critic(s)" in step["summary"]
    assert "smoothness" not in result.critique  # one critic of three: voted out
    assert "[3/3 critics]" in result.critique  # the computed weight defect, merged with two critics' fixes


def test_analysis_and_personas_options_are_checked_and_saved() -> None:
    from lares_agent.errors import ConfigError
    from lares_agent.search.config import SearchConfig

    cfg = SearchConfig(analysis="llm", personas=("neutral", "strict-coach"))
    assert SearchConfig.from_json(cfg.to_json()) == cfg and SearchConfig().analysis == "facts"
    with pytest.raises(ConfigError, match="--analysis must be one of facts, llm"):
        SearchConfig(analysis="guess")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--personas must be distinct"):
        SearchConfig(personas=("neutral", "neutral"))
    with pytest.raises(ConfigError, match="analysis must be one of"):
        GraphLimits(analysis="guess")  # type: ignore[arg-type]
    for mode in ("none", "other", "own"):
        assert SearchConfig.from_json(SearchConfig(task_examples=mode).to_json()).task_examples == mode
    assert SearchConfig().task_examples == GraphLimits().task_examples == "none"
    # a config.json from before the option resumes with the answers for its own task it was shown
    old = {k: v for k, v in SearchConfig().to_json().items() if k != "task_examples"}
    assert SearchConfig.from_json(old).task_examples == "own"
    with pytest.raises(ConfigError, match="--task-examples must be one of none, other, own"):
        SearchConfig(task_examples="mine")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="task_examples must be one of"):
        GraphLimits(task_examples="mine")  # type: ignore[arg-type]


def test_task_examples_other_reaches_every_calls_system_message() -> None:
    own, other = context([GOOD]), context([GOOD], task_examples="other")
    for ctx in (own, other):
        assert len(run_round(build_graph(), STATE, "r1", ctx).accepted) == 1
    (mine,), (theirs,) = (c.llm.chat_model.seen for c in (own, other))  # type: ignore[attr-defined]
    assert "For this task:" in mine[0].content and "For this task:" not in theirs[0].content
    assert "None for this task" in theirs[0].content


def test_task_examples_none_is_the_default_and_no_message_of_a_round_shows_or_names_an_example() -> None:
    second = '{"components": {"progress": "-3*d", "effort": "-0.01*action_norm"}, "rationale": "t"}'
    ctx = RunContext(llm=scripted_client([GOOD, second]), task=TASK, sample=SAMPLE)  # GraphLimits' defaults
    assert ctx.limits.task_examples == "none"
    assert len(run_round(build_graph(), {"round": 0, "n_wanted": 2}, "r0", ctx).accepted) == 2
    seen = ctx.llm.chat_model.seen  # type: ignore[attr-defined]
    assert len(seen) == 2 and len({m[0].content for m in seen}) == 1  # one system message for the prefix cache
    system = seen[0][0].content
    assert "Building blocks" in system and "For a DIFFERENT task" not in system and "For this task:" not in system
    for _, user in seen:  # from scratch, with nothing to point at
        assert "the examples" not in user.content and "from scratch" in user.content
        assert 'Answer with ONE JSON object: {"components": {...}' in user.content
