"""Your own task from the CLI: `--task package.module:function` resolved in the task registry,
recorded in config.json, and the example InvertedPendulum-v5 task run end to end (run, resume, report, trace,
export, tasks --show) through a fake OpenAI-compatible server at a tiny budget."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_openai import FakeOpenAI, chat_completion, serving
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine.tasks import TaskRegistry, TaskSpecError, allow_task_reference, resolve_task
from lares_agent.runs import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = "examples.inverted_pendulum:task"
CANDIDATES = [
    {"components": {"upright": "-pole_tilt", "centre": "-0.1*abs(cart_position)"}, "rationale": "stay up"},
    {"components": {"upright": "tolerance(pole_tilt, 0, 0.05, 0.15)", "alive": "0.1*time_balanced"},
     "rationale": "shaped"},
    {"components": {"upright": "exp(-10*pole_tilt)", "calm": "-0.01*pole_angular_velocity**2"}, "rationale": "c"},
]


def test_reference_gives_the_example_task() -> None:
    allow_task_reference(REFERENCE)  # what `--task REFERENCE` on a command line does
    spec = resolve_task(REFERENCE)
    assert spec.name == "InvertedPendulum-v5" and spec.family == "custom" and spec.horizon == 1000
    assert resolve_task(REFERENCE) is spec  # built once
    env = spec.make_env(0)
    obs, info = env.reset()
    raws, actions = [spec.raw_state(env, obs, info)], [np.zeros(1)]
    for _ in range(5):
        action = np.array([0.5])
        obs, _, _, _, info = env.step(action)
        raws.append(spec.raw_state(env, obs, info))
        actions.append(action)
    feats = spec.compute_features(np.stack(raws), np.stack(actions))
    np.testing.assert_allclose(feats["time_balanced"], np.arange(6) * 0.04)
    np.testing.assert_allclose(feats["pole_tilt"], np.abs(np.stack(raws)[:, 1]))
    assert feats["human_reward"][1:].tolist() == [1.0] * 5 and feats["success"].max() == 0.0


@pytest.mark.parametrize(("reference", "words"), [
    ("no_such_module_xyz:task", "cannot import no_such_module_xyz"),
    ("examples.inverted_pendulum:nothing", "has no function 'nothing'"),
    ("examples.inverted_pendulum:features", "features() missing"),
    ("examples.inverted_pendulum:make_env()", "package.module:function"),
])
def test_bad_references_are_one_line_errors(reference: str, words: str) -> None:
    with pytest.raises((TaskSpecError, TypeError)) as err:
        TaskRegistry().load_reference(reference)
    assert words in str(err.value)


def test_a_function_that_returns_no_taskspec_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_tasks_mod.py").write_text("def task():\n    return 'not a spec'\n")
    monkeypatch.chdir(tmp_path)  # found through the current folder, as `lares` run from there finds it
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    with pytest.raises(TaskSpecError, match="returned str, not a TaskSpec"):
        TaskRegistry().load_reference("my_tasks_mod:task")
    sys.modules.pop("my_tasks_mod", None)


class PendulumServer(FakeOpenAI):
    def __init__(self) -> None:
        super().__init__()
        self.proposals = 0

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        user = str(body["messages"][-1]["content"])
        if "# Step: propose" in user:
            with self.lock:
                answer = json.dumps({"candidates": [CANDIDATES[self.proposals % len(CANDIDATES)]]})
                self.proposals += 1
        else:
            answer = "The pole falls within a few steps; reward keeping it upright."
        return 200, chat_completion(answer, body["model"], 100, 20)


@pytest.fixture(scope="module")
def server() -> Iterator[PendulumServer]:
    with serving(PendulumServer()) as srv:
        yield srv


def lares(*args: str, home: Path) -> Any:
    return CliRunner().invoke(app, list(args), env={"LARES_HOME": str(home), "COLUMNS": "100", "OPENAI_API_KEY": ""})


@pytest.mark.slow  # real training through the whole CLI (~10 s), like tests/test_cli_e2e.py
def test_example_task_end_to_end(server: PendulumServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # `lares run --task examples.inverted_pendulum:task` from the project folder
    home, base = tmp_path / "home", tmp_path / "runs"
    # From scratch: with init the learner on the task's own reward may rank first, and this task has no expression
    # of it to export (tests/test_export.py covers that case).
    tiny = ["--task", REFERENCE, "--setting", "scratch", "--budget", "300", "--reward-period", "150", "--population",
            "2", "--elites", "1", "--no-report", "--seed", "1", "--llm", "openai", "--model", "fake",
            "--base-url", server.url]
    result = lares("run", *tiny, "--max-minutes", "0.03", "--allow-fallback", "--run-dir", str(base), home=home)
    assert result.exit_code == 0, result.output
    stopped = "run stopped" in result.output  # 1.8 s is a fraction of the run on a laptop
    (run,) = list(base.iterdir())
    # the task is found again when named again (a run folder alone imports no module: tests/test_cli_untrusted_task.py)
    resumed = lares("resume", str(run), "--task", REFERENCE, "--no-report", "--max-minutes", "10", home=home)
    assert resumed.exit_code == 0, resumed.output
    assert ("run finished: " if stopped else "run already finished") in resumed.output, resumed.output
    assert run.name.startswith("InvertedPendulum-v5-")
    config = json.loads((run / "config.json").read_text())
    assert config["task"] == REFERENCE
    rows = [r for r in read_jsonl(run / "candidates.jsonl") if r.get("verdict") == "accepted"]
    # the LLM's answers and numeric children of them (which list their components in sorted order)
    assert rows and {frozenset(r["components"]) for r in rows} <= {frozenset(c["components"]) for c in CANDIDATES}

    again = lares("resume", str(run), "--task", REFERENCE, "--no-report", home=home)
    assert again.exit_code == 0 and "already finished" in again.output, again.output
    report = lares("report", str(run), "--task", REFERENCE, home=home)
    assert report.exit_code == 0 and (run / "report" / "index.html").is_file(), report.output
    trace = lares("trace", str(run), home=home)
    assert trace.exit_code == 0 and f"task {REFERENCE}" in trace.output, trace.output
    exported = lares("export", str(run), "--task", REFERENCE, "--format", "json", home=home)
    assert exported.exit_code == 0, exported.output
    data = json.loads(exported.output)
    assert data["task"] == "InvertedPendulum-v5" and data["id"] in {r["id"] for r in rows}
    module = lares("export", str(run), "--task", REFERENCE, home=home)
    assert module.exit_code == 0 and "pole_tilt [rad]: absolute angle of the pole" in module.output
    assert "def env_features(" not in module.output  # a user task: its author has the feature code
    _exported_equals_compiled_on_real_steps(run, module.output, tmp_path)
    shown = lares("tasks", "--show", REFERENCE, home=home)
    assert shown.exit_code == 0 and "InvertedPendulum-v5 (custom), horizon 1000" in shown.output


def _exported_equals_compiled_on_real_steps(run: Path, source: str, tmp_path: Path) -> None:
    """The exported module, imported without lares, against the compiled reward on features of real env steps."""
    from test_export import _isolated_values

    from lares_agent.rewards import compile_record

    spec = resolve_task(REFERENCE)
    rng = np.random.default_rng(0)
    env = spec.make_env(3)
    obs, info = env.reset()
    raws, actions = [], []
    for _ in range(300):
        action = rng.uniform(-3, 3, size=1)
        obs, _, terminated, truncated, info = env.step(action)
        raws.append(spec.raw_state(env, obs, info))
        actions.append(action)
        if terminated or truncated:
            obs, info = env.reset()
    features = spec.compute_features(np.stack(raws), np.stack(actions))
    np.savez(tmp_path / "sample.npz", **features)
    (tmp_path / "exported.py").write_text(source)
    got = _isolated_values(tmp_path / "exported.py", tmp_path / "sample.npz", tmp_path / "out.npz")
    selected = next(r for r in read_jsonl(run / "candidates.jsonl") if r.get("id") and f"Reward {r['id']} " in source)
    compiled = compile_record(selected, spec)
    np.testing.assert_allclose(got["total"], compiled(features), rtol=1e-6, atol=1e-6)
