"""Every command's error paths: one `error: ...` line, a non-zero exit, no traceback, nothing half-written.

Runs go through the real `lares_agent.cli.app.app` with typer's CliRunner. Each failing `lares run` must
fail before it trains or creates a run folder, so these tests take about a second each.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.errors import LaresError
from lares_agent.search.config import SearchConfig

SMALL = ["--task", "Reacher-v5", "--budget", "300", "--reward-period", "150", "--population", "2", "--elites", "1",
         "--no-retrieval", "--no-report", "--handover-episodes", "2"]


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env)


def assert_one_line_error(result: Any, *fragments: str, exit_code: int = 1) -> str:
    """The exit code (2: an invalid configuration), exactly one non-empty output line, `error: ` first, every
    fragment in it, no traceback."""
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def closed_port() -> int:
    """A local port nothing listens on (bound by the OS, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def _nothing_written(runs: Path) -> bool:
    return not runs.exists() or not any(runs.iterdir())


# ---------------------------------------------------------------------------------------------- lares run
@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--task", "reach-v99"], ("unknown task 'reach-v99'", "lares tasks")),
        (["--persona", "grumpy-wizard"], ("unknown persona 'grumpy-wizard'", "neutral")),
        (["--llm-model", "no/such/model.gguf"], ("model 'no/such/model.gguf' not found",)),
        (["--llm-model", "qwen-99b"], ("not a known model", "qwen2.5-coder-0.5b")),
        (["--llm-backend", "openai"], ("needs a model name", "--llm-model")),
        (["--llm-backend", "replay"], ("--llm-backend replay needs --replay-from",)),
        (["--llm-backend", "replay", "--replay-from", "."], ("replay record", "does not exist")),
        (["--rewards-file", "no-such-rewards.json"], ("--rewards-file", "does not exist")),
    ],
)
def test_run_rejects_bad_input_before_creating_anything(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], fragments: tuple[str, ...]
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths above resolve inside the test's folder
    assert_one_line_error(invoke("run", *SMALL, "--run-dir", str(runs), *args), *fragments)
    assert _nothing_written(runs)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--population", "0"], ("--population must be at least 1",)),
        (["--elites", "0"], ("--elites must be between 1 and --population (2), not 0", "inherit")),
        (["--elites", "3"], ("--elites must be between 1 and --population (2), not 3",)),
        (["--setting", "bogus"], ("--setting must be one of auto, scratch, init, baseline",)),
        (["--llm-backend", "bogus"], ("--llm-backend must be one of local, openai, replay",)),
        (["--learner", "ppo"], ("--learner must be one of sac, crossq, es",)),
        (["--learner", "crossq", "--critic-layer-norm"], ("--critic-layer-norm applies to SAC's critics",)),
        (["--learner", "es", "--obs-norm"], ("--obs-norm applies to --learner sac or crossq",)),
        (["--selection", "roulette"], ("--selection must be one of truncation, tournament",)),
        (["--selection", "tournament"], ("--selection tournament applies to the ES learner (--learner es)",)),
        (["--complexity-lambda", "-0.5"], ("--complexity-lambda must be a number >= 0",)),
        (["--backend", "ray"], ("--backend ray runs the ES learner (--learner es)", "--backend local")),
        (["--budget", "0"], ("--budget and --reward-period must be positive",)),
        (["--max-minutes", "-1"], ("--max-minutes must be positive",)),
        (["--seed", "-1"], ("--seed must be between 0 and 4294967295, not -1",)),
        (["--seed", str(2**32)], ("--seed must be between 0 and 4294967295, not 4294967296",)),
        (["--max-llm-tokens", "0"], ("LLM token budget must be >= 1",)),
        (["--preset", "huge"], ("unknown preset 'huge'", "demo, paper")),
        (["--learner", "es", "--population", "3", "--elites", "4"], ("--elites must be between 1 and --population",)),
    ],
)
def test_run_refuses_an_invalid_config_with_exit_2_before_creating_anything(
    runs: Path, args: list[str], fragments: tuple[str, ...]
) -> None:
    result = invoke("run", *SMALL, "--run-dir", str(runs), *args)
    assert_one_line_error(result, *fragments, exit_code=2)
    assert isinstance(result.exception, SystemExit) and _nothing_written(runs)


