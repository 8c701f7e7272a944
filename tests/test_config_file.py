"""`lares run --config FILE`: TOML, YAML or JSON with every `lares run` option by name, a run's own config.json
included; flags typed on the command line win over the file, the file over the preset and the defaults; a bad
key or value is one line naming it, exit 2, before any run folder exists."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from lares_agent.cli import run_cmd
from lares_agent.cli.app import app
from lares_agent.search.config import SearchConfig
from lares_agent.search.presets import preset_config

TOML = """
task = "Reacher-v5"
budget = 600
reward-period = 200
population = 3
elites = 2
hidden = [64, 64]
ablations = ["no-relabel"]
retrieval = false
lr = 1e-3
analysis = "llm"
personas = ["neutral", "strict-coach"]
"""
YAML = """
task: Reacher-v5
budget: 600
reward_period: 200
population: 3
elites: 2
hidden: 64x64
ablations: [no-relabel]
retrieval: false
lr: 0.001
analysis: llm
personas: neutral,strict-coach
"""
EXPECTED = {"task": "Reacher-v5", "budget": 600, "reward_period": 200, "population": 3, "elites": 2,
            "hidden": (64, 64), "ablations": ("no-relabel",), "retrieval": False, "lr": 1e-3, "analysis": "llm",
            "personas": ("neutral", "strict-coach")}


def _start(args: list[str]) -> tuple[SearchConfig, dict[str, object], list[str]]:
    """What `lares run ARGS` would start (config, options, the lines it says first), without starting it."""
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    ctx = command.make_context("run", args)
    return run_cmd._run_config(ctx, ctx.params["config"])


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _error_line(result: Any) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize(("name", "text"), [("run.toml", TOML), ("run.yaml", YAML), ("run.yml", YAML),
                                            ("run.json", json.dumps(EXPECTED))])
def test_toml_yaml_and_json_give_the_same_config(tmp_path: Path, name: str, text: str) -> None:
    cfg, _, _ = _start(["--config", str(_write(tmp_path / name, text))])
    assert cfg == preset_config("demo", EXPECTED)


def test_flags_override_the_file_the_file_overrides_preset_and_defaults(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.toml", 'preset = "paper"\ntask = "Reacher-v5"\nbudget = 50000\nseed = 5\n'
                                         'run_dir = "elsewhere"\nreport = false\n')
    cfg, params, _ = _start(["--config", str(path), "--budget", "40000", "--seed", "0"])
    assert (cfg.preset, cfg.task, cfg.population, cfg.hidden) == ("paper", "Reacher-v5", 5, (256, 256, 256))
    assert cfg.budget == 40_000  # the flag, over the file
    assert cfg.seed == 0  # typed, though it is the default
    assert (params["run_dir"], params["report"]) == (Path("elsewhere"), False)  # the options that are not fields


def test_a_runs_own_config_json_starts_the_same_run_with_the_flags_changed(tmp_path: Path) -> None:
    ran = preset_config("paper", {"task": "Reacher-v5", "setting": "scratch", "fitness": "success-then-return",
                                  "budget": 30_000, "reward_period": 10_000, "llm_backend": "openai", "llm_model": "m",
                                  "base_url": "http://127.0.0.1:9/v1", "rewards_file": "start.json"})
    ran.save(tmp_path / "config.json")  # with the run format marker, as `lares run` writes it
    cfg, _, said = _start(["--config", str(tmp_path / "config.json"), "--seed", "2"])
    assert cfg == dataclasses.replace(ran, seed=2) and said[0].startswith("note: --preset paper differs")
    demo = preset_config("demo", {"task": "Reacher-v5", "learner": "sac", "hidden": (32, 32)})
    demo.save(tmp_path / "config.json")
    assert _start(["--config", str(tmp_path / "config.json")])[0] == demo


def test_the_round_trip_through_the_cli_reaches_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = preset_config("demo", {"task": "Reacher-v5", "budget": 900, "reward_period": 300, "retrieval": False})
    ran.save(tmp_path / "config.json")
    started: list[SearchConfig] = []

    def start_run(cfg: SearchConfig, run_dir: Path, **_: Any) -> None:
        started.append(cfg)
        raise typer.Exit(0)

    monkeypatch.setattr("lares_agent.search.runner.check_start", lambda cfg: None)
    monkeypatch.setattr("lares_agent.search.runner.start_run", start_run)
    result = invoke("run", "--config", str(tmp_path / "config.json"), "--seed", "2", "--run-dir", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    assert started == [dataclasses.replace(ran, seed=2)]


def test_a_flag_that_makes_a_file_value_useless_drops_it_with_a_note(tmp_path: Path) -> None:
    """An openai run's config.json replayed: its base_url is left out, not refused."""
    ran = preset_config("demo", {"task": "Reacher-v5", "llm_backend": "openai", "llm_model": "m",
                                 "base_url": "http://127.0.0.1:9/v1"})
    ran.save(tmp_path / "config.json")
    cfg, _, said = _start(["--config", str(tmp_path / "config.json"), "--llm-backend", "replay",
                           "--replay-from", str(tmp_path)])
    assert (cfg.llm_backend, cfg.base_url, cfg.replay_from) == ("replay", None, str(tmp_path))
    assert said == [f"note: --config {tmp_path / 'config.json'} sets base_url, left out: --base-url applies to "
                    "--llm-backend openai; --llm-backend replay never calls it"]


