"""One scratch setting for every task: from scratch the LLM is offered a task's generic features only, not those
made to write the task's own reward (`Feature.designer`); `--designer-features` and the init setting offer them,
and docs/scratch-features.md says per task which features moved."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import scripted_client

from lares_agent.engine.tasks import TaskSpecError, get_task, list_tasks
from lares_agent.graphs.budget import fitted_system
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.nodes import _cases, _grammar
from lares_agent.memory.cases import Case, CaseStore
from lares_agent.rewards import human_components, synthetic_sample, validate
from lares_agent.search.config import SearchConfig
from lares_agent.search.option_checks import option_warnings
from lares_agent.search.proposer import fallback_reward

DOC = Path(__file__).resolve().parents[1] / "docs" / "scratch-features.md"
DESIGNER_TASKS = [spec.name for spec in list_tasks() if spec.designer_features]
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _context(name: str, *, init: bool = False, designer: bool = False, **kw: object) -> RunContext:
    task = get_task(name)
    human = dict(human_components(task) or ()) if init else None
    return RunContext(llm=scripted_client([]), task=task, limits=GraphLimits(designer_features=designer),
                      human_reward=human, **kw)  # type: ignore[arg-type]


def _named(text: str, names: tuple[str, ...]) -> set[str]:
    return set(WORD.findall(text)) & set(names)


def test_every_metaworld_task_with_its_own_reward_marks_the_features_made_for_it() -> None:
    assert {"drawer-open-v3", "door-close-v3", "push-v3", "hammer-v3"} <= set(DESIGNER_TASKS)
    assert {"hand_to_obj", "initial_tcp_to_obj"} <= set(get_task("drawer-open-v3").designer_features)
    assert {"obj_to_initial_hand", "initial_obj_to_target"} <= set(get_task("door-close-v3").designer_features)
    assert {"left_pad_gap", "right_pad_gap"} <= set(get_task("push-v3").designer_features)
    for name in ("tcp_to_obj", "obj_to_target", "tcp_x", "grasped", "tcp_speed", "action_norm", "obj_height"):
        assert name not in get_task("push-v3").designer_features  # the generic ones stay
    task = get_task("push-v3")
    with pytest.raises(TaskSpecError, match="cannot be the designer's"):  # a scratch reward must read both
        replace(task, feature_defs=tuple(replace(f, designer=f.designer or f.name == "tcp_to_obj")
                                         for f in task.feature_defs))


@pytest.mark.parametrize("name", DESIGNER_TASKS)
def test_a_scratch_prompt_and_grammar_name_no_designer_feature(name: str) -> None:
    designer = get_task(name).designer_features
    scratch = _context(name)
    assert not _named(fitted_system(scratch), designer)
    assert not _named(_grammar(scratch, 1, 4) or "", designer)
    assert "gripper_caging" not in (_grammar(scratch, 1, 4) or "")
    # the option and the init setting offer them (the task's own reward reads them)
    for ctx in (_context(name, designer=True), _context(name, init=True)):
        assert _named(fitted_system(ctx), designer) == set(designer)
        assert _named(_grammar(ctx, 1, 4) or "", designer) == set(designer)


def test_a_scratch_candidate_naming_a_designer_feature_is_rejected_and_the_fallback_still_passes() -> None:
    task = get_task("drawer-open-v3")
    states = synthetic_sample(task.features, 512, np.random.default_rng(0))
    answer = {"approach": "5*tolerance(hand_to_obj, 0, 0.01, initial_tcp_to_obj, 0.1, 'long_tail')",
              "progress": "-obj_to_target"}
    refused = validate({"components": answer}, task, states, config=_context(task.name).checks)
    assert not refused.accepted and refused.reason.startswith(
        "component 'approach' reads hand_to_obj, initial_tcp_to_obj: made to write the task's own reward")
    for ctx in (_context(task.name, designer=True), _context(task.name, init=True)):
        assert validate({"components": {**answer, "reach": "-tcp_to_obj"}}, task, states, config=ctx.checks).accepted
    for name in DESIGNER_TASKS:  # the engine's distances are generic: the fallback reward passes from scratch
        spec = get_task(name)
        sample = synthetic_sample(spec.features, 256, np.random.default_rng(1))
        verdict = validate(fallback_reward(spec, "fallback-0").to_json(), spec, sample, config=_context(name).checks)
        assert verdict.accepted, (name, verdict.reason)


def test_a_past_reward_that_reads_designer_features_is_not_retrieved_from_scratch(tmp_path: Path) -> None:
    store = CaseStore(tmp_path / "cases.sqlite")
    task = get_task("push-v3")
    for i, body in enumerate(["-tcp_to_obj - 2*obj_to_target", "2*gripper_caging(obj_radius=0.02, pad_success=0.05, "
                              "xz_success=0.005) - obj_to_target", "-left_pad_gap - obj_to_target"]):
        store.add(Case(task.name, task.description, {"reward": body}, 3.0, "old-run", f"c{i}", fitness=float(i)))
    scratch = _cases(_context(task.name, cases=store))
    assert "tcp_to_obj" in scratch and "gripper_caging" not in scratch and "left_pad_gap" not in scratch
    shown = _cases(_context(task.name, cases=store, designer=True))
    assert "gripper_caging" in shown and "left_pad_gap" in shown


def test_the_option_reaches_the_config_and_survives_a_resume() -> None:
    from test_cli_options import _config

    assert SearchConfig().designer_features is False and GraphLimits().designer_features is False
    cfg = _config(["--designer-features", "--setting", "scratch", "--task", "push-v3"])
    assert cfg.designer_features is True
    assert SearchConfig.from_json(cfg.to_json()) == cfg
    # a scratch run saved before the option was offered them, and resumes so
    old = {k: v for k, v in SearchConfig(setting="scratch").to_json().items() if k != "designer_features"}
    assert SearchConfig.from_json(old).designer_features is True
    init = replace(cfg, setting="init")
    assert any(w.startswith("--designer-features offers") for w in option_warnings(init))
    assert not any(w.startswith("--designer-features") for w in option_warnings(cfg))


def moved_table() -> str:
    """The table docs/scratch-features.md holds: per built-in task, the features a scratch search is not offered."""
    rows = ["| task | features the scratch setting does not offer (the designer's) |", "| --- | --- |"]
    for spec in list_tasks():
        if spec.family == "custom":
            continue
        moved = ", ".join(f"`{name}`" for name in spec.designer_features) or "none"
        rows.append(f"| {spec.name} | {moved} |")
    return "\n".join(rows)


def test_the_table_of_moved_features_is_current() -> None:
    assert moved_table() in DOC.read_text(encoding="utf-8"), "docs/scratch-features.md should hold:\n" + moved_table()


def test_the_random_edit_control_draws_over_the_features_the_llm_would_be_offered() -> None:
    from lares_agent.graphs.fillers import random_edits
    from lares_agent.graphs.state import EliteInfo

    task = get_task("push-v3")
    limits = GraphLimits(llm_proposals=False, edits="random")
    parent = EliteInfo(id="e0", components={"progress": "-obj_to_target", "approach": "-tcp_to_obj"})
    named: dict[bool, set[str]] = {False: set(), True: set()}
    for designer in named:
        ctx = RunContext(llm=scripted_client([]), task=task, limits=replace(limits, designer_features=designer))
        for round_ in range(6):
            for rec in random_edits(ctx, [parent], round_, 0, 0, None, 4) + random_edits(ctx, [], round_, 0, 0, None,
                                                                                               4):
                named[designer] |= _named(" ".join((rec.get("components") or {}).values()), task.designer_features)
    assert not named[False] and named[True]  # offered, they are drawn too: the test can see them
