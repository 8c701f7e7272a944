"""The ``candidates.jsonl`` record: a proposal and its verdict, or (``verdict="evaluated"``) a fitness it got.

Written by the search (``GraphProposer``): an ``accepted`` or ``rejected`` line when the graph judged a
proposal (also for rewards given with ``--rewards`` and fallbacks), then an ``evaluated`` line per reward
update with the slot's fitness. Fields a line does not carry are None and left out of the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lares_agent.runs.coerce import as_float_list, as_int, as_mapping, as_opt_float, as_opt_str, as_stats

__all__ = ["VERDICTS", "CandidateRow", "Verdict"]

Verdict = Literal["accepted", "rejected", "evaluated"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)


@dataclass(frozen=True)
class CandidateRow:
    """One ``candidates.jsonl`` line."""

    id: str
    round: int | None = None
    slot: int | None = None  # the slot it was installed in (None: rejected)
    verdict: Verdict | None = None
    reason: str | None = None  # why it was rejected, or "given (--rewards)" / "fallback"
    components: Mapping[str, str] | None = None  # component name -> expression
    rationale: str | None = None
    complexity: float | None = None
    parent_id: str | None = None  # the elite the LLM was asked to improve
    critique_id: str | None = None  # the critique the proposal was conditioned on
    attempt: int | None = None  # the graph's propose attempt
    fitness: float | None = None  # evaluated lines
    success: float | None = None  # evaluated lines
    component_stats: Mapping[str, Mapping[str, float]] | None = None  # evaluated lines: mean/std/share
    # evaluated lines, what the fitness was made of: fitness = graded value (events.graded_value; graded value -
    # complexity_penalty in runs before the one ranking rule, engine/setup/fitness.py)
    graded_by: str | None = None  # "success" (some slot succeeded at that update), "progress", "approach", "return"
    progress_closed: float | None = None  # mean share of the start distance closed, in [-1, 1]
    approach_closed: float | None = None  # the same for the approach feature
    task_return: float | None = None  # mean task (human) return per episode: the graded value of "return"
    complexity_penalty: float | None = None  # complexity_lambda * complexity
    action_jerk: float | None = None  # mean squared action change per step (Pareto selection's smoothness)
    origin: str | None = None  # "child": constants of `parent_id` perturbed; "edit": a random structural edit; neither
    # written by the LLM
    proxy: float | None = None  # the offline pre-screen's score on the round's sample (accepted/rejected lines)
    learner_success: tuple[float, ...] | None = None  # evaluated lines: each learner's (--learners-per-reward > 1)
    # the verifier on the update's episodes (rewards/verifier.py; accepted/rejected lines of valid candidates from
    # round 1 on): Kendall tau of episode returns against the task's order, against progress closed, and the share
    # of steps at the episode's maximum reward
    verifier_tau: float | None = None
    verifier_progress: float | None = None
    verifier_flooding: float | None = None

    @property
    def key(self) -> tuple[str, int | None, str | None, int | None]:
        """What makes a line distinct: a resumed run does not log the same (id, round, verdict, slot) twice."""
        return (self.id, self.round, self.verdict, self.slot)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "round": self.round,
            "slot": self.slot,
            "verdict": self.verdict,
            "reason": self.reason,
            "components": None if self.components is None else dict(self.components),
            "rationale": self.rationale,
            "complexity": self.complexity,
            "parent_id": self.parent_id,
            "critique_id": self.critique_id,
            "attempt": self.attempt,
            "fitness": self.fitness,
            "success": self.success,
            "component_stats": None if self.component_stats is None else {
                k: dict(v) for k, v in self.component_stats.items()},
            "graded_by": self.graded_by,
            "progress_closed": self.progress_closed,
            "approach_closed": self.approach_closed,
            "task_return": self.task_return,
            "complexity_penalty": self.complexity_penalty,
            "action_jerk": self.action_jerk,
            "origin": self.origin,
            "proxy": self.proxy,
            "learner_success": None if self.learner_success is None else list(self.learner_success),
            "verifier_tau": self.verifier_tau,
            "verifier_progress": self.verifier_progress,
            "verifier_flooding": self.verifier_flooding,
        }
        return {k: v for k, v in data.items() if v is not None}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> CandidateRow | None:
        """None for a line without an id; an unknown verdict reads as None."""
        cid = row.get("id")
        if cid is None:
            return None
        verdict = row.get("verdict")
        comps = row.get("components")
        return cls(
            id=str(cid),
            round=as_int(row.get("round")),
            slot=as_int(row.get("slot")),
            verdict=verdict if verdict in VERDICTS else None,
            reason=as_opt_str(row.get("reason")),
            components={k: str(v) for k, v in as_mapping(comps).items()} if isinstance(comps, Mapping) else None,
            rationale=as_opt_str(row.get("rationale")),
            complexity=as_opt_float(row.get("complexity")),
            parent_id=as_opt_str(row.get("parent_id")),
            critique_id=as_opt_str(row.get("critique_id")),
            attempt=as_int(row.get("attempt")),
            fitness=as_opt_float(row.get("fitness")),
            success=as_opt_float(row.get("success")),
            component_stats=as_stats(row["component_stats"]) if isinstance(row.get("component_stats"), Mapping)
            else None,
            graded_by=as_opt_str(row.get("graded_by")),
            progress_closed=as_opt_float(row.get("progress_closed")),
            approach_closed=as_opt_float(row.get("approach_closed")),
            task_return=as_opt_float(row.get("task_return")),
            complexity_penalty=as_opt_float(row.get("complexity_penalty")),
            action_jerk=as_opt_float(row.get("action_jerk")),
            origin=row.get("origin") if isinstance(row.get("origin"), str) else None,
            proxy=as_opt_float(row.get("proxy")),
            learner_success=as_float_list(row["learner_success"]) if row.get("learner_success") else None,
            verifier_tau=as_opt_float(row.get("verifier_tau")),
            verifier_progress=as_opt_float(row.get("verifier_progress")),
            verifier_flooding=as_opt_float(row.get("verifier_flooding")),
        )
