"""The screen's table: each finished trial's evaluations of the learner alone on the task's own reward.

    python experiments/raw.py unpack with_init_screen
    python experiments/with_init_screen/table.py experiments/with_init_screen/runs \
        --replay experiments/with_init_screen/results/final_policies.csv

Per trial: the evaluations it made (`eval` rows of `metrics.jsonl`), the success at the last one and at the best,
the area (the mean success over the evaluations, the grid's area) and, with `--replay`, the handed-over policy's
success on fresh episodes (`../sample_efficiency/final_policies.py --csv`). A trial without a `run_end` event that
says finished is left out (the sweep is still running or was stopped: `lares sweep --resume` continues it).
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def row(trial: Path, replayed: dict[str, str]) -> str | None:
    events = [json.loads(line) for line in (trial / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    if not any(e.get("event") == "run_end" and e.get("finished") for e in events):
        return None
    rows = [json.loads(line) for line in (trial / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    success = [float(r["success_max"]) for r in rows if r.get("kind") == "eval"]
    if not success:
        return None
    area = sum(success) / len(success)
    fresh = f"{float(replayed[trial.name]):.0%}" if trial.name in replayed else "not replayed"
    return f"| {trial.name} | {len(success)} | {success[-1]:.0%} | {max(success):.0%} | {area:.3f} | {fresh} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path)
    parser.add_argument("--replay", type=Path, help="final_policies.py's CSV: success on fresh episodes per trial")
    args = parser.parse_args()
    replayed: dict[str, str] = {}
    if args.replay is not None:
        with args.replay.open(encoding="utf-8") as f:
            replayed = {r["trial"]: r["success"] for r in csv.DictReader(f)}
    print("| trial | evaluations | last | best | area | handed over, 30 fresh episodes |\n|---|---|---|---|---|---|")
    for trial in sorted(p for p in args.runs.iterdir() if (p / "metrics.jsonl").is_file()):
        line = row(trial, replayed)
        if line is not None:
            print(line)


if __name__ == "__main__":
    main()
