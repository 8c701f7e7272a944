"""`lares eval` on a tiny real run folder: success and return of the run's policy, the same
numbers from the policy file and from the checkpoint, JSON output, a rendered GIF of the first episode, and one line
for a video it cannot write."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import assert_real_gif
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.runs import FINAL_POLICY, RunLayout

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def lares(*args: str, home: Path) -> Any:
    return CliRunner().invoke(app, list(args), env={"LARES_HOME": str(home), "COLUMNS": "240"})


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("eval")
    result = lares("baseline", "--task", "Reacher-v5", "--learner", "sac", "--budget", "200", "--no-report",
                   "--run-dir", str(base / "runs"), home=base)
    assert result.exit_code == 0, result.output
    (folder,) = [p for p in (base / "runs").iterdir() if p.is_dir()]
    return folder


def test_eval_prints_success_return_and_length(run: Path, tmp_path: Path) -> None:
    result = lares("eval", str(run), "--episodes", "2", "--seed", "5", home=tmp_path)
    assert result.exit_code == 0, result.output
    assert str(RunLayout(run).policy(FINAL_POLICY)) in result.output
    assert "Reacher-v5, 2 deterministic episodes (seed 5): success " in result.output
    assert "task return -" in result.output and "episode length 50.0" in result.output


def test_policy_file_and_checkpoint_slot_give_the_same_episodes(run: Path, tmp_path: Path) -> None:
    data = torch.load(RunLayout(run).policy(FINAL_POLICY), weights_only=True)
    assert data["task"] == "Reacher-v5" and data["learner"] == "sac" and data["reward_id"] == "human"
    outs = []
    for policy in ("best", "slot 0", str(RunLayout(run).policy(FINAL_POLICY))):
        result = lares("eval", str(run), "--policy", policy, "--episodes", "2", "--json", home=tmp_path)
        assert result.exit_code == 0, result.output
        outs.append(json.loads(result.output))
    assert outs[1]["policy"] == str(RunLayout(run).slot_policy(0))  # every slot's file, written at the end
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    RunLayout(copy).slot_policy(0).unlink()
    result = lares("eval", str(copy), "--policy", "slot 0", "--episodes", "2", "--json", home=tmp_path)
    assert result.exit_code == 0, result.output
    outs.append(json.loads(result.output))
    assert outs[3]["policy"].startswith("checkpoint ")  # no slot file: built from the newest checkpoint
    assert len({o["task_return"] for o in outs}) == 1
    assert outs[0]["episodes"] == 2 and outs[0]["episode_length"] == 50.0
    again = json.loads(lares("eval", str(run), "--episodes", "2", "--seed", "1", "--json", home=tmp_path).output)
    assert again["task_return"] != outs[0]["task_return"]  # another seed, other resets


def test_a_video_that_cannot_be_written_is_one_line_and_non_zero(run: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MUJOCO_GL", raising=False)  # eval sets it for MuJoCo; undone after the test
    result = lares("eval", str(run), "--episodes", "1", "--video", str(tmp_path / "x.avi"), home=tmp_path)
    assert result.exit_code == 1
    assert "no video written" in result.output and "write a .gif or an .mp4" in result.output
    assert "Traceback" not in result.output


def test_the_first_episode_is_rendered_into_a_real_gif(run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """No skipping: a machine that cannot render off screen fails here (`make system-deps` installs EGL)."""
    monkeypatch.delenv("MUJOCO_GL", raising=False)  # the backend is chosen by lares (EGL first), not by the test
    gif = tmp_path / "episode.gif"
    result = lares("eval", str(run), "--episodes", "1", "--video", str(gif), "--json", home=tmp_path)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    frames = assert_real_gif(gif)
    assert out["video"] == str(gif) and out["video_frames"] == len(frames) == 26  # reset + every 2nd of 50 steps
    assert out["video_gl"] in ("egl", "osmesa", "glfw")


def test_eval_of_something_that_is_not_a_run_or_a_policy(tmp_path: Path) -> None:
    result = lares("eval", str(tmp_path), home=tmp_path)
    assert result.exit_code == 1 and "not a lares run directory" in result.output
    result = lares("eval", "--policy", str(tmp_path / "nope.pt"), home=tmp_path)
    assert result.exit_code == 1 and "does not exist" in result.output


def test_the_last_screen_of_a_baseline_names_the_policy_and_eval(tmp_path: Path) -> None:
    from lares_agent.cli.takeaway import takeaway_lines

    result = lares("baseline", "--task", "Reacher-v5", "--budget", "100", "--no-report", "--run-dir",
                   str(tmp_path / "runs"), home=tmp_path)
    assert result.exit_code == 0, result.output
    (folder,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert "selected reward human (slot 0): the task's own reward" in result.output
    assert f"evaluate: lares eval {folder}" in result.output and "lares export" not in result.output
    assert takeaway_lines(tmp_path, None, None) == []  # no policy file: nothing to say
