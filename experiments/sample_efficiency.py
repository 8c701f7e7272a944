"""Sample efficiency: LaRes against the learner on the task's own reward and on its success indicator alone, at
the same env-step budget (issue 7, issue 14). A thin wrapper over `lares sweep` with the experiment's grid:

    5 MetaWorld tasks (window-close, window-open, button-press, door-close, drawer-open, all -v3)
    x 3 seeds x methods lares / human / sparse, 50k env steps each

    python experiments/sample_efficiency.py --out runs/sample_efficiency           # start (or --resume it)
    python experiments/sample_efficiency.py --out runs/sample_efficiency --resume
    lares report --sweep runs/sample_efficiency                                      # the table and the plot

With ``--ablations`` the grid is the ablations of issue 14 instead: one task (button-press-v3, the last sitting's)
x the same 3 seeds x each ablation as a method (search/sweep_spec.py), private case stores, 50k steps. Full
LaRes on that task is the main grid's button-press-v3 lares trials (same options, seeds and commit), not run a
second time; the report puts them beside the ablations:

    python experiments/sample_efficiency.py --ablations --out runs/ablations       # (or --resume it)
    lares report --sweep runs/ablations --with-sweep runs/sample_efficiency

``--archive SWEEP DEST`` copies the record of a sweep into the repository (its spec, its report and every trial's
config, metrics, events and candidates: no checkpoints or policies), so what finished is committed:

    python experiments/sample_efficiency.py --archive runs/sample_efficiency experiments/results/sample-efficiency

Extra arguments go to `lares sweep` unchanged (e.g. `--set llm_model=...`, `--ray-address ...`). The earlier
hand-written version of this script (its own process pool, resume and aggregation) is in the git history; its
figures are docs/sample_efficiency.png and docs/ablations.png (docs/RESULTS.md).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from lares_agent.cli.app import app

TASKS = ("window-close-v3", "window-open-v3", "button-press-v3", "door-close-v3", "drawer-open-v3")
SEEDS = (0, 1, 2)
METHODS = ("lares", "human", "sparse")
BUDGET = 50_000
ABLATION_TASK = "button-press-v3"
ABLATION_METHODS = ("no-relabel", "no-thompson", "no-scaling", "no-constraint", "no-reflection", "no-retrieval")


def sweep_args(argv: Sequence[str]) -> list[str]:
    """The `lares sweep` command line of the experiment (`--resume` continues the sweep in `--out`)."""
    args = list(argv)
    ablations = "--ablations" in args
    if ablations:
        args.remove("--ablations")
    if "--resume" in args:
        i = args.index("--resume")
        out = args[args.index("--out") + 1] if "--out" in args else "runs/sample_efficiency"
        rest = [a for j, a in enumerate(args) if j != i and a != "--out" and (j == 0 or args[j - 1] != "--out")]
        return ["sweep", "--resume", out, *rest]
    if "--out" not in args:
        args += ["--out", "runs/ablations" if ablations else "runs/sample_efficiency"]
    tasks, methods = ((ABLATION_TASK,), ABLATION_METHODS) if ablations else (TASKS, METHODS)
    return ["sweep", "--tasks", ",".join(tasks), "--seeds", ",".join(map(str, SEEDS)), "--methods",
            ",".join(methods), "--set", f"budget={BUDGET}", *args]


RECORD_FILES = ("config.json", "metrics.jsonl", "events.jsonl", "candidates.jsonl")


def archive(sweep: Path, dest: Path) -> list[Path]:
    """Copy the sweep's record (sweep.json, report/, each trial's RECORD_FILES) under ``dest``; returns the copies."""
    copied = []
    for src in [sweep / "sweep.json", *sorted((sweep / "report").glob("*")),
                *(run / name for run in sorted((sweep / "runs").glob("*")) for name in RECORD_FILES)]:
        if src.is_file():
            target = dest / src.relative_to(sweep)
            target.parent.mkdir(parents=True, exist_ok=True)
            copied.append(Path(shutil.copy2(src, target)))
    return copied


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--archive"] and len(args) == 3:
        print(f"{len(archive(Path(args[1]), Path(args[2])))} files copied to {args[2]}")
        return 0
    app(sweep_args(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
