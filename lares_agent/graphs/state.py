"""Graph state: small, serialisable records (ids, expressions, verdicts, summaries), never tensors.

One graph thread is one reward-update round. Lists that several node runs extend (accepted, rejected, the
step log) use an `operator.add` reducer, so each node returns only what it adds (LangGraph partial
updates); `pending` is replaced by each `propose` and emptied by `validate`.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from lares_agent.engine import HumanReward

__all__ = ["HUMAN_ELITE", "CandidateRecord", "EliteInfo", "RoundInput", "RoundState", "StepRecord", "step"]

HUMAN_ELITE = HumanReward.id
"""The elite id of the task's own reward (the init setting's human-reward learner)."""


class EliteInfo(TypedDict, total=False):
    """An elite candidate as the search layer reports it."""

    id: str
    components: dict[str, str]
    fitness: float
    success: float
    complexity: float
    stats: dict[str, dict[str, float]]  # component -> {"mean": .., "std": .., "share": ..} on the buffer
    task_return: float  # mean task (human) return per evaluation episode; absent where the task has none
    graded_by: str  # what the update graded fitness on: "success", "return", "progress" or "approach"


class CandidateRecord(TypedDict, total=False):
    """One proposal and its verdict. Accepted: canonical components; rejected: as written (may be empty)."""

    id: str
    round: int
    attempt: int
    components: dict[str, str]
    rationale: str
    complexity: float | None
    parent_id: str | None
    critique_id: str | None
    accepted: bool
    reason: str
    key: str | None  # the reward's identity (`rewards.reward_key`), set by validate; duplicates share it
    candidate: dict[str, Any]  # the mapping the LLM's answer decoded to (pending only; validate parses it)
    error: str  # set by propose when the answer itself was unusable (validate forwards it as the reason)
    origin: str  # "child": a numeric child of `parent_id` (rewards/mutate.py); "edit": a random structural edit
    # (rewards/edits.py, the random-edit control); "rule": the critique's computed edits (the critique-edit control);
    # absent: the LLM wrote it
    proxy: float | None  # the offline pre-screen's score on the round's sample (rewards/prescreen.py), set by validate
    # the verifier's numbers on the update's episodes (rewards/verifier.py), set by validate from round 1 on where
    # defined; logged, never deciding
    verifier_tau: float | None
    verifier_progress: float | None
    verifier_flooding: float | None


class StepRecord(TypedDict):
    """One node execution, for `lares trace`."""

    node: str
    attempt: int
    summary: str


class RoundInput(TypedDict, total=False):
    """What the search layer passes in for one round."""

    round: int
    elites: list[EliteInfo]
    rollout_ids: list[str]
    n_wanted: int
    explore: bool
    rejections: list[str]  # failure reasons from earlier rounds, for the critique
    tried: list[str]  # `reward_key`s of every reward the run accepted before: a discarded one is not proposed again
    feedback: list[dict[str, str]]  # the user's notes this round takes ({"id", "text"}, runs/feedback.py)


class RoundState(RoundInput, total=False):
    """The whole state of one round's thread."""

    analysis: str
    critique: str
    critique_id: str | None
    cases: str
    pending: list[CandidateRecord]
    accepted: Annotated[list[CandidateRecord], operator.add]
    rejected: Annotated[list[CandidateRecord], operator.add]
    attempts: Annotated[int, operator.add]
    steps: Annotated[list[StepRecord], operator.add]
    node: str
    summary: str
    facts: list[dict[str, Any]]  # analyse: the computed facts (tools/facts.py Fact.to_json)
    fact_check: dict[str, Any]  # analyse, --analysis llm: {checked, dropped, statements: [{statement, reason}]}
    defects: list[dict[str, Any]]  # critique: kept defects with their facts, edit and voters (critique_rules.Defect)
    critics: list[str]  # critique: the personas that voted
    critique_check: dict[str, Any]  # critique, --analysis llm: {dropped} statements of the critics refuted by facts


def step(node: str, attempt: int, summary: str, **update: Any) -> dict[str, Any]:
    """A partial update that also logs the node and a one-line summary (the readable trace)."""
    summary = " ".join(summary.split())[:300]
    record = StepRecord(node=node, attempt=attempt, summary=summary)
    return {**update, "node": node, "summary": summary, "steps": [record]}
