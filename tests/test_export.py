"""`lares export`: the exported numpy module equals the compiled reward without lares importable,
and the CLI picks the run's selected reward and writes python, json and latex."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.rewards import compile_reward, parse_candidate
from lares_agent.rewards.export import ExportedFeature, latex_document, numpy_expression, python_module
from lares_agent.runs import CandidateRow, MetricRow, RunLayout, RunLog, SlotRecord
from lares_agent.search.config import SearchConfig

FEATURES = ("dist", "speed", "grasp", "height")
REWARDS = {
    "where_cmp": {"near": "where(dist < 0.1, 1.0, -dist)", "calm": "-0.1*speed*(speed > 0.5)"},
    "tolerance": {"t": "tolerance(dist, 0, 0.05, 0.2)", "hard": "tolerance(height, (0.1, 0.3))",
                  "g": "tolerance(speed, bounds=(-1, 1), margin=0.5, sigmoid='gaussian', value_at_margin=0.2)"},
    "hamacher": {"soft_and": "hamacher(tolerance(dist, 0, 0.02, 0.3), sigmoid(4*height))", "pull": "-dist**2"},
    "minmax": {"m": "Min(dist, speed, 1) - Max(height, 0)", "c": "clip(speed, -0.5, 0.5) + abs(height)**0.5"},
    "logic": {"p": "Piecewise((2, (dist < 0.05) & (grasp > 0.5)), (1, dist < 0.1), (0, True))",
              "q": "where(not (height > 0.2) or grasp, exp(-3*dist), log(1 + speed**2))", "r": "1/(1 + dist)",
              "s": "tanh(speed)**3 - 2*sqrt(abs(dist))"},
}


def _sample(n: int = 4096) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    sample = {name: rng.normal(0.0, 0.5, n) for name in FEATURES}
    sample["grasp"] = (rng.random(n) > 0.5).astype(np.float64)
    sample["dist"][:64] = 0.0  # exact ties at the bounds and comparisons
    sample["height"][64:128] = 0.3
    return sample


def _isolated_values(module: Path, sample: Path, out: Path) -> np.ndarray:
    """Import the module in a fresh interpreter where lares_agent cannot be imported."""
    code = (
        "import sys; sys.modules['lares_agent'] = None; sys.path.insert(0, sys.argv[1]); "
        "import numpy as np, exported; data = dict(np.load(sys.argv[2])); "
        "assert 'lares_agent' not in {m.split('.')[0] for m in sys.modules if sys.modules[m] is not None}; "
        "np.savez(sys.argv[3], total=exported.reward(data), **exported.components(data))"
    )
    subprocess.run([sys.executable, "-I", "-c", code, str(module.parent), str(sample), str(out)], check=True,
                   cwd=module.parent, timeout=120)
    return dict(np.load(out))  # type: ignore[return-value]


@pytest.mark.parametrize("name", sorted(REWARDS))
def test_exported_module_matches_compiled_reward_without_lares(tmp_path: Path, name: str) -> None:
    parsed = parse_candidate({"components": REWARDS[name]}, FEATURES)
    source = python_module(parsed, [ExportedFeature("dist", "distance to the goal", "m")], reward_id=name,
                           task="test-task", feature_code="def env_features(env, obs, info, action):\n"
                           "    return {'dist': 0.0}\n", feature_kind="feature code")
    assert "lares_agent" not in source and "import lares" not in source
    (tmp_path / "exported.py").write_text(source)
    sample = _sample()
    np.savez(tmp_path / "sample.npz", **sample)
    got = _isolated_values(tmp_path / "exported.py", tmp_path / "sample.npz", tmp_path / "out.npz")
    compiled = compile_reward(parsed)
    total, parts = compiled.evaluate(sample)
    np.testing.assert_allclose(got["total"], total, rtol=1e-6, atol=1e-6, equal_nan=True)
    for part, values in parts.items():
        np.testing.assert_allclose(got[part], values, rtol=1e-6, atol=1e-6, equal_nan=True)
    assert np.isfinite(total).mean() > 0.5  # the sample exercises real values, not only nan


def test_only_the_helpers_a_reward_uses_are_inlined() -> None:
    plain = parse_candidate("-dist + where(speed > 1, 1, 0)", FEATURES)
    source = python_module(plain, [], reward_id="r", task="t")
    assert "def np_tolerance" not in source and "def np_hamacher" not in source and "def np_sigmoid" not in source
    assert "import math" not in source
    _, helpers = numpy_expression(parse_candidate("hamacher(sigmoid(dist), tolerance(speed, 0, 1, 0.5))",
                                                  FEATURES).components["reward"])
    assert helpers == {"np_hamacher", "np_sigmoid", "np_tolerance", "tolerance_coefficient"}


def test_latex_has_each_component_and_the_total() -> None:
    parsed = parse_candidate({"components": {"a": "exp(-dist)", "b": "speed**2"}}, FEATURES)
    text = latex_document(parsed)
    assert text.splitlines()[0].startswith("a: $$e^{- dist}") and "speed^{2}" in text
    assert text.splitlines()[-1].startswith("total: $$")


def _run_folder(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    root.mkdir()
    layout = RunLayout(root)
    SearchConfig(task="Reacher-v5", budget=300, reward_period=150, population=2).save(layout.config)
    log = RunLog(layout)
    log.candidates.append(CandidateRow(id="r-a", round=0, slot=0, verdict="accepted",
                                       components={"reach": "-fingertip_to_target"}, rationale="plain"))
    log.candidates.append(CandidateRow(id="r-b", round=0, slot=1, verdict="accepted", rationale="shaped",
                                       components={"reach": "tolerance(fingertip_to_target, 0, 0.02, 0.1)",
                                                   "calm": "-0.1*action_norm"}))
    # the higher fitness is not the selected one
    log.candidates.append(CandidateRow(id="r-a", evaluated=SlotRecord(fitness=0.9)))
    log.metrics.append(MetricRow(kind="eval", env_steps=300, round=1, best_slot=1,
                                 slots=(SlotRecord(0, "r-a", success=0.2), SlotRecord(1, "r-b", success=0.6))))
    return root


def test_cli_exports_the_selected_reward_in_every_format(tmp_path: Path) -> None:
    root = _run_folder(tmp_path)
    runner = CliRunner()
    out = tmp_path / "reward_b.py"
    result = runner.invoke(app, ["export", str(root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    source = out.read_text()
    assert "Reward r-b found by lares-agent on task Reacher-v5" in source
    assert "fingertip_to_target [m]: distance from the fingertip to the target" in source
    assert "def component_reach(" in source and "def component_calm(" in source
    assert "def env_features(" in source and "def reacher_features" in source and "class LaresRewardWrapper" in source
    namespace: dict[str, object] = {}
    exec(compile(source, str(out), "exec"), namespace)  # the user's code, in the test only
    features = {"fingertip_to_target": np.array([0.0, 0.05, 0.5]), "action_norm": np.array([1.0, 0.0, 2.0])}
    reward = namespace["reward"]
    assert callable(reward)
    np.testing.assert_allclose(reward(features), [0.9, np.exp(np.log(0.1) * (0.03 / 0.1) ** 2), -0.2], atol=1e-9)

    as_json = runner.invoke(app, ["export", str(root), "--reward", "r-a", "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["components"] == {"reach": "-fingertip_to_target"} and data["key"] == "-fingertip_to_target"
    assert data["features_used"] == ["fingertip_to_target"] and data["fitness"] == 0.9
    latex = runner.invoke(app, ["export", str(root), "--format", "latex"])
    assert latex.exit_code == 0 and "calm: $$- 0.1 action_{norm}$$" in latex.output


def test_cli_refuses_an_unknown_reward_and_format(tmp_path: Path) -> None:
    root = _run_folder(tmp_path)
    runner = CliRunner()
    unknown = runner.invoke(app, ["export", str(root), "--reward", "nope"])
    assert unknown.exit_code == 1 and "reward 'nope' has no expression" in unknown.output and "r-a" in unknown.output
    bad = runner.invoke(app, ["export", str(root), "--format", "yaml"])
    assert bad.exit_code == 2 and "must be one of python, json, latex" in bad.output


def test_the_exported_wrapper_puts_the_reward_on_a_gymnasium_env(tmp_path: Path) -> None:
    from lares_agent.engine.tasks import get_task

    spec = get_task("Reacher-v5")
    parsed = parse_candidate({"components": {"reach": "-fingertip_to_target", "calm": "-0.1*action_norm**2"}},
                             spec.feature_names)
    namespace: dict[str, object] = {}
    exec(compile(python_module(parsed, [], reward_id="r", task=spec.name), "exported", "exec"), namespace)
    wrapper = namespace["LaresRewardWrapper"]

    def features_fn(env: object, obs: object, info: dict, action: np.ndarray) -> dict[str, float]:
        raw = spec.raw_state(env, obs, info)  # type: ignore[arg-type]
        values = spec.compute_features(raw[None, :], np.asarray(action, dtype=np.float64)[None, :])
        return {name: float(v[0]) for name, v in values.items()}

    env = wrapper(spec.make_env(0), features_fn)  # type: ignore[operator]
    obs, info = env.reset()
    action = np.array([0.5, -0.5])
    obs, reward, _, _, info = env.step(action)
    expected = compile_reward(parsed)({k: np.array([v]) for k, v in features_fn(env, obs, info, action).items()})
    assert reward == pytest.approx(float(expected[0])) and "env_reward" in info and reward != info["env_reward"]


@pytest.mark.parametrize("task", ["Reacher-v5", "push-v3"])
def test_cli_exports_the_task_own_reward_which_reproduces_the_env_reward(tmp_path: Path, task: str) -> None:
    from lares_agent.engine.tasks import get_task

    spec = get_task(task)
    runner = CliRunner()
    out = tmp_path / "own.py"
    result = runner.invoke(app, ["export", "--human", "--task", task, "--out", str(out)])
    assert result.exit_code == 0, result.output
    source = out.read_text()
    assert source.startswith(f'"""The own reward of task {task}') and "human-expr" in source
    namespace: dict[str, object] = {}
    exec(compile(source, str(out), "exec"), namespace)  # the user's code, in the test only

    def features_fn(env: object, obs: object, info: dict, action: np.ndarray) -> dict[str, float]:
        raw = spec.raw_state(env, obs, info)  # type: ignore[arg-type]
        values = spec.compute_features(raw[None, :], np.asarray(action, dtype=np.float64)[None, :])
        return {name: float(v[0]) for name, v in values.items()}

    env = namespace["LaresRewardWrapper"](spec.make_env(0), features_fn)  # type: ignore[operator]
    env.reset()
    for _ in range(20):
        _, reward, _, _, info = env.step(env.action_space.sample())
        assert reward == pytest.approx(float(info["env_reward"]), rel=1e-6, abs=1e-9)
    env.close()

    as_json = json.loads(runner.invoke(app, ["export", "--human", "--task", task, "--format", "json"]).output)
    assert as_json["id"] == "human-expr" and as_json["human"] is True
    assert set(as_json["components"]) == {name for name, _ in spec.human_components or ()}


