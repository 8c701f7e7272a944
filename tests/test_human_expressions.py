"""Each task's own reward written in the reward language (`TaskSpec.human_components`) equals the env's reward.

States come from MetaWorld's scripted expert policies (which reach success, so grasps, lifts and success overrides
happen), the same experts with action noise, and random actions; Gymnasium tasks have no experts and use random
actions. The compiled expression is compared with the `human_reward` feature (the env's own step reward) on every
state after a step; the designer's reward must also pass the one validator.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest

from lares_agent.engine.tasks import TaskSpec, get_task, list_tasks
from lares_agent.engine.tasks.human_rewards import GYM_HUMAN, METAWORLD_HUMAN
from lares_agent.engine.tasks.metaworld_catalog import METAWORLD_TASKS
from lares_agent.rewards import (
    HUMAN_EXPR_ID,
    CheckConfig,
    compile_record,
    human_record,
    human_reference,
    parse_candidate,
    synthetic_sample,
    validate,
)
from lares_agent.rewards.validate import structure_key

REL, ABS = 1e-4, 1e-8  # the env's float32 action and info terms leave ~1e-7 relative differences
MIN_STATES = 1000
FAST = ("push-v3", "door-close-v3", "Pusher-v5")  # caging, a feature margin, a success override; a Gym task
HUMAN_TASKS = [spec.name for spec in list_tasks() if spec.human_components is not None]


def _episodes(spec: TaskSpec) -> list[str]:
    if spec.family == "metaworld":
        return ["expert"] * 3 + ["noisy"] * 2 + ["random"] * 2
    return ["random"] * -(-MIN_STATES // spec.horizon)


def collect(spec: TaskSpec, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Raw states after each step and the actions that led to them, over the task's mix of episodes."""
    policy = None
    if spec.family == "metaworld":
        from metaworld.policies import ENV_POLICY_MAP

        policy = ENV_POLICY_MAP[spec.name]()
    env = spec.make_env(seed)
    rng = np.random.default_rng(seed)
    raws, actions = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the expert policies warn that their gains exceed the action range
        for kind in _episodes(spec):
            obs, _ = env.reset()
            for _ in range(spec.horizon):
                if kind == "random" or policy is None:
                    action = env.action_space.sample()
                else:
                    noise = rng.normal(0.0, 0.5, spec.act_dim) if kind == "noisy" else 0.0
                    action = np.clip(policy.get_action(obs) + noise, -1.0, 1.0)
                obs, _, terminated, truncated, info = env.step(action)
                raws.append(spec.raw_state(env, obs, info))
                actions.append(np.asarray(action, dtype=np.float64))
                if terminated or truncated:
                    break
    env.close()
    return np.array(raws), np.array(actions)


def match(name: str) -> tuple[int, float, float, dict[str, np.ndarray]]:
    """(states, max abs error, max relative error, features) of the task's expression against its env reward."""
    spec = get_task(name)
    raw, action = collect(spec)
    features = spec.compute_features(raw, action)
    record = human_record(spec)
    assert record is not None
    got = compile_record(record, spec)(features)
    want = features["human_reward"]
    error = np.abs(got - want)
    assert np.isfinite(got).all(), name
    bad = error > REL * np.abs(want) + ABS
    worst = int(np.argmax(error / (np.abs(want) + ABS)))
    assert not bad.any(), (
        f"{name}: {int(bad.sum())} of {len(want)} states differ, e.g. expression {got[worst]!r} vs env {want[worst]!r}"
    )
    relative = float(np.max(error / np.maximum(np.abs(want), ABS)))
    return len(want), float(error.max()), relative, features


def _check(name: str) -> None:
    n, _, _, features = match(name)
    assert n >= MIN_STATES
    spec = get_task(name)
    if spec.family == "metaworld":
        assert features["success"].any(), f"{name}: the expert never succeeded; the override was not exercised"
    record = human_record(spec)
    assert record is not None
    verdict = validate(record, spec, features, id=HUMAN_EXPR_ID)
    assert verdict.accepted, f"{name}: {verdict.reason}"


@pytest.mark.parametrize("name", FAST)
def test_expression_equals_env_reward(name: str) -> None:
    _check(name)