def test_a_typed_preset_under_a_whole_config_says_the_file_wins(tmp_path: Path) -> None:
    preset_config("demo", {"task": "Reacher-v5"}).save(tmp_path / "config.json")
    cfg, _, said = _start(["--config", str(tmp_path / "config.json"), "--preset", "paper", "--no-retrieval"])
    assert cfg.preset == "paper" and cfg.budget == SearchConfig.budget
    assert any("which --preset paper would set too: the file's values are kept" in line for line in said)


def test_old_option_names_work_in_a_file_and_a_flag_overrides_them(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.toml", 'llm = "openai"\nmodel = "m"\n')
    assert (_start(["--config", str(path)])[0].llm_backend, _start(["--config", str(path)])[0].llm_model) == (
        "openai", "m")
    assert _start(["--config", str(path), "--llm-backend", "local", "--llm-model", "x"])[0].llm_backend == "local"


@pytest.mark.parametrize(
    ("name", "text", "fragments"),
    [
        ("run.toml", "reward_perod = 100\n", ("unknown key 'reward_perod'", "did you mean 'reward_period'")),
        ("run.toml", 'config = "other.toml"\n', ("unknown key 'config'",)),
        ("run.toml", "budget = 100\nllm = 'openai'\nllm_backend = 'openai'\n", ("'llm_backend' and 'llm'",)),
        ("run.toml", "reward_period = 100\nreward-period = 200\n", ("same option",)),
        ("run.toml", 'budget = "lots"\n', ("budget must be a whole number, not \"lots\"",)),
        ("run.toml", "population = 2.5\n", ("population must be a whole number, not 2.5",)),
        ("run.toml", "hidden = [64, true]\n", ("hidden must be a list of whole numbers",)),
        ("run.toml", "retrieval = 3\n", ("retrieval must be true or false, not 3",)),
        ("run.toml", "report = 1\n", ("report must be true or false, not 1",)),
        ("run.toml", "[run]\nbudget = 100\n", ("unknown key 'run'",)),
        ("run.toml", "learner = 'ppo'\n", ("--learner must be one of sac, crossq, es",)),
        ("run.toml", "max_minutes = nan\n", ("--max-minutes must be positive and finite, not nan",)),
        ("run.json", '{"format": "someone-else", "budget": 100}', ("format 'someone-else' is not 'lares-run'",)),
        ("run.json", '{"format": "lares-run", "format_version": 99}', ("format_version 99", "newer lares")),
        ("run.toml", "budget = \n", ("is not valid TOML",)),
        ("run.yaml", "- budget: 100\n", ("must hold a table of options", "not a list")),
        ("run.yaml", "budget: [1\n", ("is not valid YAML",)),
        ("run.ini", "budget = 100\n", ("must end in .toml, .yaml, .yml, .json",)),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key_and_nothing_is_written(
    tmp_path: Path, name: str, text: str, fragments: tuple[str, ...]
) -> None:
    runs = tmp_path / "runs"
    line = _error_line(invoke("run", "--config", str(_write(tmp_path / name, text)), "--run-dir", str(runs)))
    for fragment in fragments:
        assert fragment in line, line
    assert not runs.exists()


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    line = _error_line(invoke("run", "--config", str(tmp_path / "no.toml"), "--run-dir", str(tmp_path / "runs")))
    assert "no.toml: no such file" in line and not (tmp_path / "runs").exists()


def test_an_empty_yaml_file_is_the_defaults(tmp_path: Path) -> None:
    assert _start(["--config", str(_write(tmp_path / "run.yaml", ""))])[0] == preset_config("demo")
