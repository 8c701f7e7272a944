"""Critique rules: each computed fact that is a defect becomes a `Defect` with one concrete edit.

The 1.5B critic gave the same generic fix for every defect; here each defect is tied to its fact and its edit is
computed from the fact's numbers: a flat `exp(-k*d)` gets a scale near the median of d on the sample, an effort
term that outweighs progress a weight ten times lower, a stall or a regression near the goal a near-goal term,
a success that never happens a bonus on a threshold the policies already reach. Defects with the same fix
(`Defect.key`: kind of edit and what it touches) are merged, their voters united; with several critic personas a
defect an LLM critic added is kept when at least half the critics name it (`vote`).

A computed defect also carries its edit as operations on a reward's components (`Defect.change`), so the edit can
be made without the LLM (`apply_changes`, the critique-edit control): a lead the model's answers owe to the
critique's arithmetic then shows as the control's lead too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lares_agent.tools.diagnosis import evaluated_success
from lares_agent.tools.facts import Fact

__all__ = ["CHANGE_OPS", "Change", "Defect", "apply_changes", "defects_from_facts", "defects_from_text",
           "feedback_defects", "merge_defects", "render_defects", "vote"]

# One operation of an edit on a reward's components, (op, component, expression): "add" sets the component (added or
# replaced), "replace" sets one the reward has, "times" multiplies it by the expression, "negate" flips its sign and
# "drop" removes it; the last three need the component, and ignore the expression.
Change = tuple[str, str, str]
CHANGE_OPS = ("add", "replace", "times", "negate", "drop")


@dataclass(frozen=True)
class Defect:
    """A defect of the elite rewards and the edit that fixes it; `voters` are the critic personas that name it."""

    kind: str  # the edit: scale | weight | near_goal | bonus | sign | smooth | dense | other | user
    subject: str  # the component or feature the edit touches
    problem: str
    edit: str
    facts: tuple[Mapping[str, Any], ...] = ()  # the facts it is tied to (Fact.to_json); () for an LLM-only defect
    voters: tuple[str, ...] = ()
    source: str = "rules"  # rules (computed) | llm (a critic's bullet no rule produced) | user (a user's note)
    change: tuple[Change, ...] = ()  # the edit as operations (computed defects only; () where it names no number)

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.subject)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "subject": self.subject, "problem": self.problem, "edit": self.edit,
                "facts": [dict(f) for f in self.facts], "voters": list(self.voters), "source": self.source,
                "change": [list(c) for c in self.change]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Defect:
        return cls(kind=str(data["kind"]), subject=str(data.get("subject") or ""),
                   problem=str(data.get("problem") or ""), edit=str(data.get("edit") or ""),
                   facts=tuple(data.get("facts") or ()),
                   voters=tuple(data.get("voters") or ()), source=str(data.get("source") or "rules"),
                   change=tuple((str(op), str(name), str(expr)) for op, name, expr in data.get("change") or ()))


def _g(x: float) -> str:
    return f"{x:.3g}"


def _expr(elites: Sequence[Mapping[str, Any]], fact: Fact) -> str:
    for e in elites:
        if not fact.source or e.get("id") == fact.source:
            found = (e.get("components") or {}).get(fact.subject)
            if found:
                return str(found)
    return fact.subject


def _reach(facts: Sequence[Fact], feature: str) -> tuple[float, float] | None:
    """(the policies' best value of ``feature``, a bonus threshold the policies reach): 1.5x the best, but below
    where the episodes start, or the bonus would fire from the first step and be a constant (docs/results-archive.md,
    "Sample efficiency on five MetaWorld tasks (50k steps)": door-close-v3)."""
    found = [f for f in facts if f.kind == "progress" and f.subject == feature]
    if not found:
        return None
    best = min(f.numbers["best"] for f in found)
    start = min(f.numbers.get("start", math.inf) for f in found)
    t = 1.5 * max(best, 1e-3)
    return best, (t if t < start or start <= best else best + 0.5 * (start - best))


def _rule(fact: Fact, facts: Sequence[Fact], elites: Sequence[Mapping[str, Any]], progress: str,
          smooth_on: str | None) -> Defect | None:
    n = fact.numbers
    expr = _expr(elites, fact)
    tie = (fact.to_json(),)
    subject = fact.subject
    if fact.kind == "flat":
        s = max(n["median"], 1e-3)
        w = n.get("range", 1.0)
        weight = "" if math.isclose(w, 1.0, rel_tol=0.05) else f"{_g(w)}*"
        new = f"{weight}exp(-{fact.feature}/{_g(s)})"
        return Defect("scale", subject, fact.text,
                      f"{subject}: replace {expr} by {new} (scale at the median {fact.feature} {_g(n['median'])} on "
                      "the sample, so it changes where the policy is)", tie, change=(("replace", subject, new),))
    if fact.kind == "effort":
        return Defect("weight", subject, fact.text, f"{subject}: lower its weight tenfold: {expr} -> 0.1*({expr})",
                      tie, change=(("times", subject, "0.1"),))
    if fact.kind == "dominant":
        k = f"{min(max((1 - n['share']) / max(n['share'], 1e-9), 0.01), 0.5):.2g}"
        return Defect("weight", subject, fact.text, f"{subject}: scale it by {k} so the other terms matter: "
                      f"{k}*({expr})", tie, change=(("times", subject, k),))
    if fact.kind == "wrong_sign":
        return Defect("sign", subject, fact.text,
                      f"{subject}: flip its sign, -({expr}), or write it as w*exp(-{fact.feature}/s) with w, s > 0",
                      tie, change=(("negate", subject, ""),))
    if fact.kind in ("regressed", "stall") and (fact.kind == "regressed" or n.get("near_goal")):
        s = max(n["best"] if fact.kind == "regressed" else n["value"], 1e-3)
        near = f"2*exp(-{subject}/{_g(s)})"
        return Defect("near_goal", subject, fact.text,
                      f"add a near-goal term that pays for the last {_g(s)} of {subject}: near = {near}", tie,
                      change=(("add", "near", near),))
    if fact.kind == "stall":
        v = max(n["value"], 1e-3)
        shape = f"2*exp(-{subject}/{_g(v)})"
        return Defect("scale", subject, fact.text,
                      f"add shaping whose scale is the stall value, so moving on from {_g(v)} pays: shape = {shape}",
                      tie, change=(("add", "shape", shape),))
    if fact.kind == "success" and n["rate"] == 0 and not (evaluated_success(fact, elites) or n.get("evaluated")):
        # The kept episodes may all have failed where the evaluation succeeded: no bonus "that can fire" then.
        reach = _reach(facts, progress)
        if reach is None:
            return Defect("bonus", progress, fact.text, "add a bonus on a threshold of the progress feature the "
                          f"policies reach: bonus = 5*({progress} < t), t above their best {progress}", tie)
        best, t = reach
        bonus = f"5*({progress} < {_g(t)})"
        return Defect("bonus", progress, fact.text,
                      f"add a bonus that can fire: bonus = {bonus} (the policies get to {progress} = {_g(best)}; "
                      "success itself never fires)", tie, change=(("add", "bonus", bonus),))
    if fact.kind == "silent":
        reach = _reach(facts, progress)
        bonus = f"5*({progress} < {_g(reach[1])})" if reach is not None else ""
        where = f" such as {bonus}" if bonus else ""
        return Defect("bonus" if bonus else "other", progress if bonus else subject, fact.text,
                      f"{subject} ({expr}) never fires: drop it or replace it by a term the policy can trigger{where}",
                      tie, change=(("drop", subject, ""),) + ((("add", "bonus", bonus),) if bonus else ()))
    if fact.kind in ("oscillation", "jerk") and smooth_on:
        smooth = f"-0.05*{smooth_on}"
        return Defect("smooth", smooth_on, fact.text, f"add a small smoothness cost: smooth = {smooth}", tie,
                      change=(("add", "smooth", smooth),))
    if fact.kind == "progress" and subject == progress and n["closed"] < 0.1:
        dense = f"-2*{progress}"
        return Defect("dense", progress, fact.text, f"add a dense progress term: progress = {dense}", tie,
                      change=(("add", "progress", dense),))
    return None


def apply_changes(components: Mapping[str, str], defects: Iterable[Defect]) -> tuple[dict[str, str], list[Defect]]:
    """`components` with each defect's `change` made in turn, and the defects made. A defect is skipped whole where
    its change needs a component the reward lacks, would leave none, or touches one an earlier defect changed (so
    every defect made shows in the result). "add" replaces a component of its name: the rules name their terms
    (near, shape, bonus, ...), and in a descendant the term of that name is the one an earlier edit added."""
    out = dict(components)
    made: list[Defect] = []
    touched: set[str] = set()
    for d in defects:
        names = {name for _, name, _ in d.change}
        edited = None if names & touched else _changed(out, d.change)
        if edited is not None and edited != out:
            out = edited
            made.append(d)
            touched |= names
    return out, made


def _changed(components: dict[str, str], change: Sequence[Change]) -> dict[str, str] | None:
    out = dict(components)
    for op, name, expr in change:
        if op not in CHANGE_OPS:
            raise ValueError(f"unknown change operation {op!r}; one of {', '.join(CHANGE_OPS)}")
        if op == "add":
            out[name] = expr
        elif name not in out:
            return None
        elif op == "drop":
            del out[name]
        else:
            out[name] = {"replace": expr, "times": f"{expr}*({out[name]})", "negate": f"-({out[name]})"}[op]
    return out or None


def defects_from_facts(facts: Sequence[Fact], elites: Sequence[Mapping[str, Any]], progress: str,
                       feature_names: Sequence[str], voters: Sequence[str]) -> list[Defect]:
    """The computed defects (every voter names each: the rules are the same for every persona), merged."""
    smooth_on = "action_norm" if "action_norm" in feature_names else next(
        (n for n in feature_names if n.endswith("speed")), None)
    found = [_rule(f, facts, elites, progress, smooth_on) for f in facts]
    return merge_defects(replace(d, voters=tuple(voters)) for d in found if d is not None)


_KINDS = (
    ("sign", re.compile(r"\bsign\b|flip|wrong direction|rewards? moving away")),
    ("near_goal", re.compile(r"near[- ]goal|close to the (goal|target)|last (bit|part|centimet)|precision"
                             r"|final approach")),
    ("bonus", re.compile(r"\bbonus\b|success")),
    ("smooth", re.compile(r"smooth|jerk|oscillat")),
    ("weight", re.compile(r"weight|tenfold|too (large|big|strong|high)|outweigh|dominat|lower|reduce|smaller")),
    ("scale", re.compile(r"\bscale\b|steep|flat|saturat|temperature|exp\(")),
    ("dense", re.compile(r"dense|progress term|shaping")),
)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")


def defects_from_text(text: str, voter: str, components: Sequence[str], feature_names: Sequence[str]) -> list[Defect]:
    """An LLM critique's bullets as defects: the kind of edit and the component (or feature) each names, so the same
    fix from several critics (or from a rule) merges."""
    out = []
    for line in text.splitlines():
        body = _BULLET.sub("", line).strip()
        if not body:
            continue
        low = body.lower()
        kind = next((k for k, pattern in _KINDS if pattern.search(low)), "other")
        names = [c for c in components if re.search(rf"\b{re.escape(c.lower())}\b", low)]
        names += [f for f in feature_names if re.search(rf"\b{re.escape(f.lower())}\b", low)]
        subject = names[0] if names else ""
        if kind == "other":
            subject = subject or re.sub(r"\W+", " ", low)[:40].strip()
        out.append(Defect(kind, subject, body, body, (), (voter,), "llm"))
    return out


def feedback_defects(notes: Iterable[Mapping[str, Any]]) -> list[Defect]:
    """The user's notes (`lares feedback`, runs/feedback.py) as defects of their own: kept whatever the critics
    vote, and listed first. The text was cleaned and bounded when it was stored."""
    return [Defect("user", f"note {note.get('id', '?')}", f"The user's note: {note.get('text', '')}",
                   f"The user's note: {note.get('text', '')}", (), ("user",), "user")
            for note in notes if str(note.get("text") or "").strip()]


def merge_defects(defects: Iterable[Defect]) -> list[Defect]:
    """One defect per fix (`key`): the first's text (a computed defect's before a critic's), the facts and voters
    of all. Order: first appearance."""
    merged: dict[tuple[str, str], Defect] = {}
    for d in defects:
        old = merged.get(d.key)
        if old is None:
            merged[d.key] = d
            continue
        first, other = (old, d) if old.source == "rules" or d.source != "rules" else (d, old)
        facts = first.facts + tuple(f for f in other.facts if f not in first.facts)
        voters = tuple(dict.fromkeys(old.voters + d.voters))
        merged[d.key] = replace(first, facts=facts, voters=voters)
    return list(merged.values())


def vote(defects: Iterable[Defect], critics: Sequence[str]) -> list[Defect]:
    """Merge, then keep a defect when at least half the critics name it; most votes first (stable)."""
    need = math.ceil(len(critics) / 2) if critics else 0
    kept = [d for d in merge_defects(defects) if len(d.voters) >= need]
    return sorted(kept, key=lambda d: -len(d.voters))


def render_defects(defects: Sequence[Defect], critics: Sequence[str] = (), max_chars: int = 1200) -> str:
    """The critique the propose prompt reads: one bullet per defect, its fact and its edit."""
    if not defects:
        return "- no defect found in the computed facts: keep the elite's terms and change one weight or scale"
    n = len(critics)
    lines = []
    for d in defects:
        votes = f" [{len(d.voters)}/{n} critics]" if n > 1 and d.source != "user" else ""
        lines.append(f"- {d.problem}. Fix: {d.edit}{votes}" if d.problem != d.edit else f"- {d.edit}{votes}")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 3].rstrip() + "..."

