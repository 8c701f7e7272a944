"""CLI listings at 80 columns: no line over 80 characters, and a path is printed whole on a
line of its own rather than folded into a narrow table column."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lares_agent.cli.app import app

WIDTH = 80


@pytest.fixture()
def narrow(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    return CliRunner()


def _long_lines(text: str, allowed: tuple[str, ...] = ()) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH and line.strip() not in allowed]


def test_models_list_fits_80_columns_with_each_path_whole(narrow: CliRunner, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "a-rather-long-cache-folder-name-so-the-path-cannot-fit-in-a-table-column" / "lares"
    monkeypatch.setenv("LARES_CACHE", str(cache))
    models = cache / "models"
    models.mkdir(parents=True)
    (models / "my-own-model-with-a-long-file-name.Q4_K_M.gguf").write_bytes(b"GGUF")
    result = narrow.invoke(app, ["models", "list"])
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    assert str(models) in lines  # the cache folder, whole, on its own line
    assert str(models / "my-own-model-with-a-long-file-name.Q4_K_M.gguf") in lines
    assert any(line.startswith(("sha256: ", "pinned: ")) and len(line.split()[1]) == 64 for line in lines)
    paths = tuple(line for line in lines if line.startswith(str(cache)))
    assert _long_lines(result.output, allowed=paths) == []


@pytest.mark.parametrize("args", [["tasks"], ["tasks", "--show", "push-v3"], ["tasks", "--show", "HalfCheetah-v5"],
                                  ["personas", "list"]])
def test_listings_fit_80_columns(narrow: CliRunner, args: list[str]) -> None:
    result = narrow.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert _long_lines(result.output) == []
    assert "…" not in result.output  # nothing cut short


def test_tasks_table_names_every_task_whole(narrow: CliRunner) -> None:
    result = narrow.invoke(app, ["tasks"])
    assert "button-press-topdown-v3" in result.output and "fingertip_to_target" in result.output
    shown = narrow.invoke(app, ["tasks", "--show", "Reacher-v5"])
    assert "fingertip_to_target [m]" in shown.output and "success: fingertip_to_target <= 0.02 m" in shown.output
