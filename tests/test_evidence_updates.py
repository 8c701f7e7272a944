"""experiments/evidence/updates.py: what each reward update of a grid trial saw and did, read from the evidence
grid's records (its runs.tar.xz, unpacked)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import load_script, unpacked_study

ROOT = Path(__file__).resolve().parents[1] / "experiments" / "evidence"


def test_an_answer_is_told_apart_from_its_source_by_form_and_by_constants() -> None:
    script = load_script(ROOT / "updates.py")
    before = {"reach": "exp(-tcp_to_obj/0.1)", "done": "5*success"}
    after = {"reach": "exp(-tcp_to_obj/0.2)", "close": "-obj_to_target"}
    assert script.changes(before, after, "door-close-v3") == "+close -done ~reach (constants)"
    assert script.changes(before, {**before, "reach": "-tcp_to_obj"}, "door-close-v3") == "~reach"
    assert script.changes(before, dict(before), "door-close-v3") == "no component changed"


def test_an_edit_made_without_the_llm_is_not_read_as_its_answer() -> None:
    from lares_agent.runs.reader import Candidate

    script = load_script(ROOT / "updates.py")

    def made(rationale: str, parent: str | None) -> Candidate:
        return Candidate("c", 1, 0, {"d": "-tcp_to_obj"}, rationale, "accepted", "", 1.0, parent, None, None, {})

    assert script.kind(made("random edit of human: added ...", "human"), "c") == "random edit of own"
    assert script.kind(made("random reward: drew 2 random term(s): ...", None), "c") == "random edit of none"
    assert script.kind(made(script.CRITIQUE_EDIT + "human: add a near-goal term ...", "human"), "c") == \
        "critique edit of own"
    assert script.kind(made("a closer reach", "e1"), "c") == "LLM, from e1"


def test_a_committed_with_init_trial_reads_as_updates_answers_and_what_was_handed_over(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trial = "door-close-v3-lares-init-s2"
    runs = unpacked_study("evidence", tmp_path) / "runs"
    assert load_script(ROOT / "updates.py").main([str(runs), "--pattern", trial]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "env steps" not in line]
    assert len(rows) == 16  # 4 updates x 3 searched slots and the kept learner on the task's own reward
    assert sum("| own |" in row for row in rows) == 4 and sum("ranked first" in row for row in rows) == 4
    assert "LLM, from own" in out and "Handed over: nit-s2-r3-a1-2" in out
    assert "- round 0, nit-s2-r0-a1-1 (LLM): " in out  # each installed reward says who made it
    cells = [row.split(" | ") for row in rows]  # success, then the approach and progress shares closed
    closed = [float(c[8]) for c in cells if float(c[6]) == 1.0]
    assert len(closed) >= 4 and all(p > 0.5 for p in closed)  # a slot at 100% success closed the door


def test_the_summary_follows_numeric_children_back_to_their_source(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = load_script(ROOT / "updates.py")
    runs = unpacked_study("evidence", tmp_path) / "runs"
    assert script.main([str(runs), "--pattern", "door-close-v3-lares-init-s2", "--summary"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[-1] == "| door-close-v3-lares-init-s2 | own; own; own; LLM | LLM |"

    from lares_agent.runs.reader import Candidate

    def made(cid: str, rationale: str, parent: str | None) -> Candidate:
        return Candidate(cid, 1, 0, {"d": "-tcp_to_obj"}, rationale, "accepted", "", 1.0, parent, None, None, {})

    candidates = [made("a", "a closer reach", "human"), made("b", script.CHILD + "a", "a"),
                  made("c", script.CHILD + "human", "human"), made("e", "random edit of human: ...", "human"),
                  made("r", script.CRITIQUE_EDIT + "human: ...", "human"), made("k", script.CHILD + "r", "r")]
    run = SimpleNamespace(candidate={c.id: c for c in candidates}.get)  # all origin() reads of a run
    assert [script.origin(run, r) for r in ("human", "a", "b", "c", "e", "r", "k", "gone")] == \
        ["own", "LLM", "LLM, tuned", "own, tuned", "edit", "critique edit", "critique edit, tuned", "?"]
