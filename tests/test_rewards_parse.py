"""Parser of the reward language: hostile input is rejected with a precise reason and nothing is executed."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from lares_agent.rewards import (
    Limits,
    RewardRejected,
    expression_complexity,
    feature_symbol,
    parse_candidate,
    parse_expression,
)
from lares_agent.rewards import functions as fn

FEATURES = ("tcp_to_obj", "obj_to_target", "tcp_speed", "action_norm", "grasp")
HOSTILE_FILE = Path(__file__).parent / "data" / "hostile_expressions.txt"


def _hostile_cases() -> list[tuple[str, str]]:
    cases = []
    for line in HOSTILE_FILE.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fragment, sep, expression = line.partition(" ::")
        assert sep, f"malformed line in {HOSTILE_FILE.name}: {line!r}"
        cases.append((fragment, expression.removeprefix(" ")))
    return cases


HOSTILE = _hostile_cases()


@pytest.fixture
def nothing_executes(monkeypatch: pytest.MonkeyPatch):
    """Fail loudly if anything in the parse path evaluates text (eval/exec of a string, sympy's parser).

    Code objects still go through: Python's import machinery execs them when sympy loads a module lazily.
    """
    import sympy.parsing.sympy_parser as sympy_parser

    calls: list[str] = []
    real = {"eval": builtins.eval, "exec": builtins.exec}

    def trap(name: str):
        def _trapped(*args, **kwargs):
            if name in real and args and not isinstance(args[0], (str, bytes)):
                return real[name](*args, **kwargs)
            calls.append(name)
            raise AssertionError(f"{name} was called on text during parsing")

        return _trapped

    monkeypatch.setattr(builtins, "eval", trap("eval"))
    monkeypatch.setattr(builtins, "exec", trap("exec"))
    monkeypatch.setattr(sympy_parser, "parse_expr", trap("parse_expr"))
    return calls


def test_hostile_file_is_substantial() -> None:
    assert len(HOSTILE) >= 100


@pytest.mark.parametrize(("fragment", "expression"), HOSTILE, ids=[f"{i:03d}" for i in range(len(HOSTILE))])
def test_hostile_expression_is_rejected_with_reason(
    fragment: str, expression: str, tmp_path: Path, nothing_executes: list[str]
) -> None:
    sentinel = tmp_path / "executed"
    text = expression.replace("{SENTINEL}", str(sentinel))
    with pytest.raises(RewardRejected) as info:
        parse_expression(text, FEATURES)
    reason = info.value.reason
    assert fragment in reason, f"reason {reason!r} lacks {fragment!r}"
    assert "\n" not in reason and reason == str(info.value)
    assert not sentinel.exists()
    assert nothing_executes == []


def test_valid_expressions_do_not_trip_the_traps(nothing_executes: list[str]) -> None:
    expr = parse_expression("tolerance(tcp_to_obj, 0, 0.02, 0.1) + where(grasp, 1, 0) - 0.1*action_norm**2", FEATURES)
    assert expr.free_symbols == {feature_symbol(n) for n in ("tcp_to_obj", "grasp", "action_norm")}
    assert nothing_executes == []


@pytest.mark.parametrize(
    "text",
    [
        "x" * 1001,
        "tcp_to_obj\x00",
        "",
        "   ",
    ],
)
def test_text_level_rejections(text: str) -> None:
    with pytest.raises(RewardRejected):
        parse_expression(text, FEATURES)


def test_non_text_is_rejected() -> None:
    with pytest.raises(RewardRejected, match="must be text"):
        parse_expression(42, FEATURES)  # type: ignore[arg-type]


def test_adversarial_worst_cases_are_bounded_by_the_ast_checks() -> None:
    # Inputs built to make a naive parser blow up: each is refused before any sympy object is built.
    cases = {
        "nested too deeply": "tanh(" * 120 + "tcp_to_obj" + ")" * 120,
        "too large": "*".join(["exp(-tcp_to_obj)"] * 50),
        "too long": "+".join(["exp(-tcp_to_obj)"] * 200),
    }
    for fragment, text in cases.items():
        with pytest.raises(RewardRejected, match=fragment):
            parse_expression(text, FEATURES)
    # Redundant parentheses make no syntax nodes: harmless, and accepted.
    assert parse_expression("(" * 150 + "tcp_to_obj" + ")" * 150, FEATURES) == feature_symbol("tcp_to_obj")


def test_nested_opaque_functions_stay_linear_in_size() -> None:
    # hamacher repeats its arguments; expanded, 15 levels would be 3**15 leaves. Opaque, it stays small.
    text = "grasp"
    for _ in range(15):
        text = f"hamacher({text}, tcp_to_obj)"
    expr = parse_expression(text, FEATURES)
    assert sum(1 for _ in sympy.preorder_traversal(expr)) < 100


def test_limits_are_configurable() -> None:
    with pytest.raises(RewardRejected, match="exceeds the limit 2"):
        parse_expression("tcp_to_obj**3", FEATURES, Limits(max_exponent=2))
    assert parse_expression("tcp_to_obj**3", FEATURES, Limits(max_exponent=3)) == feature_symbol("tcp_to_obj") ** 3
    with pytest.raises(ValueError):
        Limits(max_nodes=0)


# --- semantics of what is accepted -----------------------------------------------------------------------
x, g = feature_symbol("tcp_to_obj"), feature_symbol("grasp")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("abs(tcp_to_obj)", sympy.Abs(x)),
        ("min(tcp_to_obj, grasp)", fn.Min(x, g)),
        ("max(tcp_to_obj, 0.5)", fn.Max(sympy.Float(0.5), x)),
        ("Max(Max(grasp, tcp_to_obj), tcp_to_obj, 1, 2)", fn.Max(2, g, x)),
        ("tcp_to_obj / 2", x / 2),
        ("-tcp_to_obj", -x),
        ("+tcp_to_obj", x),
        ("tcp_to_obj**0.5", x ** sympy.Float(0.5)),
        ("sqrt(tcp_to_obj)", sympy.sqrt(x)),
        ("tcp_to_obj < 0.05", fn.where(x < sympy.Float(0.05), 1, 0)),
        ("where(grasp, tcp_to_obj, 0)", fn.where(sympy.Ne(g, 0), x, 0)),
        ("where(grasp > 0.5, 1, tcp_to_obj)", fn.where(g > sympy.Float(0.5), 1, x)),
        ("Piecewise((1, grasp > 0.5), (tcp_to_obj, True))", fn.where(g > sympy.Float(0.5), 1, x)),
        ("Piecewise((1, grasp > 0.5), (2, tcp_to_obj < 1), (3, True))",
         fn.where(g > sympy.Float(0.5), 1, fn.where(x < 1, 2, 3))),
        ("clip(tcp_to_obj, 0, 1)", fn.Min(1, fn.Max(0, x))),
        ("0 < tcp_to_obj < 1", fn.where(sympy.And(sympy.Lt(0, x), x < 1), 1, 0)),
        ("(tcp_to_obj < 1) and not (grasp == 1)", fn.where(sympy.And(x < 1, sympy.Ne(g, 1)), 1, 0)),
        ("(tcp_to_obj < 1) | (grasp != 0)", fn.where(sympy.Or(x < 1, sympy.Ne(g, 0)), 1, 0)),
        ("pi * tcp_to_obj", sympy.pi * x),
    ],
)
def test_accepted_forms(text: str, expected: sympy.Expr) -> None:
    assert parse_expression(text, FEATURES) == expected


def test_tolerance_call_styles_agree() -> None:
    forms = [
        "tolerance(tcp_to_obj, 0, 0.02, 0.1)",
        "tolerance(tcp_to_obj, 0, 0.02, 0.1, 0.1)",
        "tolerance(tcp_to_obj, bounds=(0, 0.02), margin=0.1)",
        "tolerance(tcp_to_obj, (0, 0.02), 0.1)",
        "tolerance(tcp_to_obj, bounds=(0, 0.02), margin=0.1, sigmoid='gaussian', value_at_margin=0.1)",
        "tolerance(tcp_to_obj, lower=0, upper=0.01 * 2, margin=0.05 + 0.05)",
    ]
    parsed = {parse_expression(f, FEATURES) for f in forms}
    assert len(parsed) == 1
    assert parse_expression("tolerance(tcp_to_obj, 0, 0.02, 0.1, 0.2)", FEATURES) not in parsed


def test_canonical_text_parses_back_to_the_same_tree() -> None:
    texts = [
        "tolerance(tcp_to_obj, 0, 0.02, 0.1) + 2*hamacher(sigmoid(-obj_to_target), grasp)",
        "where(grasp, 1, 0) * exp(-obj_to_target/0.05) - 0.01*action_norm**2 + (tcp_to_obj < 0.05)",
        "Piecewise((1, (tcp_to_obj<0.05) & (grasp > 0.5)), (clip(tcp_speed, 0, 1), True))",
        "sqrt(tcp_to_obj**2 + 1e-6) + Min(1, 2*tcp_speed, obj_to_target) + tcp_to_obj**(3/2)",
        "log(1 + tcp_to_obj) * tanh(obj_to_target) + abs(tcp_speed) + max(grasp, 0.5) + 1/(tcp_speed + 1)**2",
        "(tcp_to_obj == 0) + (grasp != 1) + E*pi*tcp_speed",
    ]
    for text in texts:
        expr = parse_expression(text, FEATURES)
        assert parse_expression(str(expr), FEATURES) == expr, text


def test_feature_names_take_precedence_over_constants() -> None:
    expr = parse_expression("E + pi", ("E",))
    assert expr == feature_symbol("E") + sympy.pi


# --- candidates ------------------------------------------------------------------------------------------
def test_candidate_json_and_dict_and_bare_forms() -> None:
    as_dict = {"components": {"reach": "-tcp_to_obj", "bonus": "5*grasp"}, "rationale": "reach, then grasp"}
    from_json = parse_candidate(json.dumps(as_dict), FEATURES)
    from_dict = parse_candidate(as_dict, FEATURES)
    fenced = parse_candidate("```json\n" + json.dumps(as_dict) + "\n```", FEATURES)
    assert from_json == from_dict == fenced
    assert dict(from_json.canonical) == {"reach": "-tcp_to_obj", "bonus": "5*grasp"}
    assert from_json.features_used == {"tcp_to_obj", "grasp"}
    assert from_json.rationale == "reach, then grasp"
    bare = parse_candidate("-tcp_to_obj", FEATURES)
    assert list(bare.components) == ["reward"]


def test_complexity_is_reported_and_grows_with_structure() -> None:
    simple = parse_candidate("-tcp_to_obj", FEATURES)
    richer = parse_candidate("-tcp_to_obj + exp(-obj_to_target/0.1)", FEATURES)
    two = parse_candidate({"components": {"a": "-tcp_to_obj", "b": "exp(-obj_to_target/0.1)"}}, FEATURES)
    assert 0 < simple.complexity < richer.complexity
    assert two.complexity > 0 and set(two.component_complexity) == {"a", "b"}
    deeper = expression_complexity(parse_expression("sigmoid(-exp(tcp_speed) * tanh(tcp_to_obj))", FEATURES))
    assert deeper > expression_complexity(parse_expression("tanh(tcp_to_obj)", FEATURES))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"components": {f"c{i}": "tcp_to_obj" for i in range(9)}}, "9 components, limit 8"),
        ({"components": {}}, "no components"),
        ({"components": {"bad name": "tcp_to_obj"}}, "must be an identifier"),
        ({"components": {"class": "tcp_to_obj"}}, "must be an identifier"),
        ({"components": {"n" * 41: "tcp_to_obj"}}, "longer than 40"),
        ({"components": {"reach": 3}}, "must be text"),
        ({"components": ["tcp_to_obj"]}, "needs \"components\""),
        ({"reach": "tcp_to_obj"}, "needs \"components\""),
        ({"components": {"reach": "tcp_to_obj"}, "rationale": 7}, "rationale must be text"),
        ({"components": {"reach": "tcp_to_obj"}, "rationale": "r" * 4001}, "rationale longer"),
        ({"components": {"ok": "tcp_to_obj", "broken": "foo + 1"}}, "component 'broken': unknown name 'foo'"),
        ('{"components": {"a": "tcp_to_obj", "a": "grasp"}}', "duplicate key 'a'"),
        ('{"components": {"a": "tcp_to_obj"', "invalid JSON"),
        ("[1, 2]", "lists, dicts and sets"),
        ('{"components": ' + "[" * 100000 + "]" * 100000 + "}", "candidate too long"),
        ("{" + '"components": {"a": "tcp_to_obj"}, "n": ' + "[" * 3000 + "]" * 3000 + "}", "invalid JSON"),
    ],
)
def test_candidate_rejections(data: object, fragment: str) -> None:
    limits = Limits(max_candidate_chars=20000)
    with pytest.raises(RewardRejected) as info:
        parse_candidate(data, FEATURES, limits)  # type: ignore[arg-type]
    assert fragment in info.value.reason


def test_a_decoded_mapping_is_held_to_the_candidate_size_limit() -> None:
    """The graph passes the LLM's decoded answer as a mapping: its names, expressions and rationale together obey
    `Limits.max_candidate_chars`, each part within its own limit."""
    components = {f"c{i}": "tcp_to_obj + " * 76 + "1" for i in range(8)}  # 8 x 989 characters
    data = {"components": components, "rationale": "r" * 1000}
    with pytest.raises(RewardRejected) as info:
        parse_candidate(data, FEATURES)
    assert info.value.reason == (
        "candidate too long: 8928 characters in its names, expressions and rationale, limit 8000")
    with pytest.raises(RewardRejected) as info:  # within a larger total, each part is judged on its own
        parse_candidate(data, FEATURES, Limits(max_candidate_chars=9000))
    assert info.value.reason.startswith("component 'c0': expression nested too deeply")


# --- property: any text is either parsed or rejected, never a crash ---------------------------------------
_TOKENS = [
    "tcp_to_obj", "grasp", "0", "1", "0.5", "1e5", "-", "+", "*", "/", "**", "(", ")", ", ", "<", ">=", "==",
    " and ", " or ", " not ", "&", "|", "~", "exp(", "log(", "sqrt(", "tanh(", "sigmoid(", "abs(", "Min(",
    "max(", "Piecewise(", "where(", "clip(", "tolerance(", "hamacher(", "True", "pi", "(1, True)", ".", "[", "'",
]  # fmt: skip


@given(st.one_of(st.text(max_size=80), st.lists(st.sampled_from(_TOKENS), max_size=30).map("".join)))
@settings(max_examples=300, deadline=None)
def test_any_text_is_parsed_or_rejected(text: str) -> None:
    try:
        expr = parse_expression(text, FEATURES)
    except RewardRejected as err:
        assert err.reason and "\n" not in err.reason
    else:
        assert isinstance(expr, sympy.Expr) and expr.free_symbols
