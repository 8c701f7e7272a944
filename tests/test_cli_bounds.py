"""Bad input refused before memory is taken or a folder exists: numbers (nan, negative, sizes), files (devices,
pipes, huge or alias-bomb YAML), output paths (missing folders, folders), and the stored LLM answers bounded.

Each test here failed before its fix; the refusals are one `error:` line from the real CLI (typer's CliRunner).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.errors import ConfigError
from lares_agent.runs.llm_calls import MAX_STORED_ANSWER, LLMCallRow
from lares_agent.search.config import SearchConfig, resolved_for_task
from lares_agent.search.presets import preset_config
from lares_agent.search.sweep_spec import SweepSpec

SMALL = ["--task", "Reacher-v5", "--budget", "300", "--reward-period", "150", "--population", "2", "--elites", "1",
         "--no-retrieval", "--no-report", "--handover-episodes", "2"]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def error_line(result: Any, exit_code: int = 2) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


# ------------------------------------------------------------------------------------------------ numbers
@pytest.mark.parametrize(("args", "words"), [
    (["--temperature", "nan"], "--temperature must be a finite number"),
    (["--temperature", "-1"], "--temperature must be between 0 and 2"),
    (["--anchor-weight", "nan"], "--anchor-weight must be a finite number"),
    (["--torch-threads", "-3"], "--torch-threads must be between 0 and"),
    (["--utd", "nan"], "--utd must be a finite number"),
    (["--utd", "0"], "--utd must be a positive number"),
    (["--init-alpha", "inf"], "--init-alpha must be a finite number"),
    (["--population", "100000", "--elites", "1"], "--population must be at most 64"),
    (["--hidden", "100000x100000"], "--hidden must be 1 to 8 layers of 1 to 4096 units"),
    (["--hidden", "8x8x8x8x8x8x8x8x8"], "--hidden must be 1 to 8 layers"),
    (["--batch-size", "1000000000"], "--batch-size must be between 1 and"),
    (["--warmup-steps", "10000000000"], "--warmup-steps must be at most 1,000,000"),
])
def test_numeric_options_are_checked_before_a_folder_exists(tmp_path: Path, args: list[str], words: str) -> None:
    runs = tmp_path / "runs"
    line = error_line(invoke("run", *SMALL, *args, "--run-dir", str(runs)))
    assert words in line, line
    assert not runs.exists()


def test_every_sweep_trial_gets_the_refusals_of_lares_run() -> None:
    """`--set selection=pareto --set elites=1` is truncation in every trial: refused as `lares run` refuses it,
    and so are the sizes, before a sweep folder exists (`SweepSpec.check` builds no folder)."""
    pareto = SweepSpec(tasks=("Reacher-v5",), seeds=(0,), methods=("lares", "human"),
                       options={"selection": "pareto", "elites": 1})
    with pytest.raises(ConfigError, match=r"trial .*--selection pareto with --elites 1"):
        pareto.check()
    huge = SweepSpec(tasks=("Reacher-v5",), seeds=(0,), methods=("lares",), options={"population": 100_000})
    with pytest.raises(ConfigError, match="--population must be at most 64"):
        huge.check()


# ------------------------------------------------------------------------------------------------- files
def test_a_yaml_of_nested_aliases_is_refused_in_one_short_line(tmp_path: Path) -> None:
    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i, name in enumerate("bcdefgh"):
        prev = "abcdefg"[i]
        lines.append(f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]")
    lines.append("task: *h")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    line = error_line(invoke("run", "--config", str(path), "--run-dir", str(tmp_path / "runs")))
    assert "aliases (*name) are not read" in line and len(line) < 600, line[:300]


def test_a_long_value_in_an_error_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"budget": ["x" * 10_000]}), encoding="utf-8")
    line = error_line(invoke("run", "--config", str(path), "--run-dir", str(tmp_path / "runs")))
    assert "budget must be a whole number" in line and len(line) < 600, line[:300]


@pytest.mark.parametrize("flag", ["--config", "--rewards-file"])
def test_a_device_a_pipe_or_a_huge_file_is_refused_without_reading_it(tmp_path: Path, flag: str) -> None:
    zero, pipe, huge = tmp_path / "zero.json", tmp_path / "pipe.json", tmp_path / "huge.json"
    zero.symlink_to("/dev/zero")
    os.mkfifo(pipe)  # reading it would wait for a writer forever
    huge.write_text(" " * (2 << 20), encoding="utf-8")
    for path, words in ((zero, "not a regular file"), (pipe, "not a regular file"), (huge, "at most 1,048,576 bytes")):
        result = invoke("run", *SMALL, flag, str(path), "--run-dir", str(tmp_path / "runs"))
        assert result.exit_code != 0 and words in result.output, result.output
    assert stat.S_ISFIFO(pipe.stat().st_mode) and not (tmp_path / "runs").exists()


def test_a_folder_as_the_config_file_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "conf.json"
    folder.mkdir()
    assert "is a folder, not a file" in error_line(invoke("run", "--config", str(folder)))


# ------------------------------------------------------------------------------------------- LLM answers
def test_a_huge_llm_answer_is_stored_cut_with_its_length() -> None:
    row = LLMCallRow(call=0, tag="propose", answer="x" * (MAX_STORED_ANSWER * 3), error="e" * 10_000)
    data = row.to_json()
    assert len(data["answer"]) == MAX_STORED_ANSWER and data["answer_chars"] == MAX_STORED_ANSWER * 3
    assert len(data["error"]) <= 2_000
    again = LLMCallRow.from_json(json.loads(json.dumps(data)))
    assert again.answer_chars == MAX_STORED_ANSWER * 3 and again.to_json()["answer_chars"] == MAX_STORED_ANSWER * 3
    assert "answer_chars" not in LLMCallRow(call=0, tag="t", answer="short").to_json()


# ------------------------------------------------------------------------------------------- output paths
def test_export_out_makes_no_missing_folder(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "reward.py"
    line = error_line(invoke("export", "--human", "--task", "Reacher-v5", "--out", str(target)))
    assert "does not exist" in line and not (tmp_path / "no").exists()


def test_export_out_to_a_folder_is_one_clear_line(tmp_path: Path) -> None:
    line = error_line(invoke("export", "--human", "--task", "Reacher-v5", "--out", str(tmp_path)))
    assert "is a folder: give a file name" in line and "Errno" not in line


def test_an_exported_file_is_readable_by_others(tmp_path: Path) -> None:
    target = tmp_path / "reward.py"
    result = invoke("export", "--human", "--task", "Reacher-v5", "--out", str(target))
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_eval_video_makes_no_missing_folder(tmp_path: Path) -> None:
    video = tmp_path / "no" / "such" / "episode.gif"
    line = error_line(invoke("eval", "--policy", str(tmp_path / "p.pt"), "--video", str(video)))
    assert "--video" in line and "does not exist" in line and not (tmp_path / "no").exists()


@pytest.mark.parametrize("policy", ["slot -1", "slot=-2"])
def test_a_negative_slot_is_refused(policy: str) -> None:
    line = error_line(invoke("eval", "--policy", policy), exit_code=1)
    assert "a slot is numbered from 0" in line


# ---------------------------------------------------------------------------------------- reward check
@pytest.mark.parametrize("expression", ["-2*obj_to_target", "-tcp_to_obj"])
def test_reward_check_reads_a_leading_minus_as_the_expression(expression: str) -> None:
    result = invoke("reward", "check", expression, "--task", "push-v3", "--json")
    assert result.exit_code in (0, 1) and "No such option" not in result.output, result.output
    verdict = json.loads(result.output)
    assert verdict["task"] == "push-v3" and expression.lstrip("-")[:5] in json.dumps(verdict)


def test_a_huge_value_at_the_goal_is_refused_by_the_validator() -> None:
    result = invoke("reward", "check", "exp(0.004/(0.0002+tcp_to_target))", "--task", "reach-v3")
    assert result.exit_code == 1 and "reaches 4.85e+08 in magnitude at tcp_to_target = 0" in result.output, \
        result.output
    assert invoke("reward", "check", "exp(-tcp_to_target/0.1)", "--task", "reach-v3").exit_code == 0


# -------------------------------------------------------------------------- --replay-from another task
def test_replaying_a_run_of_another_task_is_refused_before_training(tmp_path: Path) -> None:
    from lares_agent.search.start_checks import check_llm

    record = tmp_path / "other"
    record.mkdir()
    SearchConfig(task="reach-v3").save(record / "config.json")
    row = LLMCallRow(call=0, tag="propose", answer="{}")
    (record / "llm_calls.jsonl").write_text(json.dumps(row.to_json()) + "\n", encoding="utf-8")
    cfg = SearchConfig(task="push-v3", llm_backend="replay", replay_from=str(record))
    with pytest.raises(ConfigError, match="is a run of task 'reach-v3'"):
        check_llm(cfg)
    check_llm(SearchConfig(task="reach-v3", llm_backend="replay", replay_from=str(record)))  # the same task: fine


# ------------------------------------------------------------- a task whose own reward is code, not an expression
def test_auto_runs_scratch_with_a_note_where_the_own_reward_is_no_expression(monkeypatch: pytest.MonkeyPatch) -> None:
    from lares_agent.engine.tasks import allow_task_reference, default_registry
    from lares_agent.search.option_checks import option_warnings, setting_notes

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    monkeypatch.setattr(default_registry(), "_allowed", set())
    reference = "examples.inverted_pendulum:task"
    allow_task_reference(reference)
    cfg = preset_config("demo", {"task": reference})
    assert resolved_for_task(cfg, True, False).setting == "scratch"
    assert resolved_for_task(cfg, True, True).setting == "init"
    (note,) = setting_notes(cfg)
    assert note.startswith("--setting auto runs scratch: task InvertedPendulum-v5 has its own reward")
    init = preset_config("demo", {"task": reference, "setting": "init"})
    assert any("is shown none" in line for line in option_warnings(init))
    assert setting_notes(preset_config("demo", {"task": "Reacher-v5"})) == []  # an expression: init, no note
