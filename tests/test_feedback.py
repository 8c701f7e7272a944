"""A user's note between rounds: `lares feedback RUN "text"` stores it (cleaned, bounded), the next round's critique
states it as a defect of its own that the propose prompt sees, each note is taken by one round (a `feedback`
event), `lares trace` and the report show it, and `lares run --feedback-file` refuses a bad file before any run
folder exists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import described_task, scripted_client
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.graphs.build import build_graph
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.round import run_round
from lares_agent.graphs.state import RoundInput
from lares_agent.runs import RunLayout, RunLog
from lares_agent.runs.feedback import MAX_NOTE_CHARS, FeedbackNote, clean_note, pending_notes
from lares_agent.search.config import SearchConfig
from lares_agent.search.proposer import GraphProposer

TASK = described_task(
    "reach-v3", "tcp_to_goal",
    {"tcp_to_goal": ("gripper to goal", "m"), "action_norm": ("action size", "1"), "success": ("goal reached", "bool")},
    description="Move the gripper to the goal position.", horizon=50,
)
GOOD = json.dumps({"components": {"approach": "-2*tcp_to_goal", "bonus": "5*success"}, "rationale": "t"})
GOOD2 = json.dumps({"components": {"approach": "exp(-tcp_to_goal/0.1)", "calm": "-0.01*action_norm"},
                    "rationale": "t"})
ELITE = {"id": "e1", "components": {"d": "-tcp_to_goal"}, "fitness": 0.5, "success": 0.5, "complexity": 2.0,
         "stats": {}}
NOTE = "the gripper drags on the table"


def _context(script: list[Any], **limits: Any) -> RunContext:
    rng = np.random.default_rng(0)
    sample = {"tcp_to_goal": rng.uniform(0, 0.5, 64), "action_norm": rng.uniform(0, 1, 64),
              "success": np.zeros(64)}
    return RunContext(llm=scripted_client(script), task=TASK, sample=sample, limits=GraphLimits(**limits))


def _prompts(ctx: RunContext) -> list[str]:
    return [str(m[-1].content) for m in ctx.llm.chat_model.seen]  # type: ignore[attr-defined]


def _run(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    root.mkdir()
    SearchConfig(task="Reacher-v5", budget=300, reward_period=150, population=2).save(RunLayout(root).config)
    return root


# ---------------------------------------------------------------------------------------------- the note
def test_cli_stores_a_cleaned_note_and_lists_which_round_took_it(tmp_path: Path) -> None:
    root = _run(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["feedback", str(root), "the gripper\x1b[31m drags\non the\ttable "])
    assert result.exit_code == 0, result.output
    (note,) = RunLog(root).feedback.read()
    assert (note.id, note.text, note.source) == ("note-1", "the gripper [31m drags on the table", "cli")
    assert "waiting for the next round" in runner.invoke(app, ["feedback", str(root)]).output
    RunLog(root).event("feedback", round=3, note="note-1", text=note.text)
    assert "note-1 (taken by round 3)" in runner.invoke(app, ["feedback", str(root)]).output

    too_long = runner.invoke(app, ["feedback", str(root), "x" * (MAX_NOTE_CHARS + 1)])
    empty = runner.invoke(app, ["feedback", str(root), "\x00 \n"])
    assert too_long.exit_code == 2 and "at most 1,000" in too_long.output
    assert empty.exit_code == 2 and "empty" in empty.output
    assert len(RunLog(root).feedback.read()) == 1
    stray = runner.invoke(app, ["feedback", str(tmp_path), NOTE])
    assert stray.exit_code == 1 and "not a lares run" in stray.output


def test_a_note_is_cleaned_again_when_read_and_taken_by_one_round_only() -> None:
    notes = [FeedbackNote("note-1", "a"), FeedbackNote("note-2", "b"), FeedbackNote.from_json(
        {"id": "note-3", "text": "c\u2028" + "y" * 5000})]
    assert notes[2] is not None and len(notes[2].text) == MAX_NOTE_CHARS and "\u2028" not in notes[2].text
    log = RunLog(Path("/nonexistent"))
    taken = [log.events.parse({"event": "feedback", "round": 1, "note": "note-1"})]
    assert [n.id for n in pending_notes(notes, taken, 2)] == ["note-2", "note-3"]  # type: ignore[arg-type]
    assert [n.id for n in pending_notes(notes, taken, 1)] == ["note-1", "note-2", "note-3"]  # type: ignore[arg-type]
    assert clean_note(" a\r\nb ") == "a b"


# ---------------------------------------------------------------------------------------------- the graph
def test_the_round_critique_states_the_note_first_and_propose_sees_it() -> None:
    ctx = _context([GOOD])
    state = {"round": 2, "n_wanted": 1, "elites": [ELITE], "feedback": [{"id": "note-1", "text": NOTE}]}
    result = run_round(build_graph(), state, "r2", ctx)
    assert [s["node"] for s in result.steps] == ["critique", "propose", "validate"]
    assert result.critique.splitlines()[0] == f"- The user's note: {NOTE}"
    assert "1 user note(s) (note note-1)" in result.steps[0]["summary"]
    (prompt,) = _prompts(ctx)
    assert f"The user's note: {NOTE}" in prompt
    assert result.feedback == ({"id": "note-1", "text": NOTE},)


def test_a_note_sends_round_0_through_critique_and_reaches_propose_without_reflection() -> None:
    noted = _context([GOOD])
    result = run_round(build_graph(), {"round": 0, "n_wanted": 1, "feedback": [{"id": "n", "text": NOTE}]}, "r0",
                       noted)
    assert [s["node"] for s in result.steps] == ["critique", "propose", "validate"] and NOTE in _prompts(noted)[0]
    plain = _context([GOOD])
    assert [s["node"] for s in run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", plain).steps] == [
        "propose", "validate"]
    assert NOTE not in _prompts(plain)[0]
    bare = _context([GOOD], reflect=False)
    result = run_round(build_graph(), {"round": 2, "n_wanted": 1, "elites": [ELITE],
                                       "feedback": [{"id": "n", "text": NOTE}]}, "r2", bare)
    assert [s["node"] for s in result.steps] == ["propose", "validate"]
    assert f"The user's note: {NOTE}" in _prompts(bare)[0]


def test_the_proposer_reads_notes_at_each_round_start_and_each_note_is_taken_once(tmp_path: Path) -> None:
    root = _run(tmp_path)
    log = RunLog(root)
    log.feedback.append(FeedbackNote("note-1", "first note"))
    ctx = _context([GOOD, GOOD2, GOOD2])
    proposer = GraphProposer(build_graph(), ctx, log, "reach-v3")
    proposer.initial(1, ctx.sample)
    log.feedback.append(FeedbackNote("note-2", "second note"))  # given while the run is live
    round_1 = RoundInput(round=1, n_wanted=1, elites=[ELITE], rollout_ids=[])
    proposer._round(round_1, ctx)
    proposer._round(round_1, ctx)  # the same round again (a resume): it takes its own note, logs nothing twice
    prompts = _prompts(ctx)
    assert "first note" in prompts[0] and "second note" not in prompts[0]
    assert "second note" in prompts[1] and "first note" not in prompts[1]
    taken = [(e.get("note"), e.round, e.get("text")) for e in log.events.read() if e.event == "feedback"]
    assert taken == [("note-1", 0, "first note"), ("note-2", 1, "second note")]


# ---------------------------------------------------------------------------------------------- trace, report
def test_trace_and_report_show_each_note_and_the_round_that_took_it(tmp_path: Path) -> None:
    from lares_agent.report.html import render_html
    from lares_agent.runs.reader import read_run
    from lares_agent.trace import read_trace

    root = _run(tmp_path)
    log = RunLog(root)
    log.feedback.append(FeedbackNote("note-1", "<script>x</script> drags"))
    log.feedback.append(FeedbackNote("note-2", "still waiting"))
    log.event("feedback", round=1, note="note-1", text="<script>x</script> drags")
    notes = read_trace(root).notes
    assert [(n.id, n.round) for n in notes] == [("note-1", 1), ("note-2", None)]
    shown = CliRunner().invoke(app, ["trace", str(root), "--json"])
    assert shown.exit_code == 0, shown.output
    assert [n["round"] for n in json.loads(shown.output)["notes"]] == [1, None]
    human = CliRunner().invoke(app, ["trace", str(root)])
    assert "note-1 (round 1): <script>x</script> drags" in human.output and "note-2 (waiting" in human.output
    page = render_html(read_run(root), [])
    assert "&lt;script&gt;x&lt;/script&gt; drags" in page and "<script>x" not in page
    assert 'id="notes"' in page and "still waiting" in page and "not yet" in page


# ---------------------------------------------------------------------------------------------- lares run
def test_run_refuses_a_missing_or_unreadable_feedback_file_before_any_folder(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runner = CliRunner()
    missing = runner.invoke(app, ["run", "--feedback-file", str(tmp_path / "nope.txt"), "--run-dir", str(runs)])
    assert missing.exit_code == 2 and "--feedback-file" in missing.output and "does not exist" in missing.output
    (tmp_path / "empty.txt").write_text("\n\n")
    empty = runner.invoke(app, ["run", "--feedback-file", str(tmp_path / "empty.txt"), "--run-dir", str(runs)])
    assert empty.exit_code == 2 and "empty" in empty.output
    folder = runner.invoke(app, ["run", "--feedback-file", str(tmp_path), "--run-dir", str(runs)])
    assert folder.exit_code == 2 and "folder" in folder.output
    (tmp_path / "note.txt").write_text(NOTE)
    no_llm = runner.invoke(app, ["run", "--feedback-file", str(tmp_path / "note.txt"), "--ablations", "no-llm",
                                 "--run-dir", str(runs)])
    assert no_llm.exit_code == 2 and "asks no LLM" in no_llm.output
    assert not runs.exists()


def test_a_run_started_with_a_feedback_file_holds_the_note_before_its_first_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lares_agent.errors import LaresError
    from lares_agent.search import runner

    class Stop(LaresError):
        pass

    def stop(*args: Any) -> None:
        raise Stop("stopped before the first round")

    monkeypatch.setattr(runner, "check_start", lambda cfg: None)
    monkeypatch.setattr(runner, "Search", stop)
    with pytest.raises(Stop):
        runner.start_run(SearchConfig(task="reach-v3"), tmp_path, run_id="r", feedback=NOTE)
    (note,) = RunLog(tmp_path / "r").feedback.read()
    assert (note.id, note.text, note.source) == ("note-1", NOTE, "file")
