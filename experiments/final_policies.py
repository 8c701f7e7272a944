"""The grid's final success on more episodes: each finished trial's handed-over policy replayed on fresh resets.

The sweep table's "final success" is the run's last evaluation: 5 episodes, so one trial's number moves by 20
points an episode (docs/RESULTS.md, issue 14: window-close-v3-lares-s1's handed-over slot scored 40% there and
80% on 30 fresh episodes at the same env steps). This plays every finished trial's `policies/final.pt` (what
`lares eval --policy final` plays: the policy the run hands over, after its last env step) on ``--episodes``
deterministic episodes from resets no run used (seed ``--seed``), and averages per task and method. A LaRes
run's other slots are not compared: its last reward update (installed at 49,050 to 50,100 steps in the grid)
made two of them copies of the best learner. Nothing is written to the runs.

    python experiments/final_policies.py runs/sample_efficiency --episodes 30
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lares_agent.engine import PolicyArtefact, evaluate_policy, get_task
from lares_agent.runs import FINAL_POLICY, RunLayout, RunLog, recorded_outcome
from lares_agent.runs.sweep_layout import SweepLayout
from lares_agent.search.runner import read_config
from lares_agent.search.sweep_spec import SweepSpec


def trial_success(run: RunLayout, task: str, episodes: int, seed: int) -> float | None:
    """The handed-over policy's success rate; None for a trial that has not finished."""
    if not recorded_outcome(RunLog(run)).finished:
        return None
    policy = PolicyArtefact.load(run.policy(FINAL_POLICY))
    return float(evaluate_policy(get_task(task), policy, episodes, seed, read_config(run).horizon).success_rate)


def rows_of(sweep: Path, episodes: int, seed: int) -> list[tuple[str, str, str, float]]:
    """(task, method, trial, success) of every finished trial, in the grid's order."""
    layout = SweepLayout.open(sweep)
    out: list[tuple[str, str, str, float]] = []
    for trial in SweepSpec.load(layout.spec).trials():
        run = RunLayout(layout.run(trial.id))
        success = trial_success(run, trial.task, episodes, seed) if run.config.is_file() else None
        if success is not None:
            out.append((trial.task, trial.method, trial.id, success))
    return out


def markdown(rows: Sequence[tuple[str, str, str, float]], episodes: int) -> str:
    lines = [f"| task | method | trials | success on {episodes} fresh episodes, mean ± std | each trial |",
             "|---|---|---|---|---|"]
    for task, method in dict.fromkeys((r[0], r[1]) for r in rows):
        values = [r[3] for r in rows if r[0] == task and r[1] == method]
        lines.append(f"| {task} | {method} | {len(values)} | {np.mean(values):.0%} ± {np.std(values):.0%} | "
                     f"{', '.join(f'{v:.0%}' for v in values)} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=2000, help="the resets' seed (the runs used their own, 0-2)")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    print(markdown(rows_of(args.sweep, args.episodes, args.seed), args.episodes), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
