"""Expression text -> sympy, through Python's `ast` and an allow-list; nothing is ever evaluated.

`sympify`/`parse_expr` call `eval` on their input, and the reference `exec`s LLM code (docs/lares-reference.md §12
item 27), so LLM text only ever reaches `ast.parse`. Size and depth are checked on the `ast` before a
single sympy object is built. No simplify/expand ever runs: the only rewriting is sympy's automatic
evaluation of arithmetic; Min/Max/where/Piecewise are the opaque functions of `functions.py`, because
sympy's own ones run symbolic comparisons and set solvers while being built (seconds on hostile input).
"""

from __future__ import annotations

import ast
import difflib
import math
import warnings
from collections.abc import Collection
from typing import cast

import sympy
from sympy.logic.boolalg import Boolean

from lares_agent.rewards import functions as fn
from lares_agent.rewards.caging_call import caging_call
from lares_agent.rewards.limits import Limits, RewardRejected
from lares_agent.rewards.tolerance_call import rect_prism_call, tolerance_call

__all__ = ["CONSTANT_NAMES", "FUNCTION_NAMES", "feature_symbol", "parse_expression"]

_UNARY = {
    "exp": sympy.exp,
    "log": sympy.log,
    "sqrt": sympy.sqrt,
    "tanh": sympy.tanh,
    "sigmoid": fn.sigmoid,
    "Abs": sympy.Abs,
    "abs": sympy.Abs,
}
_VARIADIC = {"Min": fn.Min, "min": fn.Min, "Max": fn.Max, "max": fn.Max}
_SPECIAL = ("Piecewise", "where", "clip", "tolerance", "hamacher", "rect_prism", "gripper_caging", "Eq", "Ne")
FUNCTION_NAMES: frozenset[str] = frozenset(_UNARY) | frozenset(_VARIADIC) | frozenset(_SPECIAL)
# Ties broken by the name itself: 'Abs'/'abs' in set order would change reasons (and prompts) between runs.
_ALLOWED_TEXT = ", ".join(sorted(FUNCTION_NAMES, key=lambda n: (n.lower(), n)))
CONSTANT_NAMES = {"pi": sympy.pi, "E": sympy.E}
_CALCULUS = frozenset(
    {"diff", "Derivative", "integrate", "Integral", "limit", "Limit", "Sum", "Product", "summation", "grad"}
)
_ALLOWED_NODES = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
    ast.Call, ast.keyword, ast.Tuple,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.BitAnd, ast.BitOr, ast.USub, ast.UAdd, ast.Not,
    ast.Invert, ast.And, ast.Or, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq,
)  # fmt: skip
_REFUSED_HINTS: dict[type, str] = {
    ast.Attribute: "attribute access is not allowed; write exp(x), not np.exp(x)",
    ast.Subscript: "indexing is not allowed; features are scalars",
    ast.IfExp: "'a if c else b' is not allowed; write where(c, a, b)",
    ast.Lambda: "lambda is not allowed",
    ast.NamedExpr: "assignment ':=' is not allowed",
    ast.JoinedStr: "strings are not allowed",
    ast.Starred: "'*' unpacking is not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.List: "lists, dicts and sets are not allowed",
    ast.Dict: "lists, dicts and sets are not allowed",
    ast.Set: "lists, dicts and sets are not allowed",
    ast.Await: "'await' is not allowed",
    ast.Yield: "'yield' is not allowed",
    ast.YieldFrom: "'yield' is not allowed",
    ast.FloorDiv: "'//' is not allowed; use '/'",
    ast.Mod: "'%' is not allowed",
    ast.MatMult: "'@' is not allowed",
    ast.BitXor: "'^' is not allowed; write x**2 for powers",
    ast.LShift: "'<<' is not allowed",
    ast.RShift: "'>>' is not allowed",
    ast.In: "'in' is not allowed",
    ast.NotIn: "'not in' is not allowed",
    ast.Is: "'is' is not allowed; use '=='",
    ast.IsNot: "'is not' is not allowed; use '!='",
}
_COMPARE = {ast.Lt: sympy.Lt, ast.LtE: sympy.Le, ast.Gt: sympy.Gt, ast.GtE: sympy.Ge, ast.Eq: sympy.Eq,
            ast.NotEq: sympy.Ne}  # fmt: skip
_NON_FINITE = (sympy.S.ComplexInfinity, sympy.S.NaN, sympy.S.Infinity, sympy.S.NegativeInfinity)


def feature_symbol(name: str) -> sympy.Symbol:
    """The sympy symbol of a feature; every layer must use this so symbols compare equal."""
    return sympy.Symbol(name, real=True)


