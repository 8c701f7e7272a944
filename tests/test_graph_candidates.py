"""Many cheap candidates: several per LLM call, numeric children of the elites, one dedupe by reward key,
and the screen that keeps the best valid ones for the free slots when asked to, by the offline pre-screen or the
verifier (both score them always). Scripted model, real validator."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
from helpers import described_task, scripted_client

from lares_agent.graphs.build import build_graph
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.prompting import answer_format, extract_candidates, proposal_schema
from lares_agent.graphs.round import run_round
from lares_agent.rewards import record_key
from lares_agent.rewards.prescreen import NEXT_PREFIX

TASK = described_task(
    "reach-v3", "tcp_to_goal",
    {"tcp_to_goal": ("gripper to goal", "m"), "action_norm": ("action size", "1"), "success": ("goal reached", "bool")},
    description="Move the gripper to the goal position.", horizon=150,
)


def cand(**components: str) -> dict[str, Any]:
    return {"components": components, "rationale": "test"}


def episodes_sample(seed: int = 0, n: int = 32, t: int = 20) -> dict[str, np.ndarray]:
    """Random-walk distances in episodes, with the next step's features as the engine's sample carries them."""
    rng = np.random.default_rng(seed)
    d = np.clip(rng.uniform(0.1, 0.5, (n, 1)) + np.cumsum(rng.normal(0, 0.02, (n, t)), axis=1), 0.0, 1.0)
    cols = {"tcp_to_goal": d, "action_norm": rng.uniform(0, 1, (n, t)), "success": (d < 0.12).astype(float)}
    out = {k: v.ravel() for k, v in cols.items()}
    for k, v in cols.items():
        nxt = np.full_like(v, np.nan)
        nxt[:, :-1] = v[:, 1:]
        out[NEXT_PREFIX + k] = nxt.ravel()
    return out


def deps(script: list[Any], **limits: Any) -> RunContext:
    llm = scripted_client(script)
    llm.kind = "local"  # the llama.cpp option path: the JSON schema reaches the model
    return RunContext(llm=llm, task=TASK, sample=episodes_sample(), limits=GraphLimits(**limits))


ELITE = {"id": "e1", "components": {"d": "-2*tcp_to_goal", "b": "5*success"}, "fitness": 0.5, "success": 0.5,
         "complexity": 4.0}


def test_one_call_answers_several_candidates_under_the_list_schema() -> None:
    schema = proposal_schema(3, 4)
    assert schema["properties"]["candidates"]["minItems"] == 3 == schema["properties"]["candidates"]["maxItems"]
    assert "exactly 3 different candidates" in answer_format(3)
    answer = {"candidates": [cand(a="-tcp_to_goal"), cand(a="exp(-tcp_to_goal/0.1)"), cand(a="-tcp_to_goal**2")]}
    assert [c["components"]["a"] for c in extract_candidates(json.dumps(answer))] == \
        ["-tcp_to_goal", "exp(-tcp_to_goal/0.1)", "-tcp_to_goal**2"]
    ctx = deps([answer], per_call=3, oversample=1.5, screen="proxy")  # 2 slots -> a pool of 3, in one call
    result = run_round(build_graph(), {"round": 0, "n_wanted": 2}, "r0", ctx)
    options = ctx.llm.chat_model.options  # type: ignore[attr-defined]
    assert len(options) == 1 and "candidates" in json.dumps(options[0]["response_format"])
    assert len(result.accepted) == 2 and len(result.rejected) == 1
    assert result.rejected[0]["reason"].startswith("screened out: proxy")


def test_the_screen_keeps_the_best_proxy_and_logs_every_score() -> None:
    answers = [cand(a="exp(-100*tcp_to_goal)"), cand(a="exp(-tcp_to_goal/0.1)"), cand(a="-tcp_to_goal")]
    result = run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", deps(answers, oversample=3.0, screen="proxy"))
    (best,) = result.accepted
    assert best["components"] == {"a": "-tcp_to_goal"} and best["proxy"] > 0.9
    scores = {r["components"]["a"]: r["proxy"] for r in result.rejected}
    assert set(scores) == {"exp(-100*tcp_to_goal)", "exp(-10.0*tcp_to_goal)"}  # canonical form
    assert scores["exp(-100*tcp_to_goal)"] < scores["exp(-10.0*tcp_to_goal)"] < best["proxy"]
    for r in result.rejected:
        assert r["reason"] == f"screened out: proxy {r['proxy']:.4f} < {best['proxy']:.4f}"
    plain = run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", deps(answers, oversample=3.0))
    assert plain.accepted[0]["components"] == {"a": "exp(-100*tcp_to_goal)"}  # the default: proposal order
    assert plain.accepted[0]["proxy"] == scores["exp(-100*tcp_to_goal)"]  # scored all the same, for the record
    assert plain.rejected[0]["reason"].startswith("surplus")


def verifier_episodes() -> tuple[dict[str, np.ndarray], ...]:
    """Four update episodes, each ending farther from the goal (the first two succeed), the larger actions on the
    better ones: a reward paying the distance orders them as the task does, one paying mostly for small actions the
    other way."""
    out = []
    for i, end in enumerate((0.05, 0.1, 0.3, 0.45)):
        d = np.linspace(0.4, end, 20)
        out.append({"tcp_to_goal": d, "action_norm": np.full(20, 1.0 - 0.2 * i), "success": (d < 0.12).astype(float)})
    return tuple(out)


def test_the_verifier_screen_keeps_the_candidate_that_orders_the_update_episodes_as_the_task() -> None:
    answers = [cand(d="-0.01*tcp_to_goal", e="-action_norm"), cand(a="-tcp_to_goal")]
    runs = {mode: run_round(build_graph(), {"round": 1, "n_wanted": 1}, "r1",
                            dataclasses.replace(deps(answers, oversample=2.0, screen=mode),
                                                episodes=verifier_episodes()))
            for mode in ("order", "verifier")}
    assert runs["order"].accepted[0]["components"] == {"d": "-0.01*tcp_to_goal", "e": "-action_norm"}  # proposal order
    (best,) = runs["verifier"].accepted
    (lost,) = runs["verifier"].rejected
    assert best["components"] == {"a": "-tcp_to_goal"} and best["verifier_tau"] > 0.5 > -0.5 > lost["verifier_tau"]
    assert lost["reason"] == f"screened out: verifier {lost['verifier_tau']:.4f} < {best['verifier_tau']:.4f}"
    # a tie keeps proposal order, and says so
    tied = run_round(build_graph(), {"round": 1, "n_wanted": 1}, "r1", dataclasses.replace(
        deps([cand(a="-tcp_to_goal"), cand(a="exp(-tcp_to_goal/0.1)")], oversample=2.0, screen="verifier"),
        episodes=verifier_episodes()))
    assert tied.accepted[0]["components"] == {"a": "-tcp_to_goal"}
    assert tied.rejected[0]["reason"] == "screened out: verifier 1.0000, tied with the lowest kept (proposal order)"
    # round 0 has no update episodes: nothing to score, so the verifier screen keeps proposal order
    first = run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0",
                      deps(answers, oversample=2.0, screen="verifier"))
    assert first.accepted[0]["components"] == runs["order"].accepted[0]["components"]
    assert first.rejected[0]["reason"].startswith("surplus") and "verifier_tau" not in first.accepted[0]


def test_a_model_that_copies_the_elite_still_fills_the_slots_with_distinct_candidates() -> None:
    copy = cand(b="5*success", d="-2*tcp_to_goal")  # the elite, its components reordered
    ctx = deps([copy], oversample=1.5, numeric_children=3)
    result = run_round(build_graph(), {"round": 1, "n_wanted": 2, "elites": [ELITE]}, "r1", ctx)
    assert ctx.llm.usage["by_tag"]["propose"]["calls"] == 3  # the model copied the elite three times
    assert len(result.accepted) == 2 and result.attempts == 1
    elite_key = record_key(ELITE, TASK)
    keys = [r["key"] for r in result.accepted]
    assert len(set(keys)) == 2 and elite_key not in keys
    assert all(r["parent_id"] == "e1" and r["rationale"].startswith("numeric child of e1") for r in result.accepted)
    copies = [r for r in result.rejected if r["reason"].startswith("duplicate")]
    assert len(copies) == 3  # every copy of the elite is refused by its key
    again = run_round(build_graph(), {"round": 1, "n_wanted": 2, "elites": [ELITE]}, "r1",
                      deps([copy], oversample=1.5, numeric_children=3))
    assert [r["components"] for r in again.accepted] == [r["components"] for r in result.accepted]  # seeded


def test_with_no_elite_a_model_repeating_itself_fills_the_slots_with_children_of_its_accepted_reward() -> None:
    answer = cand(d="-3*tcp_to_goal", b="5*success")
    ctx = deps([answer], numeric_children=2)
    result = run_round(build_graph(), {"round": 0, "n_wanted": 3}, "r0", ctx)
    assert len(result.accepted) == 3 and result.attempts == 2
    first, *children = result.accepted
    assert first["components"] == {"d": "-3*tcp_to_goal", "b": "5*success"} and first.get("origin") != "child"
    assert all(c["origin"] == "child" and c["parent_id"] == first["id"] for c in children)
    temperatures = [o["temperature"] for o in ctx.llm.chat_model.options]  # type: ignore[attr-defined]
    assert len(temperatures) == 5 and max(temperatures) == 1.0  # the ramp: 0.4, 0.55, 0.7, 0.85, 1.0


def test_dedupe_spans_the_llm_candidates_the_elites_and_the_children() -> None:
    other = cand(d="-3*tcp_to_goal", b="5*success")  # a valid new reward, given twice in one answer
    answer = {"candidates": [other, other, cand(b="5*success", d="-2*tcp_to_goal")]}
    ctx = deps([answer], per_call=3, oversample=3.0, numeric_children=4)
    result = run_round(build_graph(), {"round": 1, "n_wanted": 1, "elites": [ELITE]}, "r1", ctx)
    judged = [*result.accepted, *result.rejected]
    dup = [r for r in judged if r["reason"].startswith("duplicate")]
    assert len(dup) == 2  # the second copy of `other`, and the copy of the elite
    valid = [r for r in judged if not r["reason"].startswith("duplicate")]
    assert len(valid) == 1 + 4 and len({r["key"] for r in valid}) == 5
    assert record_key(ELITE, TASK) not in {r["key"] for r in valid}


def test_a_reward_the_run_tried_before_is_not_accepted_again() -> None:
    tried = cand(a="-tcp_to_goal")  # accepted in an earlier round, then discarded
    fresh = cand(a="-tcp_to_goal**2")
    key = record_key(tried, TASK)
    assert key is not None
    result = run_round(build_graph(), {"round": 2, "n_wanted": 1, "tried": [key]}, "r2", deps([tried, fresh]))
    assert [r["components"] for r in result.accepted] == [{"a": "-tcp_to_goal**2"}]
    assert result.rejected[0]["reason"].startswith("duplicate")
    again = run_round(build_graph(), {"round": 2, "n_wanted": 1}, "r2", deps([tried, fresh]))
    assert [r["components"] for r in again.accepted] == [{"a": "-tcp_to_goal"}]  # without the history it passes


def test_children_are_labelled_tpe_only_once_the_sampler_had_its_start_up_trials() -> None:
    """Before TPE's 4 start-up trials of a structure are measured its draws are uniform, and the rationale says so."""
    measured = tuple(({"d": f"-{w}*tcp_to_goal", "b": "5*success"}, f) for w, f in
                     ((1.5, 0.2), (2.5, 0.4), (3.0, 0.1), (1.8, 0.3)))
    for n, label in ((0, "drawn at random"), (3, "drawn at random"), (4, "by TPE over 4 measured")):
        ctx = RunContext(llm=scripted_client([]), task=TASK, sample=episodes_sample(), measured=measured[:n],
                         limits=GraphLimits(reflect=False, llm_proposals=False, numeric_children=2))
        result = run_round(build_graph(), {"round": 1, "n_wanted": 2, "elites": [ELITE]}, f"r1-{n}", ctx)
        assert len(result.accepted) == 2
        assert all(label in r["rationale"] and r["origin"] == "child" for r in result.accepted), n
        assert all(("TPE over" in r["rationale"]) == (n >= 4) for r in result.accepted), n


