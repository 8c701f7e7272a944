"""What `lares sweep` costs over running the same runs by hand (its targets: overhead < 10%, both cores busy).

Runs N human-baseline runs by hand (`lares baseline`, one process each, as many at once as there are cores, the
way one would start them by hand), then the same N as a sweep on a local Ray (one trial per core), and prints
both wall times and their ratio, how much the sweep's trials overlapped in time (from their run_start / run_end
events), and the sweep's fixed cost (Ray's start, its workers, imports) apart from its per-trial slowdown. Run it
on an otherwise idle machine: a busy one slows whichever half runs beside the other work.

    python benchmarks/sweep_overhead.py                 # 2 runs of Reacher-v5, about a minute each
    python benchmarks/sweep_overhead.py --budget 6000 --seeds 0,1,2,3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lares_agent.runs import read_jsonl

ROOT = Path(__file__).resolve().parents[1]


def lares(*args: str) -> subprocess.Popen[bytes]:
    """Start one `lares` command in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", "from lares_agent.cli.app import main; main()", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def timed(batches: list[list[tuple[str, ...]]]) -> tuple[float, list[float]]:
    """Run each batch of commands at once, the batches one after the other: (total wall s, each command's s)."""
    start = time.monotonic()
    each = []
    for batch in batches:
        began = time.monotonic()
        procs = [lares(*cmd) for cmd in batch]
        for proc in procs:
            if proc.wait() != 0:
                raise SystemExit(f"a run failed (exit {proc.returncode})")
            each.append(time.monotonic() - began)
    return time.monotonic() - start, each


def span(run: Path) -> tuple[float, float]:
    """(first run_start, last run_end) Unix times of a run."""
    events = read_jsonl(run / "events.jsonl")
    starts = [e["time"] for e in events if e.get("event") == "run_start" and e.get("time")]
    ends = [e["time"] for e in events if e.get("event") == "run_end" and e.get("time")]
    return min(starts), max(ends)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="Reacher-v5")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--budget", type=int, default=4000)
    args = p.parse_args()
    seeds = [s for s in args.seeds.split(",") if s]
    cores = len(os.sched_getaffinity(0))
    work = Path(tempfile.mkdtemp(prefix="sweep-overhead-"))
    common = ["--set", f"budget={args.budget}"]
    runs: list[tuple[str, ...]] = [
        ("baseline", "--task", args.task, "--budget", str(args.budget), "--seed", s, "--no-report", "--run-dir",
         str(work / "hand")) for s in seeds]
    hand, each = timed([runs[i:i + cores] for i in range(0, len(runs), cores)])
    swept, _ = timed([[("sweep", "--tasks", args.task, "--methods", "human", "--seeds", ",".join(seeds), *common,
                        "--out", str(work / "sweep"))]])
    spans = [span(r) for r in sorted((work / "sweep" / "runs").iterdir())]
    overlap = max(0.0, min(e for _, e in spans) - max(s for s, _ in spans))
    shortest = min(e - s for s, e in spans)
    longest = max(e - s for s, e in spans)
    print(f"{len(seeds)} runs of {args.task}, {args.budget} env steps each, {cores} cores")
    print(f"by hand ({min(cores, len(runs))} at a time): {hand:.1f} s (each {', '.join(f'{t:.1f}' for t in each)} s)")
    print(f"sweep: {swept:.1f} s    ratio sweep / by hand: {swept / hand:.3f}")
    print(f"trial overlap: {overlap:.1f} s of the shortest trial's {shortest:.1f} s ({overlap / shortest:.0%})")
    print(f"fixed cost (sweep wall minus its longest trial: Ray start, workers, imports): {swept - longest:.1f} s; "
          f"longest trial / longest by-hand run: {longest / max(each):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
