"""`lares sweep` on a local Ray: a 2 tasks x 2 methods grid at a tiny budget, then a sweep killed mid-trial and
continued with `--resume` (Ray Tune's restore), and `lares report --sweep` on it.

Methods human and sparse only: they ask no LLM, so the trials are seconds of training each; the LaRes method
is the same trainable with another config (tests/test_cli_e2e.py covers LaRes runs themselves).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lares_agent.runs import read_jsonl
from lares_agent.runs.tensorboard import read_scalars
from lares_agent.search.sweep_spec import SweepSpec

pytest.importorskip("ray.tune")
pytestmark = pytest.mark.slow  # a local Ray starts in seconds; each sweep takes tens of them

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--set", "warmup_steps=150", "--set", "eval_every=150", "--set", "eval_episodes=1", "--set", "hidden=32x32",
        "--set", "batch_size=32", "--set", "checkpoint_every=150", "--set", "handover_episodes=2"]
KILLED_BUDGET = 750  # three trials one after another: long enough to be killed inside the second


def lares(*args: str, home: Path, cwd: Path | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LARES_HOME": str(home), "OMP_NUM_THREADS": "1",
           "RAY_AUTH_MODE": "disabled"}
    # -P: the driver imports this checkout (PYTHONPATH), never a package in its working directory
    return subprocess.Popen([sys.executable, "-P", "-c", "from lares_agent.cli.app import main; main()", *args],
                            env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float = 300) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return out


def kill_session(sid: int) -> None:
    """SIGKILL every process left in session `sid` (what the sweep started), and wait until none is."""
    for _ in range(50):
        ps = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True, check=True).stdout
        left = [int(p) for p, s in (line.split() for line in ps.splitlines()) if int(s) == sid]
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def steps(run: Path) -> list[int]:
    return [int(r["env_steps"]) for r in read_jsonl(run / "metrics.jsonl")]


def test_sweep_runs_the_grid_and_reports_it(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    # Started inside another checkout: Ray puts the driver's cwd first on its workers' path, and the trials must
    # still run the driver's lares_agent, not this decoy.
    decoy = tmp_path / "other-checkout" / "lares_agent"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise ImportError('a trial imported the checkout it was started in')\n")
    log = finish(lares("sweep", "--tasks", "Reacher-v5,window-close-v3", "--methods", "human,sparse", "--seeds", "0",
                       "--set", "budget=300", *TINY, "--out", str(out), home=tmp_path / "home", cwd=decoy.parent))
    assert "4/4 trials finished" in log
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == ["Reacher-v5-human-s0", "Reacher-v5-sparse-s0", "window-close-v3-human-s0",
                    "window-close-v3-sparse-s0"]
    for name in runs:
        assert steps(out / "runs" / name) == [150, 300]
        # every evaluation reached Tune as it was written
        tune_rows = read_jsonl(out / "tune" / name / "result.json")
        assert [r["env_steps"] for r in tune_rows] == [150, 300]
        # and Tune's TensorBoard logger, at their env steps, in the trial's folder of the sweep
        points = read_scalars(out / "tune" / name)["ray/tune/success"]
        assert points == [(r["env_steps"], pytest.approx(r["success"])) for r in tune_rows]
    sparse = read_jsonl(out / "runs" / "Reacher-v5-sparse-s0" / "metrics.jsonl")
    assert all(s["own_return"] == 0 or s["success"] > 0 for r in sparse for s in r["slots"])  # trained on success
    end = [e for e in read_jsonl(out / "runs" / "Reacher-v5-sparse-s0" / "events.jsonl") if e["event"] == "run_end"]
    assert end[-1]["learn_s"] > 0 and end[-1]["sim_s"] > 0 and end[-1]["learn_s"] + end[-1]["sim_s"] < end[-1]["wall_s"]
    report = finish(lares("report", "--sweep", str(out), home=tmp_path / "home"))
    assert "| Reacher-v5 | sparse | 1/1 |" in report
    header = next(line for line in report.splitlines() if line.startswith("| task |")).split("|")
    row = next(line for line in report.splitlines() if line.startswith("| Reacher-v5 | sparse |")).split("|")
    assert row[header.index(" learn s ")].strip() != "n/a" and row[header.index(" sim s ")].strip() != "n/a"
    assert {p.name for p in (out / "report").iterdir()} >= {"table.md", "table.csv", "success.png"}
    code = report[report.index("## Which code ran"):].splitlines()[2]  # one session each, on this checkout's code
    assert code.startswith("- `") and all(name in code for name in runs) and "then" not in code
    # Another sweep's trials on this sweep's tasks join its table (`--with-sweep`), its own trials first.
    only = tmp_path / "only-human"
    only.mkdir()
    SweepSpec(("Reacher-v5",), (0,), ("human",)).save(only / "sweep.json")
    shutil.copytree(out / "runs" / "Reacher-v5-human-s0", only / "runs" / "Reacher-v5-human-s0")
    joined = finish(lares("report", "--sweep", str(only), "--with-sweep", str(out), home=tmp_path / "home"))
    table = joined.split("## Both protocols")[0]  # the main table (the protocols' table lists the methods again)
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| Reacher-v5 |")]
    assert [m.strip() for _, m in rows] == ["human", "sparse"] and "window-close-v3" not in joined


def test_a_killed_sweep_resumes_without_rerunning_finished_trials(tmp_path: Path) -> None:
    out, home = tmp_path / "sweep", tmp_path / "home"
    cores = len(os.sched_getaffinity(0))
    proc = lares("sweep", "--tasks", "Reacher-v5", "--methods", "human", "--seeds", "0,1,2", "--set",
                 f"budget={KILLED_BUDGET}",
                 *TINY, "--cpus-per-trial", str(cores), "--out", str(out), home=home)  # one trial at a time
    first = second = None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        runs = [p for p in (out / "runs").glob("*") if (p / "metrics.jsonl").is_file()]
        done = [p for p in runs if any(e.get("event") == "run_end" and e.get("finished")
                                       for e in read_jsonl(p / "events.jsonl"))]
        going = [p for p in runs if p not in done and steps(p)]
        if done and going:
            first, second = done[0], going[0]
            break
        time.sleep(0.1)
    assert first is not None and second is not None, "the sweep never had one trial done and one evaluated"
    os.killpg(proc.pid, signal.SIGKILL)  # the driver, its local Ray and the trial, at once
    proc.wait()
    kill_session(proc.pid)  # a Ray process that left the group: only this sweep's session
    before_first = (first / "metrics.jsonl").read_bytes(), (first / "events.jsonl").read_bytes()
    kept = steps(second)
    assert kept and kept[-1] < KILLED_BUDGET

    log = finish(lares("sweep", "--resume", str(out), home=home))
    assert "3/3 trials finished" in log
    assert "Failed to fetch metrics" not in log  # Tune's restore warned about the trial that had not started
    # the finished trial was not run again: its files are byte for byte what they were
    assert ((first / "metrics.jsonl").read_bytes(), (first / "events.jsonl").read_bytes()) == before_first
    after = steps(second)
    assert after[-1] == KILLED_BUDGET and after == sorted(set(after))  # no evaluation repeated
    assert set(kept[:-1]) <= set(after)  # evaluations up to the last checkpoint are kept, not run again
    assert any(e.get("event") == "resumed" or (e.get("event") == "run_start" and e.get("env_steps", 0) > 0)
               for e in read_jsonl(second / "events.jsonl"))