@pytest.mark.slow  # about 5 s of simulation per MetaWorld task
@pytest.mark.parametrize("name", [n for n in HUMAN_TASKS if n not in FAST])
def test_expression_equals_env_reward_on_every_task(name: str) -> None:
    _check(name)


def test_every_builtin_task_has_its_own_reward_written() -> None:
    names = {spec.name for spec in list_tasks() if spec.family != "custom"}
    assert set(HUMAN_TASKS) == names
    assert set(METAWORLD_HUMAN) == {task.env_name for task in METAWORLD_TASKS} and set(GYM_HUMAN) <= names
    with_init = {"button-press-topdown-v3", "basketball-v3", "push-back-v3", "dial-turn-v3", "hand-insert-v3",
                 "pick-out-of-hole-v3", "hammer-v3", "coffee-pull-v3", "coffee-push-v3", "peg-unplug-side-v3",
                 "peg-insert-side-v3", "soccer-v3", "reach-v3"}  # LaRes' "with init" tasks
    assert with_init <= names


@pytest.mark.parametrize("name", HUMAN_TASKS)
def test_record_compiles_and_passes_the_validator_on_synthetic_states(name: str) -> None:
    spec = get_task(name)
    record = human_record(spec)
    assert record is not None and record["id"] == HUMAN_EXPR_ID
    reward = compile_record(record, spec)
    assert set(reward.parsed.components) == {n for n, _ in spec.human_components or ()}
    assert reward.feature_names and set(reward.feature_names) <= set(spec.feature_names)
    sample = synthetic_sample(spec.features, 256, np.random.default_rng(0))
    verdict = validate(record, spec, sample, id=HUMAN_EXPR_ID)
    assert verdict.accepted, verdict.reason
    again = parse_candidate({"components": dict(reward.parsed.canonical)}, spec.feature_names)  # canonical form
    assert again.canonical == reward.parsed.canonical and again.complexity == reward.complexity
    assert spec.to_dict()["human_components"] == dict(spec.human_components or ())


def test_a_rule_the_task_own_reward_breaks_is_advice_for_the_task() -> None:
    spec = get_task("door-close-v3")  # its reward reaches for the goal: it never reads tcp_to_obj
    sample = synthetic_sample(spec.features, 256, np.random.default_rng(1))
    record = human_record(spec)
    assert record is not None
    own = validate(record, spec, sample)
    assert own.accepted and any("never uses tcp_to_obj" in w for w in own.warnings)
    components = dict(record["components"])
    components["hand"] = components["hand"].replace("3*", "4*")  # a numeric child keeps the designer's structure
    edited = validate({"components": components}, spec, sample)
    assert edited.accepted and any("own reward breaks this rule too" in w and "tcp_to_obj" in w
                                   for w in edited.warnings)
    strict = validate(record, replace(spec, human_components=None), sample)
    assert not strict.accepted and "tcp_to_obj" in strict.reason
    features = spec.feature_names
    own_key = structure_key(parse_candidate(record, features))
    assert structure_key(parse_candidate({"components": components}, features)) == own_key  # a numeric child
    assert structure_key(parse_candidate({"components": {**components, "hand": "-tcp_to_obj"}}, features)) != own_key
    # a rule the task's own reward keeps still binds: the reward must grow as the progress distance shrinks
    unread = validate({"components": {"hand": components["hand"]}}, spec, sample)
    assert not unread.accepted and "does not change when obj_to_target changes" in unread.reason


def test_complexity_cap_leaves_room_above_the_task_own_reward() -> None:
    spec = get_task("door-open-v3")
    reference = human_reference(spec)
    assert reference is not None and reference[1] > CheckConfig().complexity_cap
    sample = synthetic_sample(spec.features, 256, np.random.default_rng(2))
    record = human_record(spec)
    assert record is not None
    components = {**record["components"], "approach": "-tcp_to_obj", "progress": "-obj_to_target"}
    refined = validate({"components": components}, spec, sample)
    assert refined.accepted and refined.complexity is not None and refined.complexity > reference[1]
    capped = validate({"components": components}, replace(spec, human_components=None), sample)
    assert not capped.accepted and "exceeds the cap 60" in capped.reason
