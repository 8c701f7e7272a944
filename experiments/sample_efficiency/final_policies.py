"""The grid's final success on more episodes: each finished trial's handed-over policy replayed on fresh resets.

The sweep table's "final success" is the run's last evaluation: 5 episodes, so one trial's number moves by 20
points an episode (docs/results-archive.md, "Sample efficiency on five MetaWorld tasks (50k steps)", has a trial at 40%
there and 80% on 30 fresh episodes at the same env steps). This plays every finished trial's `policies/final.pt`
(what `lares eval --policy final` plays: the policy the run hands over, after its last env step) on
``--episodes`` deterministic episodes from resets no run used (seed ``--seed``), and averages per task and method.
A LaRes run's other slots are not compared: its last reward update (installed at 49,050 to 50,100 steps in the
grid) made two of them copies of the best learner. Nothing is written to the runs.

    python experiments/sample_efficiency/final_policies.py runs/sample_efficiency --episodes 30 \
        --csv experiments/sample_efficiency/results/final_policies.csv

With ``--csv FILE`` each trial's number is kept in FILE (trial, episodes, seed, success) and a trial already there
at the same episodes and seed is not replayed: a sweep restored from its archive (`run.py
--restore`) has no policy files, so its earlier trials' numbers come from the committed FILE and only the new
trials are played.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lares_agent.engine import PolicyArtefact, evaluate_policy, get_task
from lares_agent.runs import FINAL_POLICY, RunLayout, RunLog, atomic_write_text, recorded_outcome
from lares_agent.runs.sweep_layout import SweepLayout
from lares_agent.search.runner import read_config
from lares_agent.search.sweep_spec import SweepSpec


def trial_success(run: RunLayout, task: str, episodes: int, seed: int) -> float | None:
    """The handed-over policy's success rate; None for a trial that has not finished."""
    if not recorded_outcome(RunLog(run)).finished:
        return None
    policy = PolicyArtefact.load(run.policy(FINAL_POLICY))
    return float(evaluate_policy(get_task(task), policy, episodes, seed, read_config(run).horizon).success_rate)


FIELDS = ("trial", "episodes", "seed", "success")


def read_kept(path: Path | None) -> list[dict[str, str]]:
    """Every line of the per-trial file (none when there is no file)."""
    if path is None or not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _same(row: dict[str, str], episodes: int, seed: int) -> bool:
    return (int(row["episodes"]), int(row["seed"])) == (episodes, seed)


def write_kept(path: Path, lines: Sequence[dict[str, str]], rows: Sequence[tuple[str, str, str, float]],
               episodes: int, seed: int) -> None:
    """``rows`` as their trials' lines for (episodes, seed); every other line is kept as it was, those of trials
    this sweep does not hold too (a grid run as several sweeps keeps one file). Written whole or not at all."""
    replayed = {trial for _task, _method, trial, _success in rows}
    sink = io.StringIO()
    out = csv.writer(sink)
    out.writerow(FIELDS)
    out.writerows([line[k] for k in FIELDS] for line in lines
                  if not (_same(line, episodes, seed) and line["trial"] in replayed))
    out.writerows([trial, episodes, seed, f"{success:.6g}"] for _task, _method, trial, success in rows)
    atomic_write_text(path, sink.getvalue())


def rows_of(sweep: Path, episodes: int, seed: int,
            kept: dict[str, float] | None = None) -> list[tuple[str, str, str, float]]:
    """(task, method, trial, success) of every finished trial, in the grid's order; a trial in ``kept`` is not
    replayed, and a finished one without its policy file (restored from an archive) is left out with a warning."""
    layout = SweepLayout.open(sweep)
    kept = kept or {}
    out: list[tuple[str, str, str, float]] = []
    for trial in SweepSpec.load(layout.spec).trials():
        run = RunLayout(layout.run(trial.id))
        success: float | None = None
        if trial.id in kept:
            success = kept[trial.id]
        elif run.policy(FINAL_POLICY).is_file():
            success = trial_success(run, trial.task, episodes, seed)
        elif run.config.is_file() and recorded_outcome(RunLog(run)).finished:
            print(f"warning: {trial.id} finished but its policy is not here; left out", file=sys.stderr)
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
    parser.add_argument("--csv", type=Path, help="per-trial numbers: read (not replayed again) and rewritten")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    lines = read_kept(args.csv)
    kept = {line["trial"]: float(line["success"]) for line in lines if _same(line, args.episodes, args.seed)}
    rows = rows_of(args.sweep, args.episodes, args.seed, kept)
    if args.csv is not None:
        write_kept(args.csv, lines, rows, args.episodes, args.seed)
    print(markdown(rows, args.episodes), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
