"""OS errors in words: a full disk, a path that cannot hold a folder, a directory or
binary file where a file of text is wanted: one line naming the file and the cause, nothing half-written."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine.state.checkpoint import CheckpointError, latest_checkpoint, save_checkpoint
from lares_agent.graphs.build import open_trace
from lares_agent.runs import append_jsonl, read_jsonl
from lares_agent.runs import jsonl as jsonl_module
from lares_agent.runs.oserrors import RunFileError, sqlite_file_error

SMALL = ["--task", "Reacher-v5", "--budget", "300", "--reward-period", "150", "--population", "2", "--elites", "1",
         "--no-report", "--handover-episodes", "2"]


def test_a_full_disk_during_a_checkpoint_names_it_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "checkpoints"
    save_checkpoint(root, {"w": np.zeros(3)}, "round-0001")

    def full(*args: Any, **kwargs: Any) -> None:  # what torch's zip writer raises when the disk fills up
        raise RuntimeError("[enforce fail at inline_container.cc:603] . unexpected pos 4160 vs 4054")

    monkeypatch.setattr(torch, "save", full)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9, 0))  # type: ignore[attr-defined]
    with pytest.raises(CheckpointError) as info:
        save_checkpoint(root, {"w": torch.zeros(3)}, "round-0002")
    message = str(info.value)
    assert "round-0002" in message and "no space left on device" in message and "enforce fail" not in message
    assert sorted(p.name for p in root.iterdir()) == ["LATEST", "round-0001"]  # no .tmp-* left
    assert latest_checkpoint(root).name == "round-0001"  # type: ignore[union-attr]


def test_a_failed_append_leaves_no_half_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, {"env_steps": 1})
    before = path.read_bytes()
    real = os.write

    def half(fd: int, data: Any) -> int:
        real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonl_module.os, "write", half)
    with pytest.raises(RunFileError) as info:
        append_jsonl(path, {"env_steps": 2, "text": "x" * 200})
    assert str(path) in str(info.value) and "no space left on the device" in str(info.value)
    assert path.read_bytes() == before
    monkeypatch.setattr(jsonl_module.os, "write", real)
    append_jsonl(path, {"env_steps": 3})
    assert [r["env_steps"] for r in read_jsonl(path)] == [1, 3]


def _one_line(result: Any, *fragments: str, code: int = 1) -> None:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == code and len(lines) == 1 and lines[0].startswith("error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_a_run_dir_under_proc_says_why(tmp_path: Path) -> None:
    if not Path("/proc/self").exists():
        pytest.skip("no /proc here")
    result = CliRunner().invoke(app, ["run", *SMALL, "--no-retrieval", "--llm", "replay", "--replay-from",
                                      str(_record(tmp_path)), "--run-dir", "/proc/lares-runs"],
                                env={"LARES_HOME": str(tmp_path)})
    _one_line(result, "cannot create the run folder /proc/lares-runs", "--run-dir")
    assert "No such file" not in result.output


def _record(tmp_path: Path) -> Path:
    run = tmp_path / "recorded"
    run.mkdir()
    (run / "llm_calls.jsonl").write_text('{"call": 0, "tag": "propose", "key": "k", "answer": "{}", "ok": true}\n')
    return run


@pytest.mark.parametrize("kind", ["directory", "nested", "binary"])
def test_bad_input_files_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    if kind == "directory":
        (tmp_path / "rewards").mkdir()
        args, fragments = ["--rewards", "rewards"], ("rewards", "folder, not a file")
    elif kind == "nested":
        (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
        args, fragments = ["--rewards", "deep.json"], ("deep.json", "nested too deeply")
    else:
        (tmp_path / "me.md").write_bytes(b"# Me\n\x89PNG\r\n\x1a\n\xff\xfe\x00")
        args, fragments = ["--persona", "me.md"], ("me.md", "not UTF-8 text")
    result = CliRunner().invoke(app, ["run", *SMALL, "--run-dir", str(runs), *args], env={"LARES_HOME": str(tmp_path)})
    _one_line(result, *fragments, code=2 if kind == "directory" else 1)  # a folder is a wrong option, told at once
    assert not runs.exists()


def test_an_unusable_lares_home_fails_before_a_run_folder_exists(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")  # a LARES_HOME below a file cannot be created, as a read-only one
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["run", *SMALL, "--run-dir", str(runs)], env={"LARES_HOME": str(blocker / "home")})
    _one_line(result, "cannot open the case store", "LARES_HOME", "--no-retrieval")
    assert not runs.exists()


def _read_only_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Open every case store read-only, as SQLite does where the file or its folder may not be written (a
    chmod does not stop root, who runs these tests in containers)."""
    import sqlite3

    from lares_agent.memory import cases

    real = sqlite3.connect

    def read_only(path: str, **kwargs: Any) -> sqlite3.Connection:
        return real(f"file:{path}?mode=ro", uri=True, **kwargs)

    monkeypatch.setattr(cases.sqlite3, "connect", read_only)