def _snippet(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def _precheck(tree: ast.Expression, limits: Limits) -> None:
    """Allow-list, node count and depth on the raw ast, iteratively (no recursion on hostile depth)."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > limits.max_nodes:
            raise RewardRejected(f"expression too large: more than {limits.max_nodes} syntax nodes")
        if depth > limits.max_depth:
            raise RewardRejected(f"expression nested too deeply: more than {limits.max_depth} levels")
        if not isinstance(node, _ALLOWED_NODES):
            hint = _REFUSED_HINTS.get(type(node))
            where_ = f" in '{_snippet(node)}'" if isinstance(node, ast.expr) else ""
            raise RewardRejected(hint + where_ if hint else f"'{type(node).__name__}' syntax is not allowed{where_}")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


class _Builder:
    """Builds sympy from a checked ast. Booleans (comparisons) and numbers are kept apart and coerced
    where used: a comparison in arithmetic is an indicator, a number as a condition means `!= 0`."""

    def __init__(self, features: Collection[str], limits: Limits) -> None:
        self.features = frozenset(features)
        self.limits = limits
        self.exp_depth = 0

    # --- coercions and checks -------------------------------------------------------------------------
    def expr(self, node: ast.AST) -> sympy.Expr:
        value = self.build(node)
        return fn.indicator(value) if fn.is_condition(value) else cast(sympy.Expr, value)

    def cond(self, node: ast.AST) -> Boolean:
        return fn.as_condition(self.build(node))

    def number(self, value: sympy.Expr, what: str) -> float:
        """A constant argument (tolerance bounds, exponents): folded to a finite real float or rejected."""
        if value.free_symbols:
            raise RewardRejected(f"{what} must be a number, got '{value}'")
        return self.check_constant(value, what)

    def check_constant(self, value: sympy.Expr, what: str = "constant") -> float:
        folded = value if value.is_Number else value.evalf(15)
        if folded.has(*_NON_FINITE):
            raise RewardRejected(f"{what} '{value}' is undefined or infinite (division by zero, log(0)?)")
        if not folded.is_Number:
            raise RewardRejected(f"{what} '{value}' is complex, not a real number (sqrt or log of a negative?)")
        number = float(folded)
        if not math.isfinite(number) or abs(number) > self.limits.max_literal:
            raise RewardRejected(f"{what} '{value}' exceeds the limit {self.limits.max_literal:g} in magnitude")
        return number

    def fold(self, value: sympy.Basic) -> sympy.Basic:
        if isinstance(value, sympy.Expr) and not value.free_symbols:
            self.check_constant(value)
        return value

    # --- nodes ----------------------------------------------------------------------------------------
    def build(self, node: ast.AST) -> sympy.Basic:
        if isinstance(node, ast.Expression):
            return self.build(node.body)
        if isinstance(node, ast.Constant):
            return self.constant(node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.BinOp):
            return self.fold(self.binop(node))
        if isinstance(node, ast.UnaryOp):
            return self.fold(self.unary(node))
        if isinstance(node, ast.BoolOp):
            parts = [self.cond(v) for v in node.values]
            return sympy.And(*parts) if isinstance(node.op, ast.And) else sympy.Or(*parts)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Call):
            return self.fold(self.call(node))
        if isinstance(node, ast.Tuple):
            raise RewardRejected(f"tuple '{_snippet(node)}' is only allowed inside Piecewise((value, condition), ...)")
        raise RewardRejected(f"'{type(node).__name__}' syntax is not allowed")

    def constant(self, node: ast.Constant) -> sympy.Basic:
        value = node.value
        if isinstance(value, bool):
            return sympy.true if value else sympy.false
        if isinstance(value, (int, float)):
            # abs() first: math.isfinite of an int over ~1e308 raises OverflowError (found by fuzzing)
            if abs(value) > self.limits.max_literal or not math.isfinite(value):
                raise RewardRejected(f"number {_snippet(node)} exceeds the limit {self.limits.max_literal:g}")
            return sympy.Integer(value) if isinstance(value, int) else sympy.Float(value)
        if isinstance(value, complex):
            raise RewardRejected(f"complex number {_snippet(node)} is not allowed")
        raise RewardRejected(f"literal {_snippet(node)} is not allowed; only numbers")

    def name(self, node: ast.Name) -> sympy.Basic:
        ident = node.id
        if ident in self.features:
            return feature_symbol(ident)
        if ident in CONSTANT_NAMES:
            return CONSTANT_NAMES[ident]
        if ident in FUNCTION_NAMES:
            raise RewardRejected(f"function '{ident}' must be called, e.g. {ident}(x)")
        close = difflib.get_close_matches(ident, sorted(self.features), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        shown = ident if len(ident) <= 40 else ident[:37] + "..."
        raise RewardRejected(f"unknown name '{shown}'; features are {', '.join(sorted(self.features))}{hint}")

    def binop(self, node: ast.BinOp) -> sympy.Basic:
        op = node.op
        if isinstance(op, ast.Pow):
            return self.power(node)
        if isinstance(op, (ast.BitAnd, ast.BitOr)):
            left, right = self.build(node.left), self.build(node.right)
            if not (fn.is_condition(left) and fn.is_condition(right)):
                raise RewardRejected(f"'&' and '|' only combine comparisons, in '{_snippet(node)}'")
            return sympy.And(left, right) if isinstance(op, ast.BitAnd) else sympy.Or(left, right)
        left, right = self.expr(node.left), self.expr(node.right)
        if isinstance(op, ast.Add):
            return left + right
        if isinstance(op, ast.Sub):
            return left - right
        if isinstance(op, ast.Mult):
            return left * right
        if isinstance(op, ast.Div):
            if right.is_zero:
                raise RewardRejected(f"division by zero in '{_snippet(node)}'")
            return left / right
        raise RewardRejected(f"operator in '{_snippet(node)}' is not allowed")

    def power(self, node: ast.BinOp) -> sympy.Expr:
        if isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Pow):
            raise RewardRejected(f"power tower '{_snippet(node)}' is not allowed")
        for sub in ast.walk(node.right):
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Pow):
                raise RewardRejected(f"power tower '{_snippet(node)}' is not allowed")
            if isinstance(sub, (ast.Name, ast.Call)) and not (isinstance(sub, ast.Name) and sub.id in CONSTANT_NAMES):
                raise RewardRejected(f"exponent in '{_snippet(node)}' must be a number; use exp(...) for growth")
        base, exponent = self.expr(node.left), self.expr(node.right)
        p = self.number(exponent, "exponent")
        if abs(p) > self.limits.max_exponent:
            raise RewardRejected(f"exponent {p:g} in '{_snippet(node)}' exceeds the limit {self.limits.max_exponent:g}")
        if base.is_zero and p < 0:
            raise RewardRejected(f"division by zero in '{_snippet(node)}'")
        return cast(sympy.Expr, base**exponent)

    def unary(self, node: ast.UnaryOp) -> sympy.Basic:
        if isinstance(node.op, (ast.Not, ast.Invert)):
            operand = self.build(node.operand)
            if isinstance(node.op, ast.Invert) and not fn.is_condition(operand):
                raise RewardRejected(f"'~' only negates comparisons, in '{_snippet(node)}'; use 'not'")
            return sympy.Not(fn.as_condition(operand))
        operand_expr = self.expr(node.operand)
        return -operand_expr if isinstance(node.op, ast.USub) else operand_expr

    def compare(self, node: ast.Compare) -> Boolean:
        terms = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        parts = []
        for op, left, right in zip(node.ops, terms, terms[1:], strict=False):
            try:
                parts.append(_COMPARE[type(op)](left, right))
            except TypeError as err:  # sympy refuses comparisons with non-real values
                raise RewardRejected(f"invalid comparison '{_snippet(node)}': {err}") from None
        return parts[0] if len(parts) == 1 else sympy.And(*parts)

    # --- calls ----------------------------------------------------------------------------------------
    def call(self, node: ast.Call) -> sympy.Basic:
        if not isinstance(node.func, ast.Name):
            raise RewardRejected(f"only named functions may be called, not '{_snippet(node.func)}'")
        name = node.func.id
        if name in _CALCULUS:
            raise RewardRejected(f"'{name}': derivatives, integrals, limits and sums are not allowed")
        if name in self.features:
            raise RewardRejected(f"feature '{name}' is a number, not a function")
        if name not in FUNCTION_NAMES:
            shown = name if len(name) <= 40 else name[:37] + "..."
            raise RewardRejected(
                f"call to unknown function '{shown}'; allowed: {_ALLOWED_TEXT}"
            )
        if name == "tolerance":
            return self.tolerance(node)
        if name == "gripper_caging":
            return caging_call(node, self.expr, self.number, self.features, feature_symbol)
        if name == "rect_prism":
            return rect_prism_call(node, self.expr, self.number)
        if node.keywords:
            raise RewardRejected(f"{name}() takes no keyword arguments")
        if len(node.args) > self.limits.max_call_args:
            raise RewardRejected(f"{name}() has more than {self.limits.max_call_args} arguments")
        if name == "Piecewise":
            return self.piecewise(node)
        if name in _UNARY:
            self.arity(node, 1)
            if name == "exp":
                if self.exp_depth:
                    raise RewardRejected(f"nested exp (a power tower) in '{_snippet(node)}' is not allowed")
                self.exp_depth += 1
                try:
                    return _UNARY[name](self.expr(node.args[0]))
                finally:
                    self.exp_depth -= 1
            return _UNARY[name](self.expr(node.args[0]))
        if name in _VARIADIC:
            if len(node.args) < 2:
                raise RewardRejected(f"{name}() needs at least 2 arguments")
            return _VARIADIC[name](*(self.expr(a) for a in node.args))
        if name == "where":
            self.arity(node, 3)
            return fn.where(self.cond(node.args[0]), self.expr(node.args[1]), self.expr(node.args[2]))
        if name == "clip":
            self.arity(node, 3)
            x, low, high = (self.expr(a) for a in node.args)
            if low.is_Number and high.is_Number and low > high:
                raise RewardRejected(f"clip bounds in '{_snippet(node)}' have low > high")
            return fn.clip(x, low, high)
        if name == "hamacher":
            self.arity(node, 2)
            return fn.hamacher(self.expr(node.args[0]), self.expr(node.args[1]))
        self.arity(node, 2)  # Eq / Ne, as sympy prints them
        left, right = self.expr(node.args[0]), self.expr(node.args[1])
        return sympy.Eq(left, right) if name == "Eq" else sympy.Ne(left, right)

    @staticmethod
    def arity(node: ast.Call, n: int) -> None:
        if len(node.args) != n:
            name = cast(ast.Name, node.func).id
            raise RewardRejected(f"{name}() takes {n} argument{'s' if n > 1 else ''}, got {len(node.args)}")

    def piecewise(self, node: ast.Call) -> sympy.Expr:
        if not node.args:
            raise RewardRejected("Piecewise() needs (value, condition) pairs")
        pairs = []
        for arg in node.args:
            if not (isinstance(arg, ast.Tuple) and len(arg.elts) == 2):
                raise RewardRejected(f"Piecewise arguments must be (value, condition) pairs, got '{_snippet(arg)}'")
            pairs.append((self.expr(arg.elts[0]), self.cond(arg.elts[1])))
        if pairs[-1][1] is not sympy.true:
            raise RewardRejected("Piecewise needs a final (value, True) default branch")
        return fn.piecewise(pairs)

    def tolerance(self, node: ast.Call) -> sympy.Expr:
        return tolerance_call(node, self.expr, self.number)


def _final_checks(expr: sympy.Expr, limits: Limits) -> None:
    """Checks on the built tree, with a traversal that stops as soon as the size limit is passed."""
    for count, node in enumerate(sympy.preorder_traversal(expr), start=1):
        if count > limits.max_sympy_nodes:
            raise RewardRejected(f"expression too large once built: more than {limits.max_sympy_nodes} nodes")
        if node in _NON_FINITE:
            raise RewardRejected("expression is undefined or infinite somewhere (division by zero, log(0)?)")
        if node is sympy.I or (isinstance(node, sympy.Number) and not node.is_real):
            raise RewardRejected("expression has a complex value (e.g. sqrt of a negative number)")
        if isinstance(node, sympy.Pow) and node.exp.is_Number and abs(float(node.exp)) > limits.max_exponent:
            raise RewardRejected(f"exponent {node.exp} exceeds the limit {limits.max_exponent:g}")
    if not expr.free_symbols:
        shown = str(expr) if len(str(expr)) <= 40 else str(expr)[:37] + "..."
        raise RewardRejected(f"expression is constant ({shown}); it must depend on at least one feature")


def parse_expression(text: str, feature_names: Collection[str], limits: Limits = Limits()) -> sympy.Expr:
    """Parse one reward expression over `feature_names`; raises RewardRejected with a precise reason."""
    if not isinstance(text, str):
        raise RewardRejected(f"expression must be text, got {type(text).__name__}")
    if len(text) > limits.max_chars:
        raise RewardRejected(f"expression too long: {len(text)} characters, limit {limits.max_chars}")
    if not text.strip():
        raise RewardRejected("expression is empty")
    if "\x00" in text:
        raise RewardRejected("expression contains a NUL character")
    try:
        with warnings.catch_warnings():  # LLM text like "5x" makes the tokenizer warn; the rejection says it all
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise RewardRejected(f"syntax error: {err.msg}") from None
    except (ValueError, RecursionError, MemoryError) as err:
        raise RewardRejected(f"unparseable expression: {type(err).__name__}") from None
    _precheck(tree, limits)
    builder = _Builder(feature_names, limits)
    try:
        expr = builder.expr(tree)
    except RewardRejected:
        raise
    except (TypeError, ValueError, ArithmeticError, RecursionError) as err:
        # sympy refusing a construction (e.g. Min of non-comparable values) is a rejection, not a crash
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise RewardRejected(f"invalid expression: {first[:120]}") from None
    _final_checks(expr, limits)
    return expr
