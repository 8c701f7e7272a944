"""`--fitness` and `--setting`: the options reach the engine under the same name, "auto" is resolved against the
task (the task return and the init setting where it has a human reward), a return rule or init for a task without
one is refused before a run folder exists, and configs and checkpoints from before the option resume with the rule
they ran."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from helpers import point_task
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine import FITNESS_RULES, EngineConfig, TaskSpec
from lares_agent.engine.tasks import register_task, unregister_task
from lares_agent.errors import ConfigError
from lares_agent.search import options as search_options
from lares_agent.search import runner
from lares_agent.search.config import SearchConfig, engine_config, resolved_for_task

NO_HUMAN = "point-no-human-v0"
WITH_HUMAN = "point-with-human-v0"


@pytest.fixture
def tasks() -> Iterator[tuple[TaskSpec, TaskSpec]]:
    """Two registered point tasks, one without a human reward."""
    specs = (point_task(name=NO_HUMAN, has_human_reward=False),
             point_task(name=WITH_HUMAN, human_components=(("reward", "-dist"),)))  # written: auto runs init
    for spec in specs:
        register_task(spec, replace=True)
    try:
        yield specs
    finally:
        for spec in specs:
            unregister_task(spec.name)


def test_the_option_maps_onto_the_engine_under_its_name() -> None:
    assert search_options.FITNESS_RULES == get_args(search_options.Fitness) == FITNESS_RULES
    assert SearchConfig().fitness == "auto" and EngineConfig().fitness == "auto"
    assert engine_config(SearchConfig()).fitness == "auto"
    assert engine_config(SearchConfig(fitness="success-then-progress")).fitness == "success-then-progress"
    with pytest.raises(ConfigError, match="--fitness must be one of"):
        SearchConfig(fitness="return")  # type: ignore[arg-type]


@pytest.mark.parametrize("setting", ["scratch", "init"])
def test_auto_is_the_return_rule_where_the_task_has_a_human_reward(setting: Any) -> None:
    cfg = SearchConfig(setting=setting)
    assert resolved_for_task(cfg, has_human_reward=True).fitness == "success-then-return"
    assert resolved_for_task(SearchConfig(), has_human_reward=False).fitness == "success-then-progress"
    chosen = SearchConfig(setting=setting, fitness="success-then-progress")
    assert resolved_for_task(chosen, has_human_reward=True) is chosen  # an explicit choice is kept as it is
    with pytest.raises(ConfigError, match=r"--fitness success-then-return .* has none"):
        resolved_for_task(SearchConfig(fitness="success-then-return"), has_human_reward=False)


def test_configs_and_checkpoints_from_before_the_option_keep_their_rule() -> None:
    saved = SearchConfig().to_json()
    assert SearchConfig.from_json(saved).fitness == "auto"  # a round trip keeps what was written
    del saved["fitness"]
    assert SearchConfig.from_json(saved).fitness == "success-then-progress"
    state = EngineConfig().to_json()
    assert EngineConfig.from_json(state) == EngineConfig()
    del state["fitness"]
    assert EngineConfig.from_json(state).fitness == "success-then-progress"


@pytest.mark.parametrize(("option", "value"), [("--fitness", "success-then-return"), ("--setting", "init")])
def test_a_choice_needing_a_human_reward_is_refused_in_one_line_before_a_folder(
        tasks: Any, tmp_path: Path, option: str, value: str) -> None:
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["run", "--task", NO_HUMAN, option, value, "--run-dir", str(runs),
                                      "--no-retrieval"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"{option} {value}" in lines[0] and NO_HUMAN in lines[0]
    assert not runs.exists()
    with pytest.raises(ConfigError, match="has none"):
        runner.check_start(SearchConfig(task=NO_HUMAN, **{option[2:]: value}, retrieval=False))


def test_auto_setting_is_init_where_the_task_has_a_human_reward(tasks: Any) -> None:
    cfg = SearchConfig()
    assert cfg.setting == "auto"
    assert resolved_for_task(cfg, has_human_reward=True).setting == "init"
    assert resolved_for_task(cfg, has_human_reward=False).setting == "scratch"
    # a reward of code only: init would show the LLM no expression to refine
    assert resolved_for_task(cfg, has_human_reward=True, has_expression=False).setting == "scratch"
    for setting in ("scratch", "init", "baseline"):
        assert resolved_for_task(SearchConfig(setting=setting), has_human_reward=True).setting == setting
    # the engine gets one setting, the one the task decides
    assert engine_config(SearchConfig(task=WITH_HUMAN)).setting == "init"
    assert engine_config(SearchConfig(task=NO_HUMAN)).setting == "scratch"


class _Stop(Exception):
    pass


class _NoSearch:
    def __init__(self, *args: Any) -> None:
        raise _Stop


@pytest.mark.parametrize(("task", "rule", "setting"), [(WITH_HUMAN, "success-then-return", "init"),
                                                       (NO_HUMAN, "success-then-progress", "scratch")])
def test_a_new_run_records_what_auto_resolved_to(tasks: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 task: str, rule: str, setting: str) -> None:
    monkeypatch.setattr(runner, "check_start", lambda cfg: None)  # no LLM or case store: the config is the subject
    monkeypatch.setattr(runner, "Search", _NoSearch)  # stop once config.json is written
    with pytest.raises(_Stop):
        runner.start_run(SearchConfig(task=task, retrieval=False), tmp_path)
    (saved,) = tmp_path.glob("*/config.json")
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert (data["fitness"], data["setting"]) == (rule, setting)
    restored = runner.read_config(runner.RunLayout.open(saved.parent))
    assert (restored.fitness, restored.setting) == (rule, setting)
