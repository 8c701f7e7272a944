"""Crash safety: `lares run` killed with SIGKILL at random points, then `lares resume`d, loses nothing accepted.

The run is Reacher-v5 with the demo preset's small networks and a short budget; its LLM is a fake
OpenAI-compatible server on 127.0.0.1 inside this test (one thread, answers valid and distinct candidates, stops
with the test). Kill points, drawn from a seeded generator:

  * during an LLM call: the server holds the n-th request and the test kills the run while it waits;
  * during training: the subprocess runs through a tiny `-c` wrapper that reports the n-th `_learn` call to the
    test server and waits there;
  * during checkpoint writing: the same wrapper reports from inside `save_checkpoint`, after the temporary
    checkpoint directory is written and before it is renamed into place (the moment atomicity matters).

The wrapper patches functions in the child process only; production code has no test hooks. After the kills a
final `lares resume` must finish, every candidate accepted before any kill must still be in candidates.jsonl
(once), trace.sqlite must hold every round as finished, and the final checkpoint's rewards must be accepted ones.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_openai import FakeOpenAI, chat_completion, serving

from lares_agent.engine.state.checkpoint import latest_checkpoint, load_checkpoint
from lares_agent.runs import read_jsonl

WAIT_S = 240.0  # upper bound on any one wait for a child (a hang guard; nothing is timed)
BUDGET, PERIOD, POPULATION, ELITES = 900, 200, 3, 1  # Reacher episodes are 50 steps, 3 per iteration

WRAPPER = """
import json, os, sys, urllib.request
def _hook(point):
    body = json.dumps({"point": point, "pid": os.getpid()}).encode()
    req = urllib.request.Request(os.environ["LARES_TEST_HOOK_URL"], data=body, method="POST")
    urllib.request.urlopen(req, timeout=600).read()  # the test kills this process while it waits here
point, _, nth = os.environ.get("LARES_TEST_KILL_AT", "").partition(":")
if point == "learn":
    from lares_agent.engine.populations import replay as _replay
    _real_learn, _seen = _replay.ReplayPopulation._learn, [0]
    def _learn(self, steps, env_steps):
        done = _real_learn(self, steps, env_steps)
        _seen[0] += 1
        if _seen[0] == int(nth):
            _hook("learn")
        return done
    _replay.ReplayPopulation._learn = _learn
elif point == "checkpoint":
    from lares_agent.engine.state import checkpoint as _ckpt
    _real_fsync_dir, _seen = _ckpt._fsync_dir, [0]
    def _fsync_dir(path):
        _real_fsync_dir(path)
        if path.name.startswith(".tmp-"):  # temporary directory complete, not yet renamed into place
            _seen[0] += 1
            if _seen[0] == int(nth):
                _hook("checkpoint")
    _ckpt._fsync_dir = _fsync_dir
