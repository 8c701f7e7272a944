"""Sample efficiency: LaRes against the learner on the task's own reward and on its success indicator alone, at
the same env-step budget. A thin wrapper over `lares sweep` with the experiment's grid:

    5 MetaWorld tasks (window-close, window-open, button-press, door-close, drawer-open, all -v3)
    x 3 seeds x methods lares / human / sparse, 50k env steps each, LaRes from scratch (`setting=scratch`, fixed
    here and in sweep.json: the default, init where the task has a human reward, came after this grid)

    python experiments/sample_efficiency/run.py --out runs/sample_efficiency       # start (or --resume it)
    python experiments/sample_efficiency/run.py --out runs/sample_efficiency --resume
    lares report --sweep runs/sample_efficiency                                  # the table and the plot

The sweep folder gets this folder's ``targets.json`` before the sweep starts, so `lares report --sweep` counts
the experiment's targets and explains where LaRes missed them.

With ``--ablations`` the grid is the ablations instead (experiments/ablations/): one task (button-press-v3) x the
same 3 seeds x each ablation as a method (search/sweep_spec.py), private case stores, 50k steps. Full LaRes on
that task is the main grid's button-press-v3 lares trials (same options, seeds and commit), not run a second
time; the report puts them beside the ablations:

    python experiments/sample_efficiency/run.py --ablations --out runs/ablations   # (or --resume it)
    lares report --sweep runs/ablations --with-sweep runs/sample_efficiency

``--archive SWEEP DEST`` copies the record of a sweep into the repository (its spec and targets, its report into
``DEST/results/`` and every trial's config, metrics, events and candidates into ``DEST/runs/``: no checkpoints or
policies), so what finished is committed:

    python experiments/sample_efficiency/run.py --archive runs/sample_efficiency experiments/sample_efficiency

``--restore ARCHIVE SWEEP`` is the way back, for a machine that kept only the repository: it makes ``SWEEP`` a
sweep folder again from the archive's spec, its targets and its finished trials' records (a trial without a
finished `run_end` is left out: its checkpoints were never archived, so it must start over), and ``--resume``
then runs only the trials that are missing:

    python experiments/sample_efficiency/run.py --restore experiments/sample_efficiency runs/sample_efficiency
    python experiments/sample_efficiency/run.py --out runs/sample_efficiency --resume

Extra arguments go to `lares sweep` unchanged (e.g. `--set llm_model=...`, `--ray-address ...`). The earlier
hand-written version of this script (its own process pool, resume and aggregation) is in the git history; its
figures are in results/10k-steps/ (docs/results-archive.md).
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from lares_agent.cli.app import app
from lares_agent.runs.files import RunLog
from lares_agent.runs.health import recorded_outcome
from lares_agent.runs.sweep_layout import SWEEP_TARGETS_NAME, SweepLayout

STUDY = Path(__file__).resolve().parent

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
            ",".join(methods), "--set", f"budget={BUDGET}", "--set", "setting=scratch", *args]


def give_targets(command: Sequence[str], ablations: bool) -> None:
    """Put the study's targets.json into the sweep folder of the `lares sweep` ``command`` before it runs (a
    resumed sweep keeps the targets it has)."""
    resume = "--resume" in command
    out = SweepLayout(Path(command[command.index("--resume" if resume else "--out") + 1]))
    if out.targets.exists() or (resume and not out.is_sweep()):
        return
    out.root.mkdir(parents=True, exist_ok=True)
    shutil.copy2((STUDY.parent / "ablations" if ablations else STUDY) / SWEEP_TARGETS_NAME, out.targets)


RECORD_FILES = ("config.json", "metrics.jsonl", "events.jsonl", "candidates.jsonl")


def _copy(files: Sequence[Path], src: Path, dest: Path) -> list[Path]:
    """Copy each existing file of ``files`` to the same place under ``dest`` as it has under ``src``."""
    copied = []
    for path in files:
        if path.is_file():
            target = dest / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            copied.append(Path(shutil.copy2(path, target)))
    return copied


def _records(runs: Sequence[Path]) -> list[Path]:
    return [run / name for run in runs for name in RECORD_FILES]


def without_machine_paths(text: str, roots: Sequence[str]) -> str:
    """``text`` with every path under one of ``roots`` cut to its last part (a model file's name, a run folder's):
    an archive is committed, and where its files lay on the machine that ran it is no part of the record."""
    pattern = "|".join(re.escape(r.rstrip("/")) for r in sorted(roots, key=len, reverse=True))
    return re.sub(rf"(?:{pattern})(?:/[^\s\"'/]+)+", lambda m: m.group(0).rsplit("/", 1)[-1], text)


def _scrub(paths: Sequence[Path], roots: Sequence[str]) -> None:
    for path in paths:
        text = path.read_text(encoding="utf-8")
        clean = without_machine_paths(text, roots)
        if clean != text:
            path.write_text(clean, encoding="utf-8")


def archive(sweep: Path, dest: Path) -> list[Path]:
    """Copy the sweep's record under ``dest``: sweep.json, targets.json, report/ as results/ and each trial's
    RECORD_FILES under runs/, with the paths of this machine cut to their last part; returns the copies."""
    layout = SweepLayout(sweep)
    records = _copy([layout.spec, layout.targets, *_records(sorted(layout.runs.glob("*")))], sweep, dest)
    _scrub(records, [str(Path.home()), str(sweep.resolve()), str(STUDY.parents[1])])
    return [*records, *_copy(sorted(layout.report.glob("*")), layout.report, dest / "results")]


def restore(archived: Path, sweep: Path) -> list[str]:
    """Make ``sweep`` a sweep folder from an archive (`archive`'s output): its spec, its targets and the record
    files of every trial that finished; returns the restored trial ids. A folder that is already a sweep is not
    touched."""
    target = SweepLayout(sweep)
    if target.is_sweep():
        raise SystemExit(f"{sweep} holds a sweep already; restore into a new folder")
    source = SweepLayout.open(archived)
    done = [run for run in sorted(source.runs.glob("*"))
            if (run / "config.json").is_file() and recorded_outcome(RunLog(run)).finished]
    _copy([*_records(done), source.targets], source.root, target.root)
    target.runs.mkdir(parents=True, exist_ok=True)
    _copy([source.spec], source.root, target.root)  # last: the folder is a sweep once its trials are in
    return [run.name for run in done]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--archive"] and len(args) == 3:
        print(f"{len(archive(Path(args[1]), Path(args[2])))} files copied to {args[2]}")
        return 0
    if args[:1] == ["--restore"] and len(args) == 3:
        print(f"{len(restore(Path(args[1]), Path(args[2])))} finished trials restored into {args[2]}")
        return 0
    command = sweep_args(args)
    give_targets(command, "--ablations" in args)
    app(command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
