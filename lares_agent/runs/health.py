"""What a run's files say about its LLM and its end, read by the last screen (`lares run`/`resume`) and the report.

`llm_health`: whether any LLM candidate was ever accepted, how many calls failed and why most often. A run whose
every reward is the built-in fallback used to print "run finished" and exit 0; now the
last screen, the report and the exit status say so. `recorded_outcome`: env steps, best success and whether
the run finished, from the files alone (resuming a finished run prints this).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections import Counter
from dataclasses import dataclass

from lares_agent.runs.files import RunLog

__all__ = ["NOT_FROM_LLM", "LLMHealth", "RecordedOutcome", "llm_health", "recorded_outcome", "spent_wall_s"]

# Accepted candidate rows that are not the LLM's: the built-in fallback and the user's --rewards-file.
NOT_FROM_LLM = ("fallback", "given (--rewards)")


@dataclass(frozen=True)
class LLMHealth:
    accepted: int  # candidates the LLM proposed that were accepted
    fallbacks: int  # slots filled with the built-in fallback
    failed_calls: int  # LLM requests that failed (llm_calls.jsonl rows with ok false)
    refused_calls: int  # proposals whose call the breaker or a budget never made
    rejected: int  # proposals rejected, for any reason
    top_failure: str | None  # the most common failure, one line
    given: int = 0  # slots filled from the user's --rewards-file
    children: int = 0  # numeric children of a reward the LLM did not write (the task's own, a fallback, an edit)
    edits: int = 0  # edits made without the LLM (the random-edit and critique-edit controls)

    @property
    def only_fallbacks(self) -> bool:
        """No LLM candidate was ever accepted, and the LLM was asked (a run with proposals or fallbacks)."""
        return self.accepted == 0 and (self.fallbacks > 0 or self.rejected > 0 or self.failed_calls > 0)

    def sentence(self) -> str:
        """One line for the last screen and the report."""
        reason = f"; most common failure: {self.top_failure}" if self.top_failure else ""
        refused = (f" ({self.refused_calls} more calls not made: endpoint down or time limit reached)"
                   if self.refused_calls else "")
        # name only the sources that filled a slot: with init every slot can be a numeric child of the task's own
        # reward, which is no fallback
        sources = [text for n, text in (
            (self.fallbacks, f"the built-in fallback ({self.fallbacks} slot(s))"),
            (self.given, f"from --rewards-file ({self.given} slot(s))"),
            (self.children, f"a numeric child of the task's own reward or of an elite the LLM did not write "
                            f"({self.children} slot(s))"),
            (self.edits, f"an edit made without the LLM ({self.edits} slot(s))"),
        ) if n]
        installed = f"every reward is {' or '.join(sources)}" if sources else "no reward was installed"
        return (f"no LLM candidate was accepted: {installed}; "
                f"{self.failed_calls} LLM call(s) failed{refused}, {self.rejected} proposal(s) rejected{reason}")


def _normal(reason: str) -> str:
    """A failure reason without what differs from call to call (call names, numbers, ports)."""
    reason = re.sub(r"LLM call '[^']*'", "LLM call", reason)
    return re.sub(r"\d+(\.\d+)?", "N", reason)[:200]


def llm_health(log: RunLog) -> LLMHealth:
    rows = log.candidates.read()
    accepted = [r for r in rows if r.verdict == "accepted"]
    # A numeric child has the LLM's structure only when its parent came from the LLM: children of fallback or
    # given rewards would otherwise make a run that never got an LLM candidate look like a search. An edit made
    # without it (origin "edit" or "rule", the random-edit and critique-edit controls) is never the LLM's.
    from_llm: set[str] = set()
    for r in accepted:
        if (r.reason or "") not in NOT_FROM_LLM and (r.origin is None or (r.origin == "child"
                                                                           and r.parent_id in from_llm)):
            from_llm.add(r.id)
    fallbacks = {r.id for r in accepted if r.reason == "fallback"}
    given = {r.id for r in accepted if r.reason == NOT_FROM_LLM[1]}
    others = [r for r in accepted if r.id not in from_llm | fallbacks | given]
    children = sum(1 for r in others if r.origin == "child")
    rejected = [r.reason or "" for r in rows if r.verdict == "rejected"]
    refused = sum(1 for r in rejected if "not called for" in r or "refused" in r)
    failed = [c.error or "" for c in log.llm_calls.read() if not c.ok]
    pool = failed or [r for r in rejected if r]
    top: str | None = None
    if pool:
        counts = Counter(_normal(r) for r in pool)
        key = counts.most_common(1)[0][0]
        top = next(r for r in pool if _normal(r) == key)
        top = top if len(top) <= 240 else top[:237] + "..."
    return LLMHealth(len(from_llm), len(fallbacks), len(failed), refused, len(rejected), top, len(given),
                     children, len(others) - children)


@dataclass(frozen=True)
class RecordedOutcome:
    env_steps: int
    finished: bool
    best_success: float
    wall_s: float


def recorded_outcome(log: RunLog) -> RecordedOutcome:
    """The run's state from its files: the newest `run_end` (finished, wall time) and every evaluation's best."""
    ends = [e for e in log.events.read() if e.event == "run_end"]
    metrics = log.metrics.read()
    best = max((m.success_max for m in metrics if m.success_max is not None and m.success_max == m.success_max),
               default=0.0)
    steps = max([m.env_steps for m in metrics] + [e.env_steps or 0 for e in ends], default=0)
    last = ends[-1] if ends else None
    finished = bool(last is not None and last.get("finished"))
    wall = float(last.get("wall_s", 0.0) or 0.0) if last is not None else 0.0
    return RecordedOutcome(int(steps), finished, float(best), wall)


def spent_wall_s(log: RunLog) -> float:
    """Wall seconds the run's earlier sessions took, so a resumed run reports its whole time.

    A session that ended has a `run_end` whose `wall_s` is the run's total so far; one that was killed counts
    from its `run_start` to its last stamped event or LLM call before the next session's line, whichever is later
    (never to the `resumed` line a later resume wrote: the time between is dead time; the engine's own events
    carry no time; `run_start` is logged before the initial proposals, so their time counts too).
    """
    calls = sorted(t for t in (_epoch(row.time) for row in log.llm_calls.read()) if t is not None)
    total, start, last = 0.0, None, None

    def close(start: float, last: float | None, until: float | None) -> float:
        inside = [t for t in calls if t >= start and (until is None or t < until)]
        return max(0.0, max([last or start, *inside]) - start)

    for event in log.events.read():
        if event.event == "run_start" and event.time is not None:
            if start is not None:
                total += close(start, last, event.time)
            start = last = event.time
        elif event.event == "run_end":
            total, start = float(event.get("wall_s", 0.0) or 0.0), None
        elif event.event == "resumed" and event.time is not None:
            # a resume that starts the engine again stamps this line: the killed session before it ended at its
            # own last line, and the time the run lay dead until this resume is no run time
            if start is not None:
                total += close(start, last, event.time)
            start = None
        elif event.time is not None and start is not None:
            last = event.time
    if start is not None:
        total += close(start, last, None)
    return total


def _epoch(iso: str) -> float | None:
    try:
        return _dt.datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None
