"""The reward language as a llama.cpp grammar (GBNF): a local model decoding under it can only write an answer
that parses, names only the task's features and calls only the language's functions.

A JSON schema alone (what llama.cpp is given otherwise) fixes the answer's shape but leaves each expression free
text, and the small models' commonest failures were in that text: unknown names, `If(...)`, Python syntax, a cut
string. The grammar is the language's syntax (`parse.py`), not its semantics: argument counts of `tolerance` and
`gripper_caging`, constant-only arguments and the numeric checks stay the parser's and the validator's.

From scratch it also fixes what the small model most often got wrong in meaning (docs/RESULTS.md, "Proposals
without own-task examples, under the grammar"): the answer opens with a "progress" component (and, where the robot
must reach an object first, an "approach" one), each ONE term over its distance that grows as the distance
shrinks, in one of the bounded or linear shapes the tasks' own rewards use (-w*d, w*exp(-d/s), w*(1 - tanh(d/s)),
w*tolerance(d, 0, r, s, ...)). The model still picks the shape and every constant, and writes the other components
freely; the grammar only rules out a wrong sign, a missing progress term, and a scale s that leaves the term flat
over the distance an episode closes (r under 0.1 m; s within `scale_bounds` of the distances the run has seen, or
the distance at the start where the task has it as a feature). In the evidence grid's two door-close-v3 seeds
that never moved the door (docs/RESULTS.md, "The evidence grid") the 1.5B wrote
`exp(-obj_to_target/10)`, which changes by 5% between the start and the goal, and `exp(-tcp_to_obj/0.05)`, which is
0.0005 at the handle's start distance of 0.38 m: either way no gradient until the goal is nearly reached. A fixed
0.1 to 0.99 m still let it write `exp(-obj_to_target/0.1)` for a door 0.49 m from shut (0.008 at the start; docs/
RESULTS.md, "From scratch with the scale bounded"), so the bounds follow the task's own distances. A term for
precision near the goal is `tolerance`'s zone r, with the margin for the way there.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

from lares_agent.rewards.shaping import CAGING_FEATURES, CAGING_PARAMS, SIGMOIDS

__all__ = ["SCALE_BOUNDS", "answer_grammar", "scale_bounds"]

SCALE_BOUNDS = (0.1, 0.99)
"""The opening terms' scale in metres where no distances were sampled, as the `scale` rule below writes it ("0."
then one or two digits)."""


def scale_bounds(values: np.ndarray | None) -> tuple[float, float]:
    """The scales s an opening term `exp(-d/s)` may take for a distance whose sampled values are `values`: from
    D/ln(10), where the term is still a tenth of its top at the distance D episodes start from, to 2D, over which
    it changes by 40%; D is the 90th percentile of the sample (the distances fall from where episodes start),
    the bounds rounded inward to the 0.01 m the grammar writes. `SCALE_BOUNDS` without a usable sample."""
    sampled = np.asarray(values if values is not None else (), np.float64)
    finite = sampled[np.isfinite(sampled)]
    far = float(np.quantile(finite, 0.9)) if finite.size else 0.0
    if not far >= 0.01:  # nothing sampled, or distances too small to shape at the grammar's resolution
        return SCALE_BOUNDS
    low = min(max(math.ceil(100 * far / math.log(10)) / 100, 0.01), 9.9)
    high = math.floor(20 * far) / 10 if 2 * far >= 1 else math.floor(200 * far) / 100  # `_scale_literals`' steps
    return low, min(max(high, low), 9.9)


def _scale_literals(bounds: tuple[float, float]) -> list[str]:
    """Every scale the grammar writes between the bounds: 0.01 m steps below 1 m, 0.1 m steps from 1 to 9.9 m."""
    low, high = (round(100 * b) for b in bounds)
    return [f"{v / 100:.2f}" if v < 100 else f"{v / 100:.1f}"
            for v in range(low, high + 1) if v < 100 or v % 10 == 0]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNARY = ("exp", "log", "sqrt", "tanh", "sigmoid", "abs", "Abs")
_VARIADIC = ("min", "max", "Min", "Max")  # both spellings, as the parser (the task's own rewards use sympy's)
_TOLERANCE_KEYWORDS = ("margin", "value_at_margin")

# Bounded repetitions: the tasks' own rewards have at most 3 terms in a sum, 2 arguments to min/max and 5
# comparisons in a condition; unbounded, the 1.5B repeated one term until the token cap cut the answer
# (docs/RESULTS.md, "The default run"), a minute of background LLM time for a rejected answer.
_EXPRESSION_RULES = r"""
sum ::= prod (sp [-+] sp prod){0,7}
prod ::= unary (sp ("*" | "/") sp unary){0,5}
unary ::= "-"? power
power ::= atom ("**" exponent)?
exponent ::= "-"? num | "(" "-"? num ")"
atom ::= num | feature | "pi" | call | "(" sp sum sp ")" | "(" sp cond sp ")"
num ::= [0-9]{1,6} ("." [0-9]{1,10})? ([eE] "-"? [0-9]{1,2})?
cond ::= comparison (sp ("&" | "|") sp comparison){0,7}
comparison ::= sum sp cmp sp sum | "(" sp cond sp ")" | "~(" sp cond sp ")"
cmp ::= "<" | "<=" | ">" | ">=" | "==" | "!="
call ::= unaryname "(" sp sum sp ")" |
  variadicname "(" sp sum (sep sum){1,3} sp ")" |
  "where(" sp cond sep sum sep sum sp ")" |
  "clip(" sp sum sep sum sep sum sp ")" |
  "hamacher(" sp sum sep sum sp ")" |
  "tolerance(" sp sum sep tolbounds (sep tolarg)* sp ")" |
  "gripper_caging(" sp cagearg (sep cagearg)* sp ")" |
  "rect_prism(" sp sum sep sum sep sum sep triple sep triple sp ")" |
  "Piecewise(" sp piece (sep piece){0,3} sep "(" sp sum sep "True" sp ")" sp ")"
