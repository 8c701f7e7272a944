"""The trace's types: a node step, an LLM call, a candidate and its lineage, and the whole run's trace.

`trace/reader.py` builds them from a run folder; `lares trace` (cli/trace_cmd.py) renders them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lares_agent.errors import LaresError
from lares_agent.graphs.prompting import AnswerError, extract_candidates
from lares_agent.runs import RewardUpdateRecord

__all__ = ["NODES", "CandidateTrace", "LLMCall", "Lineage", "RunTrace", "TraceStep", "UnknownCandidateError"]

NODES = ("analyse", "critique", "propose", "validate")


class UnknownCandidateError(LaresError):
    """`--candidate ID` names no candidate of the run."""


@dataclass(frozen=True)
class LLMCall:
    """One attempt of one LLM call (a retried call has several rows with the same `call` index)."""

    call: int
    node: str
    round: int | None
    attempt: int | None  # the graph's propose attempt (0 for analyse / critique)
    persona: str | None
    messages: tuple[Mapping[str, str], ...]
    answer: str | None
    ok: bool
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    time: str
    try_number: int  # the client's retry number of this row (1 = first try)


@dataclass(frozen=True)
class TraceStep:
    """One node execution: when it ended, what it said, what it wrote, which LLM calls it made."""

    round: int
    step: int  # LangGraph's super-step number within the round's thread
    time: str  # ISO 8601 (UTC) when the node's checkpoint was written
    seconds: float | None  # since the previous checkpoint of the thread (about the node's run time)
    node: str
    attempt: int
    persona: str
    summary: str
    output: Mapping[str, Any]  # the node's part of the state: analysis, critique, pending or the verdicts
    calls: tuple[LLMCall, ...] = ()

    @property
    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.calls)


@dataclass(frozen=True)
class CandidateTrace:
    """One proposal as the run recorded it, with every fitness it got later."""

    id: str
    round: int | None = None
    attempt: int | None = None
    verdict: str = "unknown"  # accepted | rejected | evaluated (known only from fitness rows) | unknown
    reason: str = ""
    components: Mapping[str, str] = field(default_factory=dict)
    rationale: str = ""
    complexity: float | None = None
    slot: int | None = None
    parent_id: str | None = None
    critique_id: str | None = None
    # {"round", "slot", "fitness", "success"[, "learner_success"]}, and what the fitness was made of where the run
    # recorded it: "graded_by", "task_return", "progress_closed", "approach_closed", "complexity_penalty"
    evaluations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Lineage:
    """Where a candidate came from: its ancestors (elite it improved, that elite's parent, ...), the critique it
    was conditioned on, the propose step and LLM call that wrote it, and the validate step that judged it."""

    candidate: CandidateTrace
    ancestors: tuple[CandidateTrace, ...]
    children: tuple[str, ...]
    critique: str | None
    proposed_by: TraceStep | None
    call: LLMCall | None
    validated_by: TraceStep | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NoteTrace:
    """A user's note (`lares feedback`, runs/feedback.py) and the round whose critique took it (None: waiting)."""

    id: str
    text: str
    round: int | None


@dataclass(frozen=True)
class RunTrace:
    """Everything `lares trace` shows about one run."""

    root: Path
    task: str
    persona: str
    llm_backend: str
    steps: tuple[TraceStep, ...]
    candidates: Mapping[str, CandidateTrace]
    unmatched_calls: tuple[LLMCall, ...]  # calls no stored step claims (a node killed mid-call)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)  # candidate id -> the decoded answer item
    updates: tuple[RewardUpdateRecord, ...] = ()
    """The reward updates (events.jsonl), by round: what ranked the slots (``graded_by``) and each slot's value.
    The update of round R ranked the rewards that the graph's round R then replaced."""
    notes: tuple[NoteTrace, ...] = ()
    """The user's notes, oldest first, each with the round that took it into its critique."""
    shaping: str = "additive"
    """What the LLM wrote (config.json `shaping`): a reward, or a potential that shaped a base reward."""
    potentials: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Under `--shaping potential`: each reward id's `potential` event (its base, gamma and standardisation)."""

    def form(self, reward_id: str) -> str:
        """One line saying what a reward's components are: the reward itself, or a potential and its shaping."""
        if self.shaping != "potential":
            return "additive: the components sum to the reward the learners trained on"
        shaped = self.potentials.get(reward_id)
        if shaped is None:
            return "potential Phi (not installed, so no base or standardisation was fixed)"
        return (f"potential Phi: the learners trained on {shaped.get('base')} + gamma*Phi(s') - Phi(s), gamma "
                f"{shaped.get('gamma')}, Phi = (sum - {shaped.get('top'):.4g}) / {shaped.get('spread'):.4g}")

    def update(self, round: int) -> RewardUpdateRecord | None:
        """The reward update of one round (the last one logged, after a resume), or None."""
        found = [u for u in self.updates if u.round == round]
        return found[-1] if found else None

    @property
    def rounds(self) -> tuple[int, ...]:
        return tuple(sorted({s.round for s in self.steps}))

    def select(self, node: str | None = None, round: int | None = None) -> tuple[TraceStep, ...]:
        """The steps of one node and/or one round; raises LaresError for a node or round the run does not have."""
        if node is not None and node not in NODES:
            raise LaresError(f"--node must be one of {', '.join(NODES)}, not {node!r}")
        if round is not None and round not in self.rounds:
            have = ", ".join(map(str, self.rounds)) or "none (no graph step was recorded)"
            raise LaresError(f"run {self.root} has no round {round}; its rounds are: {have}")
        return tuple(s for s in self.steps if (node is None or s.node == node) and (round is None or s.round == round))

    def lineage(self, candidate_id: str) -> Lineage:
        """A candidate's record and where it came from; raises UnknownCandidateError with close ids."""
        cand = self.candidates.get(candidate_id)
        if cand is None:
            close = [c for c in self.candidates if candidate_id in c or c.endswith(candidate_id)][:5]
            some = close or list(self.candidates)[-5:]
            hint = f"; known ids include: {', '.join(some)}" if some else "; the run has no candidates yet"
            raise UnknownCandidateError(f"run {self.root} has no candidate {candidate_id!r}{hint}")
        ancestors: list[CandidateTrace] = []
        seen = {cand.id}
        parent = cand.parent_id
        while parent and parent not in seen:
            seen.add(parent)
            found = self.candidates.get(parent, CandidateTrace(id=parent))
            ancestors.append(found)
            parent = found.parent_id
        children = tuple(c.id for c in self.candidates.values() if c.parent_id == cand.id)
        critique = next(
            (str(s.output.get("critique") or "") for s in self.steps
             if s.node == "critique" and cand.critique_id and s.output.get("critique_id") == cand.critique_id),
            None,
        )
        proposed = next((s for s in self.steps if s.node == "propose" and _holds(s, "pending", cand.id)), None)
        validated = next((s for s in self.steps if s.node == "validate"
                          and (_holds(s, "accepted", cand.id) or _holds(s, "rejected", cand.id))), None)
        call = self._call_for(cand.id, proposed) if proposed is not None else None
        return Lineage(cand, tuple(ancestors), children, critique, proposed, call, validated)

    def _call_for(self, candidate_id: str, step: TraceStep) -> LLMCall | None:
        """The LLM call whose answer held this candidate: the one whose parsed items include its exact JSON;
        for an unusable answer (no JSON), the k-th failed call of the step for the k-th error proposal."""
        groups: dict[int, list[LLMCall]] = defaultdict(list)
        for c in step.calls:
            groups[c.call].append(c)
        finals = [rows[-1] for _, rows in sorted(groups.items())]
        raw = self.raw.get(candidate_id)
        failed: list[LLMCall] = []
        for c in finals:
            items = _items(c.answer) if c.ok else None
            if items is None:
                failed.append(c)
            elif raw is not None and any(i == raw for i in items):
                return c
        errors = [p.get("id") for p in step.output.get("pending") or [] if p.get("error")]
        if candidate_id in errors and errors.index(candidate_id) < len(failed):
            return failed[errors.index(candidate_id)]
        return None


def _items(answer: str | None) -> list[dict[str, Any]] | None:
    try:
        return extract_candidates(answer or "")
    except AnswerError:
        return None


def _holds(step: TraceStep, key: str, candidate_id: str) -> bool:
    return any(r.get("id") == candidate_id for r in step.output.get(key) or [])

