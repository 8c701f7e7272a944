"""What a resume checks before anything runs (`search/resume_checks.py`), on hand-made run folders: no engine."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from lares_agent.engine.state.checkpoint import save_checkpoint
from lares_agent.runs import RunLayout
from lares_agent.runs.oserrors import RunFileError
from lares_agent.search.resume_checks import prepare_resume


def _run(tmp_path: Path) -> RunLayout:
    """A run folder with two evaluations and one event, checkpointed after all of them at round 1."""
    run = RunLayout(tmp_path)
    run.metrics.write_text('{"env_steps": 100}\n{"env_steps": 200}\n', encoding="utf-8")
    run.events.write_text('{"event": "run_start"}\n', encoding="utf-8")
    sizes = {run.metrics.name: run.metrics.stat().st_size, run.events.name: run.events.stat().st_size}
    save_checkpoint(run.checkpoints, {"counters": {"env_steps": 200, "round": 1}}, "round-0001",
                    meta={"log_bytes": sizes})
    return run


def test_an_emptied_metrics_log_is_named_on_resume(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.metrics.write_text("", encoding="utf-8")
    notes: list[str] = []
    plan = prepare_resume(run, notes.append)
    assert plan.checkpoint == run.checkpoints / "round-0001"
    assert len(notes) == 1 and notes[0].startswith(f"{run.metrics} is empty, but the checkpoint was taken when")
    assert "rows before it are lost" in notes[0] and "\n" not in notes[0]


def test_whole_logs_resume_without_a_note(tmp_path: Path) -> None:
    notes: list[str] = []
    plan = prepare_resume(_run(tmp_path), notes.append)
    assert plan.checkpoint is not None and notes == [] and plan.dropped == {"metrics.jsonl": 0, "events.jsonl": 0}


def test_a_read_only_run_folder_is_named_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume cuts the logs back to its checkpoint; on a read-only file system (root ignores a chmod, so the
    refusal is simulated where the cut opens the file) the error names the file and the cause."""
    run = _run(tmp_path)
    with run.metrics.open("a", encoding="utf-8") as fh:
        fh.write('{"env_steps": 300}\n')  # written after the checkpoint: the resume cuts it
    opened = Path.open

    def read_only(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "+" in mode or "w" in mode or "a" in mode:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return opened(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", read_only)
    with pytest.raises(RunFileError) as info:
        prepare_resume(run, lambda line: None)
    message = str(info.value)
    assert message.startswith(f"cannot prepare the resume in {run.metrics}: the file system is read-only")
    assert "Errno" not in message and "\n" not in message
