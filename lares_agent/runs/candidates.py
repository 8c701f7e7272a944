"""The ``candidates.jsonl`` record: a proposal and its verdict, or (``verdict="evaluated"``) a fitness it got.

Written by the search (``GraphProposer``): an ``accepted`` or ``rejected`` line when the graph judged a
proposal (also for rewards given with ``--rewards`` and fallbacks), then an ``evaluated`` line per reward
update with what the slot's fitness was made of (a ``SlotRecord``). Fields a line does not carry are None and left
out of the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lares_agent.runs.coerce import as_int, as_mapping, as_opt_float, as_opt_str
from lares_agent.runs.slots import SlotRecord

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
    origin: str | None = None  # "child": constants of `parent_id` perturbed; "edit": a random structural edit; neither
    # written by the LLM
    proxy: float | None = None  # the offline pre-screen's score on the round's sample (accepted/rejected lines)
    # the verifier on the update's episodes (rewards/verifier.py; accepted/rejected lines of valid candidates from
    # round 1 on): Kendall tau of episode returns against the task's order, against progress closed, and the share
    # of steps at the episode's maximum reward
    verifier_tau: float | None = None
    verifier_progress: float | None = None
    verifier_flooding: float | None = None
    evaluated: SlotRecord | None = None
    """An evaluated line's measurement: what the slot's fitness was made of at that update (``SlotRecord``'s
    candidates view, written into the line)."""

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
            "origin": self.origin,
            "proxy": self.proxy,
            "verifier_tau": self.verifier_tau,
            "verifier_progress": self.verifier_progress,
            "verifier_flooding": self.verifier_flooding,
        }
        if self.evaluated is not None:
            data.update(self.evaluated.to_json("candidates"))
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
            origin=row.get("origin") if isinstance(row.get("origin"), str) else None,
            proxy=as_opt_float(row.get("proxy")),
            verifier_tau=as_opt_float(row.get("verifier_tau")),
            verifier_progress=as_opt_float(row.get("verifier_progress")),
            verifier_flooding=as_opt_float(row.get("verifier_flooding")),
            # any line that carries a measurement (an older one may lack the verdict, or carry statistics elsewhere)
            evaluated=SlotRecord.from_json(row, "candidates", slot=as_int(row.get("slot")) or 0, reward_id=str(cid))
            if verdict == "evaluated" or not SlotRecord.keys("candidates").isdisjoint(row) else None,
        )
