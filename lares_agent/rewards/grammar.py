"""The reward language as a llama.cpp grammar (GBNF): a local model decoding under it can only write an answer
that parses, names only the task's features and calls only the language's functions.

A JSON schema alone (what llama.cpp is given otherwise) fixes the answer's shape but leaves each expression free
text, and the small models' commonest failures were in that text: unknown names, `If(...)`, Python syntax, a cut
string. The grammar is the language's syntax (`parse.py`), not its semantics: argument counts of `tolerance` and
`gripper_caging`, constant-only arguments and the numeric checks stay the parser's and the validator's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from lares_agent.rewards.shaping import CAGING_PARAMS, SIGMOIDS

__all__ = ["answer_grammar"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNARY = ("exp", "log", "sqrt", "tanh", "sigmoid", "abs", "Abs")
_VARIADIC = ("min", "max", "Min", "Max")  # both spellings, as the parser (the task's own rewards use sympy's)
_TOLERANCE_KEYWORDS = ("margin", "value_at_margin")

_EXPRESSION_RULES = r"""
sum ::= prod (sp [-+] sp prod)*
prod ::= unary (sp ("*" | "/") sp unary)*
unary ::= "-"? power
power ::= atom ("**" exponent)?
exponent ::= "-"? num | "(" "-"? num ")"
atom ::= num | feature | "pi" | call | "(" sp sum sp ")" | "(" sp cond sp ")"
num ::= [0-9]{1,6} ("." [0-9]{1,10})? ([eE] "-"? [0-9]{1,2})?
cond ::= comparison (sp ("&" | "|") sp comparison)*
comparison ::= sum sp cmp sp sum | "(" sp cond sp ")" | "~(" sp cond sp ")"
cmp ::= "<" | "<=" | ">" | ">=" | "==" | "!="
call ::= unaryname "(" sp sum sp ")" |
  variadicname "(" sp sum (sep sum)+ sp ")" |
  "where(" sp cond sep sum sep sum sp ")" |
  "clip(" sp sum sep sum sep sum sp ")" |
  "hamacher(" sp sum sep sum sp ")" |
  "tolerance(" sp sum sep tolbounds (sep tolarg)* sp ")" |
  "gripper_caging(" sp cagearg (sep cagearg)* sp ")" |
  "rect_prism(" sp sum sep sum sep sum sep triple sep triple sp ")" |
  "Piecewise(" sp piece (sep piece)* sep "(" sp sum sep "True" sp ")" sp ")"
triple ::= "(" sp sum sep sum sep sum sp ")"
piece ::= "(" sp sum sep cond sp ")"
tolbounds ::= sum sep sum | "bounds=(" sp sum sep sum sp ")"
tolarg ::= sum | shape | tolkey "=" sum | "sigmoid=" shape
sep ::= sp "," sp
sp ::= " "?
"""


def _alternatives(names: Sequence[str]) -> str:
    return " | ".join(json.dumps(name) for name in names)


def answer_grammar(features: Sequence[str], max_components: int, rationale_chars: int = 120) -> str:
    """GBNF of one propose answer, ``{"components": {"name": "expression", ...}, "rationale": "..."}``, with 1 to
    ``max_components`` components whose expressions use only ``features`` (the answer the schema of
    `graphs/prompting.proposal_schema` describes for one candidate)."""
    bad = [name for name in features if not _NAME.fullmatch(name)]
    if not features or bad:
        raise ValueError(f"features must be identifiers, got {bad or 'none'}")
    if max_components < 1:
        raise ValueError("max_components must be at least 1")
    ordered = sorted(set(features))
    rules = [
        'root ::= "{" sp "\\"components\\"" sp ":" sp "{" sp component'
        f' (sep component){{0,{max_components - 1}}} sp "}}" sep "\\"rationale\\"" sp ":" sp rationale sp "}}"',
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
