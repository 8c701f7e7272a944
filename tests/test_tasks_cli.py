"""`lares tasks`: a table of every task, or JSON with their features."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine.tasks import list_tasks

runner = CliRunner()


def test_tasks_table_lists_every_task():
    result = runner.invoke(app, ["tasks"])
    assert result.exit_code == 0, result.output
    names = [spec.name for spec in list_tasks()]
    assert len(names) >= 19
    for name in names:
        assert name in result.output
    assert "obj_to_target" in result.output and "fingertip_to_target" in result.output


def test_tasks_json_is_valid_and_complete():
    result = runner.invoke(app, ["tasks", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data) >= 19
    by_name = {entry["name"]: entry for entry in data}
    push = by_name["push-v3"]
    assert push["horizon"] == 150 and push["progress_feature"] == "obj_to_target" and push["has_human_reward"]
    names = [f["name"] for f in push["features"]]
    assert "tcp_to_obj" in names and "human_reward" not in names
    assert push["approach_feature"] == "tcp_to_obj" and by_name["reach-v3"]["approach_feature"] is None
    assert by_name["Pusher-v5"]["approach_feature"] == "tip_to_obj"
    assert all(set(f) == {"name", "meaning", "unit", "designer"} for entry in data for f in entry["features"])
    # the features made to write the task's own reward say so (docs/scratch-features.md)
    designer = {f["name"] for f in push["features"] if f["designer"]}
    assert "left_pad_gap" in designer and "tcp_to_obj" not in designer
    assert by_name["HalfCheetah-v5"]["horizon"] == 1000


def test_tasks_show_prints_the_task_own_reward_expression():
    from lares_agent.engine.tasks import get_task

    spec = get_task("pick-place-v3")
    result = runner.invoke(app, ["tasks", "--show", "pick-place-v3"])
    assert result.exit_code == 0, result.output
    assert "human reward as an expression" in result.output and "gripper_caging(" in result.output
    for name, _ in spec.human_components or ():
        assert f"  {name} = " in result.output
    shown = json.loads(runner.invoke(app, ["tasks", "--show", "reach-v3", "--json"]).output)
    assert shown["human_components"] == dict(get_task("reach-v3").human_components or ())
