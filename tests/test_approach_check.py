"""The validator asks for an approach term while the object has not moved (docs/RESULTS.md, button-press)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lares_agent.engine.tasks import get_task
from lares_agent.search.runner import random_feature_sample
from lares_agent.tools.checks import CheckConfig, allowed_features, check_candidate, progress_stuck


def _sample(progress: np.ndarray, approach: np.ndarray) -> dict[str, np.ndarray]:
    return {"obj_to_target": progress, "tcp_to_obj": approach, "success": np.zeros_like(progress)}


def test_progress_stuck_needs_a_still_progress_and_a_moving_hand() -> None:
    rng = np.random.default_rng(0)
    hand = rng.uniform(0.05, 0.4, 200)
    jitter = 0.0936 + 1.6e-5 * rng.standard_normal(200)  # a button that was never pressed
    assert progress_stuck(_sample(jitter, hand), "obj_to_target", "tcp_to_obj")
    assert not progress_stuck(_sample(rng.uniform(0.0, 0.1, 200), hand), "obj_to_target", "tcp_to_obj")
    assert not progress_stuck(_sample(jitter, np.full(200, 0.2)), "obj_to_target", "tcp_to_obj")
    assert not progress_stuck(_sample(jitter, hand), "obj_to_target", "missing")


@pytest.fixture(scope="module")
def button_sample() -> dict[str, np.ndarray]:
    return random_feature_sample(get_task("button-press-v3"), steps=300, seed=0)


def _check(components: dict[str, str], sample: dict[str, np.ndarray], config: CheckConfig = CheckConfig()):
    task = get_task("button-press-v3")
    return check_candidate({"components": components}, feature_names=allowed_features(task), sample=sample,
                           candidate_id="c", progress_feature=task.progress_feature, config=config,
                           approach_feature=task.approach_feature)


def test_random_steps_never_press_the_button_so_a_reward_without_approach_is_rejected(button_sample) -> None:
    assert progress_stuck(button_sample, "obj_to_target", "tcp_to_obj")
    result = _check({"progress": "-obj_to_target", "bonus": "5*success"}, button_sample)
    assert not result.accepted and "tcp_to_obj" in result.reason and "no signal" in result.reason
    assert _check({"approach": "-tcp_to_obj", "progress": "-5*obj_to_target"}, button_sample).accepted
    off = replace(CheckConfig(), require_approach_when_stuck=False)
    assert _check({"progress": "-obj_to_target", "bonus": "5*success"}, button_sample, off).accepted


def test_once_the_object_moves_the_approach_term_is_optional(button_sample) -> None:
    moved = dict(button_sample)
    moved["obj_to_target"] = np.linspace(0.0, 0.1, len(button_sample["obj_to_target"]))
    assert _check({"progress": "-obj_to_target", "bonus": "5*success"}, moved).accepted
