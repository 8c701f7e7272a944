"""A user's notes to a run (`lares feedback RUN "text"`, `lares run --feedback-file`): ``feedback.jsonl``.

Users of Eureka-like tools steer between rounds (Eureka's human-feedback variant): a note such as "the gripper
drags on the table" reaches the next reward round's critique as a defect of its own. Notes are appended by the
CLI, also while the run is live, and read at each round's start; the round that takes a note records it as a
``feedback`` event, so each note is used once. User text is data like LLM text: control characters are
replaced and its size is bounded before it is stored, so no note can break a prompt line or fill a prompt.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lares_agent.errors import ConfigError
from lares_agent.runs.coerce import as_opt_float, as_str
from lares_agent.runs.events import Event

__all__ = ["MAX_NOTE_CHARS", "NOTES_PER_ROUND", "FeedbackNote", "clean_note", "note_id", "pending_notes",
           "read_note_file"]

MAX_NOTE_CHARS = 1000
"""The longest note stored (characters): a few sentences, well inside a prompt's critique section."""
MAX_NOTE_FILE_BYTES = 16 * 1024
"""The largest `--feedback-file` read (bytes): room for a note of `MAX_NOTE_CHARS` and its white space."""
NOTES_PER_ROUND = 5
"""Notes one round takes, oldest first; later ones wait for the next round."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def clean_note(text: str, what: str = "the note") -> str:
    """`text` on one line, control characters as spaces and runs of spaces as one; ConfigError where nothing is
    left or it is longer than `MAX_NOTE_CHARS`."""
    cleaned = " ".join(_CONTROL.sub(" ", text).split())
    if not cleaned:
        raise ConfigError(f"{what} is empty: say what the next reward round should fix")
    if len(cleaned) > MAX_NOTE_CHARS:
        raise ConfigError(f"{what} has {len(cleaned):,} characters; a note of at most {MAX_NOTE_CHARS:,} is read "
                          "(say the one thing the next round should fix)")
    return cleaned


def note_id(existing: Sequence[FeedbackNote]) -> str:
    """The next note's id: ``note-<n>``, one more than the notes already stored."""
    return f"note-{len(existing) + 1}"


@dataclass(frozen=True)
class FeedbackNote:
    """One note: its id, the cleaned text, when it was given and how (``cli``: `lares feedback`; ``file``:
    `lares run --feedback-file`)."""

    id: str
    text: str
    time: float | None = None
    source: str = "cli"

    @classmethod
    def new(cls, text: str, existing: Sequence[FeedbackNote], source: str = "cli") -> FeedbackNote:
        return cls(id=note_id(existing), text=clean_note(text), time=time.time(), source=source)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "text": self.text, "source": self.source}
        if self.time is not None:
            out["time"] = self.time
        return out

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> FeedbackNote | None:
        """None for a line that is not a note; a note edited by hand is cleaned and cut again on reading."""
        note, text = as_str(row.get("id")), as_str(row.get("text"))
        if not note or not text:
            return None
        text = " ".join(_CONTROL.sub(" ", text).split())[:MAX_NOTE_CHARS]
        return cls(id=note[:40], text=text, time=as_opt_float(row.get("time")),
                   source=as_str(row.get("source")) or "cli") if text else None


def pending_notes(notes: Sequence[FeedbackNote], events: Sequence[Event], round_: int) -> list[FeedbackNote]:
    """The notes round `round_` takes: those no other round took (a resumed round takes its own again), at most
    `NOTES_PER_ROUND`, oldest first."""
    taken = {str(e.get("note")): e.round for e in events if e.event == "feedback"}
    return [n for n in notes if taken.get(n.id, round_) == round_][:NOTES_PER_ROUND]


def read_note_file(path: Path, flag: str = "--feedback-file") -> str:
    """The cleaned note in the file at `path`; ConfigError (one line, before any run folder exists) where it is
    missing, not a regular file, too big or holds no note."""
    from lares_agent.runs.input_files import check_input_file

    try:
        check_input_file(path, flag, limit=MAX_NOTE_FILE_BYTES)
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise ConfigError(f"{flag}: {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{flag}: cannot read {path} ({exc.strerror or type(exc).__name__})") from None
    return clean_note(text, f"{flag} {path}")
