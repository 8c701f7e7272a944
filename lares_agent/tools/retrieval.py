"""Retrieval tools over the case store: fetch the best similar past candidates, render them, record new ones.

The seed's RAG extension: "build a reward-function case database; before generating, retrieve similar
scenarios". Cases of the same task come first (their features match exactly); the rest of the `k` slots
go to BM25 matches on the task's words, whose expressions show shaping ideas even when names differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from lares_agent.memory.cases import Case, CaseStore

__all__ = ["DescribedTask", "record_case", "render_cases", "retrieve_cases"]


class DescribedTask(Protocol):
    """What retrieval reads of a task: its name (same-task cases) and its description (text matches)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...


def retrieve_cases(store: CaseStore, task: DescribedTask, k: int = 3, exclude_run: str | None = None) -> list[Case]:
    """Up to k cases: the fittest of the same task first, then text matches from similar tasks."""
    if k <= 0:
        return []
    found = store.best(task.name, k=k, exclude_run=exclude_run)
    seen = {(c.run_id, c.candidate_id) for c in found}
    if len(found) < k:
        for case in store.search(f"{task.name} {task.description}", k=k * 2, exclude_run=exclude_run):
            if (case.run_id, case.candidate_id) not in seen and len(found) < k:
                found.append(case)
                seen.add((case.run_id, case.candidate_id))
    return found


def render_cases(cases: list[Case], max_chars: int = 900) -> str:
    """One line per case, for the propose prompt; marks cases of other tasks so names are not copied."""
    if not cases:
        return "none"
    lines = []
    for case in cases:
        fitness = "?" if case.fitness is None else f"{case.fitness:.2f}"
        body = "; ".join(f"{n} = {e}" for n, e in case.components.items())
        lines.append(f"- [{case.task}, fitness {fitness}, complexity {case.complexity:.1f}] {body}")
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[: max_chars - 3] + "..."
    return text + "\n(cases of other tasks may use names that do not exist here: adapt, do not copy)"


def record_case(
    store: CaseStore,
    task: DescribedTask,
    record: Mapping[str, Any],
    run_id: str,
    persona: str,
    fitness: float | None = None,
    success: float | None = None,
) -> int:
    """Store an accepted candidate record (as produced by the validate node) as a case."""
    return store.add(
        Case(
            task=task.name,
            description=task.description,
            components=dict(record["components"]),
            complexity=float(record.get("complexity") or 0.0),
            run_id=run_id,
            candidate_id=str(record["id"]),
            rationale=str(record.get("rationale", "")),
            fitness=fitness,
            success=success,
            persona=persona,
            round=int(record.get("round", 0)),
        )
    )
