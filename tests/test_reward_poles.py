"""Poles and domains over the features' declared ranges: `1/tcp_to_target` has its pole at
the goal, which a sample of random states never holds, so the magnitude check alone lets it through."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from lares_agent.engine.tasks import get_task
from lares_agent.rewards import synthetic_sample, validate
from lares_agent.rewards.sampling import feature_range


@pytest.fixture(scope="module")
def task_and_sample() -> tuple[object, dict[str, np.ndarray]]:
    task = get_task("reach-v3")
    return task, synthetic_sample(task.features, 4096, np.random.default_rng(0))


@pytest.mark.parametrize(
    ("expression", "fragments"),
    [
        ("1/tcp_to_target", ("division by tcp_to_target", "reaches 0", "[0, 1]", "epsilon", "exp(-tcp_to_target/0.1)")),
        ("-tcp_to_target + 1e-6/tcp_to_target**2", ("division by tcp_to_target",)),
        ("-tcp_to_target - log(tcp_to_target)", ("log of tcp_to_target", "log(1 + tcp_to_target)")),
        ("-tcp_to_target + 0.001/(tcp_to_target - 0.25)", ("changes sign",)),
        ("-tcp_to_target + 0.01/(tcp_to_target - tcp_to_obj)", ("division by",)),
    ],
)
def test_a_pole_inside_the_declared_range_is_rejected_with_the_fix(
    task_and_sample: tuple[object, dict[str, np.ndarray]], expression: str, fragments: tuple[str, ...]
) -> None:
    task, sample = task_and_sample
    verdict = validate(expression, task, sample)  # type: ignore[arg-type]
    assert not verdict.accepted
    for fragment in fragments:
        assert fragment in verdict.reason, verdict.reason


@pytest.mark.parametrize(("expression", "reaches"), [
    ("1/(1e-9 + tcp_to_target)", "1e+09"),
    ("-tcp_to_target + 1/sqrt(1e-10 + tcp_to_target)", "1e+05"),
])
def test_a_near_pole_is_rejected_though_the_denominator_never_reaches_0(expression: str, reaches: str) -> None:
    """Random states stay far from the goal, where the epsilon-guarded reciprocal passes the magnitude limit."""
    task = get_task("reach-v3")
    sample = synthetic_sample(task.features, 512, np.random.default_rng(1))
    sample["tcp_to_target"] = 0.3 + 0.5 * sample["tcp_to_target"]
    verdict = validate(expression, task, sample)
    assert not verdict.accepted
    for fragment in ("comes within", "of 0 over the declared range", f"reaches {reaches}", "limit 10000", "epsilon"):
        assert fragment in verdict.reason, verdict.reason


def test_the_pole_is_found_though_no_sample_state_is_near_it() -> None:
    """The sample holds only states far from the goal: only the declared range shows the pole."""
    task = get_task("reach-v3")
    sample = synthetic_sample(task.features, 512, np.random.default_rng(1))
    sample["tcp_to_target"] = 0.3 + 0.5 * sample["tcp_to_target"]
    assert validate("-tcp_to_target + 0.1/(tcp_to_target + 0.01)", task, sample).accepted
    verdict = validate("1/tcp_to_target", task, sample)
    assert not verdict.accepted and "reaches 0" in verdict.reason


@pytest.mark.parametrize(
    "expression",
    ["-tcp_to_target + 0.1/(tcp_to_target + 0.01)", "-log(1 + tcp_to_target)", "exp(-tcp_to_target/0.1)",
     "-tcp_to_target + 1/(1 + action_norm)**3"],
)
def test_guarded_denominators_and_logs_pass(
    task_and_sample: tuple[object, dict[str, np.ndarray]], expression: str
) -> None:
    task, sample = task_and_sample
    verdict = validate(expression, task, sample)  # type: ignore[arg-type]
    assert verdict.accepted, verdict.reason


def test_a_feature_may_declare_its_own_range() -> None:
    @dataclass(frozen=True)
    class Ranged:
        name: str = "height"
        unit: str = "m"
        low: float = 0.5
        high: float = 2.0

    assert feature_range(Ranged()) == (0.5, 2.0)
    assert feature_range(Ranged(low=3.0)) == (0.0, 1.0)  # an inverted range falls back to the unit's
