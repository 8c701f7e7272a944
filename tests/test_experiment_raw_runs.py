"""experiments/raw.py: a study's raw runs packed in one archive come back byte for byte, and a RESULTS table
regenerates from them (the with-init sweep's `lares report --sweep` table)."""

from __future__ import annotations

import io
import lzma
import shutil
import tarfile
from pathlib import Path

import pytest
from helpers import load_script, unpacked_study

from lares_agent.report.sweep_table import write_sweep_report

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def test_unpack_then_pack_gives_the_same_archive(tmp_path: Path) -> None:
    raw = load_script(EXPERIMENTS / "raw.py", "experiments_raw")
    unpacked = unpacked_study("learners", tmp_path / "learners")
    assert raw.raw_files(unpacked) and all(p.parts[0] in ("runs", "options") for p in raw.raw_files(unpacked))
    again = tmp_path / "again.tar.xz"
    raw.pack(unpacked, again)
    assert again.read_bytes() == raw.archive_of("learners").read_bytes()  # deterministic: git sees no change


def test_an_archive_member_outside_the_destination_is_refused(tmp_path: Path) -> None:
    raw = load_script(EXPERIMENTS / "raw.py", "experiments_raw")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    bad = tmp_path / "bad.tar.xz"
    bad.write_bytes(lzma.compress(buffer.getvalue()))
    with pytest.raises(SystemExit, match="outside"):
        raw.unpack(bad, tmp_path / "dest")
    assert not (tmp_path / "escaped.txt").exists()


def test_the_with_init_table_regenerates_from_its_archive(tmp_path: Path) -> None:
    study = EXPERIMENTS / "with_init"
    sweep = unpacked_study("with_init", tmp_path / "sweep")  # its archive is in the history (`IN_HISTORY`)
    for name in ("sweep.json", "targets.json"):
        shutil.copy(study / name, sweep / name)
    paths = write_sweep_report(sweep, replay=study / "results" / "final_policies.csv")
    table = next(p for p in paths if p.name == "table.md")
    assert table.read_text(encoding="utf-8") == (study / "results" / "table.md").read_text(encoding="utf-8")


def test_a_superseded_study_unpacks_from_the_history(tmp_path: Path) -> None:
    raw = load_script(EXPERIMENTS / "raw.py", "experiments_raw")
    assert not raw.archive_of("ablations").exists()  # out of the tree, in the history
    try:
        data = raw.archive_bytes("ablations")
    except SystemExit as exc:  # a shallow clone, or a copy without .git
        pytest.skip(str(exc))
    files = raw.unpack(data, tmp_path)
    assert len(files) == 60 and all((f.parent / "metrics.jsonl").is_file() for f in files)


def _run(folder: Path, ended: bool) -> None:
    folder.mkdir(parents=True)
    events = '{"event":"run_start"}\n{"event":"run_end","finished":false}\n'  # stopped early, then resumed
    events += '{"event":"run_end","finished":true}\n' if ended else ""
    (folder / "events.jsonl").write_text(events, encoding="utf-8")
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / "policies").mkdir()
    (folder / "policies" / "final.pt").write_bytes(b"weights")


def test_add_copies_a_sweeps_finished_trials_beside_the_archived_ones(tmp_path: Path) -> None:
    """A study run as several sweeps: each adds its finished trials' records; the archive keeps the earlier ones."""
    raw = load_script(EXPERIMENTS / "raw.py", "experiments_raw")
    study, sweep = tmp_path / "study", tmp_path / "sweep"
    _run(study / "runs" / "old-s0", ended=True)
    raw.pack(study, study / raw.ARCHIVE)
    shutil.rmtree(study / "runs")  # a fresh clone: only the archive
    _run(sweep / "runs" / "new-s0", ended=True)
    _run(sweep / "runs" / "new-s1", ended=False)  # still running: not yet
    assert raw.add(study, sweep) == ["new-s0"]
    assert sorted(p.name for p in (study / "runs").iterdir()) == ["new-s0", "old-s0"]
    assert sorted(p.name for p in (study / "runs" / "new-s0").iterdir()) == ["config.json", "events.jsonl"]
    assert raw.add(study, sweep) == []  # already there
    with pytest.raises(SystemExit, match="no runs/ folder"):
        raw.add(study, tmp_path / "nowhere")