import torch
torch.set_num_threads(1)
from lares_agent.cli.app import main
sys.argv = ["lares", *sys.argv[1:]]
main()
"""


# ---------------------------------------------------------------------------------------------- fake LLM server
class FakeLLM(FakeOpenAI):
    """OpenAI-compatible chat completions with valid, distinct Reacher candidates; `/hook` parks the caller.

    `hold_at` (1-based request number) makes that request wait instead of answering; `held` is set when it
    arrives. Parked requests wait at most WAIT_S and the server thread is a daemon, so nothing outlives the test.
    """

    def __init__(self) -> None:
        super().__init__()
        self.hold_at: int | None = None
        self.held = threading.Event()
        self.hooked = threading.Event()
        self.hook_points: list[str] = []
        self.release = threading.Event()  # set at teardown: parked handlers return

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path == "/hook":
            self.hook_points.append(body.get("point", "?"))
            self.hooked.set()
            self.release.wait(WAIT_S)
            return 200, {"ok": True}
        n = self.count()
        if n == self.hold_at:
            self.held.set()
            self.release.wait(WAIT_S)
        weight = 1.0 + 0.125 * n  # distinct weights: no candidate duplicates another
        answer = json.dumps({"candidates": [{
            "components": {"reach": f"-{weight}*fingertip_to_target", "calm": "-0.01*joint_speed"},
            "rationale": f"closer is better, variant {n}",
        }]})
        return 200, chat_completion(answer, body.get("model", "fake"), 100, 30, id=f"cmpl-{n}")


@pytest.fixture
def llm_server() -> Iterator[FakeLLM]:
    with serving(FakeLLM(), join_timeout=10) as server:
        try:
            yield server
        finally:
            server.release.set()  # parked handlers return before the server shuts down


# ---------------------------------------------------------------------------------------------- helpers
def _start(args: list[str], cwd: Path, server: FakeLLM, kill_at: str = "") -> subprocess.Popen[str]:
    """The CLI in a child process (own session, output to a log file: a full pipe would stall it)."""
    log = cwd / f"child-{len(list(cwd.glob('child-*.log')))}.log"
    env = {**os.environ, "LARES_TEST_HOOK_URL": f"{server.origin}/hook", "LARES_TEST_KILL_AT": kill_at,
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENAI_API_KEY": "test-key", "NO_COLOR": "1",
           "HOME": str(cwd)}  # keeps any per-user file (case store, caches) inside the test folder
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", WRAPPER, *args], cwd=cwd, env=env, text=True,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    proc.log = log  # type: ignore[attr-defined]
    return proc


def _output(proc: subprocess.Popen[str]) -> str:
    return proc.log.read_text(errors="replace")[-3000:]  # type: ignore[attr-defined]


def _kill_when(proc: subprocess.Popen[str], event: threading.Event) -> bool:
    """SIGKILL `proc` once `event` is set; False when the process ended first (it then must have succeeded)."""
    waiter = threading.Thread(target=lambda: (proc.wait(), event.set()), daemon=True)
    waiter.start()
    assert event.wait(WAIT_S), f"the run neither reached its kill point nor finished: {_output(proc)}"
    if proc.poll() is not None:
        assert proc.returncode == 0, _output(proc)
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(WAIT_S)
    assert proc.returncode == -signal.SIGKILL
    return True


def _accepted(run: Path) -> dict[str, int]:
    return {r["id"]: r["round"] for r in read_jsonl(run / "candidates.jsonl") if r.get("verdict") == "accepted"}


def _run_dir(base: Path) -> Path:
    runs = [p for p in base.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def _rounds_in_trace(run: Path) -> dict[int, list[str]]:
    """round -> accepted ids, for every round thread that the trace holds as finished."""
    from lares_agent.graphs.build import build_graph, open_trace

    saver = open_trace(run)
    try:
        graph = build_graph(saver)  # reading stored state needs no run context
        threads = {row[0] for row in saver.conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
        out: dict[int, list[str]] = {}
        for thread in sorted(threads):
            snapshot = graph.get_state({"configurable": {"thread_id": thread}})
            if snapshot.values and not snapshot.next:
                out[int(thread.removeprefix("round-"))] = [r["id"] for r in snapshot.values.get("accepted") or []]
        return out
    finally:
        saver.conn.close()


# ---------------------------------------------------------------------------------------------- the tests
def test_round_killed_between_its_first_writes_and_checkpoint_resumes(tmp_path: Path) -> None:
    """What SIGKILL during `analyse` left in a real run: the input checkpoint plus the saved writes of its
    `__start__` step, and no later checkpoint. `get_state` then shows values and no `next`; the round must
    resume, not be taken as finished with nothing accepted."""
    import sqlite3

    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from lares_agent.engine.tasks import get_task
    from lares_agent.graphs.build import build_graph, open_trace
    from lares_agent.graphs.context import RunContext
    from lares_agent.graphs.round import run_round
    from lares_agent.llm import LLMClient, LLMConfig
    from lares_agent.rewards import synthetic_sample

    task = get_task("Reacher-v5")
    answers = [json.dumps({"candidates": [{"components": {"reach": f"-{w}*fingertip_to_target"}}]}) for w in (2, 3)]
    fake = FakeListChatModel(responses=["the arm overshoots", *answers])
    deps = RunContext(llm=LLMClient(fake, LLMConfig()), task=task,
                      sample=synthetic_sample(task.features, 64, np.random.default_rng(0)))
    elite = {"id": "e", "components": {"reach": "-fingertip_to_target"}, "fitness": 0.0}
    saver = open_trace(tmp_path)
    graph = build_graph(saver)
    first = run_round(graph, {"round": 1, "n_wanted": 2, "elites": [elite]}, "round-1", deps)
    assert len(first.accepted) == 2
    db = sqlite3.connect(tmp_path / "trace.sqlite")
    (start,) = db.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = 'round-1' ORDER BY checkpoint_id "
                          "LIMIT 1").fetchone()
    db.execute("DELETE FROM checkpoints WHERE thread_id = 'round-1' AND checkpoint_id != ?", (start,))
    db.execute("DELETE FROM writes WHERE thread_id = 'round-1' AND checkpoint_id != ?", (start,))
    db.commit()
    db.close()
    snapshot = graph.get_state({"configurable": {"thread_id": "round-1"}})
    assert snapshot.values and not snapshot.next and snapshot.tasks  # the misleading state
    again = run_round(graph, {"round": 1, "n_wanted": 2, "elites": [elite]}, "round-1", deps)
    assert len(again.accepted) == 2 and [s["node"] for s in again.steps][-1] == "validate"
    saver.conn.close()


@pytest.mark.slow  # five Python processes, each importing torch/langchain: one to two minutes
def test_sigkill_at_random_points_then_resume_loses_nothing(tmp_path: Path, llm_server: FakeLLM) -> None:
    rng = np.random.default_rng(20250711)
    base = tmp_path / "runs"
    # --analysis llm: analyse and critique call the LLM
    run_args = ["run", "--task", "Reacher-v5", "--llm", "openai", "--model", "fake", "--base-url",
                llm_server.url, "--population", str(POPULATION), "--elites", str(ELITES),
                "--budget", str(BUDGET), "--reward-period", str(PERIOD), "--no-retrieval", "--no-report",
                "--handover-episodes", "2",
                "--run-dir", str(base), "--seed", "3", "--setting", "scratch", "--analysis", "llm"]
    kills: list[str] = []
    snapshots: list[dict[str, int]] = []

    # 1. during an LLM call of round 0 (three propose calls, one candidate each)
    llm_server.hold_at = int(rng.integers(1, 4))
    proc = _start(run_args, tmp_path, llm_server)
    assert _kill_when(proc, llm_server.held)
    kills.append(f"llm#{llm_server.hold_at}")
    run = _run_dir(base)
    assert (run / "config.json").is_file()
    resume_args = ["resume", str(run), "--no-report"]

    # 2. during training, before the first reward update (iterations 1-2 of 150 steps each)
    llm_server.hold_at, llm_server.held = None, threading.Event()
    learn_n = int(rng.integers(1, 3))
    proc = _start(resume_args, tmp_path, llm_server, kill_at=f"learn:{learn_n}")
    assert _kill_when(proc, llm_server.hooked)
    kills.append(f"learn#{learn_n}")
    snapshots.append(_accepted(run))
    assert sorted(snapshots[-1].values()) == [0] * POPULATION  # round 0 complete and logged

    # 3. during the write of the first checkpoint (round 1's), between writing and renaming it
    llm_server.hooked = threading.Event()
    proc = _start(resume_args, tmp_path, llm_server, kill_at="checkpoint:1")
    assert _kill_when(proc, llm_server.hooked)
    kills.append("checkpoint#1")
    snapshots.append(_accepted(run))
    assert 1 in snapshots[-1].values()  # round 1 was accepted before its checkpoint was written
    assert list((run / "checkpoints").glob(".tmp-round-0001-*")), "the kill should leave a partial checkpoint"
    assert latest_checkpoint(run / "checkpoints") is None  # ... which nothing points to

    # 4. during an LLM call of round 2 (analyse, critique, two proposals; round 1 is replayed from the trace)
    llm_server.hold_at = llm_server.requests + int(rng.integers(1, 5))
    proc = _start(resume_args, tmp_path, llm_server)
    assert _kill_when(proc, llm_server.held)
    kills.append(f"llm#{llm_server.hold_at}")
    snapshots.append(_accepted(run))
    assert latest_checkpoint(run / "checkpoints").name == "round-0001"

    # 5. resume to the end
    llm_server.hold_at = None
    proc = _start(resume_args, tmp_path, llm_server)
    proc.wait(WAIT_S)
    assert proc.returncode == 0, _output(proc)
    assert "run finished" in _output(proc)

    # Every candidate accepted before any kill is still there, once; rounds are not repeated in the log.
    rows = read_jsonl(run / "candidates.jsonl")
    final = _accepted(run)
    for snap in snapshots:
        assert snap.items() <= final.items(), kills
    # A round replayed from the trace after a resume is not logged again. (A run restarted from scratch may
    # place a stored round's children in other slots than the killed process did; that new placement is logged.)
    logged = [(r["id"], r["verdict"], r.get("slot")) for r in rows if r.get("verdict") in ("accepted", "rejected")]
    assert len(logged) == len(set(logged)), "a round's candidates were logged twice after a resume"
    # The final checkpoint is complete and at the end of the budget. (Thompson sampling picks 1-3 learners per
    # iteration, so the number of reward updates in the budget varies with the seed: at least 2 here.)
    state = load_checkpoint(run / "checkpoints")
    rounds = int(state["counters"]["round"])
    assert state["counters"]["env_steps"] >= BUDGET and rounds >= 2
    per_round = {k: [i for i, r in final.items() if r == k] for k in set(final.values())}
    assert sorted(per_round) == list(range(rounds + 1))
    assert len(per_round[0]) == POPULATION
    assert all(len(per_round[k]) == POPULATION - ELITES for k in range(1, rounds + 1))

    # The trace holds every round as finished, with the same accepted candidates.
    trace = _rounds_in_trace(run)
    assert sorted(trace) == list(range(rounds + 1))
    for k, ids in trace.items():
        assert sorted(ids) == sorted(per_round[k])

    # The final checkpoint's rewards are accepted candidates, including those of the last reward update.
    reward_ids = {r["id"] for r in state["rewards"]}
    assert reward_ids <= set(final)
    placed = {r["id"]: r["slot"] for r in rows if r.get("verdict") == "accepted"}  # the latest placement wins
    assert all(placed[r["id"]] == slot for slot, r in enumerate(state["rewards"]))
    last_update = [e for e in read_jsonl(run / "events.jsonl") if e.get("event") == "reward_update"][-1]
    assert last_update["round"] == rounds and set(last_update["replaced"].values()) <= reward_ids
    assert set(per_round[rounds]) == set(last_update["replaced"].values())
    _rows_once(run)  # the rows written after a checkpoint and before a kill are not written again on resume


def _rows_once(run: Path) -> None:
    """Each metric row (kind, env steps) and each reward update exists once, whatever was killed and resumed."""
    metrics = [(m["kind"], m["env_steps"]) for m in read_jsonl(run / "metrics.jsonl")]
    assert len(metrics) == len(set(metrics)), metrics
    updates = [e["round"] for e in read_jsonl(run / "events.jsonl") if e["event"] == "reward_update"]
    assert len(updates) == len(set(updates)), updates


@pytest.mark.slow  # three Python processes, each importing torch/langchain: about half a minute
def test_sigterm_stops_after_the_step_then_resume_duplicates_no_row(tmp_path: Path, llm_server: FakeLLM) -> None:
    base = tmp_path / "runs"
    run_args = ["run", "--task", "Reacher-v5", "--llm", "openai", "--model", "fake", "--base-url",
                llm_server.url, "--population", str(POPULATION), "--elites", str(ELITES),
                "--budget", str(BUDGET), "--reward-period", str(PERIOD), "--no-retrieval", "--no-report",
                "--handover-episodes", "2",
                "--run-dir", str(base), "--seed", "3", "--setting", "scratch"]
    # 1. SIGTERM while the 3rd training step is in progress: the step finishes, a checkpoint and run_end follow
    proc = _start(run_args, tmp_path, llm_server, kill_at="learn:3")
    assert llm_server.hooked.wait(WAIT_S), _output(proc)
    os.killpg(proc.pid, signal.SIGTERM)
    llm_server.release.set()  # the parked step goes on (and later hooks return at once)
    proc.wait(WAIT_S)
    out = _output(proc)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "stopped by SIGTERM after the current step, checkpoint written" in out and "lares resume" in out
    run = _run_dir(base)
    end = [e for e in read_jsonl(run / "events.jsonl") if e["event"] == "run_end"][-1]
    assert end["stopped_by"] == "SIGTERM"
    assert load_checkpoint(run / "checkpoints")["counters"]["env_steps"] == end["env_steps"] > 0

    # 2. a second signal stops at once: SIGKILL-like, nothing after it
    llm_server.release, llm_server.hooked = threading.Event(), threading.Event()
    proc = _start(["resume", str(run), "--no-report"], tmp_path, llm_server, kill_at="learn:1")
    assert llm_server.hooked.wait(WAIT_S), _output(proc)
    os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + WAIT_S
    while "stopping after the current step" not in _output(proc):  # two signals at once would merge into one
        assert time.monotonic() < deadline, _output(proc)
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(WAIT_S)
    assert proc.returncode == -signal.SIGTERM, _output(proc)
    llm_server.release.set()

    # 3. resume to the end: every row once
    proc = _start(["resume", str(run), "--no-report"], tmp_path, llm_server)
    proc.wait(WAIT_S)
    assert proc.returncode == 0 and "run finished" in _output(proc), _output(proc)
    _rows_once(run)
    assert len([e for e in read_jsonl(run / "events.jsonl") if e["event"] == "resumed"]) == 2
