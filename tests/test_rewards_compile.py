"""Compiled rewards: numpy and torch agree, batch equals per-sample, functions match their definitions,
and the numeric checks name the failing component."""

from __future__ import annotations

import math
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lares_agent.engine.contracts import RewardFunction
from lares_agent.rewards import (
    FeatureError,
    NumericThresholds,
    check_numeric,
    compile_reward,
    load_reward,
    parse_candidate,
    reward_key,
    synthetic_sample,
    validate,
)

FEATURES = ("tcp_to_obj", "obj_to_target", "tcp_speed", "action_norm", "grasp")

# Together these use every function and operator of the language.
EVERY_FUNCTION = {
    "reach": "tolerance(tcp_to_obj, 0, 0.05, 0.2) + tolerance(obj_to_target, bounds=(0.1, 0.3), margin=0)",
    "place": "exp(-obj_to_target / 0.1) * sigmoid(4*(0.5 - tcp_speed)) - log(1 + action_norm)",
    "shape": "sqrt(tcp_to_obj**2 + 0.01) + tanh(tcp_speed) - Abs(tcp_speed - 0.5) / tcp_to_obj**(1/2)",
    "minmax": "Min(tcp_to_obj, obj_to_target, 0.4) + max(action_norm, 0.2) - min(grasp, 0.5) + 1/(1 + action_norm)**3",
    "logic": "where(grasp, 2, 0.5) + (tcp_to_obj < 0.3) + Piecewise((1, (grasp > 0.5) & (tcp_speed <= 0.3)),"
    " (tcp_speed, (obj_to_target >= 0.6) | (tcp_to_obj == 0.5)), (0, True))",
    "soft_and": "hamacher(tolerance(tcp_to_obj, 0, 0.1, 0.3), grasp) + clip(2*tcp_speed - 0.5, 0, 1)"
    " + abs(-tcp_to_obj)",
    "chain": "(0.2 < tcp_to_obj <= 0.8) * E + pi * (not (grasp != 0)) + tcp_speed**-1 * 0.01",
}


