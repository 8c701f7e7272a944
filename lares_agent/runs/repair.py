"""Exactly-once rows after a resume: cut the logs back to what the restored checkpoint covers.

A resumed engine replays every step after its checkpoint, and used to write those steps' metric and event rows
a second time. Each checkpoint records the byte sizes of `metrics.jsonl` and `events.jsonl`
when it was taken (`log_sizes`); a resume truncates both files back to them (to nothing when no checkpoint was
taken yet) before anything is written. Lines of the sessions themselves (`run_start`, `run_end`, `resumed`,
`llm_breaker`, `llm_format_step`, `llm_context`, and `reward_update_abandoned`: a stop gave a round up, which the
resume then redoes), which the replay does not write again, are kept in order after the cut.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from lares_agent.runs.layout import EVENTS_NAME, METRICS_NAME, RunLayout

__all__ = ["SESSION_EVENTS", "log_sizes", "short_logs", "truncate_logs"]

SESSION_EVENTS = ("run_start", "run_end", "resumed", "llm_breaker", "llm_format_step", "llm_context",
                  "reward_update_abandoned")


def log_sizes(layout: RunLayout) -> dict[str, int]:
    """Byte sizes of the logs a resume may cut back (a missing file is 0)."""
    return {p.name: p.stat().st_size if p.is_file() else 0 for p in (layout.metrics, layout.events)}


def short_logs(layout: RunLayout, sizes: Mapping[str, int] | None) -> list[str]:
    """One line per log that is shorter than the checkpoint recorded (emptied or cut outside lares): the cut
    below leaves such a file as it is, and the resumed run appends to it, so without this line the lost rows
    would go unnoticed until a report shows a curve with a hole."""
    lines = []
    for path in (layout.metrics, layout.events):
        want = int((sizes or {}).get(path.name, 0))
        have = path.stat().st_size if path.is_file() else 0
        if have < want:
            what = "is missing" if not path.is_file() else "is empty" if have == 0 else f"holds {have} bytes"
            lines.append(f"{path} {what}, but the checkpoint was taken when it held {want} bytes: the rows before "
                         "it are lost (emptied or cut outside lares); the run goes on and appends after what is left")
    return lines


def _cut(path: Path, size: int) -> list[str]:
    """Truncate `path` to `size` bytes (at a line end); returns the lines removed."""
    if not path.is_file() or path.stat().st_size <= size:
        return []
    with path.open("rb") as fh:
        head = fh.read(size)
        tail = fh.read()
    if head and not head.endswith(b"\n"):  # a size inside a line (should not happen): keep that line whole
        end = tail.find(b"\n") + 1 or len(tail)
        head, tail = head + tail[:end], tail[end:]
    with path.open("r+b") as fh:
        fh.truncate(len(head))
        fh.flush()
        os.fsync(fh.fileno())
    return [line for line in tail.decode("utf-8", errors="replace").splitlines() if line.strip()]


def truncate_logs(layout: RunLayout, sizes: Mapping[str, int] | None) -> dict[str, int]:
    """Cut metrics and events back to `sizes` (None: to nothing, the run restarts its engine); returns the rows
    dropped per file. Session lines dropped from the events are appended again, in their order."""
    sizes = sizes or {}
    dropped: dict[str, int] = {}
    metrics = _cut(layout.metrics, int(sizes.get(METRICS_NAME, 0)))
    dropped[METRICS_NAME] = len(metrics)
    removed = _cut(layout.events, int(sizes.get(EVENTS_NAME, 0)))
    kept = []
    for line in removed:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("event") in SESSION_EVENTS:
            kept.append(line)
    if kept:
        with layout.events.open("a", encoding="utf-8") as fh:
            fh.write("".join(line + "\n" for line in kept))
    dropped[EVENTS_NAME] = len(removed) - len(kept)
    return dropped
