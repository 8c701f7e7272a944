"""The reward language's MetaWorld shapes: every dm_control tolerance sigmoid with constant or feature margins,
`rect_prism` and `gripper_caging`, equal to `metaworld.utils.reward_utils` and the env's own helper, the same in
numpy, torch and an exported module, and printed canonically so they parse back to the same reward."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sympy
import torch
from metaworld.utils import reward_utils

from lares_agent.engine.tasks import get_task
from lares_agent.rewards import RewardRejected, compile_reward, parse_candidate, parse_expression, reward_key
from lares_agent.rewards.export import python_module
from lares_agent.rewards.shaping import CAGING_FEATURES, SIGMOIDS

FEATURES = ("dist", "margin", "px", "py", "pz", *CAGING_FEATURES)


def _sample(n: int = 600, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    sample = {name: rng.uniform(-0.1, 0.5, n) for name in FEATURES}
    sample["margin"] = rng.uniform(0.0, 0.3, n)
    sample["margin"][:40] = 0.0  # a starting distance can be 0
    sample["dist"][40:60] = 0.1  # exactly on a bound
    sample["gripper_command"] = rng.uniform(-1.0, 1.0, n)
    return sample


def _torch(reward: object, sample: dict[str, np.ndarray]) -> np.ndarray:
    total, _ = reward.torch({k: torch.from_numpy(v) for k, v in sample.items()})  # type: ignore[attr-defined]
    return total.detach().numpy()


@pytest.mark.parametrize("sigmoid", SIGMOIDS)
def test_every_sigmoid_equals_reward_utils_with_constant_and_feature_margins(sigmoid: str) -> None:
    sample = _sample()
    x, m = sample["dist"], sample["margin"]
    for margin, margins in (("0.2", np.full_like(x, 0.2)), ("margin", m)):
        text = f"tolerance(dist, bounds=(0.05, 0.1), margin={margin}, sigmoid='{sigmoid}', value_at_margin=0.2)"
        reward = compile_reward(parse_candidate(text, FEATURES))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reward_utils' cosh overflows far from the bounds
            shape: Any = sigmoid  # reward_utils types it as a Literal of the same names
            want = [reward_utils.tolerance(float(a), bounds=(0.05, 0.1), margin=float(b), sigmoid=shape,
                                           value_at_margin=0.2) for a, b in zip(x, margins, strict=True)]
        got = reward(sample)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15, err_msg=text)
        np.testing.assert_allclose(_torch(reward, sample), got, rtol=1e-12, atol=1e-15, err_msg=text)


def test_a_feature_margin_at_or_below_zero_is_the_bounds_indicator_with_finite_gradients() -> None:
    reward = compile_reward(parse_candidate("tolerance(dist, bounds=(0, 0.1), margin=margin - 0.1, "
                                            "sigmoid='long_tail')", FEATURES))
    dist = np.array([0.05, 0.2, 0.05, 0.2, 0.3])
    margin = np.array([0.0, 0.0, 0.1, 0.1, 0.4])  # margin - 0.1: negative, negative, 0, 0, 0.3
    got = reward({"dist": dist, "margin": margin})
    np.testing.assert_allclose(got, [1.0, 0.0, 1.0, 0.0, 1 / ((0.2 / 0.3 * 3.0) ** 2 + 1)], rtol=1e-12)
    columns = {"dist": torch.tensor(dist, requires_grad=True), "margin": torch.tensor(margin, requires_grad=True)}
    total, _ = reward.torch(columns)
    total.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in columns.values())  # type: ignore[arg-type]


def test_canonical_text_round_trips_and_the_plain_gaussian_keeps_its_old_form() -> None:
    old = parse_candidate("tolerance(dist, 0, 0.05, 0.2)", FEATURES)
    assert old.canonical["reward"] == "tolerance(dist, 0.0, 0.05, 0.2, 0.1)"  # unchanged: same keys as before
    for text in (
        "tolerance(dist, bounds=(0, 0.05), margin=abs(margin - 0.02), sigmoid='long_tail')",
        "tolerance(dist, bounds=(0, 0.05), margin=margin + 0.1, sigmoid='gaussian')",
        "tolerance(dist, 0, 0.05, 0.3, 0.2, 'tanh_squared')",
        "rect_prism(px, py, pz, (0.1, 0.2, -0.1), (0.3, -0.2, 0.1))",
        "gripper_caging(obj_radius=0.013, pad_success=0.05, xz_success=0.005, gate=0.95, grip_band=0.023)",
        "gripper_caging(0.015, 0.05, 0.005, 0.7, 0.97, 1)",
    ):
        parsed = parse_candidate(text, FEATURES)
        again = parse_candidate(parsed.canonical["reward"], FEATURES)
        assert again.canonical == parsed.canonical and reward_key(again) == reward_key(parsed), text
    shown = parse_candidate("gripper_caging(obj_radius=0.015, pad_success=0.05, xz_success=0.005, effort=1)",
                            FEATURES).canonical["reward"]
    assert shown == "gripper_caging(obj_radius=0.015, pad_success=0.05, xz_success=0.005)"  # defaults left out
    assert "long\\_tail" in sympy.latex(parse_expression(
        "tolerance(dist, 0, 0.05, margin, 0.1, 'long_tail')", FEATURES))


def test_a_feature_margin_is_structure_in_the_complexity() -> None:
    constant = parse_candidate("tolerance(dist, 0, 0.05, 0.2, 0.1, 'long_tail')", FEATURES).complexity
    feature = parse_candidate("tolerance(dist, 0, 0.05, abs(margin - 0.05), 0.1, 'long_tail')", FEATURES).complexity
    caging = parse_candidate("gripper_caging(obj_radius=0.015, pad_success=0.05, xz_success=0.005)", FEATURES)
    assert feature > constant and caging.complexity == 8.0 and caging.features_used == frozenset(CAGING_FEATURES)


@pytest.mark.parametrize(("fragment", "text"), [
    ("must be a number", "gripper_caging(obj_radius=dist, pad_success=0.05, xz_success=0.005)"),
    ("missing 'xz_success'", "gripper_caging(obj_radius=0.015, pad_success=0.05)"),
    ("no argument 'margin'", "gripper_caging(obj_radius=0.015, pad_success=0.05, xz_success=0.005, margin=1)"),
    ("below obj_radius", "gripper_caging(obj_radius=0.05, pad_success=0.01, xz_success=0.005)"),
    ("high_density must be 0 or 1", "gripper_caging(0.015, 0.05, 0.005, high_density=0.5)"),
    ("gate must be in", "gripper_caging(0.015, 0.05, 0.005, gate=1)"),
    ("at most 7", "gripper_caging(0.015, 0.05, 0.005, 1, 0.97, 0, 0, 1)"),
    ("triple of numbers", "rect_prism(px, py, pz, (0, 0), (1, 1, 1))"),
    ("must be a number", "rect_prism(px, py, pz, (0, dist, 0), (1, 1, 1))"),
    ("differ along every axis", "rect_prism(px, py, pz, (0, 0, 0), (1, 0, 1))"),
    ("sigmoid must be one of", "tolerance(dist, 0, 0.1, margin, 0.1, 'step')"),
])  # fmt: skip
def test_malformed_calls_are_refused_with_a_reason(fragment: str, text: str) -> None:
    with pytest.raises(RewardRejected) as info:
        parse_expression(text, FEATURES)
    assert fragment in info.value.reason


def test_gripper_caging_needs_the_task_caging_features() -> None:
    with pytest.raises(RewardRejected, match="this task lacks"):
        parse_expression("gripper_caging(obj_radius=0.015, pad_success=0.05, xz_success=0.005)", ("dist",))
    assert "left_pad_gap" not in get_task("reach-v3").feature_names  # only tasks whose own reward cages declare them
    assert set(CAGING_FEATURES) <= set(get_task("push-v3").feature_names)


def test_rect_prism_equals_reward_utils() -> None:
    sample = _sample(800, seed=3)
    zero, one = (0.1, 0.3, -0.05), (0.35, -0.05, 0.2)  # one corner below the other along y
    reward = compile_reward(parse_candidate(f"rect_prism(px, py, pz, {zero}, {one})", FEATURES))
    want = [reward_utils.rect_prism_tolerance(np.array(p), np.array(zero), np.array(one))
            for p in zip(sample["px"], sample["py"], sample["pz"], strict=True)]
    got = reward(sample)
    assert 0 < np.mean(got != 1.0) < 1  # points inside and outside the prism
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(_torch(reward, sample), got, rtol=1e-12)


@pytest.mark.parametrize(("name", "kwargs"), [
    ("push-v3", {"obj_radius": 0.015, "pad_success_thresh": 0.05, "xz_thresh": 0.005, "high_density": True}),
    ("push-v3", {"obj_radius": 0.02, "pad_success_thresh": 0.05, "xz_thresh": 0.05, "desired_gripper_effort": 0.7}),
    ("hand-insert-v3", {"obj_radius": 0.015, "pad_success_thresh": 0.02, "xz_thresh": 0.03,
                        "desired_gripper_effort": 0.1, "high_density": True}),
])  # fmt: skip
def test_gripper_caging_equals_the_env_helper(name: str, kwargs: dict[str, float]) -> None:
    spec = get_task(name)
    env = spec.make_env(1)
    sawyer = env.unwrapped
    obs, info = env.reset()
    raws, actions, want = [], [], []
    for step in range(80):
        action = env.action_space.sample()
        if step % 3 == 0:  # drive the hand onto the object so the caging terms move
            action[:3] = np.clip((obs[4:7] - obs[0:3]) * 20, -1, 1)
        obs, _, _, _, info = env.step(action)
        raws.append(spec.raw_state(env, obs, info))
        actions.append(np.asarray(action, dtype=np.float64))
        want.append(sawyer._gripper_caging_reward(action, obs[4:7], object_reach_radius=0.01, **kwargs))
    env.close()
    features = spec.compute_features(np.array(raws), np.array(actions))
    text = (f"gripper_caging(obj_radius={kwargs['obj_radius']}, pad_success={kwargs['pad_success_thresh']}, "
            f"xz_success={kwargs['xz_thresh']}, effort={kwargs.get('desired_gripper_effort', 1.0)}, "
            f"high_density={int(kwargs.get('high_density', False))})")
    got = compile_reward(parse_candidate(text, spec.feature_names))(features)
    assert np.std(want) > 0
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)  # the env's float32 action


def test_the_new_functions_export_to_numpy_equal_to_the_compiled_reward(tmp_path: Path) -> None:
    components = {
        "shaped": "tolerance(dist, bounds=(0, 0.05), margin=abs(margin - 0.02), sigmoid='long_tail') "
                  "+ tolerance(dist, 0, 0.1, 0.2, 0.1, 'cosine')",
        "prism": "rect_prism(px, py, pz, (0.1, 0.3, -0.05), (0.35, -0.05, 0.2))",
        "caging": "gripper_caging(obj_radius=0.015, pad_success=0.05, xz_success=0.005, high_density=1)",
        "soccer": "gripper_caging(obj_radius=0.013, pad_success=0.05, xz_success=0.005, gate=0.95, grip_band=0.023)",
    }
    parsed = parse_candidate({"components": components}, FEATURES)
    source = python_module(parsed, [], reward_id="shapes", task="test-task", heading="The shapes.")
    assert "lares_agent" not in source and source.startswith('"""The shapes.')
    path = tmp_path / "exported_shapes.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("exported_shapes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sample = _sample(seed=5)
    total, parts = compile_reward(parsed).evaluate(sample)
    np.testing.assert_allclose(module.reward(sample), total, rtol=1e-12)
    for name, values in module.components(sample).items():
        np.testing.assert_allclose(values, parts[name], rtol=1e-12, err_msg=name)
