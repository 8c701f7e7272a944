"""A reward candidate as the LLM proposes it (named components) and its parsed, checked form."""

from __future__ import annotations

import hashlib
import json
import keyword
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy
from sympy.printing.str import StrPrinter

from lares_agent.rewards.complexity import ComplexityWeights, expression_complexity, total_complexity
from lares_agent.rewards.limits import Limits, RewardRejected
from lares_agent.rewards.parse import parse_expression

__all__ = [
    "CandidateData",
    "ParsedReward",
    "RewardCandidate",
    "candidate_id",
    "canonical_text",
    "parse_candidate",
    "reward_key",
]


class _CanonicalPrinter(StrPrinter):  # type: ignore[misc]  # sympy ships no type hints
    """sympy's str, but floats as Python's shortest round-trip repr: '0.05', not '0.0500000000000000',
    and parsing the text again gives the very same numbers."""

    def _print_Float(self, expr: sympy.Float) -> str:
        return repr(float(expr))


def canonical_text(expr: sympy.Basic) -> str:
    """The stable text of a parsed expression; `parse_expression` of it gives the same tree back."""
    text: str = _CanonicalPrinter().doprint(expr)
    return text


@dataclass(frozen=True)
class RewardCandidate:
    """What an LLM proposes: `{"components": {"name": "expression", ...}, "rationale": "..."}`."""

    components: Mapping[str, str]
    rationale: str = ""


CandidateData = str | Mapping[str, Any] | RewardCandidate
"""What `parse_candidate` takes: JSON text or a bare expression (the CLI, `--rewards` files), the mapping an LLM
answer decodes to (the graph passes it as decoded, never re-encoded), or a `RewardCandidate`."""

@dataclass(frozen=True)
class ParsedReward:
    """A candidate that passed the language checks. The reward is the sum of the components.

    Plain dicts (not read-only proxies) so that parsed and compiled rewards pickle for worker processes.
    """

    components: Mapping[str, sympy.Expr]
    canonical: Mapping[str, str]  # sympy's str of each component: stable, and parseable again
    complexity: float  # weighted op count + depth, summed over components
    features_used: frozenset[str]
    rationale: str = ""
    component_complexity: Mapping[str, float] = field(default_factory=dict)


def reward_key(parsed: ParsedReward) -> str:
    """The identity of a reward: the canonical text of the total, so `2*d` and `d*2`, renamed components and
    re-split terms are the same reward. The one notion of "the same reward" (duplicates in a round, diversity of
    the population); a compiled reward carries it as `key`."""
    return canonical_text(sympy.Add(*parsed.components.values()))


def candidate_id(parsed: ParsedReward, prefix: str = "r") -> str:
    """A default name for a reward that has none: a hash of the canonical components.

    A name, not an identity: two ids can name the same reward (renamed components hash differently, and the graph
    names candidates by round and attempt); compare rewards by `reward_key`.
    """
    text = json.dumps(dict(parsed.canonical), sort_keys=True)
    return f"{prefix}-{hashlib.sha1(text.encode()).hexdigest()[:10]}"


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise RewardRejected(f"duplicate key '{key[:40]}' in candidate JSON")
        seen[key] = value
    return seen


def _strip_fence(text: str) -> str:
    """LLMs often wrap JSON in a ```json fence; accept exactly that wrapping and nothing looser."""
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        body = text[3:-3]
        first_newline = body.find("\n")
        if first_newline >= 0 and body[:first_newline].strip() in ("", "json", "JSON"):
            return body[first_newline + 1 :].strip()
    return text


def _text_chars(candidate: RewardCandidate) -> int:
    """Characters of a candidate's names, expressions and rationale (what a prompt or a checkpoint would hold)."""
    return len(candidate.rationale) + sum(
        len(str(name)) + (len(text) if isinstance(text, str) else 0) for name, text in candidate.components.items()
    )


def _to_candidate(data: CandidateData, limits: Limits) -> RewardCandidate:
    """Decode to a RewardCandidate; text over `max_candidate_chars` is refused before it is decoded, a mapping
    when its names, expressions and rationale together exceed it."""
    candidate = _decode(data, limits)
    chars = _text_chars(candidate)
    if chars > limits.max_candidate_chars:
        raise RewardRejected(
            f"candidate too long: {chars} characters in its names, expressions and rationale, "
            f"limit {limits.max_candidate_chars}"
        )
    return candidate


