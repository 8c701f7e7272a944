"""JSONL logs survive a writer killed mid-line: the torn fragment is skipped, later records stay readable."""

from __future__ import annotations

from pathlib import Path

from lares_agent.llm.replay import load_record
from lares_agent.runs.jsonl import JsonlWriter, append_jsonl, read_jsonl


def test_a_record_appended_after_a_torn_line_starts_on_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append_jsonl(path, {"a": 1})
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"torn": ')  # a kill in the middle of a write
    append_jsonl(path, {"c": 3})
    with JsonlWriter(path) as writer:
        writer.write({"d": 4})
    assert list(read_jsonl(path)) == [{"a": 1}, {"c": 3}, {"d": 4}]


def test_replay_skips_torn_records_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "llm_calls.jsonl"
    append_jsonl(path, {"answer": "x", "ok": True})
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"answer": "y", "o')
    assert [r.answer for r in load_record(path)] == ["x"]
    append_jsonl(path, {"answer": "z", "ok": True})
    assert [r.answer for r in load_record(path)] == ["x", "z"]  # the mended fragment is its own (skipped) line
