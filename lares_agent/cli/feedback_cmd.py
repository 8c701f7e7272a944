"""`lares feedback RUN "text"`: a note to the run's next reward round (runs/feedback.py); without text, the run's
notes and the round that took each."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def feedback_command(
    run: Annotated[Path, typer.Argument(help="The run folder (live or stopped).")],
    text: Annotated[str | None, typer.Argument(
        help="The note, e.g. \"the gripper drags on the table\" (one line, at most 1000 characters; a note that "
             "starts with - goes after --). Without it: the run's notes so far.")] = None,
) -> None:
    """Tell the next reward round what you saw (in the report's video, say): the note reaches that round's
    critique as a defect of its own, which the LLM's proposals are asked to fix. A live run reads it at its next
    round; a stopped one when `lares resume` continues it. Each note is used by one round, recorded in the run's
    events and shown by `lares trace` and the report."""
    from lares_agent.runs import RunLayout, RunLog
    from lares_agent.runs.feedback import FeedbackNote
    from lares_agent.runs.oserrors import run_file_error

    layout = RunLayout.open(run)  # one line where RUN is not a run folder
    log = RunLog(layout)
    notes = log.feedback.read()
    if text is None:
        taken = {str(e.get("note")): e.round for e in log.events.read() if e.event == "feedback"}
        if not notes:
            typer.echo(f"{run}: no notes yet (lares feedback {run} \"text\" adds one)")
        for note in notes:
            when = f"taken by round {taken[note.id]}" if note.id in taken else "waiting for the next round"
            typer.echo(f"{note.id} ({when}): {note.text}")
        return
    note = FeedbackNote.new(text, notes)  # cleaned and bounded, or one ConfigError line
    try:
        log.feedback.append(note)
    except OSError as exc:
        raise run_file_error("write", layout.feedback, exc) from None
    typer.echo(f"{note.id} stored in {layout.feedback}; the run's next reward round takes it into its critique")
