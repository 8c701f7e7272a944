"""The trajectory encoder: deterministic, within budget, and it reports what happened."""

from __future__ import annotations

import numpy as np
import pytest

from lares_agent.tools.trajectory import (
    FeatureInfo,
    Rollout,
    encode_rollout,
    encode_rollouts,
    estimate_tokens,
)

FEATURES = (
    FeatureInfo("tcp_to_obj", "m", "gripper to object"),
    FeatureInfo("tcp_speed", "m/s", "gripper speed"),
    FeatureInfo("grasp", "bool", "object held"),
    FeatureInfo("action_norm", "1", "action size"),
)


def _rollout(t: int = 150, reach_at: int = 60, seed: int = 0) -> Rollout:
    rng = np.random.default_rng(seed)
    steps = np.arange(t, dtype=np.float64)
    dist = np.maximum(0.3 * (1 - steps / reach_at), 0.01) + 0.001 * rng.random(t)
    speed = np.where(steps < reach_at, 0.2, 0.0) + 0.0
    grasp = ((steps > 70) & (steps < 90)).astype(np.float64)
    success = (dist < 0.02).astype(np.float64)
    feats = {"tcp_to_obj": dist, "tcp_speed": speed, "grasp": grasp, "success": success,
             "action_norm": rng.random(t)}
    comps = {"approach": -dist, "bonus": 5.0 * success, "effort": -0.01 * feats["action_norm"]}
    return Rollout(features=feats, components=comps, policy_id="p0", reward_id="c1")


def test_encoding_is_deterministic_and_within_budget() -> None:
    a = encode_rollout(_rollout(), "tcp_to_obj", FEATURES, budget_tokens=512)
    b = encode_rollout(_rollout(), "tcp_to_obj", FEATURES, budget_tokens=512)
    assert a == b
    assert estimate_tokens(a) <= 512


def test_encoding_reports_success_progress_stops_grasp_and_dominant_component() -> None:
    text = encode_rollout(_rollout(), "tcp_to_obj", FEATURES)
    first_success = int(np.flatnonzero(_rollout().features["success"] > 0.5)[0])
    assert f"success: yes, first at t{first_success}" in text
    assert "progress tcp_to_obj" in text and "t0=" in text and "t149=" in text
    assert "stopped" in text  # speed is zero from t60 on
    assert "grasp: on 19/150 steps, first at t71" in text
    assert text.index("bonus") < text.index("approach")  # the success bonus carries most |reward|


def test_failed_rollout_says_no_success_and_regression() -> None:
    t = 100
    dist = np.concatenate([np.linspace(0.4, 0.1, 50), np.linspace(0.1, 0.35, 50)])
    text = encode_rollout(Rollout({"d": dist, "success": np.zeros(t)}), "d")
    assert "success: no" in text
    assert "regressed after t49" in text


@pytest.mark.parametrize("budget", [40, 80, 160])
def test_tight_budgets_drop_low_priority_lines_first(budget: int) -> None:
    text = encode_rollout(_rollout(), "tcp_to_obj", FEATURES, budget_tokens=budget)
    assert estimate_tokens(text) <= budget
    assert text.startswith("rollout of policy p0")
    if budget >= 80:
        assert "success: yes" in text and "progress tcp_to_obj" in text
        assert "action_norm" not in text  # lowest rank goes first


def test_several_rollouts_share_the_budget() -> None:
    rollouts = [_rollout(seed=s, reach_at=40 + 20 * s) for s in range(3)]
    text = encode_rollouts(rollouts, "tcp_to_obj", FEATURES, budget_tokens=300)
    assert estimate_tokens(text) <= 300
    assert text.count("rollout of policy") == 3
    assert encode_rollouts([], "tcp_to_obj") == "no rollouts yet (initial round)"


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="one non-zero length"):
        encode_rollout(Rollout({"a": np.zeros(3), "b": np.zeros(4)}), "a")


def test_the_encoding_names_the_policy_its_reward_and_the_components() -> None:
    f = _rollout().features
    components = {"approach": -f["tcp_to_obj"], "bonus": 5.0 * f["success"]}
    rollout = Rollout(f, components, policy_id="slot2", reward_id="c7")
    text = encode_rollout(rollout, "tcp_to_obj", FEATURES)
    assert "policy slot2 (reward c7)" in text and "bonus" in text