def test_validate_logs_the_verifier_of_every_valid_candidate_from_round_one() -> None:
    # rewards/verifier.py on the update's episodes: measured on every valid candidate (children too), deciding
    # nothing with --screen order
    episodes = tuple({"tcp_to_goal": np.linspace(0.4, end, 20), "action_norm": np.full(20, 10 * (0.4 - end)),
                      "success": (np.linspace(0.4, end, 20) < 0.05).astype(float)} for end in (0.35, 0.2, 0.1, 0.0))
    # the episodes that closed more took larger actions: a heavy effort term orders them backwards
    answers = [cand(a="-tcp_to_goal", b="-0.1*action_norm"), cand(a="-tcp_to_goal")]
    ctx = deps(answers, oversample=2.0, numeric_children=1, screen="order")
    ctx = ctx.for_round(ctx.sample, episodes=episodes)
    result = run_round(build_graph(), {"round": 1, "n_wanted": 1, "elites": [ELITE]}, "r1", ctx)
    records = {r["id"]: r for r in [*result.accepted, *result.rejected]}
    effort, distance = records["r1-a1-0"], records["r1-a1-1"]
    assert effort["reason"] == distance["reason"] == "accepted" or "surplus" in effort["reason"] + distance["reason"]
    assert effort["verifier_tau"] == -1.0 and effort["verifier_progress"] == -1.0
    assert distance["verifier_tau"] == 1.0 and distance["verifier_progress"] == 1.0
    assert 0.0 < distance["verifier_flooding"] <= 1.0
    child = [r for r in result.accepted + result.rejected if r.get("origin") == "child"]
    assert child and all("verifier_tau" in r for r in child)
    plain = run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", deps(answers, oversample=2.0))
    assert all("verifier_tau" not in r for r in plain.accepted + plain.rejected)
