"""Typed facts about a round's behaviour and rewards: what `tools/diagnosis.py` computes and the graph states.

A fact is data with its numbers: the analyse node renders facts instead of asking the model what the
numbers mean (the 1.5B model wrote "never gets closer" for a rollout that closed 34% of the distance), the
fact checker (`tools/fact_check.py`) tests LLM sentences against them, and the critique rules
(`tools/critique_rules.py`) turn them into defects with concrete edits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

__all__ = ["FACT_KINDS", "Fact", "FactKind", "facts_from_json", "render_facts"]

FactKind = Literal[
    "progress",  # start, end, fraction of the start distance closed (mean over episodes)
    "regressed",  # got to its best, then moved away again
    "stall",  # the progress feature stopped changing for a stretch, away from zero
    "oscillation",  # progress turned back and forth
    "speed",  # mean / max of a speed feature and the share of steps stopped
    "jerk",  # abrupt speed changes
    "success",  # success never / sometimes / always (rate over episodes)
    "contact",  # a 0/1 contact or grasp flag: share of steps on
    "shares",  # one elite's component shares of |reward| (subject: the elite id)
    "dominant",  # one component holds most of |reward|
    "silent",  # a component that is ~0 everywhere (never fires)
    "flat",  # a component whose sensitivity to the progress feature is ~0 on most sample rows
    "effort",  # an effort / action term varies more than the progress terms
    "wrong_sign",  # a component that rises when the lower-is-better progress feature grows
    "task_return",  # one elite's mean task (human) return per evaluation episode (subject "task_return")
]
FACT_KINDS: tuple[FactKind, ...] = get_args(FactKind)


@dataclass(frozen=True)
class Fact:
    """One computed statement: `kind`, what it is about (`subject`: a feature or a component), its numbers and a
    one-line text. `source` names the reward (elite id) whose policy or expression it describes; `feature` the
    feature a component fact is measured against."""

    kind: FactKind
    subject: str
    numbers: Mapping[str, float] = field(default_factory=dict)
    text: str = ""
    source: str = ""
    feature: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FACT_KINDS:
            raise ValueError(f"unknown fact kind {self.kind!r}")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "subject": self.subject, "numbers": {k: float(v) for k, v in self.numbers.items()},
                "text": self.text, "source": self.source, "feature": self.feature}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fact:
        numbers = data.get("numbers") or {}
        return cls(kind=data["kind"], subject=str(data.get("subject") or ""),
                   numbers={str(k): float(v) for k, v in dict(numbers).items()}, text=str(data.get("text") or ""),
                   source=str(data.get("source") or ""), feature=str(data.get("feature") or ""))


def facts_from_json(rows: Iterable[Mapping[str, Any]] | None) -> list[Fact]:
    """Facts back from the state (`facts: list[dict]`); rows of unknown kinds are skipped."""
    out = []
    for row in rows or []:
        try:
            out.append(Fact.from_json(row))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def render_facts(facts: Iterable[Fact], max_chars: int = 1200) -> str:
    """One bullet per fact (its text); the analysis text of `--analysis facts`."""
    lines = [f"- {f.source + ': ' if f.source else ''}{f.text}" for f in facts]
    text = "\n".join(lines) if lines else "- no facts: no rollouts or sample to measure"
    return text if len(text) <= max_chars else text[: max_chars - 3].rstrip() + "..."
