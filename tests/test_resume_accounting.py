"""Token and time accounting that survives `lares resume`: the earlier session's LLM calls
count against `--max-llm-tokens`, and the wall time reported is the whole run's; and the last screen of that
run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import ReacherServer, serving
from helpers import lares_cli

from lares_agent.engine import PolicyArtefact
from lares_agent.llm.usage import UsageLedger
from lares_agent.runs import FINAL_POLICY, LLMCallRow, RunLayout, RunLog, read_jsonl, spent_wall_s

TINY = ["--task", "Reacher-v5", "--budget", "450", "--reward-period", "150", "--population", "2", "--elites", "1",
        "--no-report", "--no-retrieval", "--seed", "4", "--handover-episodes", "2"]


Server = ReacherServer


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving(Server()) as srv:
        yield srv


lares = lares_cli


@pytest.fixture(scope="module")
def finished_run(server: Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    base = tmp_path_factory.mktemp("finished")
    # scratch: no learner on the task's own reward, which may rank first (and be handed over) when a loaded
    # machine lets the background rounds install their rewards later
    result = lares("run", *TINY, "--setting", "scratch", "--llm", "openai", "--model", "fake", "--base-url",
                   server.url, "--max-llm-tokens", "1000000", "--run-dir", str(base / "runs"), home=base)
    assert result.exit_code == 0, result.output
    (run,) = [p for p in (base / "runs").iterdir() if p.is_dir()]
    return run, result.output


@pytest.fixture(scope="module")
def finished(finished_run: tuple[Path, str]) -> Path:
    return finished_run[0]


def test_the_last_screen_says_what_the_user_got(finished_run: tuple[Path, str]) -> None:
    """The last screen: the selected reward's expression, the policy's success and file, eval and export."""
    run, output = finished_run
    policy = PolicyArtefact.load(RunLayout(run).policy(FINAL_POLICY))
    accepted = {r.id: r.components for r in RunLog(RunLayout(run)).candidates.read() if r.components}
    components = accepted[policy.reward_id]  # an LLM candidate, not the human reward
    assert components is not None
    assert f"selected reward {policy.reward_id} (slot {policy.data['slot']}): " in output
    assert all(f"{name} = {expr}" in output for name, expr in components.items())
    assert "selected policy: crossq, trained on a searched reward, success " in output
    assert str(RunLayout(run).policy(FINAL_POLICY)) in output
    assert f"lares eval {run}" in output and f"lares export {run}" in output
    assert f"report: not written (lares report {run})" in output  # --no-report


def killed_after_round_one(finished: Path, tmp_path: Path, max_tokens: int | None) -> Path:
    """A copy as a kill just after round 1's checkpoint leaves it: no later checkpoint, no `run_end`, and no
    graph trace (which would answer the later rounds without asking the LLM again)."""
    run = tmp_path / finished.name
    shutil.copytree(finished, run)
    RunLayout(run).trace.unlink()
    for checkpoint in (run / "checkpoints").iterdir():
        if checkpoint.is_dir() and checkpoint.name != "round-0001":
            shutil.rmtree(checkpoint)
    lines = (run / "events.jsonl").read_text().splitlines()
    (run / "events.jsonl").write_text("".join(line + "\n" for line in lines if json.loads(line)["event"] != "run_end"))
    config = json.loads((run / "config.json").read_text())
    config["max_llm_tokens"] = max_tokens
    (run / "config.json").write_text(json.dumps(config))
    return run


def spent_tokens(run: Path) -> int:
    return UsageLedger.from_calls(RunLog(RunLayout(run)).llm_calls.read()).tokens


def test_the_ledger_starts_from_the_recorded_calls() -> None:
    rows = [LLMCallRow(call=0, tag="propose", answer="a", prompt_tokens=50, completion_tokens=10, seconds=1.5),
            LLMCallRow(call=1, tag="propose", answer=None, ok=False, seconds=0.5),
            LLMCallRow(call=2, tag="analyse", answer="b", prompt_tokens=20, completion_tokens=5, seconds=1.0)]
    ledger = UsageLedger.from_calls(rows)
    snap = ledger.snapshot()
    assert ledger.tokens == 85 and snap["calls"] == 2 and snap["failures"] == 1 and ledger.seconds == 3.0
    assert snap["by_tag"]["propose"]["prompt_tokens"] == 50


def test_a_resumed_run_without_a_cap_asks_the_llm_again(finished: Path, server: Server, tmp_path: Path) -> None:
    """The control: resuming after round 1 makes LLM calls, so the capped test below is not vacuous."""
    run = killed_after_round_one(finished, tmp_path, None)
    before = server.requests
    result = lares("resume", str(run), "--no-report", home=tmp_path)
    assert result.exit_code == 0, result.output
    assert server.requests > before


def test_a_resumed_run_stops_at_its_token_cap_counting_the_earlier_calls(finished: Path, server: Server,
                                                                         tmp_path: Path) -> None:
    earlier = spent_tokens(finished)
    assert earlier > 0
    run = killed_after_round_one(finished, tmp_path, earlier)  # the cap is already reached
    wall_before = spent_wall_s(RunLog(RunLayout(run)))
    before = server.requests
    result = lares("resume", str(run), "--no-report", home=tmp_path)
    assert server.requests == before, result.output  # every call refused: the earlier ones counted
    end = [e for e in read_jsonl(run / "events.jsonl") if e["event"] == "run_end"][-1]
    assert end["llm"]["total_tokens"] == earlier
    assert wall_before > 0 and end["wall_s"] >= wall_before + end["session_wall_s"] - 1e-6


def test_spent_wall_time_adds_ended_and_killed_sessions(tmp_path: Path) -> None:
    clock = iter([100.0, 160.0, 200.0, 230.0, 300.0])
    log = RunLog(RunLayout(tmp_path), clock=lambda: next(clock))
    log.event("run_start", env_steps=0)  # 100
    log.event("run_end", env_steps=10, wall_s=70.0)  # 160: the run's total so far (initial proposals included)
    log.event("run_start", env_steps=10)  # 200: killed after its fallback at 230
    log.event("fallback", round=1)  # 230
    assert spent_wall_s(log) == pytest.approx(70.0 + 30.0)
    log.event("run_start", env_steps=10)  # 300: a session killed before any stamped line adds nothing yet
    assert spent_wall_s(log) == pytest.approx(100.0)


def test_the_time_a_killed_run_lay_dead_before_a_resume_without_a_checkpoint_is_no_run_time(tmp_path: Path) -> None:
    clock = iter([100.0, 130.0, 5_000.0, 5_040.0, 5_100.0])
    log = RunLog(RunLayout(tmp_path), clock=lambda: next(clock))
    log.event("run_start", env_steps=0)  # 100: killed after its fallback at 130
    log.event("fallback", round=0)  # 130
    log.event("resumed", env_steps=0, round=0)  # 5000: the resume found no checkpoint and starts the engine again
    assert spent_wall_s(log) == pytest.approx(30.0)
    log.event("run_start", env_steps=0)  # 5040
    log.event("fallback", round=1)  # 5100
    assert spent_wall_s(log) == pytest.approx(30.0 + 60.0)