def _decode(data: CandidateData, limits: Limits) -> RewardCandidate:
    if isinstance(data, RewardCandidate):
        return data
    if isinstance(data, str):
        if len(data) > limits.max_candidate_chars:
            raise RewardRejected(f"candidate too long: {len(data)} characters, limit {limits.max_candidate_chars}")
        text = _strip_fence(data.strip())
        if not text.startswith("{"):
            return RewardCandidate({"reward": text})
        try:
            data = json.loads(text, object_pairs_hook=_reject_duplicates)
        except RewardRejected:
            raise
        except json.JSONDecodeError as err:
            raise RewardRejected(f"invalid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
        except (ValueError, RecursionError) as err:  # e.g. an integer over Python's digit limit, deep nesting
            raise RewardRejected(f"invalid JSON: {type(err).__name__}") from None
    if not isinstance(data, Mapping):
        raise RewardRejected(f"candidate must be a JSON object, got {type(data).__name__}")
    components = data.get("components")
    if not isinstance(components, Mapping):
        raise RewardRejected('candidate needs "components": {"name": "expression", ...}')
    rationale = data.get("rationale", "")
    if rationale is None:
        rationale = ""
    if not isinstance(rationale, str):
        raise RewardRejected("rationale must be text")
    return RewardCandidate(dict(components), rationale)


def _check_name(name: object, limits: Limits) -> str:
    if not isinstance(name, str):
        raise RewardRejected(f"component name {name!r:.40} must be text")
    if not (name.isidentifier() and name.isascii()) or keyword.iskeyword(name):
        raise RewardRejected(f"component name '{name[:40]}' must be an identifier like 'reach_bonus'")
    if len(name) > limits.max_name_chars:
        raise RewardRejected(f"component name '{name[:40]}...' is longer than {limits.max_name_chars} characters")
    return name


def parse_candidate(
    data: CandidateData,
    feature_names: Collection[str],
    limits: Limits = Limits(),
    weights: ComplexityWeights = ComplexityWeights(),
) -> ParsedReward:
    """Parse a candidate: JSON text, a dict, a RewardCandidate, or a bare expression (one component "reward").

    Raises RewardRejected whose reason names the failing component.
    """
    candidate = _to_candidate(data, limits)
    if not candidate.components:
        raise RewardRejected("candidate has no components")
    if len(candidate.components) > limits.max_components:
        raise RewardRejected(
            f"candidate has {len(candidate.components)} components, limit {limits.max_components}"
        )
    if len(candidate.rationale) > limits.max_rationale_chars:
        raise RewardRejected(f"rationale longer than {limits.max_rationale_chars} characters")
    exprs: dict[str, sympy.Expr] = {}
    for raw_name, text in candidate.components.items():
        name = _check_name(raw_name, limits)
        if not isinstance(text, str):
            raise RewardRejected(f"component '{name}': expression must be text, got {type(text).__name__}")
        try:
            exprs[name] = parse_expression(text, feature_names, limits)
        except RewardRejected as err:
            raise RewardRejected(f"component '{name}': {err.reason}") from None
    canonical = {name: canonical_text(expr) for name, expr in exprs.items()}
    for name, text in canonical.items():
        # Checkpoints store the canonical text and `load_reward` parses it again on resume, so it must pass the
        # same limits (found by fuzzing: 16 nested where(flag, ...) grow past max_nodes once written as Ne(flag, 0)).
        try:
            parse_expression(text, feature_names, limits)
        except RewardRejected as err:
            raise RewardRejected(
                f"component '{name}' fails the limits once written canonically: {err.reason}"
            ) from None
    used = frozenset(s.name for expr in exprs.values() for s in expr.free_symbols)
    per_component = {name: expression_complexity(expr, weights) for name, expr in exprs.items()}
    return ParsedReward(
        components=exprs,
        canonical=canonical,
        complexity=total_complexity(exprs.values(), weights),
        features_used=used,
        rationale=candidate.rationale,
        component_complexity=per_component,
    )
