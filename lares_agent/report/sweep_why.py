"""Where the reward search fell short of an experiment's targets in a sweep, told from its runs.

For each task where a search method (``lares``, ``lares-init``, ``lares-scratch``) misses a target
(`sweep_compare.Target`, from the sweep's ``targets.json``: e.g. final success below ``human``'s, or not above
``sparse``'s), every trial of that search has its reward updates listed: what the fitness was graded on, each
slot's fitness, the elites kept, the ranked-first reward, and the first defect the computed critique named for the
round that followed (trace.sqlite). A number alone says that the search lost; these lines say at which update and
on what. Pure reading: the run folders are the record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lares_agent.errors import LaresError
from lares_agent.report.sweep_compare import LABELS, Target
from lares_agent.runs.reader import RunData, read_run

__all__ = ["explain_trial", "shortfalls", "why_markdown"]


def _row(rows: Sequence[Mapping[str, Any]], task: str, method: str) -> Mapping[str, Any] | None:
    return next((r for r in rows if r["task"] == task and r["method"] == method), None)


def _value(row: Mapping[str, Any] | None, key: str) -> float:
    value = None if row is None else row.get(key)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def shortfalls(rows: Sequence[Mapping[str, Any]], targets: Sequence[Target]) -> dict[tuple[str, str], list[str]]:
    """(task, search method) -> the targets that search missed (``sweep_table.summarise`` rows; a missing side
    compares nothing)."""
    out: dict[tuple[str, str], list[str]] = {}
    for task in dict.fromkeys(r["task"] for r in rows):
        for target in targets:
            key = f"{target.metric}_mean"
            mine = _value(_row(rows, task, target.method), key)
            theirs = _value(_row(rows, task, target.other), key)
            if math.isfinite(mine) and math.isfinite(theirs) and not target.met(mine, theirs):
                word = "not above" if target.strict else "below"
                out.setdefault((task, target.method), []).append(
                    f"{LABELS[target.metric]} {mine:.2f} {word} {target.other}'s {theirs:.2f}")
    return out


def _components(run: RunData, reward_id: str | None) -> str:
    cand = run.candidate(reward_id) if reward_id else None
    if cand is None or not cand.components:
        return reward_id or "?"
    return ", ".join(f"{k}: {v}" for k, v in cand.components.items())


def _critiques(path: Path) -> dict[int, str]:
    """Round -> the first defect line of its critique (empty without a readable trace)."""
    from lares_agent.trace import read_trace

    try:
        trace = read_trace(path)
    except LaresError:
        return {}
    out: dict[int, str] = {}
    for step in trace.select(node="critique"):
        lines = [ln.strip("- ").strip() for ln in str(step.output.get("critique") or "").splitlines() if ln.strip()]
        if lines:
            out[step.round] = lines[0]
    return out


def explain_trial(path: Path) -> list[str]:
    """Markdown bullets, one per reward update of a LaRes run, then its last ranked-first success."""
    run = read_run(path)
    critique = _critiques(path)
    lines = []
    for u in run.updates:
        graded = "/".join(sorted(set(u.graded_by.values()))) or "success (no grade recorded)"
        fitness = ", ".join(f"{s}: {v:.3f}" for s, v in sorted(u.fitness.items()) if math.isfinite(v))
        best = _components(run, u.judged.get(u.best_slot)) if u.best_slot is not None else "?"
        said = critique.get(u.round + 1)
        lines.append(f"- round {u.round} at {u.env_steps:,} steps: graded by {graded}; fitness {{{fitness}}}; "
                     f"kept {list(u.elites)}; ranked first: {best}"
                     + (f"; the next round's critique: \"{said}\"" if said else ""))
    if run.evaluations:
        last = run.evaluations[-1]
        lines.append(f"- last evaluation at {last.env_steps:,} steps: "
                     + ", ".join(f"slot {s.slot} {s.success:.0%}" for s in last.slots))
    return lines


def why_markdown(rows: Sequence[Mapping[str, Any]], trials: Mapping[tuple[str, str], Sequence[Path]],
                 targets: Sequence[Target]) -> str:
    """The "Where the search fell short" section for ``table.md`` ("" when it missed no target). ``trials``:
    (task, search method) -> its trials' run folders."""
    lost = shortfalls(rows, targets)
    if not lost:
        return ""
    parts = ["", "## Where the search fell short", ""]
    for (task, method), reasons in lost.items():
        parts += [f"### {task}, {method}: {'; '.join(reasons)}", ""]
        for path in trials.get((task, method), ()):
            if path.is_dir():
                parts += [f"{path.name}:", *explain_trial(path), ""]
    return "\n".join(parts)