def test_cli_export_human_needs_a_task_and_task_needs_human(tmp_path: Path) -> None:
    runner = CliRunner()
    alone = runner.invoke(app, ["export", "--human"])
    assert alone.exit_code == 2 and "--task" in alone.output
    root = _run_folder(tmp_path)
    stray = runner.invoke(app, ["export", str(root), "--task", "push-v3"])
    assert stray.exit_code == 2 and "--human" in stray.output
    from_run = runner.invoke(app, ["export", str(root), "--human", "--format", "json"])
    assert from_run.exit_code == 0 and json.loads(from_run.output)["task"] == "Reacher-v5"


def test_cli_exports_the_task_own_reward_when_the_run_hands_over_its_learner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the init setting the learner on the task's own reward can rank first: the run's reward is then that one,
    written as an expression; a task that has none gets one line pointing at --reward."""
    root = _run_folder(tmp_path)
    RunLog(RunLayout(root)).metrics.append(MetricRow(
        kind="eval", env_steps=450, round=2, best_slot=2,
        slots=(SlotRecord(0, "r-a", success=0.2), SlotRecord(1, "r-b", success=0.6)),
        extra={"success": 0.8}))
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(root), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["human"] is True and data["id"] == "human-expr" and "task's own reward" in data["selected"]
    monkeypatch.setattr("lares_agent.rewards.human_record", lambda spec: None)
    missing = runner.invoke(app, ["export", str(root)])
    assert missing.exit_code == 1 and "--reward ID" in missing.output and "r-a" in missing.output
