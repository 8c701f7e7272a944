"""Task-aware validation: an approach term where the task names one, and a progress term that moves the reward
(both failures were seen in the 10k-step sample-efficiency sittings, docs/results-archive.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lares_agent.engine import random_feature_sample
from lares_agent.engine.tasks import get_task
from lares_agent.rewards import CheckConfig, Verdict, validate
from lares_agent.search.proposer import fallback_reward


@pytest.fixture(scope="module")
def sample() -> dict[str, np.ndarray]:
    return random_feature_sample(get_task("button-press-v3"), steps=300, seed=0)


def _check(task_name: str, components: dict[str, str], sample: dict[str, np.ndarray],
           config: CheckConfig | None = None) -> Verdict:
    return validate({"components": components}, get_task(task_name), sample, id="c", config=config or CheckConfig())


def test_a_reward_without_the_approach_term_is_rejected_with_the_fix(sample) -> None:
    result = _check("button-press-v3", {"progress": "-obj_to_target", "bonus": "5*success"}, sample)
    assert not result.accepted and "never uses tcp_to_obj" in result.reason and "-w*tcp_to_obj" in result.reason
    assert _check("button-press-v3", {"approach": "-tcp_to_obj", "progress": "-5*obj_to_target"}, sample).accepted
    off = replace(CheckConfig(), require_approach_use=False)
    assert _check("button-press-v3", {"progress": "-obj_to_target", "bonus": "5*success"}, sample, off).accepted


def test_tasks_without_an_object_need_no_approach_term() -> None:
    task = get_task("reach-v3")
    assert task.approach_feature is None
    reach_sample = random_feature_sample(task, steps=150, seed=0)
    assert _check("reach-v3", {"progress": "-tcp_to_target", "bonus": "5*success"}, reach_sample).accepted


def test_the_fallback_reward_shapes_the_approach_where_the_task_has_one(sample) -> None:
    fallback = fallback_reward(get_task("button-press-v3"), "fallback-0")
    assert {"tcp_to_obj", "obj_to_target"} <= set(fallback.feature_names)
    assert "tcp_to_obj" not in fallback_reward(get_task("reach-v3"), "fallback-1").feature_names
    # the fallback passes the one validator's checks (it is what a slot gets when nothing else did)
    assert validate(fallback.to_json(), get_task("button-press-v3"), sample).accepted


def test_progress_terms_that_cancel_or_never_switch_are_rejected(sample) -> None:
    cancelled = _check("button-press-v3", {"approach": "-tcp_to_obj", "progress": "obj_to_target",
                                           "smooth": "1 - obj_to_target"}, sample)
    assert not cancelled.accepted and "does not change when obj_to_target changes" in cancelled.reason
    threshold = _check("button-press-v3", {"approach": "-tcp_to_obj", "done": "5*(obj_to_target < 0.01)"}, sample)
    assert not threshold.accepted and "threshold" in threshold.reason
    assert _check("button-press-v3", {"approach": "-tcp_to_obj", "progress": "3*exp(-obj_to_target/0.05)"},
                  sample).accepted


def test_a_term_about_an_object_that_is_not_part_of_the_task_is_rejected_and_left_out_of_the_prompt() -> None:
    from lares_agent.graphs.prompting import system_text
    from lares_agent.rewards import answer_grammar, prompt_features

    task = get_task("reach-v3")  # the scene holds a puck; the task is the hand alone
    assert {"grasped", "tcp_to_obj", "obj_x"} <= set(task.offstage_features)
    assert not get_task("push-v3").offstage_features
    reach_sample = random_feature_sample(task, steps=150, seed=0)
    bonus = _check("reach-v3", {"progress": "-tcp_to_target", "bonus": "grasped*(1 - 0.39*action_norm)",
                                "smooth": "0.0637*grasped"}, reach_sample)
    assert not bonus.accepted and bonus.reason.startswith("component 'smooth' reads only grasped")
    # a term that also reads the task's own features is judged as usual
    assert _check("reach-v3", {"progress": "-tcp_to_target", "mixed": "-0.1*tcp_to_obj*tcp_to_target"},
                  reach_sample).accepted
    shown = prompt_features(task)
    assert "tcp_to_target" in shown and not set(shown) & set(task.offstage_features)
    text = system_text(task, shown, 4, "other", None)
    table = text.split("Features", 1)[1].split("# Reward language", 1)[0]
    assert "grasped" not in text and "puck" not in table and "puck" not in task.description
    assert "grasped" not in answer_grammar(shown, 4) and "tcp_to_target" in answer_grammar(shown, 4)


def test_a_component_that_pays_for_moving_away_is_negated_where_the_intent_is_clear() -> None:
    task = get_task("reach-v3")
    reach_sample = random_feature_sample(task, steps=150, seed=0)
    slip = {"reach": "exp(-tcp_to_target/0.05)", "done": "tcp_to_target/0.05"}  # the 1.5B model's answer
    fixed = _check("reach-v3", slip, reach_sample)
    assert fixed.accepted and fixed.canonical == {"reach": "exp(-20.0*tcp_to_target)", "done": "-20.0*tcp_to_target"}
    assert fixed.warnings[0] == "repaired: negated 'done', which grew with tcp_to_target (lower is better)"
    assert fixed.reward is not None and fixed.reward.id == "c"
    off = replace(CheckConfig(), repair_sign=False)
    refused = _check("reach-v3", slip, reach_sample, off)
    assert not refused.accepted and "increases as tcp_to_target grows" in refused.reason
    # a wrong-signed term that reads another feature too (an answer of the 1.5B model on push-v3)
    push = get_task("push-v3")
    mixed = {"approach": "exp(-tcp_to_obj/0.1)", "progress": "exp(-obj_to_target/0.1)",
             "start": "-100*(initial_obj_to_target - obj_to_target)"}
    again = _check("push-v3", mixed, random_feature_sample(push, steps=150, seed=0))
    assert again.accepted and again.warnings[0].startswith("repaired: negated 'start'"), again.reason
    # terms that cancel are not a sign slip: test_progress_terms_that_cancel_or_never_switch_are_rejected


def test_a_small_wrong_signed_component_is_negated_though_the_whole_reward_passes() -> None:
    task = get_task("reach-v3")
    reach_sample = random_feature_sample(task, steps=150, seed=0)
    # a refinement of the task's own reward by the 1.5B model: a raw distance appended as a component
    answer = {"reach": "10*tolerance(tcp_to_target, bounds=(0, 0.05), margin=initial_hand_to_target, "
                       "sigmoid='long_tail')", "tcp_to_target": "tcp_to_target", "target_x": "target_x"}
    fixed = _check("reach-v3", answer, reach_sample)
    assert fixed.accepted and fixed.canonical["tcp_to_target"] == "-tcp_to_target", fixed.canonical
    assert fixed.warnings[0] == "repaired: negated 'tcp_to_target', which grew with tcp_to_target (lower is better)"
    # without the repair the sign rule still holds for every component: the term is refused, with the reason
    refused = _check("reach-v3", answer, reach_sample, replace(CheckConfig(), repair_sign=False))
    assert not refused.accepted and refused.reason.startswith(
        "component 'tcp_to_target' pays more as tcp_to_target grows (on 100% of the sample states)"), refused.reason


def test_capped_stepped_and_approach_terms_that_pay_for_distance_are_negated() -> None:
    """Terms a local slope misses, each from a refinement or a scratch answer of the evidence grid."""
    from lares_agent.rewards import human_components

    door = get_task("door-close-v3")
    door_sample = random_feature_sample(door, steps=150, seed=0)
    own = dict(human_components(door) or ())
    refined = {**own, "grasp": "where(obj_to_target < 0.05, 0, 1)"}
    fixed = _check("door-close-v3", refined, door_sample)
    assert fixed.accepted and fixed.warnings[0] == (
        "repaired: negated 'grasp', which grew with obj_to_target (lower is better)"), fixed.warnings
    # no other term pays for reaching the handle, so nothing shows which sign the handle term meant: refused
    handle = _check("door-close-v3", {**refined, "tcp_to_obj": "where(tcp_to_obj < 0.05, 0, 1)"}, door_sample)
    assert not handle.accepted and handle.reason.startswith(
        "component 'tcp_to_obj' pays more as tcp_to_obj grows (it pays less at tcp_to_obj = 0 than at"), handle.reason
    designers = _check("door-close-v3", own, door_sample)  # its hand term is 0 at the goal: left as it is
    assert designers.accepted and not any(w.startswith("repaired") for w in designers.warnings)
    drawer = get_task("drawer-open-v3")
    answer = {"progress": "exp(-obj_to_target/0.1)", "approach": "-tcp_to_obj",
              "success": "100*Min(0.03, Max(0, obj_to_target))", "near": "-2*exp(-tcp_to_obj/0.144)"}
    again = _check("drawer-open-v3", answer, random_feature_sample(drawer, steps=150, seed=0))
    assert again.accepted, again.reason
    assert again.canonical["near"] == "2*exp(-6.944444444444445*tcp_to_obj)", again.canonical
    assert again.canonical["success"].startswith("-"), again.canonical


HAMMER_PAIR = "2*tcp_to_obj - 2*obj_to_target"  # pays the hand for moving away from the hammer


def test_the_sign_rule_refuses_an_approach_term_that_pays_for_distance_in_every_setting() -> None:
    from lares_agent.graphs.context import GraphLimits
    from lares_agent.rewards import human_components, synthetic_sample

    hammer = get_task("hammer-v3")
    synthetic = synthetic_sample(hammer.features, 1024, np.random.default_rng(0))
    alone = validate(HAMMER_PAIR, hammer, synthetic)
    assert not alone.accepted and alone.reason.startswith(
        "component 'reward' pays more as tcp_to_obj grows (on 100% of the sample states)"), alone.reason
    assert validate("-2*tcp_to_obj - 2*obj_to_target", hammer, synthetic).accepted
    # an init round: a refinement that holds the pair beside the task's own terms, judged by the round's checks
    checks = GraphLimits().checks
    states = random_feature_sample(hammer, steps=150, seed=0)
    own = dict(human_components(hammer) or ())
    refined = validate({"components": {**own, "approach": HAMMER_PAIR}}, hammer, states, config=checks)
    assert not refined.accepted and refined.reason.startswith("component 'approach' pays more as tcp_to_obj grows")
    right = validate({"components": {**own, "approach": "-2*tcp_to_obj"}}, hammer, states, config=checks)
    assert right.accepted, right.reason
    # the repair cannot mend it: negated, the pair would pay for moving the hammer's head away from the nail
    assert not validate({"components": {**own, "reach": "exp(-tcp_to_obj/0.1)", "approach": HAMMER_PAIR}}, hammer,
                        states, config=checks).accepted


# A window-open-v3 refinement the in-run checks accepted (experiments/fair_loop/, round 4 of seed 0): its component
# pays for the distance through `+ obj_to_target`, which the shaped term outweighs on the states the run sampled.
WINDOW_OPEN_SLIP = {"near": "2*exp(-28.5*tcp_to_obj)", "obj_to_target": (
    "-near_object + obj_to_target + 10*hamacher(tolerance(tcp_to_obj, 0.0, 0.02, Abs(initial_tcp_to_obj - 0.02), "
    "0.1, 'long_tail'), tolerance(obj_to_target, 0.0, 0.05, 0.15, 0.1, 'long_tail'))")}


def test_a_term_that_pays_for_the_distance_is_refused_inside_a_component_that_does_not() -> None:
    from lares_agent.graphs.context import GraphLimits

    window = get_task("window-open-v3")
    states = random_feature_sample(window, steps=150, seed=0)  # the window never moves: the term alone shows it
    near = dict(states)
    rng = np.random.default_rng(0)
    near["obj_to_target"] = rng.uniform(0.0, 0.12, states["obj_to_target"].shape)  # close to the goal, where the
    near["tcp_to_obj"] = rng.uniform(0.0, 0.03, states["tcp_to_obj"].shape)  # shaped term outweighs it
    for sample in (states, near):
        verdict = validate({"components": WINDOW_OPEN_SLIP}, window, sample, config=GraphLimits().checks)
        assert not verdict.accepted and verdict.reason.startswith(
            "component 'obj_to_target' pays more as obj_to_target grows (its term obj_to_target grows with it on "
            "100% of the sample states)"), verdict.reason
    fixed = {**WINDOW_OPEN_SLIP, "obj_to_target": WINDOW_OPEN_SLIP["obj_to_target"].replace("+ obj_to_target", "")}
    assert validate({"components": fixed}, window, near, config=GraphLimits().checks).accepted


def test_lares_reward_check_refuses_the_hammer_pair() -> None:
    from typer.testing import CliRunner

    from lares_agent.cli.app import app

    result = CliRunner().invoke(app, ["reward", "check", "--task", "hammer-v3", "--", HAMMER_PAIR])
    assert result.exit_code == 1 and "rejected: component 'reward' pays more as tcp_to_obj grows" in result.output
    fine = CliRunner().invoke(app, ["reward", "check", "--task", "hammer-v3", "--", "-2*tcp_to_obj - 2*obj_to_target"])
    assert fine.exit_code == 0, fine.output


def test_no_component_of_a_builtin_tasks_own_reward_breaks_the_sign_rule() -> None:
    from lares_agent.engine.tasks import list_tasks
    from lares_agent.rewards import allowed_features, human_record, parse_candidate, synthetic_sample
    from lares_agent.rewards.sign_rules import component_sign_reason

    checked = 0
    for spec in list_tasks():
        record = human_record(spec)
        if record is None:
            continue
        parsed = parse_candidate(record, allowed_features(spec))
        for seed in (0, 1):
            states = synthetic_sample(spec.features, 1024, np.random.default_rng(seed))
            assert component_sign_reason(parsed, spec, states) is None, spec.name
        checked += 1
    assert checked >= 24  # every built-in MetaWorld and Gymnasium task with its own reward written
