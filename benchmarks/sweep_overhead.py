"""What `lares sweep` costs over running the same runs by hand (issue 14: overhead < 10%, both cores busy).

Runs N human-baseline runs (`lares baseline`, one process each) one after the other, then the same N as a
sweep on a local Ray (one trial per core), and prints: each by-hand run's wall time, the sweep's wall time, the
ideal parallel time (the by-hand total divided by min(N, cores)), their ratio, and how much the sweep's trials
overlapped in time (from their run_start / run_end events).

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


def lares(*args: str) -> float:
    """Run one `lares` command in a fresh process; its wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "from lares_agent.cli.app import main; main()", *args], env=env,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


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
    by_hand = [lares("baseline", "--task", args.task, "--budget", str(args.budget), "--seed", s, "--no-report",
                     "--run-dir", str(work / "hand")) for s in seeds]
    swept = lares("sweep", "--tasks", args.task, "--methods", "human", "--seeds", ",".join(seeds), *common,
                  "--out", str(work / "sweep"))
    ideal = sum(by_hand) / min(len(seeds), cores)
    spans = [span(r) for r in sorted((work / "sweep" / "runs").iterdir())]
    overlap = max(0.0, min(e for _, e in spans) - max(s for s, _ in spans))
    shortest = min(e - s for s, e in spans)
    print(f"{len(seeds)} runs of {args.task}, {args.budget} env steps each, {cores} cores")
    each = ", ".join(f"{t:.1f} s" for t in by_hand)
    print(f"by hand (one after the other): {each}; total {sum(by_hand):.1f} s")
    print(f"ideal parallel: {ideal:.1f} s    sweep: {swept:.1f} s    ratio sweep / ideal: {swept / ideal:.3f}")
    print(f"trial overlap: {overlap:.1f} s of the shortest trial's {shortest:.1f} s ({overlap / shortest:.0%})")
    longest = max(e - s for s, e in spans)
    print(f"fixed cost (sweep wall minus its longest trial: Ray start, workers, imports): {swept - longest:.1f} s; "
          f"longest trial / longest by-hand run: {longest / max(by_hand):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
