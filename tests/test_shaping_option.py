"""`--shaping potential` from the option to the files: config round trip and refusals, the potential's prompt and
validator, the checkpoint loader, the exported module (it computes base + gamma*Phi(s') - Phi(s) as training did),
and (slow) a tiny run through the CLI whose rewards are potentials, traced, reported and exported."""

from __future__ import annotations

import json
import subprocess
import sys
from email.message import Message
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer.main
from fake_openai import FakeOpenAI, chat_completion, serving
from typer.testing import CliRunner

from lares_agent.cli import run_cmd
from lares_agent.cli.app import app
from lares_agent.engine import HumanReward, PotentialReward, get_task
from lares_agent.engine.replay.potential import FIRST_STEP, PREV_PREFIX, TERMINATED
from lares_agent.engine.replay.potential import SHAPINGS as ENGINE_SHAPINGS
from lares_agent.errors import ConfigError
from lares_agent.graphs.prompting import system_text
from lares_agent.rewards import CheckConfig, compile_record, prompt_features, synthetic_sample, validate
from lares_agent.rewards.export import ExportedFeature, python_module
from lares_agent.rewards.export_potential import PotentialForm
from lares_agent.runs import read_jsonl
from lares_agent.search.config import SearchConfig
from lares_agent.search.options import SHAPINGS
from lares_agent.search.potentials import load_potential, shaper_for
from lares_agent.search.presets import preset_config

TASK = "Reacher-v5"
PHI = {"components": {"reach": "exp(-fingertip_to_target/0.05)", "bonus": "2*success"}, "rationale": "close"}


def _config(args: list[str]) -> SearchConfig:
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    params = command.make_context("run", args).params
    return preset_config(params["preset"], run_cmd.run_overrides(params))


def test_the_option_reaches_the_config_and_round_trips() -> None:
    assert SHAPINGS == ENGINE_SHAPINGS == ("additive", "potential")
    cfg = _config(["--shaping", "potential", "--task", TASK])
    assert cfg.shaping == "potential" and _config([]).shaping == "additive"
    assert SearchConfig.from_json(cfg.to_json()) == cfg
    old = cfg.to_json()
    del old["shaping"]  # a config.json from before the option ran additive rewards
    assert SearchConfig.from_json(old).shaping == "additive"


