"""`lares baseline --config FILE`, read as `lares run --config` reads one (cli/config_file.py): the settings a
baseline reads come from the file, a flag wins over it, the search's settings are left out with a note, and a
bad key is one line before anything starts. `start_run` is replaced, so nothing trains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.search.config import SearchConfig
from lares_agent.search.presets import preset_config


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[SearchConfig]:
    runs: list[SearchConfig] = []

    def start_run(cfg: SearchConfig, run_dir: Path, **_: Any) -> None:
        runs.append(cfg)
        raise typer.Exit(0)

    monkeypatch.setattr("lares_agent.search.runner.start_run", start_run)
    return runs


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["baseline", *args])


def test_a_search_config_gives_the_baseline_its_engine_settings(tmp_path: Path, started: list[SearchConfig]) -> None:
    search = preset_config("demo", {"task": "Reacher-v5", "learner": "sac", "budget": 900, "hidden": (32, 32),
                                    "batch_size": 64, "population": 4, "elites": 2, "setting": "scratch",
                                    "llm_backend": "openai", "llm_model": "m", "seed": 3})
    search.save(tmp_path / "config.json")  # a search run's own config.json, marker and all
    result = invoke("--config", str(tmp_path / "config.json"), "--seed", "7", "--run-dir", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    (cfg,) = started
    assert (cfg.task, cfg.learner, cfg.budget, cfg.hidden, cfg.batch_size) == ("Reacher-v5", "sac", 900, (32, 32), 64)
    assert (cfg.setting, cfg.population, cfg.elites, cfg.seed) == ("baseline", 1, 1, 7)  # the flag wins
    assert (cfg.llm_backend, cfg.llm_model) == ("local", None)  # the search's settings are left out...
    assert "sets llm_backend, llm_model" in result.output and "only a search reads: left out" in result.output


def test_a_baseline_config_runs_the_same_baseline_again(tmp_path: Path, started: list[SearchConfig]) -> None:
    ran = preset_config("demo", {"task": "Reacher-v5", "learner": "sac", "budget": 500, "setting": "baseline",
                                 "population": 1, "elites": 1, "baseline_reward": "success", "hidden": (16,)})
    ran.save(tmp_path / "config.json")
    result = invoke("--config", str(tmp_path / "config.json"), "--run-dir", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    assert started == [ran] and "left out" not in result.output
    again = invoke("--config", str(tmp_path / "config.json"), "--reward", "human", "--run-dir", str(tmp_path / "r"))
    assert again.exit_code == 0 and started[-1].baseline_reward == "human", again.output


def test_a_toml_file_of_baseline_options(tmp_path: Path, started: list[SearchConfig]) -> None:
    path = tmp_path / "b.toml"
    path.write_text('task = "Reacher-v5"\nlearner = "sac"\nbudget = 400\nreward = "success"\nhidden = "24x24"\n',
                    encoding="utf-8")
    result = invoke("--config", str(path), "--run-dir", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    (cfg,) = started
    assert (cfg.budget, cfg.baseline_reward, cfg.hidden) == (400, "success", (24, 24))


def test_a_bad_key_is_one_line_before_anything_starts(tmp_path: Path, started: list[SearchConfig]) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"budgett": 400}), encoding="utf-8")
    result = invoke("--config", str(path), "--run-dir", str(tmp_path / "r"))
    assert result.exit_code == 2 and "unknown key 'budgett'; did you mean 'budget'?" in result.output, result.output
    assert started == [] and not (tmp_path / "r").exists()
