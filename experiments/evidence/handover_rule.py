"""The with-init arm's handed-over curve under the rule the engine follows since the grid ran: before the first
reward update, the learner on the task's own reward is the one handed over, not slot 0's untried LLM reward.

The grid's commit handed over slot 0 until the first ranking; every evaluation also recorded the task-reward
learner's success (``extra``), so the curve under the new rule is read from the same evaluations, with no new
training. This is a recomputation after the fact, and RESULTS says so beside the as-run numbers; the 30-episode
replay of the final policy is the same under both rules (the first update comes long before the end).

    python experiments/evidence/handover_rule.py experiments/evidence/runs --task door-close-v3
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lares_agent.report.sweep_stats import bootstrap_difference, success_auc
from lares_agent.runs import RunLayout, RunLog, recorded_outcome


def curves(run: Path) -> tuple[list[int], list[float], list[float]]:
    """(env steps, handed-over success as recorded, under the new rule) of a run's evaluations."""
    log = RunLog(RunLayout(run))
    first = min((int(e.get("env_steps")) for e in log.events.read() if e.event == "reward_update_started"),
                default=math.inf)
    by_step = {row.env_steps: row for row in log.metrics.read()}  # as report/sweep_table.py: the later row
    steps, recorded, rule = [], [], []
    for step in sorted(by_step):
        row = by_step[step]
        as_run = float(row.success_best_slot) if row.success_best_slot is not None else math.nan
        extra = row.extra.get("success") if row.extra is not None else None
        steps.append(step)
        recorded.append(as_run)
        rule.append(float(extra) if step < first and extra is not None else as_run)
    return steps, recorded, rule


def areas(runs: Sequence[Path]) -> list[tuple[str, float, float]]:
    """(name, area as run, area under the rule) of each finished run (one still training has no final area)."""
    out = []
    for run in runs:
        if not recorded_outcome(RunLog(RunLayout(run))).finished:
            continue
        steps, recorded, rule = curves(run)
        out.append((run.name, success_auc(steps, recorded), success_auc(steps, rule)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("runs", type=Path, help="a grid's runs/ folder")
    parser.add_argument("--task", required=True)
    args = parser.parse_args(argv)
    init = areas(sorted(args.runs.glob(f"{args.task}-lares-init-s*")))
    human = areas(sorted(args.runs.glob(f"{args.task}-human-s*")))
    if not init or not human:
        print(f"no finished lares-init or human trial of {args.task} under {args.runs}")
        return 1
    print("| trial | area as run | area, task-reward learner handed over before the first update |")
    print("|---|---|---|")
    for name, recorded, rule in [*init, *human]:
        print(f"| {name} | {recorded:.3f} | {rule:.3f} |")
    rng = np.random.default_rng(0)
    h = [a for _, a, _ in human]
    for label, values in (("as run", [a for _, a, _ in init]), ("new rule", [a for *_, a in init])):
        diff, (lo, hi) = float(np.mean(values) - np.mean(h)), bootstrap_difference(values, h, rng)
        print(f"\nlares-init minus human, area ({label}): {diff:+.3f} [{lo:+.3f}, {hi:+.3f}] (95% bootstrap)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