@pytest.mark.parametrize(("extra", "why"), [
    ({"learner": "es"}, "ES sums undiscounted episode returns"),
    ({"setting": "baseline"}, "a baseline trains on one reward as it is"),
    ({"reward_gain": 2.0}, "--reward-gain scales a reward by what it pays at the goal"),
    ({"reward_normalisation": "sigmoid"}, "no longer shaped by a potential"),
])
def test_the_option_is_refused_where_it_makes_no_sense(extra: dict[str, Any], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        SearchConfig(task=TASK, shaping="potential", **extra)
    SearchConfig(task=TASK, **extra)  # the same options without it are fine
    with pytest.raises(ConfigError, match="--shaping must be one of additive, potential"):
        SearchConfig(task=TASK, shaping="multiplicative")  # type: ignore[arg-type]


def test_a_potential_reads_the_state_alone() -> None:
    task = get_task(TASK)
    sample = synthetic_sample(task.features, 512, np.random.default_rng(0))
    with_action = {"components": {"reach": "-fingertip_to_target", "effort": "-0.1*action_norm"}}
    verdict = validate(with_action, task, sample, config=CheckConfig(state_only=True))
    assert not verdict.accepted and "action_norm, which the action sets" in verdict.reason
    assert validate(with_action, task, sample).accepted  # an additive reward may read it
    assert validate(PHI, task, sample, config=CheckConfig(state_only=True)).accepted
    assert "action_norm" in prompt_features(task) and "action_norm" not in prompt_features(task, state_only=True)


def test_the_potential_prompt_asks_for_a_potential_of_the_state() -> None:
    task = get_task(TASK)
    names = prompt_features(task, state_only=True)
    text = system_text(task, names, 4, shaping="potential")
    assert "You write a POTENTIAL" in text and "gamma*Phi(next state) - Phi(state)" in text
    assert "1 on every step where the task's success test holds" in text and "action_norm" not in text
    assert "POTENTIAL" not in system_text(task, prompt_features(task), 4)  # additive: the prompt as before
    init = system_text(task, names, 4, human={"reach": "-fingertip_to_target"}, shaping="potential")
    assert "the base reward your potential shapes" in init


def _rows(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Features of one Reacher-like episode (what the potential and base read), in order."""
    return {"fingertip_to_target": rng.uniform(0.0, 0.3, n), "success": (rng.uniform(size=n) < 0.3).astype(float)}


def test_a_checkpointed_potential_loads_as_it_was_installed() -> None:
    task = get_task(TASK)
    rng = np.random.default_rng(1)
    phi = compile_record({"id": "p1", **PHI}, task)
    for setting, base in (("scratch", "success"), ("init", "human")):
        shaper = shaper_for(SearchConfig(task=TASK, setting=setting, shaping="potential"), task, 3.0)
        assert shaper is not None and shaper.gamma == 0.99 and shaper.base.id == base
        shaped = shaper.shape(phi, _rows(rng, 64))
        loaded = load_potential(json.loads(json.dumps(shaped.to_json())), [f.name for f in task.features])
        rows = {**_rows(rng, 8), "human_reward": rng.normal(size=8)}
        rows |= {PREV_PREFIX + k: v[::-1].copy() for k, v in rows.items()}
        rows |= {FIRST_STEP: np.arange(8) == 0, TERMINATED: np.zeros(8, bool)}
        np.testing.assert_array_equal(loaded(rows), shaped(rows))
        assert isinstance(loaded.base, HumanReward) == (setting == "init")
    assert shaper_for(SearchConfig(task=TASK), task, 0.0) is None


def test_the_exported_potential_computes_the_shaped_reward(tmp_path: Path) -> None:
    task = get_task(TASK)
    phi = compile_record({"id": "p1", **PHI}, task)
    form = PotentialForm("success", 0.99, 2.5, 0.7)
    features = [ExportedFeature(f.name, f.meaning, f.unit) for f in task.feature_defs]
    source = python_module(phi.parsed, features, reward_id="p1", task=TASK, potential=form)
    assert "This is a POTENTIAL Phi" in source and "def potential_sum(" in source
    (tmp_path / "exported.py").write_text(source)
    rows = _rows(np.random.default_rng(2), 12)
    terminated = np.zeros(12, bool)
    terminated[-1] = True
    np.savez(tmp_path / "rows.npz", terminated=terminated, **rows)
    code = ("import sys, json; sys.modules['lares_agent'] = None; sys.path.insert(0, sys.argv[1]); "
            "import numpy as np, exported; d = dict(np.load(sys.argv[2])); t = d.pop('terminated'); "
            "w = exported.LaresRewardWrapper.__new__(exported.LaresRewardWrapper); w.previous_phi = 0.0; "
            "steps = [w.reward({k: float(v[i]) for k, v in d.items()}, bool(t[i])) for i in range(len(t))]; "
            "json.dump({'cut': exported.reward(d).tolist(), 'terminal': exported.reward(d, t).tolist(), "
            "'steps': steps}, open(sys.argv[3], 'w'))")
    out = tmp_path / "out.json"
    subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path), str(tmp_path / "rows.npz"), str(out)],
                   check=True, timeout=120)
    got = json.loads(out.read_text())
    base = compile_record({"id": "success", "components": {"success": "success"}}, task)
    shaped = PotentialReward(base, phi, form.gamma, form.top, form.spread)
    np.testing.assert_allclose(got["cut"], shaped(rows), rtol=1e-12)  # one episode in order, cut by a time limit
    ends = {**rows, PREV_PREFIX + "fingertip_to_target": np.roll(rows["fingertip_to_target"], 1),
            PREV_PREFIX + "success": np.roll(rows["success"], 1), FIRST_STEP: np.arange(12) == 0,
            TERMINATED: terminated}
    np.testing.assert_allclose(got["terminal"], shaped(ends), rtol=1e-12)  # Phi(s') = 0 at the true end
    np.testing.assert_allclose(got["steps"], got["terminal"], rtol=1e-12)  # the wrapper, one step at a time
    assert got["cut"][-1] != pytest.approx(got["terminal"][-1])


# ---------------------------------------------------------------------------------------------- end to end
ANSWERS = [
    {"components": {"reach": "-fingertip_to_target", "effort": "-0.1*action_norm"}, "rationale": "reads the action"},
    {"components": {"reach": "exp(-fingertip_to_target/0.05)", "bonus": "2*success"}, "rationale": "close"},
    {"components": {"reach": "-2*fingertip_to_target"}, "rationale": "linear"},
    {"components": {"reach": "1 - tanh(fingertip_to_target/0.1)"}, "rationale": "bounded"},
]


class PotentialServer(FakeOpenAI):
    """Proposes the answers above in turn (the first reads the action) and says a sentence to the other nodes."""

    def __init__(self) -> None:
        super().__init__()
        self.proposals = 0

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if "# Step: propose" not in str(body["messages"][-1]["content"]):
            return 200, chat_completion("The fingertip overshoots the target.", body["model"], 80, 10)
        with self.lock:
            answer = ANSWERS[self.proposals % len(ANSWERS)]
            self.proposals += 1
        return 200, chat_completion(json.dumps(answer), body["model"], 100, 20)


@pytest.mark.slow  # real training through the whole CLI (tens of seconds)
def test_a_tiny_potential_run_through_the_cli(tmp_path: Path) -> None:
    def lares(*args: str) -> Any:
        return CliRunner().invoke(app, list(args), env={"LARES_HOME": str(tmp_path / "home"), "COLUMNS": "240",
                                                       "OPENAI_API_KEY": ""})

    with serving(PotentialServer()) as server:
        result = lares("run", "--task", TASK, "--setting", "scratch", "--shaping", "potential", "--budget", "300",
                       "--reward-period", "150", "--population", "2", "--elites", "1", "--seed", "3",
                       "--numeric-children", "0", "--no-report", "--handover-episodes", "0", "--llm-backend",
                       "openai", "--llm-model", "fake", "--base-url", server.url, "--run-dir", str(tmp_path / "runs"))
    assert result.exit_code == 0, result.output
    (run,) = list((tmp_path / "runs").iterdir())
    assert json.loads((run / "config.json").read_text())["shaping"] == "potential"
    events = read_jsonl(run / "events.jsonl")
    shaped = [e for e in events if e["event"] == "potential"]
    assert {e["round"] for e in shaped} == {0, 1} and all(e["base"] == "success" and e["gamma"] == 0.99
                                                          for e in shaped)
    rows = read_jsonl(run / "candidates.jsonl")
    assert any("which the action sets" in (r.get("reason") or "") for r in rows if r["verdict"] == "rejected")
    calls = read_jsonl(run / "llm_calls.jsonl")
    assert all("You write a POTENTIAL" in c["messages"][0]["content"] for c in calls)
    update = next(e for e in events if e["event"] == "reward_update")
    assert update["slots"] and all(set(slot["components"]) == {"base", "shaping"} for slot in update["slots"])
    reward_id = shaped[-1]["reward_id"]
    trace = lares("trace", str(run), "--candidate", reward_id)
    assert trace.exit_code == 0 and "form: potential Phi: the learners trained on success" in trace.output
    report = lares("report", str(run), "--no-video")
    assert report.exit_code == 0, report.output
    assert "potential: the LLM writes Phi" in (run / "report" / "index.html").read_text(encoding="utf-8")
    exported = lares("export", str(run), "--reward", reward_id, "--format", "json")
    assert exported.exit_code == 0, exported.output
    doc = json.loads(exported.output)
    assert doc["shaping"] == "potential" and doc["gamma"] == 0.99 and doc["base_feature"] == "success"
    assert doc["top"] == shaped[-1]["top"] and doc["spread"] == shaped[-1]["spread"]