def _sample(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    sample = {name: rng.uniform(0.01, 1.0, size=n) for name in FEATURES}
    sample["grasp"] = rng.integers(0, 2, size=n).astype(np.float64)
    return sample


@pytest.fixture(scope="module")
def every() -> object:
    return compile_reward(parse_candidate({"components": EVERY_FUNCTION}, FEATURES), "every")


def test_numpy_and_torch_agree_on_every_function(every) -> None:
    sample = _sample(2000, seed=1)
    total, parts = every.evaluate(sample)
    t_total, t_parts = every.torch({k: torch.from_numpy(v) for k, v in sample.items()})
    assert set(t_parts) == set(parts) == set(EVERY_FUNCTION)
    for name in parts:
        np.testing.assert_allclose(t_parts[name].numpy(), parts[name], rtol=1e-6, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(t_total.numpy(), total, rtol=1e-6, atol=1e-12)
    assert np.all(np.isfinite(total)) and total.std() > 0


def test_batch_equals_per_sample(every) -> None:
    sample = _sample(64, seed=2)
    batch = every(sample)
    single = np.array([every({k: v[i : i + 1] for k, v in sample.items()})[0] for i in range(64)])
    np.testing.assert_allclose(single, batch, rtol=1e-12, atol=0)
    torch_single = [
        every.torch({k: torch.tensor(v[i : i + 1]) for k, v in sample.items()})[0].item() for i in range(64)
    ]
    np.testing.assert_allclose(torch_single, batch, rtol=1e-9)


def test_components_sum_to_total_and_outputs_are_fresh_float64(every) -> None:
    sample = {k: v.astype(np.float32) for k, v in _sample(500, seed=3).items()}
    total, parts = every.evaluate(sample)
    assert total.dtype == np.float64 and total.shape == (500,)
    np.testing.assert_allclose(sum(parts.values()), total, rtol=1e-12)
    bare = compile_reward(parse_candidate({"components": {"a": "tcp_speed", "b": "tcp_speed"}}, FEATURES))
    column = np.linspace(0.0, 1.0, 10)
    out = bare.components({"tcp_speed": column})
    out["a"][:] = -1.0
    assert column[0] == 0.0 and out["b"][0] == 0.0  # neither the input nor the other component aliased


def _dm_tolerance(x: float, lower: float, upper: float, margin: float, vam: float) -> float:
    """dm_control rewards.tolerance with sigmoid='gaussian', scalar and written independently."""
    if lower <= x <= upper:
        return 1.0
    if margin == 0:
        return 0.0
    d = (lower - x if x < lower else x - upper) / margin
    return math.exp(-0.5 * (d * math.sqrt(-2.0 * math.log(vam))) ** 2)


def test_functions_match_their_definitions() -> None:
    xs = np.array([-0.5, 0.0, 0.02, 0.05, 0.1, 0.15, 0.3, 2.0])
    tol = compile_reward(parse_candidate("tolerance(tcp_to_obj, 0.02, 0.1, 0.05, 0.2)", FEATURES))
    expected = [_dm_tolerance(v, 0.02, 0.1, 0.05, 0.2) for v in xs]
    np.testing.assert_allclose(tol({"tcp_to_obj": xs}), expected, rtol=1e-12)
    at_margin = tol({"tcp_to_obj": np.array([0.15])})[0]
    assert at_margin == pytest.approx(0.2)  # value_at_margin at one margin past the bound

    a = np.array([0.0, 0.0, 0.5, 1.0, 0.3])
    b = np.array([0.0, 0.7, 0.5, 1.0, 0.0])
    ham = compile_reward(parse_candidate("hamacher(tcp_to_obj, grasp)", FEATURES))
    with np.errstate(all="ignore"):
        direct = np.where(a + b - a * b == 0, 0.0, a * b / (a + b - a * b))
    np.testing.assert_allclose(ham({"tcp_to_obj": a, "grasp": b}), direct, rtol=1e-12)

    big = np.array([-800.0, -40.0, 0.0, 40.0, 800.0])
    sig = compile_reward(parse_candidate("sigmoid(tcp_to_obj)", FEATURES))
    values = sig({"tcp_to_obj": big})
    assert values[2] == 0.5 and values[0] == 0.0 and values[-1] == 1.0
    assert values[1] == pytest.approx(math.exp(-40.0), rel=1e-9)  # tiny values keep relative accuracy

    ind = compile_reward(parse_candidate("(tcp_to_obj < 0.05) + 2*where(grasp, 1, 0)", FEATURES))
    got = ind({"tcp_to_obj": np.array([0.01, 0.05, 0.2]), "grasp": np.array([1.0, 0.0, 1.0])})
    np.testing.assert_array_equal(got, [3.0, 0.0, 2.0])


def test_torch_gradients_flow_to_features() -> None:
    reward = compile_reward(parse_candidate("tcp_to_obj**2 + 3*obj_to_target + hamacher(tcp_speed, grasp)", FEATURES))
    n = 16
    rng = np.random.default_rng(4)
    feats = {name: torch.tensor(rng.uniform(0.1, 0.9, n), requires_grad=True) for name in FEATURES}
    feats["tcp_speed"] = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    feats["grasp"] = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    total, _ = reward.torch(feats)
    total.sum().backward()
    torch.testing.assert_close(feats["tcp_to_obj"].grad, 2 * feats["tcp_to_obj"].detach())
    torch.testing.assert_close(feats["obj_to_target"].grad, torch.full((n,), 3.0, dtype=torch.float64))
    # hamacher at a = b = 0 is defined as 0; the double-where keeps its gradient finite there
    assert torch.isfinite(feats["grasp"].grad).all() and torch.isfinite(feats["tcp_speed"].grad).all()
    assert feats["action_norm"].grad is None  # unused features get no gradient


def test_torch_float32_inputs_keep_their_dtype(every) -> None:
    sample = _sample(100, seed=5)
    total, _ = every.torch({k: torch.tensor(v, dtype=torch.float32) for k, v in sample.items()})
    assert total.dtype == torch.float32
    np.testing.assert_allclose(total.numpy(), every(sample), rtol=1e-4)


def test_feature_errors() -> None:
    reward = compile_reward(parse_candidate("tcp_to_obj + grasp", FEATURES))
    with pytest.raises(FeatureError, match="needs feature 'grasp'"):
        reward({"tcp_to_obj": np.zeros(3)})
    with pytest.raises(FeatureError, match="shape"):
        reward({"tcp_to_obj": np.zeros(3), "grasp": np.zeros(4)})


def test_protocol_serialisation_and_pickle(every) -> None:
    assert isinstance(every, RewardFunction)
    sample = _sample(300, seed=6)
    data = every.to_json()
    assert data["id"] == "every" and data["complexity"] == every.complexity > 0
    again = load_reward(data, FEATURES)
    assert again.id == "every"
    np.testing.assert_array_equal(again(sample), every(sample))
    unpickled = pickle.loads(pickle.dumps(every))
    np.testing.assert_array_equal(unpickled(sample), every(sample))


def test_ids_are_content_hashes() -> None:
    a = compile_reward(parse_candidate("-tcp_to_obj", FEATURES))
    b = compile_reward(parse_candidate({"components": {"reward": "-1*tcp_to_obj"}}, FEATURES))
    c = compile_reward(parse_candidate("-obj_to_target", FEATURES))
    assert a.id == b.id != c.id


def test_common_subexpressions_compile_once() -> None:
    shared = "exp(-tcp_to_obj/0.1)"
    reward = compile_reward(parse_candidate({"components": {"a": shared, "b": f"2*{shared}"}}, FEATURES))
    assert sum(instr.op == "exp" for instr in reward.program) == 1


# --- numeric checks --------------------------------------------------------------------------------------
def test_check_accepts_a_sane_reward_and_reports_stats() -> None:
    parsed = parse_candidate({"components": {"reach": "-tcp_to_obj", "bonus": "10*(grasp > 2)"}}, FEATURES)
    reward = compile_reward(parsed)
    verdict = check_numeric(reward, _sample(1000, seed=7))
    assert verdict.accepted and verdict.reason == "accepted"
    assert verdict.complexity == reward.complexity
    assert verdict.canonical == {"reach": "-tcp_to_obj", "bonus": "10*where(grasp > 2, 1, 0)"}
    assert set(verdict.stats) == {"reach", "bonus", "total"}
    assert verdict.stats["bonus"].std == 0 and any("'bonus'" in w for w in verdict.warnings)


@pytest.mark.parametrize(
    ("components", "fragment"),
    [
        ({"ok": "-tcp_to_obj", "bad": "log(tcp_speed - 0.5)"}, "component 'bad' is nan/inf on"),
        ({"ok": "-tcp_to_obj", "huge": "50000*tcp_to_obj"}, "component 'huge' reaches"),
        ({"flat": "where(tcp_to_obj > 5, 1, 0)"}, "the reward is constant"),
        ({"a": "tcp_to_obj * 1e-9"}, "the reward is constant"),
    ],
)
def test_check_rejections_name_the_component(components: dict[str, str], fragment: str) -> None:
    sample = _sample(1000, seed=8)
    sample["tcp_speed"][:10] = 0.5  # exact zeros of the denominators above on some states
    reward = compile_reward(parse_candidate({"components": components}, FEATURES))
    verdict = check_numeric(reward, sample)
    assert not verdict.accepted and fragment in verdict.reason
    if "nan/inf" in fragment:
        assert "%" in verdict.reason and verdict.stats["bad"].nonfinite_share > 0


def test_check_thresholds_are_configurable() -> None:
    reward = compile_reward(parse_candidate("100*tcp_to_obj", FEATURES))
    sample = _sample(100, seed=9)
    assert check_numeric(reward, sample).accepted
    assert not check_numeric(reward, sample, NumericThresholds(max_abs=10)).accepted


def test_validate_with_a_task_like_object() -> None:
    task = SimpleNamespace(
        name="toy",
        features=tuple(SimpleNamespace(name=n, meaning="", unit="bool" if n == "grasp" else "m") for n in FEATURES),
        progress_feature="tcp_to_obj",
        approach_feature=None,
    )
    sample = synthetic_sample(task.features, 512, np.random.default_rng(10))
    assert set(np.unique(sample["grasp"])) == {0.0, 1.0}
    assert sample["tcp_to_obj"].min() >= 0 and sample["tcp_to_obj"].max() <= 1
    verdict = validate('{"components": {"reach": "-tcp_to_obj"}}', task, sample, id="c1")
    assert verdict.accepted and verdict.reward is not None and verdict.reward.id == "c1"
    assert verdict.key == verdict.reward.key == "-tcp_to_obj"
    verdict = validate("-unknown_feature", task, sample)
    assert not verdict.accepted and verdict.reward is None and "unknown name" in verdict.reason
    verdict = validate("log(tcp_to_obj - 2)", task, sample)
    assert not verdict.accepted and verdict.reward is None and verdict.complexity is not None
    assert verdict.to_json()["accepted"] is False and "reward" not in verdict.to_json()


def test_reward_key_is_one_identity_whatever_the_names_order_or_split() -> None:
    def key(components: dict[str, str]) -> str:
        return reward_key(parse_candidate({"components": components}, FEATURES))

    assert key({"d": "2*tcp_to_obj"}) == key({"d": "tcp_to_obj*2"})
    split = key({"reach": "-tcp_to_obj", "ctrl": "-0.1*action_norm"})
    assert split == key({"u": "-0.1*action_norm", "r": "-tcp_to_obj"})
    assert key({"a": "-tcp_to_obj", "b": "5*grasp"}) == key({"whole": "5*grasp - tcp_to_obj"})
    assert key({"d": "-tcp_to_obj"}) != key({"d": "-2*tcp_to_obj"})
    parsed = parse_candidate({"components": {"x": "tcp_to_obj*2"}}, FEATURES)
    a, b = compile_reward(parsed, "a"), compile_reward(parse_candidate("2*tcp_to_obj", FEATURES), "b")
    assert a.key == b.key == reward_key(parsed) and a.id != b.id  # ids name, keys identify
    assert load_reward(a.to_json(), FEATURES).key == a.key


# --- property: random expressions from the grammar agree between numpy and torch -------------------------
_LEAVES = st.sampled_from(["tcp_to_obj", "obj_to_target", "tcp_speed", "grasp", "0.5", "2", "0.05"])


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(children, children)
    return st.one_of(
        pair.map(lambda p: f"({p[0]} + {p[1]})"),
        pair.map(lambda p: f"({p[0]} * {p[1]})"),
        pair.map(lambda p: f"({p[0]} / (1 + Abs({p[1]})))"),
        children.map(lambda c: f"({c})**2"),
        st.tuples(st.sampled_from(["exp(-", "log(1 + ", "sqrt(", "tanh(", "sigmoid(", "abs("]), children).map(
            lambda p: f"{p[0]}Abs({p[1]}))" if p[0] != "abs(" else f"abs({p[1]})"
        ),
        pair.map(lambda p: f"Min({p[0]}, {p[1]})"),
        pair.map(lambda p: f"max({p[0]}, {p[1]})"),
        st.tuples(children, children, children).map(lambda p: f"where({p[0]} < {p[1]}, {p[2]}, {p[1]})"),
        pair.map(lambda p: f"Piecewise(({p[0]}, {p[1]} > 0.3), ({p[1]}, True))"),
        children.map(lambda c: f"tolerance({c}, 0.1, 0.4, 0.2)"),
        children.map(lambda c: f"clip({c}, 0.2, 0.7)"),
        pair.map(lambda p: f"hamacher(sigmoid({p[0]}), sigmoid({p[1]}))"),
        children.map(lambda c: f"({c} >= 0.4)"),
    )


@given(st.recursive(_LEAVES, _extend, max_leaves=12))
@settings(max_examples=150, deadline=None)
def test_random_expressions_agree_between_numpy_and_torch(text: str) -> None:
    from lares_agent.rewards import RewardRejected

    try:
        reward = compile_reward(parse_candidate(text, FEATURES))
    except RewardRejected:
        return  # e.g. a constant expression; the parser's own tests cover rejections
    sample = _sample(64, seed=11)
    ours = reward(sample)
    theirs = reward.torch({k: torch.from_numpy(v) for k, v in sample.items()})[0].numpy()
    np.testing.assert_allclose(theirs, ours, rtol=1e-6, atol=1e-12, equal_nan=True)


def test_a_reward_whose_features_never_move_on_the_sample_is_not_judged_constant() -> None:
    """Round 0 validates on random steps, where e.g. a window never moves: the sample cannot judge the reward."""
    from lares_agent.rewards import check_numeric, compile_reward, parse_candidate

    frozen = {"obj_to_target": np.full(64, 0.21), "success": np.zeros(64), "action_norm": np.linspace(0, 1, 64)}
    progress = compile_reward(parse_candidate("-obj_to_target + 5*success", list(frozen)))
    verdict = check_numeric(progress, frozen)
    assert verdict.accepted and any("not judged" in w for w in verdict.warnings)
    # A reward that reads a feature that does vary, and is still constant, stays rejected.
    cancelling = compile_reward(parse_candidate("-obj_to_target + where(action_norm > 2, 1, 0)", list(frozen)))
    assert not check_numeric(cancelling, frozen).accepted
