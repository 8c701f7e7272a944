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
over the distance an episode closes (s of 0.1 to 0.99 m or the distance at the start, r under 0.1 m). In the
evidence grid's two door-close-v3 seeds that never moved the door (docs/RESULTS.md, "The evidence grid on the
current code") the 1.5B wrote `exp(-obj_to_target/10)`, which changes by 5% between the start and the goal, and
`exp(-tcp_to_obj/0.05)`, which is 0.0005 at the handle's start distance of 0.38 m: either way no gradient until the
goal is nearly reached. The tasks' start distances lie between 0.09 and 0.5 m; a term for precision near the goal
is `tolerance`'s zone r, with the margin for the way there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from lares_agent.rewards.shaping import CAGING_PARAMS, SIGMOIDS

__all__ = ["SCALE_BOUNDS", "answer_grammar"]

SCALE_BOUNDS = (0.1, 0.99)
"""The opening terms' scale in metres, as the `scale` rule below writes it ("0." then one or two digits)."""

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


def _alternatives(names: Sequence[str]) -> str:
    return " | ".join(json.dumps(name) for name in names)


def _shaped(rule: str, feature: str, features: Sequence[str]) -> str:
    """Rules for one term over a distance `feature` that grows as the distance shrinks (see the module's text),
    with a scale that shapes the whole way from the start: 0.1 to 0.99 m, or the distance at the episode's start
    where the task has it (`initial_<feature>`, the margin of the tasks' own `tolerance` terms)."""
    d, start = json.dumps(feature), f"initial_{feature}"
    scale = "scale" + (f' | {json.dumps(start)}' if start in features else "")
    return (f'{rule} ::= "-" (num sp "*" sp)? {d} | (num sp "*" sp)? ('
            f'"exp(-" {d} sp "/" sp {rule}scale ")" | "(1 - tanh(" {d} sp "/" sp {rule}scale "))" | '
            f'"tolerance(" {d} sep "0" sep zone sep {rule}scale (sep tolarg)* sp ")")\n'
            f"{rule}scale ::= {scale}")


def answer_grammar(features: Sequence[str], max_components: int, rationale_chars: int = 120, *,
                   progress: str | None = None, approach: str | None = None) -> str:
    """GBNF of one propose answer, ``{"components": {"name": "expression", ...}, "rationale": "..."}``, with 1 to
    ``max_components`` components whose expressions use only ``features`` (the answer the schema of
    `graphs/prompting.proposal_schema` describes for one candidate). With `progress` (and `approach`) the answer
    opens with those components, each one correctly signed shaped term over its feature (the module's text)."""
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
        *[_shaped(f"{name}term", feature, ordered) for name, feature in fixed],
        'component ::= "\\"" [a-z] [a-z0-9_]{0,23} "\\"" sp ":" sp "\\"" sum "\\""',
        f'rationale ::= "\\"" [^"\\\\\\n]{{0,{rationale_chars}}} "\\""',
        f"feature ::= {_alternatives(ordered)}",
        f"unaryname ::= {_alternatives(_UNARY)}",
        f"variadicname ::= {_alternatives(_VARIADIC)}",
        f"shape ::= {_alternatives([repr(s) for s in SIGMOIDS])}",
        f"tolkey ::= {_alternatives(_TOLERANCE_KEYWORDS)}",
        f"cagearg ::= ({_alternatives(CAGING_PARAMS)}) \"=\" sum",
    ]
    return "\n".join(rules) + _EXPRESSION_RULES
