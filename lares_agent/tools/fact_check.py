"""Check an LLM's analysis or critique against the computed facts; drop the statements that contradict them.

The 1.5B model wrote "never gets closer" for a rollout that closed 34% of the distance: in
`--analysis llm` each sentence or bullet about progress, success, a contact flag or a named component is
compared with the facts of `tools/diagnosis.py`, and dropped (and counted) when every fact it could be about
says otherwise. Statements on anything else are kept: the checker refutes, it does not judge style. Advice
("should", "needs to") is not a claim about behaviour and is never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lares_agent.tools.facts import Fact

__all__ = ["CheckResult", "Dropped", "check_text", "contradiction", "split_statements"]

_ADVICE = re.compile(r"\b(should|needs? to|must|could|would|try|consider|recommend)\b")
_NEGATION = re.compile(r"\b(never|not|no|none|without|fails?|failed|unable)\b|n't\b")
_NO_PROGRESS = re.compile(
    r"never (gets?|got|comes?|came|moves?|moved|goes|went) (any )?closer|no (real |significant |clear )?progress"
    r"|(does|did)(n't| not) (get|move|come) (any )?closer|not (getting|moving) closer|never approach"
    r"|(does|did)(n't| not) approach|stays? (at the same distance|as far)|no closer")
_MOVES_AWAY = re.compile(r"moves? away|moving away|gets? (farther|further)|drifts? away|increas\w* (the )?distance")
_NEVER_SUCCEEDS = re.compile(
    r"never (succeed|solve|reach(es)? the (goal|target)|complete)|no success|(does|did)(n't| not) (succeed|solve"
    r"|reach the (goal|target)|complete)|fails? (in )?(every|all|always)|always fails|not successful|unsuccessful"
    r"|success( rate)?( is|:)? (0|zero|none|no)\b")
_ALWAYS_SUCCEEDS = re.compile(r"always (succeed|solve|reach)|succeeds? (in )?(every|all)|every episode succeeds"
                              r"|100% success|success rate (of |is )?(1|100)")
_NOT_ALWAYS = re.compile(r"\b(not|never)\s+always\b|n't always\b")  # "does not always reach it": no always-claim
_SUCCEEDS = re.compile(r"\bsucceed(s|ed)?\b|\bsuccessful(ly)?\b|solves the task|reach(es|ed) the (goal|target)"
                       r"|achieves the goal")
_DOMINATES = re.compile(r"dominat|drives|main (driver|term|component|part|source)|most of the reward"
                        r"|largest (term|share|part|component)")
_SILENT = re.compile(r"never (fires|contributes|matters|activates)|is (always )?(zero|0)\b|does nothing"
                     r"|has no effect|inactive|contributes nothing")
_CONTACT_WORDS = {"grasp": ("grasp",), "touch": ("touch", "contact", "near"), "contact": ("touch", "contact", "near")}
_SPLIT = re.compile(r"(?<=[.!?;])\s+")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")
_LABEL = re.compile(r"^\s*\*\*[^*]{1,40}\*\*\s*:?\s*|^\s*[A-Za-z ]{1,30}\*\*\s*:\s*")  # "**Succeeds**:" headings


@dataclass(frozen=True)
class Dropped:
    """A statement the checker removed and the fact it contradicts."""

    statement: str
    reason: str


@dataclass(frozen=True)
class CheckResult:
    """The checked text (contradicting statements removed), what was kept and what was dropped."""

    text: str
    kept: tuple[str, ...]
    dropped: tuple[Dropped, ...]

    @property
    def count(self) -> int:
        return len(self.dropped)

    def to_json(self) -> dict[str, Any]:
        return {"checked": len(self.kept) + len(self.dropped), "dropped": self.count,
                "statements": [{"statement": d.statement, "reason": d.reason} for d in self.dropped]}


def split_statements(text: str) -> list[list[str]]:
    """Lines of sentences (a bullet line may hold several sentences)."""
    return [[s for s in _SPLIT.split(line.strip()) if s] for line in text.splitlines() if line.strip()]


def _all(facts: Sequence[Fact], test: Callable[[Fact], bool]) -> bool:
    return bool(facts) and all(test(f) for f in facts)


def _mentioned(sentence: str, facts: Iterable[Fact]) -> list[Fact]:
    return [f for f in facts if re.search(rf"\b{re.escape(f.subject.lower())}\b", sentence)]


def _progress(s: str, facts: Sequence[Fact]) -> str | None:
    progress = [f for f in facts if f.kind == "progress"]
    about = _mentioned(s, progress) or progress
    if _NO_PROGRESS.search(s) and _all(about, lambda f: f.numbers["closed"] >= 0.1):
        f = about[0]
        return f"progress: {f.text}"
    regressed = {f.subject for f in facts if f.kind in ("regressed", "oscillation")}  # it did move away at times
    if (_MOVES_AWAY.search(s) and not _NEGATION.search(s)
            and _all(about, lambda f: f.numbers["closed"] > 0 and f.subject not in regressed)):
        return f"progress: {about[0].text}"
    return None


def _rates(f: Fact) -> tuple[float, float]:
    """(lowest, highest) success rate a fact knows: the kept episodes' and the evaluation's (`with_evaluation`)."""
    rates = [f.numbers["rate"], f.numbers.get("evaluated", f.numbers["rate"])]
    return min(rates), max(rates)


def _success(s: str, facts: Sequence[Fact]) -> str | None:
    found = [f for f in facts if f.kind == "success"]
    if not found:
        return None
    if _NEVER_SUCCEEDS.search(s):
        return f"success: {found[0].text}" if _all(found, lambda f: _rates(f)[1] > 0) else None
    if _ALWAYS_SUCCEEDS.search(s) and not _NOT_ALWAYS.search(s):
        return f"success: {found[0].text}" if _all(found, lambda f: _rates(f)[0] < 1) else None
    if _SUCCEEDS.search(s) and not _NEGATION.search(s) and _all(found, lambda f: _rates(f)[1] == 0):
        return f"success: {found[0].text}"
    return None


def _contact(s: str, facts: Sequence[Fact]) -> str | None:
    contacts = [f for f in facts if f.kind == "contact"]
    for word, stems in _CONTACT_WORDS.items():
        if word not in s:
            continue
        about = [f for f in contacts if any(stem in f.subject.lower() for stem in stems)]
        if not about:
            continue
        if _NEGATION.search(s):
            if _all(about, lambda f: f.numbers["share"] > 0):
                return f"contact: {about[0].text}"
        elif _all(about, lambda f: f.numbers["share"] == 0):
            return f"contact: {about[0].text}"
    return None


def _component(s: str, facts: Sequence[Fact]) -> str | None:
    shares: dict[str, list[float]] = {}
    for f in facts:
        if f.kind == "shares":
            for name, share in f.numbers.items():
                shares.setdefault(name, []).append(float(share))
    silent = {f.subject for f in facts if f.kind == "silent"}

    def refuted(pattern: re.Pattern[str], claimed: str) -> bool:
        values = shares[claimed]
        if pattern is _DOMINATES:
            return all(x < 0.5 for x in values)
        return claimed not in silent and all(x > 0.01 for x in values)

    for pattern in (_DOMINATES, _SILENT):
        claim = pattern.search(s)
        if claim is None or (pattern is _DOMINATES and _NEGATION.search(s)):
            continue
        about = _claimed(s, claim.start(), shares)  # "progress drives it, bonus ..." is about progress
        if about is not None and refuted(pattern, about):
            return f"component: {about} has {max(shares[about]):.0%} of |reward|"
    return None


def _claimed(s: str, at: int, names: Iterable[str]) -> str | None:
    """The component a claim at `at` is about: the last one named before it, else the first one after it."""
    spots = [(m.start(), n) for n in names for m in re.finditer(rf"\b{re.escape(n.lower())}\b", s)]
    before = [p for p in spots if p[0] < at]
    if before:
        return max(before)[1]
    return min(spots)[1] if spots else None


_RULES = (_progress, _success, _contact, _component)


def contradiction(statement: str, facts: Sequence[Fact]) -> str | None:
    """The fact a statement contradicts (one line), or None when it is consistent or makes no checkable claim."""
    s = _LABEL.sub("", _BULLET.sub("", statement)).lower()
    if _ADVICE.search(s):
        return None
    for rule in _RULES:
        reason = rule(s, facts)
        if reason is not None:
            return reason
    return None


def check_text(text: str, facts: Sequence[Fact]) -> CheckResult:
    """Drop every statement of `text` that contradicts `facts`; keep the rest in order (bullets stay bullets)."""
    kept: list[str] = []
    dropped: list[Dropped] = []
    lines: list[str] = []
    for line in split_statements(text):
        marker = _BULLET.match(line[0])
        prefix = marker.group(0) if marker else ""
        survivors = []
        for sentence in line:
            reason = contradiction(sentence, facts)
            if reason is None:
                survivors.append(sentence)
                kept.append(sentence)
            else:
                dropped.append(Dropped(_BULLET.sub("", sentence), reason))
        if survivors:
            first = survivors[0] if survivors[0].startswith(prefix) else prefix + _BULLET.sub("", survivors[0])
            body = " ".join([first, *survivors[1:]]).strip()
            if _BULLET.sub("", body):
                lines.append(body)
    return CheckResult("\n".join(lines), tuple(kept), tuple(dropped))
