"""Fuzzing the reward language: random and adversarial text and JSON are parsed or refused, never executed.

For every input, `parse_expression` / `parse_candidate` either return or raise `RewardRejected` with a one-line
reason; `validate` (the one candidate validator, with or without the task checks) never raises; nothing
evaluates text (eval, exec and sympy's parser are trapped); and each example finishes within the hypothesis deadline
(a hang guard, not a speed claim). What is accepted is finite on the sample and survives the checkpoint round trip
(its canonical text parses back to the same tree and the same values), since `lares resume` rebuilds rewards from
that text.

The hostile corpora in `tests/data/` (hostile_expressions.txt and hostile_corpus.txt) are replayed through
every entry point. CI runs a few hundred examples per property; the `slow` variants run thousands.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sympy
from helpers import described_task
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lares_agent.rewards import (
    FUNCTION_NAMES,
    CheckConfig,
    RewardRejected,
    feature_symbol,
    load_reward,
    parse_candidate,
    parse_expression,
    synthetic_sample,
    validate,
)
from lares_agent.rewards.candidate import canonical_text

FEATURES = ("tcp_to_obj", "obj_to_target", "tcp_speed", "action_norm", "grasp")
SYMBOLS = {feature_symbol(n) for n in FEATURES}
DATA = Path(__file__).parent / "data"
SAMPLE = synthetic_sample(FEATURES, 64, np.random.default_rng(0))


# The validator's view of a task; the task checks (progress use and sign) are on only where a test says so
# (LOOSE turns them off), so that fuzzed text reaches every check.
TASK = described_task("fuzz", "obj_to_target", {n: (n, "m") for n in FEATURES})
LOOSE = CheckConfig(require_progress_use=False, require_progress_sign=False, require_approach_use=False)

CI = settings(
    max_examples=200,
    deadline=timedelta(seconds=3),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
LONG = settings(CI, max_examples=4000)


# ---------------------------------------------------------------------------------------------- traps
@contextlib.contextmanager
def no_execution() -> Iterator[list[str]]:
    """Record (and refuse) any evaluation of text while parsing: eval/exec of a string, sympy's parser,
    os.system and subprocesses. Code objects still pass: Python's import machinery execs them when sympy
    loads a module lazily."""
    import sympy.parsing.sympy_parser as sympy_parser

    calls: list[str] = []
    real_eval, real_exec = builtins.eval, builtins.exec
    real_parse, real_system, real_popen = sympy_parser.parse_expr, os.system, subprocess.Popen

    def trap(name: str, real: Any = None) -> Any:
        def trapped(*args: Any, **kwargs: Any) -> Any:
            if real is not None and args and not isinstance(args[0], (str, bytes)):
                return real(*args, **kwargs)
            calls.append(name)
            raise AssertionError(f"{name} was called while parsing LLM text")

        return trapped

    builtins.eval, builtins.exec = trap("eval", real_eval), trap("exec", real_exec)
    sympy_parser.parse_expr, os.system, subprocess.Popen = trap("parse_expr"), trap("os.system"), trap("Popen")
    try:
        yield calls
    finally:
        builtins.eval, builtins.exec = real_eval, real_exec
        sympy_parser.parse_expr, os.system, subprocess.Popen = real_parse, real_system, real_popen


def _assert_reason(reason: str) -> None:
    assert isinstance(reason, str) and reason.strip(), "a rejection must say why"
    assert "\n" not in reason and len(reason) < 2000


# ---------------------------------------------------------------------------------------------- properties
def _check_accepted(expr: sympy.Expr, text: str) -> None:
    """The canonical text (what checkpoints store) parses back to the same tree; where it breaks the limits,
    the candidate path must refuse the text, or a checkpoint holding it could not be resumed."""
    assert isinstance(expr, sympy.Expr) and expr.free_symbols and expr.free_symbols <= SYMBOLS
    try:
        again = parse_expression(canonical_text(expr), FEATURES)
    except RewardRejected:
        with pytest.raises(RewardRejected, match="once written canonically"):
            parse_candidate({"components": {"r": text}}, FEATURES)
    else:
        assert again == expr


def _check_validated(data: Any) -> None:
    """validate never raises (with or without the task checks); what it accepts is finite and reloads identically."""
    verdict = validate(data, TASK, SAMPLE, config=LOOSE)
    compiled = verdict.reward
    _assert_reason(verdict.reason)
    assert verdict.accepted == (compiled is not None)
    if compiled is not None:
        total = compiled(SAMPLE)
        assert total.shape == (64,) and np.isfinite(total).all()
        again = load_reward(compiled.to_json(), FEATURES)
        assert np.array_equal(again(SAMPLE), total)
    result = validate(data, TASK, SAMPLE, id="fuzz")
    _assert_reason(result.reason)
    assert result.accepted == (result.reward is not None)


def check_text(text: str) -> None:
    with no_execution() as calls:
        try:
            expr = parse_expression(text, FEATURES)
        except RewardRejected as err:
            _assert_reason(err.reason)
            assert err.reason == str(err)
        else:
            _check_accepted(expr, text)
        _check_validated(text)
    assert calls == []


def check_candidate_data(data: Any) -> None:
    with no_execution() as calls:
        try:
            parsed = parse_candidate(data, FEATURES)
        except RewardRejected as err:
            _assert_reason(err.reason)
        else:
            assert parsed.components and set(parsed.canonical) == set(parsed.components)
            assert parse_candidate({"components": dict(parsed.canonical)}, FEATURES).components == parsed.components
        _check_validated(data)
    assert calls == []


# ---------------------------------------------------------------------------------------------- strategies
_UNLISTED = ("eval", "exec", "open", "__import__", "getattr", "sin", "cos", "sympify", "Symbol", "lambdify",
             "range", "print", "compile", "globals", "Function", "diff", "Integral", "atan2", "еxp", "ｅｖａｌ")
_NAMES = (*FEATURES, "pi", "E", "x", "__class__", "__builtins__", "inf", "nan", "tcp_to_οbj", "True", "None", "_")
_ODD_NUMBERS = ("1e308", "1e-400", "9" * 60, "0x10", "1_000", "1j", "1e6", "1000001", "-0.0", "2.5e-7", "0o7",
                "1e999", "'s'", "b'x'", "...", "f'{x}'")
_BINOPS = (" + ", " - ", " * ", " / ", "**", " // ", " % ", " @ ", " ^ ", " & ", " | ", " << ", " and ", " or ",
           " < ", " <= ", " == ", " != ", " > ", " >= ", " in ", " is ")
_ATTRS = (".__class__", ".real", ".__globals__", ".subs(x, 1)", ".func", ".__dict__", ".args[0]")

numbers = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(_ODD_NUMBERS),
)
leaves = st.one_of(st.sampled_from(_NAMES), numbers)


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    args = st.lists(children, max_size=4).map(", ".join)
    return st.one_of(
        st.tuples(children, st.sampled_from(_BINOPS), children).map("".join),
        st.tuples(st.sampled_from(("-", "+", "not ", "~")), children).map("".join),
        st.tuples(st.sampled_from(sorted(FUNCTION_NAMES) + list(_UNLISTED)), args).map(lambda t: f"{t[0]}({t[1]})"),
        children.map(lambda c: f"({c})"),
        st.tuples(children, st.sampled_from(_ATTRS)).map("".join),
        st.tuples(children, children).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(children, children, children).map(lambda t: f"Piecewise(({t[0]}, {t[1]}), ({t[2]}, True))"),
        st.tuples(children, children, children).map(lambda t: f"where({t[0]}, {t[1]}, {t[2]})"),
        st.tuples(children, numbers, numbers, numbers, numbers).map(lambda t: f"tolerance({', '.join(t)})"),
        st.tuples(children, children).map(lambda t: f"{t[0]} if {t[1]} else 0"),
        children.map(lambda c: f"(lambda: {c})()"),
        children.map(lambda c: f"[{c} for _ in range(10**9)]"),
        st.tuples(children, children).map(lambda t: f"({t[0]}, {t[1]})"),
    )


grammar = st.recursive(leaves, _extend, max_leaves=30)

_WRAPPERS = (("(", ")"), ("-", ""), ("exp(", ")"), ("tanh(", ")"), ("Max(1, ", ")"), ("[", "]"), ("not ", ""),
             ("~", ""), ("hamacher(grasp, ", ")"), ("sqrt(", ")"), ("where(grasp, ", ", 0)"), ("{", "}"))
adversarial = st.one_of(
    st.tuples(st.sampled_from(_WRAPPERS), st.integers(1, 3000)).map(
        lambda t: t[0][0] * t[1] + "tcp_to_obj" + t[0][1] * t[1]),
    st.tuples(st.sampled_from(("tcp_to_obj", "2", "9", "E", "pi", "(grasp+1)")), st.integers(2, 300)).map(
        lambda t: "**".join([t[0]] * t[1])),
    st.tuples(st.sampled_from(("tcp_to_obj", "exp(-grasp)", "1", "Max(grasp, 1)")), st.integers(2, 5000)).map(
        lambda t: " + ".join([t[0]] * t[1])),
    st.integers(1, 6000).map(lambda n: "9" * n + " * tcp_to_obj"),
    st.integers(1, 400).map(lambda n: f"Max({', '.join(['tcp_to_obj'] * n)})"),
    st.tuples(grammar, st.integers(1, 200)).map(lambda t: t[0] * t[1]),
)
tokens = st.lists(
    st.sampled_from([*FEATURES, *_UNLISTED, *sorted(FUNCTION_NAMES), "(", ")", ",", "**", "*", "+", "-", "/", "<",
                     "==", "and", "not", "[", "]", ".", "'", '"', ":", "lambda", "=", "1e999", "0", "True", "\\",
                     "#", ";", "\n", "\x00", "\u200b", "\u202e", "__", "`", "{", "}", "@", "$", "?"]),
    max_size=60,
).map(" ".join)
expression_text = st.one_of(grammar, adversarial, tokens, st.text(max_size=300))

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.floats(), st.integers(), st.text(max_size=20)),
    lambda c: st.one_of(st.lists(c, max_size=5), st.dictionaries(st.text(max_size=10), c, max_size=5)),
    max_leaves=30,
)
component_names = st.one_of(st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True), st.text(max_size=50))
_PLAUSIBLE = ("-tcp_to_obj", "exp(-obj_to_target/0.1)", "tolerance(tcp_to_obj, 0, 0.05, 0.1)", "-0.01*action_norm**2",
              "5*(grasp > 0.5)", "-log(1 + tcp_speed)", "hamacher(grasp, 1 - tcp_to_obj)", "Min(1, 2*obj_to_target)")
plausible_candidates = st.fixed_dictionaries(
    {"components": st.dictionaries(st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True),
                                   st.one_of(st.sampled_from(_PLAUSIBLE), grammar), min_size=1, max_size=4)},
    optional={"rationale": st.text(max_size=200)},
)
candidate_dicts = st.fixed_dictionaries(
    {"components": st.one_of(
        st.dictionaries(component_names, st.one_of(grammar, st.sampled_from(FEATURES), json_values), max_size=10),
        json_values)},
    optional={"rationale": st.one_of(st.text(max_size=5000), json_values), "extra": json_values},
)


def _mutate(t: tuple[str, int, str]) -> str:
    """A JSON text cut, fenced, prefixed or nested: what a broken or hostile model writes."""
    text, n, how = t
    cut = text[: n % (len(text) + 1)]
    return {"cut": cut, "fence": f"```json\n{text}\n```", "prose": f"Here you go: {text}",
            "nest": "[" * n + text + "]" * n, "dup": text[:-1] + ', "components": {}}' if text.endswith("}") else text,
            "bigint": text.replace("{", '{"n": ' + "1" * (n + 4300) + ", ", 1)}[how]


candidate_text = st.one_of(
    plausible_candidates.map(json.dumps),
    candidate_dicts.map(json.dumps),
    st.tuples(candidate_dicts.map(json.dumps), st.integers(0, 5000),
              st.sampled_from(("cut", "fence", "prose", "nest", "dup", "bigint"))).map(_mutate),
    json_values.map(json.dumps),
    st.text(max_size=300),
)
candidates = st.one_of(candidate_text, plausible_candidates, candidate_dicts, json_values)


# ---------------------------------------------------------------------------------------------- CI properties
@pytest.mark.timeout(600)
@CI
@given(expression_text)
def test_fuzzed_expressions_are_parsed_or_refused_never_executed(text: str) -> None:
    check_text(text)


@pytest.mark.timeout(600)
@CI
@given(grammar)
def test_fuzzed_grammar_expressions_survive_every_entry_point(text: str) -> None:
    check_text(text)


@pytest.mark.timeout(600)
@CI
@given(candidates)
def test_fuzzed_candidates_are_parsed_or_refused_never_executed(data: Any) -> None:
    check_candidate_data(data)


# ---------------------------------------------------------------------------------------------- long runs
@pytest.mark.slow
@LONG
@given(expression_text)
def test_long_fuzz_expressions(text: str) -> None:
    check_text(text)


@pytest.mark.slow
@LONG
@given(candidates)
def test_long_fuzz_candidates(data: Any) -> None:
    check_candidate_data(data)


# ---------------------------------------------------------------------------------------------- corpus
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})|\\n")
_REPEAT = re.compile(r"\{\*(\d+):([^}]*)\}")


@dataclass(frozen=True)
class Case:
    source: str
    stage: str  # "expr" | "check" | "candidate"
    fragment: str
    text: str


def _expand(text: str) -> str:
    text = _REPEAT.sub(lambda m: m.group(2) * int(m.group(1)), text)
    return _ESCAPE.sub(lambda m: "\n" if m.group(0) == "\\n" else chr(int(m.group(1) or m.group(2), 16)), text)


def load_corpus() -> list[Case]:
    """Both hostile files: the parser's own (fragment :: expression) and this suite's (stage :: fragment :: input)."""
    cases: list[Case] = []
    for line in (DATA / "hostile_expressions.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            fragment, sep, expression = line.partition(" ::")
            assert sep, line
            cases.append(Case("hostile_expressions", "expr", fragment, expression.removeprefix(" ")))
    for n, line in enumerate((DATA / "hostile_corpus.txt").read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip() and not line.startswith("#"):
            parts = line.split(" :: ", 2)
            assert len(parts) == 3 and parts[0] in ("expr", "check", "candidate"), f"hostile_corpus.txt:{n}: {line!r}"
            cases.append(Case("hostile_corpus", parts[0], parts[1], _expand(parts[2])))
    return cases


CORPUS = load_corpus()


def test_corpus_is_substantial_and_new() -> None:
    ours = [c for c in CORPUS if c.source == "hostile_corpus"]
    theirs = {c.text for c in CORPUS if c.source == "hostile_expressions"}
    assert len(ours) >= 150 and {c.stage for c in ours} == {"expr", "check", "candidate"}
    assert not theirs & {c.text for c in ours}, "hostile_corpus.txt must not repeat hostile_expressions.txt"


@pytest.mark.parametrize("case", CORPUS, ids=[f"{c.source[8:12]}-{c.stage}-{i:03d}" for i, c in enumerate(CORPUS)])
def test_corpus_entry_is_refused_everywhere_with_its_reason(case: Case, tmp_path: Path) -> None:
    sentinel = tmp_path / "executed"
    text = case.text.replace("{SENTINEL}", str(sentinel))
    with no_execution() as calls:
        if case.stage == "candidate":
            with pytest.raises(RewardRejected) as info:
                parse_candidate(text, FEATURES)
            reason = info.value.reason
            as_json = text
        else:
            if case.stage == "expr":
                with pytest.raises(RewardRejected) as info:
                    parse_expression(text, FEATURES)
                reason = info.value.reason
            as_json = json.dumps({"components": {"hostile": text}, "rationale": "corpus"})
        verdict = validate(as_json, TASK, SAMPLE, config=LOOSE)
        compiled = verdict.reward
        result = validate(as_json, TASK, SAMPLE, id="corpus")
    if case.stage == "check":
        reason = verdict.reason
    assert case.fragment in reason, f"{reason!r} lacks {case.fragment!r}"
    assert not verdict.accepted and compiled is None and not result.accepted
    _assert_reason(verdict.reason)
    _assert_reason(result.reason)
    assert calls == [] and not sentinel.exists()
