"""No code runs from a run folder or a config file: a task given as `package.module:function` is imported only when
the user names it with `--task` in that command (cli/task_option.py, engine/tasks/registry.py).

The hostile folder holds `evilmod.py`, whose import and whose `f()` each write a marker file, and a config.json
naming `evilmod:f`: every command that reads it must leave the marker absent and say how to allow the task.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine.tasks import TaskRegistry, UntrustedTaskError, default_registry, get_task
from lares_agent.runs.marker import marked
from lares_agent.search.config import SearchConfig

EVIL = "evilmod:f"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(autouse=True)
def nothing_allowed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no reference allowed and leaves none behind (the registry is process-wide)."""
    monkeypatch.setattr(default_registry(), "_allowed", set())
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    sys.modules.pop("evilmod", None)


def hostile_run(root: Path) -> tuple[Path, Path]:
    """A run folder whose config.json names `evilmod:f` and which holds evilmod.py; (run, marker file)."""
    run = root / "run"
    run.mkdir(parents=True)
    marker = root / "ran"
    (run / "evilmod.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
        f"def f():\n    Path({str(marker)!r}).write_text('called')\n",
        encoding="utf-8")
    cfg = SearchConfig(task=EVIL, setting="scratch", budget=300, reward_period=150, population=2)
    (run / "config.json").write_text(json.dumps(marked(cfg.to_json())), encoding="utf-8")
    return run, marker


def assert_refused(result: Any, marker: Path) -> None:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    assert f"--task {EVIL}" in result.output, result.output  # says how to allow it
    assert not marker.exists(), "the run folder's module was imported"


@pytest.mark.parametrize("command", [["report", "."], ["eval", "."], ["export", "."], ["export", ".", "--human"],
                                     ["resume", "."]])
def test_reading_a_run_folder_imports_none_of_its_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       command: list[str]) -> None:
    run, marker = hostile_run(tmp_path)
    monkeypatch.chdir(run)  # `cd run && lares report .`: the folder was put on the import path
    assert_refused(invoke(*command), marker)
    assert "evilmod" not in sys.modules


def test_a_config_file_names_no_module_to_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, marker = hostile_run(tmp_path)
    monkeypatch.chdir(run)
    result = invoke("run", "--config", "config.json", "--run-dir", str(tmp_path / "runs"))
    assert_refused(result, marker)
    assert result.exit_code == 2 and not (tmp_path / "runs").exists()


def test_os_system_in_a_config_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    calls: list[object] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a) or 0)
    (tmp_path / "c.json").write_text(json.dumps({"task": "os:system"}), encoding="utf-8")
    result = invoke("run", "--config", str(tmp_path / "c.json"), "--run-dir", str(tmp_path / "runs"))
    assert result.exit_code == 2 and "--task os:system" in result.output, result.output
    assert calls == [] and not (tmp_path / "runs").exists()


def test_a_task_other_than_the_runs_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, marker = hostile_run(tmp_path)
    result = invoke("resume", str(run), "--task", "other:task")
    assert result.exit_code == 2 and f"a run of task {EVIL!r}" in result.output, result.output
    assert not marker.exists() and "other" not in sys.modules


def test_the_task_named_in_the_command_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Naming it is the user's permission: `--task evilmod:f` does import the module (here: f returns no TaskSpec)."""
    run, marker = hostile_run(tmp_path)
    monkeypatch.chdir(run)
    result = invoke("export", ".", "--human", "--task", EVIL)
    assert result.exit_code != 0 and "returned NoneType, not a TaskSpec" in result.output, result.output
    assert marker.read_text() == "called"


def test_get_task_refuses_a_reference_nobody_allowed() -> None:
    with pytest.raises(UntrustedTaskError, match="add --task os:getcwd"):
        get_task("os:getcwd")


def test_the_current_folder_leaves_the_import_path_after_the_import(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder is an import root for the named module only: a later `import yaml` must not find its yaml.py."""
    (tmp_path / "my_cwd_task_mod.py").write_text("def task():\n    return 'not a spec'\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    with pytest.raises(Exception, match="returned str"):
        TaskRegistry().load_reference("my_cwd_task_mod:task")
    assert "my_cwd_task_mod" in sys.modules and str(tmp_path) not in sys.path
    sys.modules.pop("my_cwd_task_mod", None)
