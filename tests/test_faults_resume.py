"""A damaged or foreign run folder, a finished run, a run of fallbacks only, and a graceful SIGTERM:
each is resumed, refused or reported in one plain line, and no metric or event row is written twice.

One tiny Reacher-v5 run against a fake OpenAI-compatible server is made once per module; each test works on
its own copy of that folder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reacher_answer, serving
from helpers import lares_cli

from lares_agent.engine.state.checkpoint import latest_checkpoint
from lares_agent.runs import read_jsonl

TINY = ["--task", "Reacher-v5", "--budget", "300", "--reward-period", "100", "--population", "2", "--elites", "1",
        "--no-report", "--no-retrieval", "--seed", "3", "--handover-episodes", "2"]


class Server(FakeOpenAI):
    """Valid distinct Reacher candidates for propose calls and a sentence for the others; or every call a 500."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        n = self.count()
        if self.fail:
            return 500, {"error": {"message": "upstream crashed", "type": "server_error"}}
        return 200, reacher_answer(body, n)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving(Server()) as srv:
        yield srv


lares = lares_cli


def only_run(base: Path) -> Path:
    (run,) = [p for p in base.iterdir() if p.is_dir()]
    return run


@pytest.fixture(scope="module")
def finished(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("finished")
    result = lares("run", *TINY, "--llm", "openai", "--model", "fake", "--base-url", server.url,
                   "--run-dir", str(base / "runs"), home=base)
    assert result.exit_code == 0, result.output
    return only_run(base / "runs")


@pytest.fixture
def killed(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished run as a kill after its last checkpoint leaves it: no `run_end` line."""
    run = tmp_path / finished.name
    shutil.copytree(finished, run)
    lines = (run / "events.jsonl").read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if json.loads(line)["event"] == "run_end")
    (run / "events.jsonl").write_text("".join(line + "\n" for i, line in enumerate(lines) if i != last))
    return run


def assert_rows_once(run: Path) -> None:
    metrics = Counter((m["kind"], m["env_steps"]) for m in read_jsonl(run / "metrics.jsonl"))
    assert all(n == 1 for n in metrics.values()), metrics
    events = read_jsonl(run / "events.jsonl")
    updates = Counter(e["round"] for e in events if e["event"] == "reward_update")
    assert all(n == 1 for n in updates.values()), updates
    warmups = [e for e in events if e["event"] == "warmup"]
    assert len(warmups) == 1
    checkpoints = Counter(e["name"] for e in events if e["event"] == "checkpoint")
    assert all(n == 1 for n in checkpoints.values()), checkpoints


def test_resume_skips_a_damaged_newest_checkpoint_and_writes_each_row_once(killed: Path, tmp_path: Path) -> None:
    newest = latest_checkpoint(killed / "checkpoints")
    assert newest is not None and newest.name.startswith("step-")
    data = (newest / "arrays.npz").read_bytes()
    (newest / "arrays.npz").write_bytes(data[: len(data) // 2])  # truncated, as a full disk or a kill leaves it
    stale = killed / "checkpoints" / ".tmp-round-0009-4242"
    stale.mkdir()
    (stale / "tensors.pt").write_bytes(b"x" * 1000)
    result = lares("resume", str(killed), "--no-report", home=tmp_path)
    assert result.exit_code == 0, result.output
    assert f"skipped checkpoint {newest.name}" in result.output and "arrays.npz is damaged" in result.output
    assert "removed" in result.output and not stale.exists()
    assert "run finished: 3" in result.output, result.output
    assert (killed / "checkpoints" / f"damaged-{newest.name}").is_dir()
    assert_rows_once(killed)
    starts = [e for e in read_jsonl(killed / "events.jsonl") if e["event"] == "run_start"]
    assert starts[-1]["skipped"] and starts[-1]["checkpoint"].startswith("round-")
    restored = [e for e in read_jsonl(killed / "events.jsonl")
                if e["event"] == "checkpoint" and e["name"] == starts[-1]["checkpoint"]]
    assert len(restored) == 1  # the checkpoint a resume restores keeps its own event


def test_a_damaged_trace_is_set_aside_before_anything_runs(killed: Path, tmp_path: Path) -> None:
    (killed / "trace.sqlite").write_bytes(b"this is not a database" * 100)
    result = lares("resume", str(killed), "--no-report", home=tmp_path)
    assert result.exit_code == 0, result.output
    assert "trace.sqlite is damaged" in result.output and "set it aside" in result.output
    assert list(killed.glob("trace.sqlite.damaged-*"))
    assert "file is not a database" not in result.output.split("run finished")[-1]


def test_resuming_a_finished_run_prints_its_true_summary_and_writes_nothing(finished: Path, tmp_path: Path) -> None:
    run = tmp_path / finished.name
    shutil.copytree(finished, run)
    before = {p: p.stat().st_size for p in run.rglob("*") if p.is_file()}
    best = max(m["success_max"] for m in read_jsonl(run / "metrics.jsonl"))
    steps = [e for e in read_jsonl(run / "events.jsonl") if e["event"] == "run_end"][-1]["env_steps"]
    result = lares("resume", str(run), home=tmp_path)
    assert result.exit_code == 0, result.output
    assert f"run already finished: {steps:,} env steps" in result.output, result.output
    assert f"best success {best:.0%}" in result.output
    assert {p: p.stat().st_size for p in run.rglob("*") if p.is_file()} == before


def test_resume_refuses_a_folder_that_is_not_a_lares_run(tmp_path: Path) -> None:
    folder = tmp_path / "other-tool"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"name": "webpack", "version": 5, "task": "build"}))
    result = lares("resume", str(folder), home=tmp_path)
    assert result.exit_code == 1 and "is not a lares run" in result.output and "nothing was written" in result.output
    assert sorted(p.name for p in folder.iterdir()) == ["config.json"]
    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / "config.json").write_text(json.dumps({"format": "lares-run", "format_version": 99}))
    assert "written by a newer lares" in lares("resume", str(newer), home=tmp_path).output


def test_a_second_writer_is_refused_and_a_killed_holder_leaves_no_lock(killed: Path, tmp_path: Path) -> None:
    from lares_agent.runs.lock import hold_run

    holder = subprocess.Popen(  # a live `lares run` as another process: it holds the folder's lock and sleeps
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)", str(killed)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = {p: p.stat().st_size for p in killed.rglob("*") if p.is_file()}
        result = lares("resume", str(killed), "--no-report", home=tmp_path)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 1 and len(lines) == 1, result.output
        assert "in use by another lares process" in lines[0] and str(killed) in lines[0]
        assert {p: p.stat().st_size for p in killed.rglob("*") if p.is_file()} == before  # nothing mended or cut
    finally:
        holder.kill()  # SIGKILL: no clean-up runs in the holder
        holder.wait()
    with hold_run(killed), hold_run(killed):  # the kernel dropped the dead holder's lock; re-entrant here
        pass


def test_a_run_without_a_checkpoint_resumes_with_a_marker_and_no_repeated_rows(killed: Path, tmp_path: Path) -> None:
    shutil.rmtree(killed / "checkpoints")
    result = lares("resume", str(killed), "--no-report", home=tmp_path)
    assert result.exit_code == 0, result.output
    events = read_jsonl(killed / "events.jsonl")
    marker = [e for e in events if e["event"] == "resumed"]
    assert marker and marker[-1]["checkpoint"] is None and marker[-1]["dropped"]["metrics.jsonl"] > 0
    assert_rows_once(killed)


class PromptServer(FakeOpenAI):
    """Answers that follow from the prompt alone, as a deterministic LLM's would: a restarted run that asks what
    the uninterrupted one asked gets the same answer."""

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.count()
        return 200, reacher_answer(body, zlib.crc32(str(body["messages"]).encode()) % 7)


def _rows_without_ids(run: Path) -> list[dict[str, Any]]:
    """Metrics rows with what differs between two run folders left out: the time and the candidates' id prefix
    (the folder's name)."""
    prefix = run.name.rsplit("-", 1)[-1] + "-"
    text = (run / "metrics.jsonl").read_text(encoding="utf-8").replace(prefix, "")
    return [{k: v for k, v in json.loads(line).items() if k != "wall_time"} for line in text.splitlines()]


def test_a_resume_with_every_checkpoint_damaged_equals_an_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The restart from zero replays every round from the trace at once, where the LLM once took its time: each
    background round is installed at the step the first session installed it, so the rows are the same."""
    from lares_agent.engine.loop.proposals import ProposalRunner

    real = ProposalRunner.ready
    monkeypatch.setattr(ProposalRunner, "ready", property(lambda self: False))  # a slow LLM: installed when overdue
    args = [*TINY[:3], "600", *TINY[4:], "--eval-every", "150", "--llm", "openai", "--model", "fake"]
    with serving(PromptServer()) as srv:
        first = lares("run", *args, "--base-url", srv.url, "--run-dir", str(tmp_path / "runs"), home=tmp_path)
        assert first.exit_code == 0, first.output
        run = only_run(tmp_path / "runs")
        whole = _rows_without_ids(run)
        assert any(e["event"] == "initial_rewards" and e["env_steps"] > 0 for e in read_jsonl(run / "events.jsonl"))
        lines = (run / "events.jsonl").read_text().splitlines()  # killed before its end: no run_end line
        (run / "events.jsonl").write_text("".join(line + "\n" for line in lines if '"run_end"' not in line))
        for arrays in (run / "checkpoints").glob("*/arrays.npz"):
            arrays.write_bytes(arrays.read_bytes()[:100])
        monkeypatch.setattr(ProposalRunner, "ready", real)  # the trace's answers are there at once
        result = lares("resume", str(run), "--no-report", home=tmp_path)
    assert result.exit_code == 0, result.output
    assert "no loadable checkpoint: the engine starts again" in result.output
    assert _rows_without_ids(run) == whole
    assert_rows_once(run)


def test_sigterm_finishes_the_step_checkpoints_and_says_how_to_resume(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lares_agent.engine.populations.replay import ReplayPopulation

    real, seen = ReplayPopulation._learn, [0]

    def learn(self: Any, steps: int, env_steps: int) -> int:
        seen[0] += 1
        if seen[0] == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives in the middle of a step
        return int(real(self, steps, env_steps))

    monkeypatch.setattr(ReplayPopulation, "_learn", learn)
    result = lares("run", *TINY, "--llm", "openai", "--model", "fake", "--base-url", server.url,
                   "--run-dir", str(tmp_path / "runs"), home=tmp_path)
    assert result.exit_code == 128 + signal.SIGTERM, result.output
    assert "stopped by SIGTERM after the current step, checkpoint written" in result.output
    assert "resume: lares resume" in result.output
    run = only_run(tmp_path / "runs")
    end = [e for e in read_jsonl(run / "events.jsonl") if e["event"] == "run_end"][-1]
    assert end["stopped_by"] == "SIGTERM" and not end["finished"]
    state = json.loads((latest_checkpoint(run / "checkpoints") / "state.json").read_text())  # type: ignore[operator]
    assert state["counters"]["env_steps"] == end["env_steps"] > 0  # the step it was in was finished and saved
    monkeypatch.setattr(ReplayPopulation, "_learn", real)
    again = lares("resume", str(run), "--no-report", home=tmp_path)
    assert again.exit_code == 0 and "run finished: 3" in again.output, again.output
    assert_rows_once(run)


def test_a_run_of_fallbacks_only_says_so_and_exits_non_zero(tmp_path: Path) -> None:
    with serving(Server(fail=True)) as broken:
        args = ["run", *TINY, "--llm", "openai", "--model", "fake", "--base-url", broken.url]
        result = lares(*args, "--run-dir", str(tmp_path / "a"), home=tmp_path)
        assert result.exit_code == 3, result.output
        assert "no LLM candidate was accepted" in result.output and "LLM call(s) failed" in result.output
        assert "upstream crashed" in result.output and "--allow-fallback" in result.output
        assert broken.requests <= 3 * 3, broken.requests  # the breaker: a few tries per round, not 8 x 3 each
        again = lares("resume", str(only_run(tmp_path / "a")), home=tmp_path)  # finished: as `lares run` ends
        assert again.exit_code == 3 and "run already finished" in again.output, again.output
        assert "warning: no LLM candidate was accepted" in again.output and "--allow-fallback" in again.output
        accepted = lares("resume", str(only_run(tmp_path / "a")), "--allow-fallback", home=tmp_path)
        assert accepted.exit_code == 0 and "warning: no LLM candidate was accepted" in accepted.output
        allowed = lares(*args, "--run-dir", str(tmp_path / "b"), "--allow-fallback", "--report", home=tmp_path)
        assert allowed.exit_code == 0, allowed.output
        page = (only_run(tmp_path / "b") / "report" / "index.html").read_text()
        assert "The LLM delivered no reward" in page


def test_a_resume_after_a_stop_in_a_round_0_that_fell_back_asks_the_llm_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lares_agent.engine.populations.replay import ReplayPopulation

    real = ReplayPopulation._learn

    def learn(self: Any, steps: int, env_steps: int) -> int:
        os.kill(os.getpid(), signal.SIGTERM)  # the first training step, in round 0, on the fallbacks
        return int(real(self, steps, env_steps))

    with serving(Server(fail=True)) as srv:
        monkeypatch.setattr(ReplayPopulation, "_learn", learn)
        result = lares("run", *TINY, "--setting", "scratch", "--llm", "openai", "--model", "fake",
                       "--base-url", srv.url, "--run-dir", str(tmp_path / "runs"), home=tmp_path)
        assert result.exit_code == 128 + signal.SIGTERM, result.output
        run = only_run(tmp_path / "runs")
        state = json.loads((latest_checkpoint(run / "checkpoints") / "state.json").read_text())  # type: ignore[operator]
        assert state["counters"]["round"] == 0 and all(r["id"].startswith("fallback-r0-") for r in state["rewards"])
        monkeypatch.setattr(ReplayPopulation, "_learn", real)
        srv.fail, srv.requests = False, 0  # the endpoint is repaired
        again = lares("resume", str(run), "--no-report", home=tmp_path)
        assert again.exit_code == 0, again.output
        assert "the LLM is asked for round 0's candidates once more" in again.output
    assert srv.requests > 0
    rows = [r for r in read_jsonl(run / "candidates.jsonl") if r["round"] == 0 and r["verdict"] == "accepted"]
    assert any(r["reason"] != "fallback" for r in rows), rows
    assert_rows_once(run)


def test_the_fallback_warning_names_where_the_rewards_came_from() -> None:
    from lares_agent.runs import LLMHealth

    given = LLMHealth(accepted=0, fallbacks=0, failed_calls=3, refused_calls=0, rejected=2, top_failure=None, given=2)
    assert given.only_fallbacks and "every reward is from --rewards-file (2 slot(s))" in given.sentence()
    assert "fallback (0 slot(s))" not in given.sentence()
    mixed = LLMHealth(0, 1, 3, 0, 2, None, given=1)
    assert "the built-in fallback (1 slot(s)) or from --rewards-file (1 slot(s))" in mixed.sentence()
    assert "every reward is the built-in fallback (2 slot(s))" in LLMHealth(0, 2, 3, 0, 0, None).sentence()


def test_a_run_of_children_of_the_task_reward_is_not_called_a_fallback_run(tmp_path: Path) -> None:
    """With init and an LLM that never answers, every slot can be a numeric child of the task's own reward."""
    from lares_agent.runs import RunLog, llm_health

    rows = [{"id": f"r1-a0-{i}", "round": 1, "slot": i, "verdict": "accepted", "origin": "child", "parent_id": "human",
             "components": {"c": "-obj_to_target"}} for i in range(3)]
    rows.append({"id": "r1-a0-9", "round": 1, "verdict": "rejected", "reason": "LLM call failed: HTTP 500"})
    (tmp_path / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    health = llm_health(RunLog(tmp_path))
    assert health.only_fallbacks and health.children == 3 and health.fallbacks == 0
    assert "every reward is a numeric child of the task's own reward" in health.sentence()
    assert "(3 slot(s))" in health.sentence() and "fallback" not in health.sentence()
    rows.append({"id": "fallback-r0-0", "round": 0, "slot": 0, "verdict": "accepted", "reason": "fallback"})
    (tmp_path / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    mixed = llm_health(RunLog(tmp_path)).sentence()
    assert "every reward is the built-in fallback (1 slot(s)) or a numeric child" in mixed