def test_a_read_only_case_store_that_exists_fails_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lares_agent.memory.cases import CaseStore

    CaseStore(tmp_path / "cases.sqlite").close()  # an earlier run made it
    _read_only_connect(monkeypatch)
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["run", *SMALL, "--run-dir", str(runs)], env={"LARES_HOME": str(tmp_path)})
    _one_line(result, "cannot open the case store", str(tmp_path / "cases.sqlite"), "readonly", "--no-retrieval")
    assert not runs.exists()


def test_a_case_store_write_error_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lares_agent.errors import LaresError
    from lares_agent.memory.cases import Case, CaseStore

    path = tmp_path / "cases.sqlite"
    CaseStore(path).close()
    _read_only_connect(monkeypatch)
    with CaseStore(path) as store, pytest.raises(LaresError) as info:
        store.add(Case("reach-v3", "reach", {"r": "-tcp_to_target"}, 1.0, "run-1", "c1"))
    assert f"cannot write the case store {path}: attempt to write a readonly database" in str(info.value)


def test_a_full_trace_names_the_file_and_the_cause(tmp_path: Path) -> None:
    """A real SQLITE_FULL from LangGraph's checkpointer (the page limit stands in for the disk)."""
    saver = open_trace(tmp_path)
    saver.conn.execute("PRAGMA max_page_count = 1")
    with pytest.raises(RunFileError) as info:
        saver.get_tuple({"configurable": {"thread_id": "round-0"}})  # its first use creates the tables
    saver.conn.close()
    message = str(info.value)
    assert message.startswith(f"cannot write the graph trace {tmp_path / 'trace.sqlite'}: no space left on the device")
    assert "free some space, then `lares resume` the run" in message and "\n" not in message
    assert info.value.errno == errno.ENOSPC


def test_a_bare_disk_io_error_on_a_full_disk_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite reports a failed WAL or journal write as `disk I/O error` alone; the free space tells why."""
    full = shutil._ntuple_diskusage(100, 100, 0)  # type: ignore[attr-defined]
    monkeypatch.setattr(shutil, "disk_usage", lambda path: full)
    error = sqlite_file_error("the graph trace", tmp_path / "trace.sqlite", sqlite3.OperationalError("disk I/O error"))
    assert str(error) == (f"cannot write the graph trace {tmp_path / 'trace.sqlite'}: no space left on the device "
                          "(sqlite: disk I/O error; free some space)")
    monkeypatch.undo()
    error = sqlite_file_error("the graph trace", tmp_path / "t", sqlite3.OperationalError("disk I/O error"))
    assert str(error).endswith(": the disk failed a read or write (sqlite: disk I/O error; check the disk and its "
                               "free space)")


def _read_only(*args: Any, **kwargs: Any) -> Any:
    """What a write on a read-only file system raises (the tests run as root, where chmod stops nothing)."""
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(args[0]) if args else "")


def test_export_to_a_read_only_file_system_is_one_plain_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lares_agent.runs import atomic

    monkeypatch.setattr(atomic.tempfile, "mkstemp", _read_only)
    target = tmp_path / "reward.py"
    result = CliRunner().invoke(app, ["export", "--human", "--task", "Reacher-v5", "--out", str(target)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert lines[0] == f"error: cannot write {target}: the file system is read-only (choose a writable folder)"
    assert not target.exists()


def test_a_video_on_a_read_only_file_system_is_named_in_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from PIL import Image

    from lares_agent.engine.policies.video import VideoError, _save

    monkeypatch.setattr(Image.Image, "save", _read_only)
    path = tmp_path / "episode.gif"
    with pytest.raises(VideoError) as info:
        _save([np.full((8, 8, 3), 9, dtype=np.uint8)] * 2, path, ".gif", 40)
    assert str(info.value) == f"cannot write {path}: the file system is read-only (choose a writable folder)"
    assert not list(tmp_path.iterdir())
