"""A study's raw runs, packed: every `runs/` folder under `experiments/<study>/` in one `runs.tar.xz` beside them.

    python experiments/raw.py unpack evidence        # experiments/evidence/runs/, retrain/*/runs/, ... (ignored by git)
    python experiments/raw.py unpack evidence DEST   # the same folders under DEST instead
    python experiments/raw.py pack evidence          # after a study adds runs: rewrite its archive
    python experiments/raw.py add init_grid SWEEP    # SWEEP's finished trials not in the study yet: copied, packed
    python experiments/raw.py list                   # the studies with an archive

The scripts of a study (`updates.py`, `handover_rule.py`, `lares report --sweep ...`) read the unpacked folders,
so unpack first. An archive is deterministic (names sorted, times and owners zeroed), so packing the same runs
again gives the same bytes and git stores no change. The archives of superseded studies (`IN_HISTORY`) are kept in
the repository's history rather than its tree; `unpack` reads them from there (`git show COMMIT:PATH`), which needs
a clone with that commit (not a shallow one).

A study too long for one session runs as several sweeps of a few cells each, and a machine does not keep its files
for the next session: `add` copies each finished trial's records (`RECORDS`, not its policies or checkpoints) into
the study's `runs/` as soon as it ends, so that what finished is committed; the replays come from
`final_policies.py`, run on the same sweep before its policies are gone.
"""

from __future__ import annotations

import argparse
import io
import lzma
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARCHIVE = "runs.tar.xz"
RECORDS = ("config.json", "events.jsonl", "metrics.jsonl", "candidates.jsonl")
# Studies whose archive left the tree: superseded ones (with their section of docs/results-archive.md) and finished
# ones whose tables are committed beside their README, to keep experiments/ a small share of the tree: the commit
# that holds it.
IN_HISTORY = {
    "sample_efficiency": "e94e285e828a6e1fa9bc14f041268917e25f15b5",
    "ablations": "e94e285e828a6e1fa9bc14f041268917e25f15b5",
    "with_init": "9760d17ee39384335ce6daae950978c9cdccc9aa",
    "scratch_bounded": "fde77f89d4daefa1c7376b286a7aaa072a0ab3c3",
    "with_init_screen": "290b42f0513abf1628ee759a75e5fdebd11438c9",
    "evidence": "a7f1f2e1305a80686e7ef02f538a2bcef727c446",
}


def archive_of(study: str) -> Path:
    return HERE / study / ARCHIVE


def raw_files(folder: Path) -> list[Path]:
    """Every file inside a `runs/` folder below `folder`, relative to it, sorted."""
    found = {p.relative_to(folder) for runs in folder.rglob("runs") if runs.is_dir() for p in runs.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    return sorted(found)


def pack(folder: Path, archive: Path) -> int:
    """Write every raw-run file below `folder` into `archive` (xz, deterministic); the number of files."""
    files = raw_files(folder)
    if not files:
        raise SystemExit(f"{folder}: no runs/ folder to pack")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in files:
            data = (folder / rel).read_bytes()
            info = tarfile.TarInfo(rel.as_posix())
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    archive.write_bytes(lzma.compress(buffer.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    return len(files)


def archive_bytes(study: str) -> bytes:
    """A study's archive: the file in its folder, else the copy in the history (`IN_HISTORY`)."""
    path = archive_of(study)
    if path.is_file():
        return path.read_bytes()
    if study not in IN_HISTORY:
        raise SystemExit(f"no {path}; the studies with raw runs: `python experiments/raw.py list`")
    spec = f"{IN_HISTORY[study]}:experiments/{study}/{ARCHIVE}"
    shown = subprocess.run(["git", "show", spec], cwd=HERE, capture_output=True, check=False)
    if shown.returncode != 0:
        raise SystemExit(f"{study}'s raw runs are in the history at {spec}, which this clone lacks "
                         f"(`git fetch --unshallow`): {shown.stderr.decode(errors='replace').strip()}")
    return shown.stdout


def unpack(archive: Path | bytes, dest: Path) -> list[Path]:
    """Extract `archive` (a file, or its bytes) under `dest` (regular files only, no path outside it); the files
    written."""
    written = []
    data = archive.read_bytes() if isinstance(archive, Path) else archive
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            target = (dest / member.name).resolve()
            if not target.is_relative_to(dest.resolve()):
                raise SystemExit(f"{archive}: {member.name} points outside {dest}")
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())
            written.append(target)
    return written


def add(folder: Path, sweep: Path) -> list[str]:
    """Copy the records of every finished trial of `sweep` that the study in `folder` lacks into its `runs/` (its
    archive unpacked first, so that a pack keeps the earlier trials); the trials added."""
    if not (sweep / "runs").is_dir():
        raise SystemExit(f"{sweep}: no runs/ folder; is it a sweep (lares sweep --out)?")
    from lares_agent.runs import RunLayout, RunLog, recorded_outcome  # here: unpack and pack need no install

    if (folder / ARCHIVE).is_file() and not (folder / "runs").is_dir():
        unpack(folder / ARCHIVE, folder)
    added = []
    for run in sorted(p for p in (sweep / "runs").iterdir() if p.is_dir()):
        target = folder / "runs" / run.name
        if target.exists() or not recorded_outcome(RunLog(RunLayout(run))).finished:
            continue
        target.mkdir(parents=True)
        for name in RECORDS:
            if (run / name).is_file():
                shutil.copyfile(run / name, target / name)
        added.append(run.name)
    return added


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("unpack", help="extract a study's raw runs (into its folder, or DEST)")
    up.add_argument("study")
    up.add_argument("dest", nargs="?", type=Path)
    down = sub.add_parser("pack", help="rewrite a study's archive from its runs/ folders")
    down.add_argument("study")
    more = sub.add_parser("add", help="copy a sweep's finished trials into a study and rewrite its archive")
    more.add_argument("study")
    more.add_argument("sweep", type=Path)
    sub.add_parser("list", help="the studies with an archive")
    args = parser.parse_args(argv)
    if args.command == "list":
        for path in sorted(HERE.glob(f"*/{ARCHIVE}")):
            print(path.parent.name)
        for study, commit in IN_HISTORY.items():
            print(f"{study} (in the history, {commit[:7]})")
        return 0
    archive = archive_of(args.study)
    if args.command == "add":
        added = add(HERE / args.study, args.sweep)
        print("added: " + (", ".join(added) or "none"))
        if added:
            print(f"{archive}: {pack(HERE / args.study, archive)} files")
        return 0
    if args.command == "pack":
        print(f"{archive}: {pack(HERE / args.study, archive)} files")
        return 0
    dest = args.dest or HERE / args.study
    print(f"{len(unpack(archive_bytes(args.study), dest))} files under {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
