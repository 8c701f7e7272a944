"""How the learner on the task's own reward fares inside the loop against the same learner alone, seed by seed.

The loop arms keep one learner on the task's own reward (`lares-init` and the controls alike); it learns from the
shared buffer, but acts only in the episodes Thompson sampling gives it. Where it learns less than the learner alone
(`human`), every loop arm starts behind, whatever the rewards beside it. Offline, from a grid's records: per trial,
that learner's mean success over the periodic evaluations (5 episodes each), over those from 25k steps on, and its
share of the acting episodes. A loop's periodic evaluation lists the kept learner as `extra`, not among the slots.

    python experiments/raw.py unpack init_grid
    python experiments/init_grid/kept_learner.py experiments/init_grid/runs
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path

from lares_agent.runs import read_jsonl
from lares_agent.runs.selected import HUMAN_REWARD_ID

LATE = 25_000  # env steps: the second half of a 50k trial


def own_reward_success(metrics: Path) -> tuple[list[tuple[int, float]], float | None]:
    """The (env steps, success) of the learner on the task's own reward at each periodic evaluation, and its share
    of the episodes acted (None for the learner alone)."""
    curve: list[tuple[int, float]] = []
    acted: list[int] = []  # episodes each learner acted, summed over the rows (each row counts since the last)
    for row in read_jsonl(metrics):
        if row.get("kind") != "eval":
            continue
        own = [s for s in row.get("slots", ()) if s.get("reward_id") == HUMAN_REWARD_ID]
        extra = row.get("extra")
        if own:
            curve.append((int(row["env_steps"]), float(own[0]["success"])))
        elif isinstance(extra, dict):
            curve.append((int(row["env_steps"]), float(extra["success"])))
        if counts := row.get("acted"):
            acted = [a + b for a, b in zip(acted or [0] * len(counts), counts, strict=True)]
    if len(acted) < 2:
        return curve, None
    return curve, acted[-1] / sum(acted)  # the kept learner is the last member


def main(argv: Sequence[str] | None = None) -> list[str]:
    """Print one markdown row per trial; returns the rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="a grid's runs folder")
    args = parser.parse_args(argv)
    rows = [f"| trial | evaluations | success, mean | from {LATE // 1000}k | acted |", "|---|---:|---:|---:|---:|"]
    for run in sorted(p for p in args.runs.iterdir() if (p / "metrics.jsonl").is_file()):
        curve, share = own_reward_success(run / "metrics.jsonl")
        if not curve:
            continue
        late = [s for t, s in curve if t >= LATE]
        rows.append(f"| {run.name} | {len(curve)} | {statistics.mean(s for _, s in curve):.3f} | "
                    f"{statistics.mean(late) if late else float('nan'):.3f} | "
                    f"{'alone' if share is None else f'{share:.0%}'} |")
    print("\n".join(rows))
    return rows


if __name__ == "__main__":
    main()
