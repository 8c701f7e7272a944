"""The screen's table: each finished trial's evaluations of the learner alone on the task's own reward.

    python experiments/raw.py unpack with_init_screen
    python experiments/with_init_screen/table.py experiments/with_init_screen/runs

Per trial: the evaluations it made (`eval` rows of `metrics.jsonl`), the success at the last one and at the best,
and the area (the mean success over the evaluations, the grid's area). A trial without a `run_end` event that says
finished is left out (the sweep is still running or was stopped: `lares sweep --resume` continues it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def row(trial: Path) -> str | None:
    events = [json.loads(line) for line in (trial / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    if not any(e.get("event") == "run_end" and e.get("finished") for e in events):
        return None
    rows = [json.loads(line) for line in (trial / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    success = [float(r["success_max"]) for r in rows if r.get("kind") == "eval"]
    if not success:
        return None
    area = sum(success) / len(success)
    return f"| {trial.name} | {len(success)} | {success[-1]:.0%} | {max(success):.0%} | {area:.3f} |"


def main(runs: Path) -> None:
    print("| trial | evaluations | last | best | area |\n|---|---|---|---|---|")
    for trial in sorted(p for p in runs.iterdir() if (p / "metrics.jsonl").is_file()):
        line = row(trial)
        if line is not None:
            print(line)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
