"""What a resume checks and mends before anything runs.

In order: the leftovers of a killed checkpoint write are removed; `trace.sqlite` is opened read-only and
checked, a damaged one is set aside (the graph history of finished rounds is lost; an interrupted round re-runs
from the engine checkpoint) instead of failing at the next reward update; the newest checkpoint that verifies
is chosen, newer damaged ones are set aside with the reason; the metric and event logs are cut back to what
that checkpoint covers, so the replayed steps write their rows once (a log already shorter than that, emptied
outside lares, is named). A run whose round 0 fell back to the
built-in reward starts again instead, so that a resume asks the (repaired) LLM for round 0 once more.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lares_agent.engine import checkpoint_meta, newest_loadable, remove_stale
from lares_agent.runs import RunLayout, read_jsonl, short_logs, truncate_logs
from lares_agent.runs.oserrors import RunFileError, run_file_error

__all__ = ["ResumePlan", "check_trace", "install_steps", "prepare_resume"]

ROUND_0_THREAD = "round-0"  # the trace thread of the initial proposals (`GraphProposer._round`)

Notify = Callable[[str], None]


@dataclass(frozen=True)
class ResumePlan:
    checkpoint: Path | None  # the checkpoint to restore (None: start the engine again)
    skipped: tuple[str, ...]  # one line per checkpoint set aside
    dropped: dict[str, int]  # rows cut from each log
    trace_set_aside: str | None  # where a damaged trace went
    # round -> the env step an earlier session installed it at (engine.install_steps), read before the cut
    install_steps: Mapping[int, int] = field(default_factory=dict)

    def summary(self) -> dict[str, object]:
        """The fields a `resumed` / `run_start` event carries."""
        return {"checkpoint": self.checkpoint.name if self.checkpoint else None, "skipped": list(self.skipped),
                "dropped": dict(self.dropped), "trace_set_aside": self.trace_set_aside}


def check_trace(path: Path) -> str | None:
    """Why the SQLite file at `path` is not a usable database (one line), or None (also when it is absent)."""
    if not path.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            result = conn.execute("PRAGMA quick_check").fetchone()
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return str(exc) or type(exc).__name__
    if not result or result[0] != "ok":
        return f"integrity check failed: {result[0] if result else 'no answer'}"
    return None


def _set_aside(path: Path) -> Path:
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    path.replace(aside)
    for suffix in ("-wal", "-shm", "-journal"):  # SQLite's side files belong to the damaged database
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.replace(aside.with_name(aside.name + suffix))
    return aside


def _fell_back_in_round_0(checkpoint: Path) -> bool:
    """Whether `checkpoint` was taken before the first reward update with a built-in fallback among its rewards
    (`GraphProposer._fallback` names them `fallback-r0-s<slot>`): the LLM failed round 0, and restoring it would
    train on the fallbacks without asking the (perhaps repaired) LLM again."""
    try:
        state = json.loads((checkpoint / "state.json").read_text(encoding="utf-8"))
        at_round = int(state["counters"]["round"])
        ids = [str(r.get("id", "")) for r in state.get("rewards", []) if isinstance(r, dict)]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return False  # verify_checkpoint read it already; an odd tree is restored as it is
    return at_round == 0 and any(i.startswith("fallback-r0-") for i in ids)


def _forget_round_0(run: RunLayout, checkpoint: Path) -> None:
    """Drop round 0's stored graph result (else the graph returns it instead of asking again), then the
    checkpoints that hold its fallbacks; in this order, so a kill in between is found and mended again."""
    if run.trace.exists():
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(run.trace, check_same_thread=False)
        try:
            SqliteSaver(conn).delete_thread(ROUND_0_THREAD)
        finally:
            conn.close()
    for path in checkpoint.parent.iterdir():  # only round 0's: no reward update happened before `checkpoint`
        if path.is_dir() and not path.name.startswith("damaged-"):
            shutil.rmtree(path)
    (checkpoint.parent / "LATEST").unlink(missing_ok=True)


def prepare_resume(run: RunLayout, notify: Notify) -> ResumePlan:
    """Mend what can be mended, say what was done through `notify`, and pick the checkpoint to restore.

    Mending writes into the run folder (removes, renames, truncates); where it cannot (a read-only copy of a
    run) the error is one line naming the file and the cause, not Python's `[Errno 30]`."""
    try:
        return _prepare(run, notify)
    except RunFileError:
        raise
    except OSError as exc:
        raise run_file_error("prepare the resume in", exc.filename or run.root, exc,
                             "; a resume writes into the run folder: copy it to a writable place and resume the copy"
                             ) from None


def _prepare(run: RunLayout, notify: Notify) -> ResumePlan:
    for stale in remove_stale(run.checkpoints):
        notify(f"removed {stale}, left by a checkpoint write that was killed")
    aside: str | None = None
    reason = check_trace(run.trace)
    if reason is not None:
        moved = _set_aside(run.trace)
        aside = moved.name
        notify(f"{run.trace} is damaged ({reason}); set it aside as {moved.name} and started a new one: an "
               "interrupted round re-runs from the engine checkpoint")
    checkpoint, skipped = newest_loadable(run.checkpoints)
    lines = []
    for path, why in skipped:
        line = f"skipped checkpoint {path.name}: {why} (kept as damaged-{path.name})"
        lines.append(line)
        notify(line)
    if skipped:
        notify(f"resuming from {checkpoint.name}" if checkpoint else "no loadable checkpoint: the engine starts again")
    installs = install_steps(run)
    if checkpoint is not None and _fell_back_in_round_0(checkpoint):
        _forget_round_0(run, checkpoint)
        installs = {}  # round 0 is asked again, not replayed
        checkpoint = None
        notify("round 0 fell back to the built-in reward, so its checkpoints were removed and the run starts again: "
               "the LLM is asked for round 0's candidates once more")
    sizes = checkpoint_meta(checkpoint).get("log_bytes") if checkpoint is not None else None
    if isinstance(sizes, dict):
        for line in short_logs(run, sizes):
            notify(line)
    if checkpoint is None or isinstance(sizes, dict):  # a checkpoint of an older lares records no sizes: keep all
        dropped = truncate_logs(run, sizes if isinstance(sizes, dict) else None)
    else:
        dropped = {}
    return ResumePlan(checkpoint, tuple(lines), dropped, aside, installs)


def install_steps(run: RunLayout) -> dict[int, int]:
    """Round -> the env step its rewards were installed at, from the events an earlier session wrote (round 0's
    `initial_rewards`, each `reward_update`). A round the trace holds is replayed at once on resume, where the LLM
    once took its time; the engine installs it at the same step, so the replayed steps follow the same path."""
    out: dict[int, int] = {}
    for row in read_jsonl(run.events):
        if row.get("event") in ("initial_rewards", "reward_update") and isinstance(row.get("round"), int) \
                and isinstance(row.get("env_steps"), int):
            out[int(row["round"])] = int(row["env_steps"])
    return out
