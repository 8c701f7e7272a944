"""What a whole LaRes trial costs: a trial with the real local model against the same loop without the LLM and
against one learner alone, and where the trial's wall time goes.

Three runs, one after another, each pinned to one core (`taskset -c`, torch on one thread, the local model's
threads on the same core), on the same task, seed and budget:

  * LaRes: `lares run --setting init` (K learners on the LLM's rewards plus the learner on the task's own reward),
    the default local model, the LLM in the background as `lares run` does by default;
  * no LLM: the same command with `--ablations no-llm`: the same loop (updates, their evaluations, relabel,
    rescale, inheritance, hand-overs) whose new rewards are numeric children of the elites instead of LLM
    answers. It is the loop's own cost without the model, the comparison the target "LaRes at most 1.1x the loop
    without LLM calls" names; a loop with no updates at all would leave the updates' own work out of the
    comparison and charge it to the LLM;
  * single: `lares baseline`, one learner on the task's own reward (the same preset's networks and cadences).

Printed: each run's wall seconds (the run's own, from its `run_end` event, and the process's, imports and model
load included) and the ratios between them; then the LaRes and no-LLM runs' wall time split from their records:
the LLM (blocking: the learners waited for it, round 0 included; in the background: it ran while they trained,
on the same core), learning, training episodes, evaluation, hand-over replays, relabel and rescale, warm-up,
checkpoints and policy files, and the rest. `--side-by-side` then runs two LaRes trials at once, one per core
(a sweep's way), and prints each one's wall time over the trial's alone. Run it on an otherwise idle machine.

    python benchmarks/trial_cost.py                          # reach-v3, 3,000 steps, about 10 minutes
    python benchmarks/trial_cost.py --budget 30000 --task hammer-v3 --side-by-side
    python benchmarks/trial_cost.py --run-args "--no-handover-rounds"   # a schedule option's effect
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lares_agent.runs import RunLayout, read_jsonl

ROOT = Path(__file__).resolve().parents[1]

PARTS = (
    ("LLM, learners waiting", "llm_block"),
    ("LLM in the background", "llm_background"),
    ("learning", "learn_s"),
    ("training episodes", "train_sim"),
    ("evaluation", "eval_s"),
    ("hand-over replays", "handover_s"),
    ("relabel and rescale", "relabel_s"),
    ("warm-up", "warmup_s"),
    ("checkpoints, policy files", "records_s"),
    ("the rest (loop, records, round 0 set-up)", "rest"),
)
"""The split's rows: every row but the background LLM's is a part of the run's wall time (they sum to it)."""


