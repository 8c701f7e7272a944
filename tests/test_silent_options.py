"""No silent options: a `lares run` option that the run would ignore, or turn into another, is refused in one line
naming the options (exit 2) before any run folder exists; a legitimate setting that skips part of the search runs
with one warning line; `--preset paper` lists what it still does differently from the reference, each with the
flags that turn it off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.search.config import SearchConfig
from lares_agent.search.option_checks import option_warnings, paper_differences
from lares_agent.search.presets import preset_config

SMALL = ["--task", "Reacher-v5", "--budget", "300", "--reward-period", "150", "--population", "2", "--elites", "1",
         "--no-retrieval", "--no-report", "--handover-episodes", "2"]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--selection", "pareto"], ("--selection pareto with --elites 1", "--selection truncation")),
        (["--personas", "neutral,strict-coach"], ("--personas", "--analysis facts", "add --analysis llm")),
        (["--personas", "neutral", "--analysis", "llm", "--ablations", "no-reflection"],
         ("--personas", "--ablations no-reflection")),
        (["--llm-backend", "replay", "--replay-from", ".", "--base-url", "http://127.0.0.1:8080/v1"],
         ("--base-url applies to --llm-backend openai", "--llm-backend replay")),
        (["--base-url", "http://127.0.0.1:8080/v1"], ("--base-url", "--llm-backend local")),
        (["--replay-from", "."], ("--replay-from applies to --llm-backend replay", "--llm-backend local")),
        (["--llm-backend", "replay", "--replay-from", ".", "--llm-context", "2048"],
         ("--llm-context sizes prompts", "--llm-backend replay calls no model")),
        (["--ray-address", "auto"], ("--ray-address applies to --backend ray", "--backend local")),
        (["--learner", "es", "--ray-address", "auto"], ("--ray-address applies to --backend ray",)),
        (["--max-minutes", "nan"], ("--max-minutes must be positive and finite, not nan", "no limit")),
        (["--max-minutes", "inf"], ("--max-minutes must be positive and finite, not inf",)),
        (["--max-minutes", "-2"], ("--max-minutes must be positive and finite, not -2.0",)),
    ],
)
def test_an_option_the_run_would_ignore_is_refused_before_anything_exists(
    tmp_path: Path, args: list[str], fragments: tuple[str, ...]
) -> None:
    runs = tmp_path / "runs"
    result = invoke("run", *SMALL, "--run-dir", str(runs), *args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert not runs.exists()


def test_two_silent_options_are_named_in_the_one_line(tmp_path: Path) -> None:
    result = invoke("run", *SMALL, "--run-dir", str(tmp_path / "r"), "--selection", "pareto", "--ray-address", "a")
    assert result.exit_code == 2 and "--ray-address" in result.output and "--selection pareto" in result.output


def _cfg(**values: Any) -> SearchConfig:
    return preset_config("demo", {"task": "Reacher-v5", "budget": 300, "reward_period": 150, **values})


def test_legitimate_settings_that_skip_part_of_the_search_warn_in_one_line(tmp_path: Path) -> None:
    assert option_warnings(_cfg(population=2, elites=1, setting="scratch")) == []
    [same] = option_warnings(_cfg(population=3, elites=3, setting="scratch"))
    assert same.startswith("--elites 3 equals --population 3") and "no reward after the initial 3" in same
    [one] = option_warnings(_cfg(population=1, elites=1, setting="scratch"))
    assert one.startswith("--population 1: one reward candidate, nothing to select")
    [init] = option_warnings(_cfg(population=2, elites=2, setting="init"))
    assert "only when the task's own reward's learner ranks above it" in init
    [period] = option_warnings(_cfg(reward_period=300))
    assert period.startswith("--reward-period 300 is not below --budget 300: no reward update")
    many = tmp_path / "many.json"
    many.write_text(json.dumps([{"components": {"reach": f"-{i}*fingertip_to_target"}} for i in range(1, 5001)]))
    [dropped] = option_warnings(_cfg(population=2, rewards_file=str(many)))
    assert "holds 5,000 candidates for 2 slot(s)" in dropped and "4,998 are dropped" in dropped
    assert option_warnings(_cfg(setting="baseline", population=1, elites=1, reward_period=900)) == []
    [own] = option_warnings(_cfg(setting="init", task_examples="own"))
    assert own.startswith("--task-examples own shows example answers for the task from scratch only")
    assert option_warnings(_cfg(setting="scratch", task_examples="own")) == []
    [idle] = option_warnings(_cfg(screen="verifier", numeric_children=0))
    assert idle.startswith("--screen verifier with one LLM candidate") and "the screen has nothing to choose" in idle
    assert option_warnings(_cfg(screen="proxy", candidates_per_slot=2.0, numeric_children=0)) == []


def _said_before_start(args: list[str], monkeypatch: pytest.MonkeyPatch, runs: Path) -> list[str]:
    """The lines `lares run ARGS` writes before it would start (the start is stopped there; the progress bar's
    line is left out)."""
    def start_run(*_: Any, **__: Any) -> None:
        raise typer.Exit(0)

    monkeypatch.setattr("lares_agent.search.runner.check_start", lambda cfg: None)
    monkeypatch.setattr("lares_agent.search.runner.start_run", start_run)
    result = invoke("run", *args, "--run-dir", str(runs))
    assert result.exit_code == 0, result.output
    return [line for line in result.output.splitlines() if line.strip() and " steps round " not in line]


def test_the_warning_reaches_the_screen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said = _said_before_start([*SMALL, "--elites", "2", "--setting", "scratch"], monkeypatch, tmp_path / "runs")
    assert said == ["warning: --elites 2 equals --population 2: every candidate survives each reward update, so "
                    "the LLM writes no reward after the initial 2"]


PAPER_OFF = ["--candidates-per-slot", "1", "--numeric-children", "0", "--complexity-lambda", "0", "--inherit", "always",
             "--handover-episodes", "0", "--sync-llm",
             "--no-retrieval", "--llm-backend", "openai", "--llm-model", "gpt-4o-mini", "--task-examples", "none",
             "--screen", "order"]


def test_the_paper_preset_lists_its_differences_and_each_flag_turns_one_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = _said_before_start(["--preset", "paper", "--task", "Reacher-v5", "--setting", "scratch",
                               "--task-examples", "own", "--screen", "proxy"], monkeypatch, tmp_path / "runs")
    groups = [{"task_examples": "none"}, {"candidates_per_slot": 1.0, "numeric_children": 0}, {"screen": "order"},
              {"complexity_lambda": 0.0}, {"inherit": "always"}, {"handover_episodes": 0}, {"sync_llm": True},
              {"retrieval": False}, {"llm_backend": "openai", "llm_model": "gpt-4o-mini"}]
    assert said[0] == (f"note: --preset paper differs from the reference in {len(groups)} setting(s); the flags make "
                       "each the reference's:")
    flags = [line.rsplit(": ", 1)[1] for line in said[1:]]
    assert said[1].startswith("  two example answers for this task and one for a different task in the system prompt")
    assert flags == ["--task-examples none", "--candidates-per-slot 1 --numeric-children 0", "--screen order",
                     "--complexity-lambda 0", "--inherit always", "--handover-episodes 0", "--sync-llm",
                     "--no-retrieval", "--llm-backend openai --llm-model gpt-4o-mini"]
    base = {"task": "Reacher-v5", "setting": "scratch", "task_examples": "own", "screen": "proxy"}
    assert len(paper_differences(preset_config("paper", base))) == len(groups)
    for group in groups:  # each flag (or pair) turns exactly its one line off
        assert len(paper_differences(preset_config("paper", {**base, **group}))) == len(groups) - 1, group
    off = {k: v for group in groups for k, v in group.items()}
    assert paper_differences(preset_config("paper", {**base, **off})) == []
    assert paper_differences(preset_config("demo", base)) == []  # only the paper preset claims the reference
    # the example for a different task alone is a difference too (the reference's prompt shows no answer)
    [other] = paper_differences(preset_config("paper", {**base, **off, "task_examples": "other"}))
    assert other.startswith("an example answer for a different task") and other.endswith("--task-examples none")


def test_task_examples_none_is_accepted_and_the_default_and_an_unknown_mode_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[SearchConfig] = []

    def start_run(cfg: SearchConfig, *_: Any, **__: Any) -> None:
        started.append(cfg)
        raise typer.Exit(0)

    monkeypatch.setattr("lares_agent.search.runner.check_start", lambda cfg: None)
    monkeypatch.setattr("lares_agent.search.runner.start_run", start_run)
    for args in (["--task-examples", "none"], [], ["--task-examples", "other"]):
        result = invoke("run", *SMALL, "--setting", "scratch", *args, "--run-dir", str(tmp_path / "runs"))
        assert result.exit_code == 0, result.output
    assert [cfg.task_examples for cfg in started] == ["none", "none", "other"]
    result = invoke("run", *SMALL, "--task-examples", "mine", "--run-dir", str(tmp_path / "runs"))
    assert result.exit_code == 2 and "--task-examples must be one of none, other, own" in result.output


def test_a_paper_run_with_every_difference_off_says_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said = _said_before_start(["--preset", "paper", "--task", "Reacher-v5", "--budget", "400000", *PAPER_OFF],
                              monkeypatch, tmp_path / "runs")
    assert said == []
