"""The arguments of a `tolerance(...)` call in reward text, bound and checked (dm_control's `rewards.tolerance`).

Two spellings are accepted, as models write both: dm_control's `tolerance(x, bounds=(lo, hi), margin=...,
sigmoid='long_tail', value_at_margin=...)` and the flat `tolerance(x, lower, upper, margin, value_at_margin,
sigmoid)` (the canonical form). The bounds and value_at_margin are constants folded by the parser; the margin is a
constant or an expression of the features, because MetaWorld's own rewards use the episode's starting distances
as margins. The sigmoid is one of dm_control's shape names (`shaping.SIGMOIDS`), the only text the language
accepts, and only as a literal here.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from typing import cast

import sympy

from lares_agent.rewards import functions as fn
from lares_agent.rewards.limits import RewardRejected
from lares_agent.rewards.shaping import SIGMOIDS

__all__ = ["rect_prism_call", "tolerance_call"]

_KNOWN = frozenset({"x", "bounds", "lower", "upper", "margin", "sigmoid", "value_at_margin"})


def _bind(node: ast.Call) -> dict[str, ast.AST]:
    """Positional and keyword arguments by name, `bounds=(lo, hi)` split into `lower` and `upper`."""
    dm_style = len(node.args) >= 2 and isinstance(node.args[1], ast.Tuple)
    order: Sequence[str] = (
        ("x", "bounds", "margin", "sigmoid", "value_at_margin")
        if dm_style
        else ("x", "lower", "upper", "margin", "value_at_margin", "sigmoid")
    )
    if len(node.args) > len(order):
        raise RewardRejected(f"tolerance() takes at most {len(order)} arguments")
    bound: dict[str, ast.AST] = dict(zip(order, node.args, strict=False))
    for kw in node.keywords:
        if kw.arg is None or kw.arg not in _KNOWN:
            raise RewardRejected(f"tolerance() has no argument '{kw.arg or '**'}'")
        if kw.arg in bound:
            raise RewardRejected(f"tolerance() got '{kw.arg}' twice")
        bound[kw.arg] = kw.value
    if "bounds" in bound:
        pair = bound.pop("bounds")
        if not (isinstance(pair, ast.Tuple) and len(pair.elts) == 2) or {"lower", "upper"} & bound.keys():
            raise RewardRejected("tolerance() bounds must be one (lower, upper) pair")
        bound["lower"], bound["upper"] = pair.elts
    for required in ("x", "lower", "upper"):
        if required not in bound:
            raise RewardRejected(f"tolerance() is missing '{required}'; write tolerance(x, lower, upper, margin)")
    return bound


def _sigmoid(node: ast.AST | None) -> str:
    """The shape name of a `sigmoid=` argument: a quoted literal from `SIGMOIDS`, nothing else."""
    if node is None:
        return "gaussian"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in SIGMOIDS:
        return node.value
    names = ", ".join(repr(s) for s in SIGMOIDS)
    raise RewardRejected(f"tolerance() sigmoid must be one of {names} (quoted)")


def tolerance_call(
    node: ast.Call,
    expr: Callable[[ast.AST], sympy.Expr],
    number: Callable[[sympy.Expr, str], float],
) -> sympy.Expr:
    """The sympy term of one `tolerance(...)` call; ``expr`` builds an argument, ``number`` folds a constant
    one (both the parser's own, so its limits apply)."""
    bound = _bind(node)
    sigmoid = _sigmoid(bound.get("sigmoid"))
    x = expr(bound["x"])
    lower = number(expr(bound["lower"]), "tolerance lower bound")
    upper = number(expr(bound["upper"]), "tolerance upper bound")
    margin_expr = expr(bound["margin"]) if "margin" in bound else sympy.Float(0.0)
    vam = (
        number(expr(bound["value_at_margin"]), "tolerance value_at_margin")
        if "value_at_margin" in bound
        else fn.DEFAULT_VALUE_AT_MARGIN
    )
    if lower > upper:
        raise RewardRejected(f"tolerance bounds have lower {lower:g} > upper {upper:g}")
    low_vam = 0 <= vam < 1 if sigmoid in ("cosine", "linear", "quadratic") else 0 < vam < 1
    if not low_vam:
        raise RewardRejected(f"tolerance value_at_margin {vam:g} must be in (0, 1)")
    margin: sympy.Expr
    if margin_expr.free_symbols:  # a feature expression: where it is <= 0 the tolerance is the bounds indicator
        margin = margin_expr
    else:
        value = number(margin_expr, "tolerance margin")
        if value < 0:
            raise RewardRejected(f"tolerance margin {value:g} is negative")
        if sigmoid == "gaussian" and value > 0 and not math.isfinite(_gaussian_coefficient(value, vam)):
            # found by fuzzing: margin**2 underflows and the compiled gaussian divides by zero (or gives nan)
            raise RewardRejected(f"tolerance margin {value:g} is too small; use margin 0 for a hard bound")
        margin = sympy.Float(value)
    args = [x, sympy.Float(lower), sympy.Float(upper), margin, sympy.Float(vam)]
    if sigmoid != "gaussian" or margin.free_symbols:
        args.append(sympy.Integer(SIGMOIDS.index(sigmoid)))
    return cast(sympy.Expr, fn.tolerance(*args))


def _gaussian_coefficient(margin: float, value_at_margin: float) -> float:
    """`fn.tolerance_coefficient`, with a division by an underflowed margin**2 reported as infinite."""
    try:
        return fn.tolerance_coefficient(margin, value_at_margin)
    except (ZeroDivisionError, OverflowError):
        return math.inf


def rect_prism_call(
    node: ast.Call,
    expr: Callable[[ast.AST], sympy.Expr],
    number: Callable[[sympy.Expr, str], float],
) -> sympy.Expr:
    """The sympy term of `rect_prism(x, y, z, (x0, y0, z0), (x1, y1, z1))` (MetaWorld's `rect_prism_tolerance`,
    whose docstring LaRes shows its LLM); the corners may also be given as `zero=` and `one=`."""
    if len(node.args) > 5:
        raise RewardRejected("rect_prism() takes at most 5 arguments: x, y, z, zero, one")
    bound: dict[str, ast.AST] = dict(zip(("x", "y", "z", "zero", "one"), node.args, strict=False))
    for kw in node.keywords:
        if kw.arg not in ("x", "y", "z", "zero", "one") or kw.arg in bound:
            raise RewardRejected(f"rect_prism() has no argument '{kw.arg or '**'}' (or got it twice)")
        bound[kw.arg] = kw.value
    if len(bound) != 5:
        raise RewardRejected("rect_prism() needs x, y, z and the corners zero=(x0, y0, z0), one=(x1, y1, z1)")
    corners: list[float] = []
    for name in ("zero", "one"):
        pair = bound[name]
        if not (isinstance(pair, ast.Tuple) and len(pair.elts) == 3):
            raise RewardRejected(f"rect_prism() {name} must be one (x, y, z) triple of numbers")
        corners.extend(number(expr(e), f"rect_prism {name} corner") for e in pair.elts)
    if any(a == b for a, b in zip(corners[:3], corners[3:], strict=True)):
        raise RewardRejected("rect_prism() corners must differ along every axis")
    point = [expr(bound[a]) for a in ("x", "y", "z")]
    return cast(sympy.Expr, fn.rect_prism(*point, *(sympy.Float(c) for c in corners)))