@dataclass
class Trial:
    """One finished run: its wall seconds and its `run_end` and LLM records."""

    name: str
    process_s: float
    end: dict[str, Any]
    updates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return float(self.end.get("session_wall_s", self.end.get("wall_s", 0.0)))

    def split(self) -> dict[str, float]:
        """Seconds by part (PARTS); the LLM's from run_end, checked against its reward-update events."""
        e = {k: float(v) for k, v in self.end.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        block = e.get("llm_wait_s", 0.0) + e.get("initial_llm_s", 0.0)
        out = {"llm_block": block, "llm_background": max(e.get("llm_s", 0.0) - e.get("llm_wait_s", 0.0), 0.0),
               "learn_s": e.get("learn_s", 0.0), "train_sim": e.get("sim_s", 0.0) - e.get("eval_s", 0.0)}
        for key in ("eval_s", "handover_s", "relabel_s", "warmup_s", "records_s"):
            out[key] = e.get(key, 0.0)
        out["rest"] = self.wall_s - sum(v for k, v in out.items() if k != "llm_background")
        return out

    def update_llm_s(self) -> tuple[float, float]:
        """The LLM's seconds and the learners' wait as the reward-update and initial-rewards events say."""
        return (sum(float(u.get("llm_s", 0.0)) for u in self.updates),
                sum(float(u.get("waited_s", 0.0)) for u in self.updates))


def command(kind: str, args: argparse.Namespace, seed: int) -> list[str]:
    """The `lares` arguments of one arm."""
    common = ["--task", args.task, "--budget", str(args.budget), "--seed", str(seed), "--no-report"]
    if kind == "single":
        return ["baseline", *common]
    run = ["run", *common, "--setting", "init", "--population", str(args.k), "--reward-period",
           str(args.reward_period or max(args.budget // 2, 1)), *shlex.split(args.run_args)]
    return [*run, "--ablations", "no-llm"] if kind == "no-llm" else run


def start(argv: list[str], core: int, folder: Path) -> subprocess.Popen[bytes]:
    """One `lares` command in a fresh process on one core, its run folder under ``folder``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    pin = ["taskset", "-c", str(core)] if shutil.which("taskset") else []
    log = (folder / "out.log").open("wb")
    return subprocess.Popen([*pin, sys.executable, "-c", "from lares_agent.cli.app import main; main()", *argv,
                             "--run-dir", str(folder)], env=env, stdout=log, stderr=subprocess.STDOUT)


def finished(name: str, proc: subprocess.Popen[bytes], began: float, folder: Path) -> Trial:
    """Wait for the run and read its records."""
    code = proc.wait()
    process_s = time.monotonic() - began
    runs = [p for p in folder.iterdir() if p.is_dir()]
    if code != 0 or len(runs) != 1:
        tail = (folder / "out.log").read_text(errors="replace")[-2000:]
        raise SystemExit(f"{name}: exit {code}, run folders {runs}\n{tail}")
    events = read_jsonl(RunLayout(runs[0]).events)
    ends = [e for e in events if e.get("event") == "run_end"]
    if not ends:
        raise SystemExit(f"{name}: no run_end event in {runs[0]}")
    updates = [e for e in events if e.get("event") in ("reward_update", "initial_rewards")]
    return Trial(name, process_s, ends[-1], updates)


def run_arms(arms: list[tuple[str, list[str], int]], out: Path) -> list[Trial]:
    """Run the arms at once (each on its core), wait for all."""
    procs = []
    for name, argv, core in arms:
        folder = out / name.replace(" ", "-")
        folder.mkdir(parents=True)
        procs.append((name, start(argv, core, folder), time.monotonic(), folder))
    return [finished(*p) for p in procs]


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"


def report(trials: dict[str, Trial]) -> None:
    lares, plain, single = trials["LaRes"], trials["no LLM"], trials["single"]
    print(f"\n{'run':<10} {'run wall s':>10} {'process s':>10} {'rounds':>7} {'LLM calls s':>11}")
    for t in (lares, plain, single):
        print(f"{t.name:<10} {t.wall_s:>10.0f} {t.process_s:>10.0f} {len(t.updates):>7} {t.update_llm_s()[0]:>11.0f}")
    print(f"\nLaRes / no LLM {ratio(lares.wall_s, plain.wall_s)}, LaRes / single {ratio(lares.wall_s, single.wall_s)}, "
          f"no LLM / single {ratio(plain.wall_s, single.wall_s)} (run wall); by process: "
          f"{ratio(lares.process_s, plain.process_s)}, {ratio(lares.process_s, single.process_s)}, "
          f"{ratio(plain.process_s, single.process_s)}")
    print(f"\n{'share of the run wall time':<42} {'LaRes':>7} {'no LLM':>7}")
    splits = [(t, t.split()) for t in (lares, plain)]
    for label, key in PARTS:
        cells = [f"{100 * s[key] / t.wall_s:>6.1f}%" if t.wall_s > 0 else "   n/a" for t, s in splits]
        print(f"{label:<42} {cells[0]:>7} {cells[1]:>7}")
    llm_s, waited_s = lares.update_llm_s()
    print(f"\nLaRes LLM from its update events: {llm_s:.0f} s of calls, learners waited {waited_s:.0f} s "
          f"(run_end: {float(lares.end.get('llm_s', 0.0)):.0f} s, {float(lares.end.get('llm_wait_s', 0.0)):.0f} s, "
          f"round 0 blocking {float(lares.end.get('initial_llm_s', 0.0)):.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="reach-v3")
    parser.add_argument("--budget", type=int, default=3_000, help="env steps of every run")
    parser.add_argument("--reward-period", type=int, default=0, help="0: half the budget (round 0 and one update)")
    parser.add_argument("--k", type=int, default=3, help="reward slots (the init setting adds the human learner)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--core", type=int, default=0, help="the core the runs alone are pinned to")
    parser.add_argument("--side-by-side", action="store_true", help="then two LaRes trials at once, one per core")
    parser.add_argument("--run-args", default="", help="more `lares run` options for the LaRes and no-LLM runs, "
                        "e.g. '--no-handover-rounds --no-eval-at-updates'")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run folders here (default: deleted)")
    args = parser.parse_args()
    out = args.keep or Path(tempfile.mkdtemp(prefix="trial-cost-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"{args.task}, {args.budget:,} env steps, K={args.k} + the human learner, seed {args.seed}, "
          f"core {args.core} {args.run_args}; load before: {os.getloadavg()[0]:.2f}")
    try:
        trials: dict[str, Trial] = {}
        for name, kind in (("LaRes", "lares"), ("no LLM", "no-llm"), ("single", "single")):
            (trials[name],) = run_arms([(name, command(kind, args, args.seed), args.core)], out)
            print(f"  {name}: {trials[name].wall_s:.0f} s (load {os.getloadavg()[0]:.2f})", flush=True)
        report(trials)
        if args.side_by_side:
            cores = sorted(os.sched_getaffinity(0))[:2]
            if len(cores) < 2:
                raise SystemExit("--side-by-side needs two cores")
            pair = run_arms([(f"LaRes side {i}", command("lares", args, args.seed), c) for i, c in enumerate(cores)],
                            out)
            alone = trials["LaRes"].wall_s
            print(f"\nside by side (cores {cores}): " + ", ".join(
                f"{t.wall_s:.0f} s = {ratio(t.wall_s, alone)} alone" for t in pair))
        print(f"load after: {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