def test_resume_refuses_a_config_the_engine_refuses_with_exit_2(tmp_path: Path) -> None:
    data = {**SearchConfig(task="Reacher-v5").to_json(), "warmup_steps": 1}  # only the engine checks this one
    (tmp_path / "config.json").write_text(json.dumps(data))
    assert_one_line_error(invoke("resume", str(tmp_path)), "config.json", "warmup_steps must be >= 2", exit_code=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_run_with_an_unreachable_endpoint_fails_at_once(runs: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    result = invoke("run", *SMALL, "--run-dir", str(runs), "--llm-backend", "openai", "--llm-model", "m",
                    "--base-url", url)
    assert_one_line_error(result, "cannot reach the LLM endpoint", url, "--base-url")
    assert _nothing_written(runs)


def test_run_with_a_base_url_that_is_not_a_url(runs: Path) -> None:
    result = invoke("run", *SMALL, "--run-dir", str(runs), "--llm-backend", "openai", "--llm-model", "m",
                    "--base-url", "localhost")
    assert_one_line_error(result, "is not an http(s) URL")


def test_badly_typed_flag_is_a_usage_error_without_traceback(runs: Path) -> None:
    # typer/click reports type errors itself (exit 2, usage box), before any command code runs.
    result = invoke("run", *SMALL, "--run-dir", str(runs), "--budget", "lots")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--budget" in result.output and _nothing_written(runs)


def test_baseline_rejects_an_unknown_task(runs: Path) -> None:
    assert_one_line_error(invoke("baseline", "--task", "nope-v1", "--run-dir", str(runs)), "unknown task 'nope-v1'")
    assert _nothing_written(runs)


# ------------------------------------------------------------------------------------ a folder that is not a run
@pytest.mark.parametrize("command", ["resume", "trace", "report"])
def test_a_folder_that_is_not_a_run(tmp_path: Path, command: str) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    line = assert_one_line_error(invoke(command, str(tmp_path)), str(tmp_path), "is not a")
    assert "run directory" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing was created there


@pytest.mark.parametrize("command", ["resume", "trace", "report"])
def test_a_missing_folder(tmp_path: Path, command: str) -> None:
    assert_one_line_error(invoke(command, str(tmp_path / "gone")), "gone")
    assert not (tmp_path / "gone").exists()


def test_report_sweep_options(tmp_path: Path) -> None:
    assert_one_line_error(invoke("report", "--with-sweep", str(tmp_path)), "--with-sweep", "pass --sweep DIR too",
                          exit_code=2)
    assert_one_line_error(invoke("report", "--replay", str(tmp_path / "f.csv")), "--replay", "pass --sweep DIR too",
                          exit_code=2)
    assert_one_line_error(invoke("report", "--sweep", str(tmp_path), "--with-sweep", str(tmp_path / "other")),
                          "is not a lares sweep folder")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["resume", "trace"])
def test_a_damaged_config(tmp_path: Path, command: str) -> None:
    (tmp_path / "config.json").write_text("{ not json")
    assert_one_line_error(invoke(command, str(tmp_path)), "config.json", "not a readable run configuration")


@pytest.mark.parametrize("data", [
    {"format": "lares-run", "format_version": 1},
    {"task": "Reacher-v5", "setting": "scratch", "budget": 300, "reward_period": 150, "population": 2},
])
def test_resume_refuses_a_config_that_is_not_a_whole_run_configuration(tmp_path: Path, data: dict[str, Any]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(data))
    assert_one_line_error(invoke("resume", str(tmp_path)), "config.json", "not a whole run configuration", "lacks")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_resume_with_an_unreachable_endpoint(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    SearchConfig(task="Reacher-v5", llm_backend="openai", llm_model="m", base_url=url).save(tmp_path / "config.json")
    assert_one_line_error(invoke("resume", str(tmp_path)), "cannot reach the LLM endpoint", url)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


# ---------------------------------------------------------------------------------------------- lares trace
@pytest.fixture
def empty_run(tmp_path: Path) -> Path:
    SearchConfig(task="Reacher-v5").save(tmp_path / "config.json")
    return tmp_path


def test_trace_of_a_run_without_graph_steps_says_so(empty_run: Path) -> None:
    result = invoke("trace", str(empty_run))
    assert result.exit_code == 0 and "no graph steps recorded" in result.output
    assert json.loads(invoke("trace", str(empty_run), "--json").output)["steps"] == []


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--node", "plan"], ("--node must be one of analyse, critique, propose, validate", "'plan'")),
        (["--round", "3"], ("has no round 3", "none (no graph step was recorded)")),
        (["--round", "-1"], ("has no round -1",)),
        (["--candidate", "abc-r1-a1-0"], ("no candidate 'abc-r1-a1-0'", "has no candidates yet")),
    ],
)
def test_trace_bad_flag_values(empty_run: Path, args: list[str], fragments: tuple[str, ...]) -> None:
    assert_one_line_error(invoke("trace", str(empty_run), *args), *fragments)


def test_trace_of_a_damaged_trace_file(empty_run: Path) -> None:
    (empty_run / "trace.sqlite").write_bytes(b"garbage" * 200)
    assert_one_line_error(invoke("trace", str(empty_run)), "not a readable graph trace")


def test_debug_flag_shows_the_exception(tmp_path: Path) -> None:
    result = invoke("--debug", "trace", str(tmp_path))
    assert result.exit_code != 0 and isinstance(result.exception, LaresError)
    assert "error: " not in result.output


# ---------------------------------------------------------------------------------------------- the other commands
def test_personas_show_unknown() -> None:
    assert_one_line_error(invoke("personas", "show", "grumpy-wizard"), "grumpy-wizard")


def test_models_path_unknown() -> None:
    assert_one_line_error(invoke("models", "path", "qwen-99b"), "qwen-99b", "not a known model")


def test_reward_check_unknown_task() -> None:
    assert_one_line_error(invoke("reward", "check", "tcp_to_obj", "--task", "nope-v1"), "nope-v1")


def test_reward_check_rejected_expression_exits_non_zero() -> None:
    result = invoke("reward", "check", "__import__('os')", "--task", "Reacher-v5", "--states", "64")
    assert result.exit_code != 0 and "Traceback" not in result.output
