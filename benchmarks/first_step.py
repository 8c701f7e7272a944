"""How soon a default `lares run` starts learning: seconds from the launch to each first event of its records.

Launches `lares run` (every default, `--no-report`) pinned to one core and watches its run folder: `config.json`
written, `run_start` (options checked, graph and LLM client built), `reward_update_started` at step 0 (with init,
round 0 set off in the background: the learners' first env steps follow at once), `warmup` (the warm-up episodes
stored and labelled), `initial_rewards` (round 0's rewards installed while the learners trained). The run is killed
after the first of them that `--until` names, or after `--limit` seconds. `--src` runs another checkout (e.g. a
worktree of an older commit) beside this one's, so two commits can be compared side by side, one per core.

    python benchmarks/first_step.py                                    # this checkout, core 0
    python benchmarks/first_step.py --src ../old-worktree --core 1     # another commit, beside it
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ("run_start", "reward_update_started", "warmup", "initial_rewards")


def first_events(src: Path, core: int, until: str, limit_s: float) -> dict[str, float]:
    """Seconds from the launch to `config.json` and to each first event of `EVENTS` seen before `until`."""
    with tempfile.TemporaryDirectory(prefix="first-step-") as tmp:
        out = Path(tmp) / "runs"
        env = {**os.environ, "PYTHONPATH": str(src), "LARES_HOME": str(Path(tmp) / "home"), "OMP_NUM_THREADS": "1"}
        launched, wall = time.monotonic(), time.time()
        proc = subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-P", "-c",
                                 "from lares_agent.cli.app import main; main()", "run", "--run-dir", str(out),
                                 "--no-report"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        seen: dict[str, float] = {}
        try:
            while proc.poll() is None and time.monotonic() - launched < limit_s and until not in seen:
                if "config.json" not in seen and any(out.glob("*/config.json")):
                    seen["config.json"] = time.monotonic() - launched
                for path in out.glob("*/events.jsonl"):
                    for line in path.read_text(encoding="utf-8").splitlines():
                        try:
                            event = json.loads(line)
                        except ValueError:
                            continue  # a line being written
                        kind = event.get("event")
                        if kind in EVENTS and kind not in seen:  # the search's events carry a Unix time
                            seen[kind] = event["time"] - wall if "time" in event else time.monotonic() - launched
                time.sleep(0.1)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=ROOT, help="the checkout to run (default: this one)")
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--until", default="warmup", choices=EVENTS)
    parser.add_argument("--limit", type=float, default=400.0, help="seconds before the run is killed")
    args = parser.parse_args()
    seen = first_events(args.src.resolve(), args.core, args.until, args.limit)
    for name in ("config.json", *EVENTS):
        value = seen.get(name)
        print(f"{name:22s} {f'{value:.1f} s' if value is not None else f'not within {args.limit:.0f} s'}")


if __name__ == "__main__":
    main()