triple ::= "(" sp sum sep sum sep sum sp ")"
piece ::= "(" sp sum sep cond sp ")"
tolbounds ::= sum sep sum | "bounds=(" sp sum sep sum sp ")"
scale ::= "0." [1-9] [0-9]?
zone ::= "0" | "0.0" [0-9]{1,3}
tolarg ::= sum | shape | tolkey "=" sum | "sigmoid=" shape
sep ::= sp "," sp
sp ::= " "?
"""


_CAGING_CALL = '  "gripper_caging(" sp cagearg (sep cagearg)* sp ")" |\n'  # a line of `call` above


def _alternatives(names: Sequence[str]) -> str:
    return " | ".join(json.dumps(name) for name in names)


def _shaped(rule: str, feature: str, features: Sequence[str], bounds: tuple[float, float] | None) -> str:
    """Rules for one term over a distance `feature` that grows as the distance shrinks (see the module's text),
    with a scale that shapes the whole way from the start: within `bounds` (`scale_bounds`; without them 0.1 to
    0.99 m), or the distance at the episode's start where the task has it (`initial_<feature>`, the margin of the
    tasks' own `tolerance` terms)."""
    d, start = json.dumps(feature), f"initial_{feature}"
    scale = "scale" if bounds is None else _alternatives(_scale_literals(bounds))
    scale += f' | {json.dumps(start)}' if start in features else ""
    return (f'{rule} ::= "-" (num sp "*" sp)? {d} | (num sp "*" sp)? ('
            f'"exp(-" {d} sp "/" sp {rule}scale ")" | "(1 - tanh(" {d} sp "/" sp {rule}scale "))" | '
            f'"tolerance(" {d} sep "0" sep zone sep {rule}scale (sep tolarg)* sp ")")\n'
            f"{rule}scale ::= {scale}")


def answer_grammar(features: Sequence[str], max_components: int, rationale_chars: int = 120, *,
                   progress: str | None = None, approach: str | None = None,
                   scales: Mapping[str, tuple[float, float]] | None = None) -> str:
    """GBNF of one propose answer, ``{"components": {"name": "expression", ...}, "rationale": "..."}``, with 1 to
    ``max_components`` components whose expressions use only ``features`` (the answer the schema of
    `graphs/prompting.proposal_schema` describes for one candidate). With `progress` (and `approach`) the answer
    opens with those components, each one correctly signed shaped term over its feature (the module's text), its
    scale within ``scales[feature]`` (`scale_bounds`) where given."""
    bad = [name for name in features if not _NAME.fullmatch(name)]
    if not features or bad:
        raise ValueError(f"features must be identifiers, got {bad or 'none'}")
    fixed = [(name, feature) for name, feature in (("progress", progress), ("approach", approach)) if feature]
    if any(feature not in features for _, feature in fixed):
        raise ValueError(f"the progress and approach features must be among the features, got {progress}, {approach}")
    if approach and not progress:
        raise ValueError("an approach component needs a progress component")
    if max_components < max(1, len(fixed)):
        raise ValueError(f"max_components must be at least {max(1, len(fixed))}")
    ordered = sorted(set(features))
    opening = ' sep '.join(f'"\\"{name}\\"" sp ":" sp "\\"" {name}term "\\""' for name, _ in fixed)
    free = max_components - len(fixed)
    if not fixed:
        body = f"component (sep component){{0,{max_components - 1}}}"
    else:
        body = opening + (f" (sep component){{0,{free}}}" if free else "")
    rules = [
        'root ::= "{" sp "\\"components\\"" sp ":" sp "{" sp ' + body +
        ' sp "}" sep "\\"rationale\\"" sp ":" sp rationale sp "}"',
        *[_shaped(f"{name}term", feature, ordered, (scales or {}).get(feature)) for name, feature in fixed],
        'component ::= "\\"" [a-z] [a-z0-9_]{0,23} "\\"" sp ":" sp "\\"" sum "\\""',
        f'rationale ::= "\\"" [^"\\\\\\n]{{0,{rationale_chars}}} "\\""',
        f"feature ::= {_alternatives(ordered)}",
        f"unaryname ::= {_alternatives(_UNARY)}",
        f"variadicname ::= {_alternatives(_VARIADIC)}",
        f"shape ::= {_alternatives([repr(s) for s in SIGMOIDS])}",
        f"tolkey ::= {_alternatives(_TOLERANCE_KEYWORDS)}",
        f"cagearg ::= ({_alternatives(CAGING_PARAMS)}) \"=\" sum",
    ]
    expression = _EXPRESSION_RULES
    if not set(CAGING_FEATURES) <= set(features):  # gripper_caging reads them: not offered (from scratch), no call
        expression = expression.replace(_CAGING_CALL, "")
    return "\n".join(rules) + expression
