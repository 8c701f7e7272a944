"""Structural edits made without the LLM (`rewards/edits.py`, the random-edit control): each kind does what it
names, a seed reproduces them, and every edit passes the one validator or is rejected with its reason."""

from __future__ import annotations

import numpy as np
import pytest
import sympy
from helpers import described_task

from lares_agent.engine.tasks import get_task
from lares_agent.rewards import Limits, RewardRejected, parse_expression, synthetic_sample, validate
from lares_agent.rewards.edits import random_reward, random_term, structural_edit

TASK = described_task(
    "door-like", "obj_to_target",
    {"tcp_to_obj": ("gripper to handle", "m"), "obj_to_target": ("door to shut", "m"),
     "obj_x": ("door's x coordinate", "m"), "success": ("door shut", "bool")},
    approach_feature="tcp_to_obj",
)
REWARD = {"reach": "-0.5*tcp_to_obj", "close": "-2.0*obj_to_target + 3.0*success"}
SAMPLE = {"tcp_to_obj": np.linspace(0.0, 0.4, 50), "obj_to_target": np.linspace(0.0, 0.5, 50),
          "obj_x": np.linspace(-0.3, 0.3, 50), "success": (np.arange(50) < 5).astype(float)}


def _terms(components: dict[str, str]) -> list[str]:
    """Every top-level summand of every component, as text (order-free comparisons sort them)."""
    names = [f.name for f in TASK.features]
    return sorted(str(t) for text in components.values() for t in sympy.Add.make_args(parse_expression(text, names)))


def test_each_kind_of_edit_does_what_it_names() -> None:
    before = _terms(REWARD)
    add = structural_edit(REWARD, TASK, np.random.default_rng(0), sample=SAMPLE, kind="add")
    assert add.kind == "add" and len(add.components) == 3 and {"reach", "close"} < set(add.components)
    assert set(before) < set(_terms(add.components)) and len(_terms(add.components)) == 4
    remove = structural_edit(REWARD, TASK, np.random.default_rng(0), sample=SAMPLE, kind="remove")
    after = _terms(remove.components)
    assert len(after) == 2 and set(after) < set(before) and remove.what.startswith("removed")
    swap = structural_edit(REWARD, TASK, np.random.default_rng(0), sample=SAMPLE, kind="swap")
    after = _terms(swap.components)
    assert len(after) == 3 and len(set(after) & set(before)) == 2 and swap.what.startswith("swapped")
    # a full reward grows a term inside a component instead of a ninth component
    full = {f"c{i}": f"-{i + 2}*tcp_to_obj" for i in range(8)}
    grown = structural_edit(full, TASK, np.random.default_rng(1), sample=SAMPLE, kind="add", limits=Limits())
    assert len(grown.components) == 8 and "added the term" in grown.what


def test_an_edit_that_cannot_apply_is_refused_with_its_reason() -> None:
    with pytest.raises(RewardRejected, match="does not apply to a reward of 1 term"):
        structural_edit({"reach": "-tcp_to_obj"}, TASK, np.random.default_rng(0), kind="remove")
    with pytest.raises(RewardRejected, match="does not parse"):
        structural_edit({"reach": "-unknown_feature"}, TASK, np.random.default_rng(0))
    drawn = {structural_edit({"reach": "-tcp_to_obj"}, TASK, np.random.default_rng(s)).kind for s in range(20)}
    assert drawn == {"add", "swap"}  # only the kinds that apply are drawn


def test_a_seed_reproduces_the_edits() -> None:
    def edits(seed: int) -> list[dict[str, str]]:
        rng = np.random.default_rng(seed)
        return [structural_edit(REWARD, TASK, rng, sample=SAMPLE).components for _ in range(8)]

    assert edits(5) == edits(5)
    assert edits(5) != edits(6)
    assert random_reward(TASK, np.random.default_rng(2), sample=SAMPLE) == \
        random_reward(TASK, np.random.default_rng(2), sample=SAMPLE)


def test_building_blocks_follow_the_feature() -> None:
    rng = np.random.default_rng(0)
    assert random_term(TASK, rng, SAMPLE, feature="success")[0] == "bonus_success"  # a 0/1 flag is a bonus
    name, text = random_term(TASK, rng, SAMPLE, feature="obj_x", shape="exp")
    assert name == "exp_obj_x" and "Abs(obj_x)" in text  # a signed feature enters by its size
    assert "Abs" not in random_term(TASK, rng, SAMPLE, feature="tcp_to_obj", shape="tanh")[1]
    with pytest.raises(ValueError, match="unknown shape"):
        random_term(TASK, rng, SAMPLE, feature="tcp_to_obj", shape="cubic")
    offered = ("tcp_to_obj", "obj_to_target")  # a run that shows the LLM fewer features edits over those alone
    for seed in range(10):
        edit = structural_edit(REWARD, TASK, np.random.default_rng(seed), sample=SAMPLE, kind="add", features=offered)
        (added,) = set(edit.components) - set(REWARD)
        assert added.endswith(offered) and "obj_x" not in edit.components[added]


def test_a_reward_drawn_from_scratch_opens_on_progress_and_approach() -> None:
    for seed in range(10):
        drawn = random_reward(TASK, np.random.default_rng(seed), sample=SAMPLE)
        assert drawn.kind == "draw" and 2 <= len(drawn.components) <= 3
        assert list(drawn.components)[:2] == ["progress", "approach"]
        assert "obj_to_target" in drawn.components["progress"] and "tcp_to_obj" in drawn.components["approach"]


def test_every_edit_passes_the_one_validator_or_is_rejected_with_a_reason() -> None:
    """On a real task's own reward (door-close-v3) and a sample of its features."""
    task = get_task("door-close-v3")
    own = dict(task.human_components or ())
    sample = synthetic_sample(task.features, 256, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    verdicts = [validate({"components": structural_edit(own, task, rng, sample=sample).components}, task, sample)
                for _ in range(30)]
    assert all(v.accepted or v.reason.strip() for v in verdicts)
    assert sum(v.accepted for v in verdicts) >= 10, [v.reason for v in verdicts if not v.accepted]
