"""The arguments of a `tolerance(...)` call in reward text, bound and checked (dm_control's `rewards.tolerance`).

Two spellings are accepted, as models write both: dm_control's `tolerance(x, bounds=(lo, hi), margin=...,
sigmoid='gaussian', value_at_margin=...)` and the flat `tolerance(x, lower, upper, margin)`. Every bound is a
constant folded by the parser; only the gaussian shape is compiled (`functions.tolerance`).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from typing import cast

import sympy

from lares_agent.rewards import functions as fn
from lares_agent.rewards.limits import RewardRejected

__all__ = ["tolerance_call"]

_KNOWN = frozenset({"x", "bounds", "lower", "upper", "margin", "sigmoid", "value_at_margin"})


def _bind(node: ast.Call) -> dict[str, ast.AST]:
    """Positional and keyword arguments by name, `bounds=(lo, hi)` split into `lower` and `upper`."""
    dm_style = len(node.args) >= 2 and isinstance(node.args[1], ast.Tuple)
    order: Sequence[str] = (
        ("x", "bounds", "margin", "sigmoid", "value_at_margin")
        if dm_style
        else ("x", "lower", "upper", "margin", "value_at_margin")
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
    if "sigmoid" in bound:
        shape = bound.pop("sigmoid")
        if not (isinstance(shape, ast.Constant) and shape.value == "gaussian"):
            raise RewardRejected("tolerance() supports only sigmoid='gaussian'")
    if "bounds" in bound:
        pair = bound.pop("bounds")
        if not (isinstance(pair, ast.Tuple) and len(pair.elts) == 2) or {"lower", "upper"} & bound.keys():
            raise RewardRejected("tolerance() bounds must be one (lower, upper) pair")
        bound["lower"], bound["upper"] = pair.elts
    for required in ("x", "lower", "upper"):
        if required not in bound:
            raise RewardRejected(f"tolerance() is missing '{required}'; write tolerance(x, lower, upper, margin)")
    return bound


def tolerance_call(
    node: ast.Call,
    expr: Callable[[ast.AST], sympy.Expr],
    number: Callable[[sympy.Expr, str], float],
) -> sympy.Expr:
    """The sympy term of one `tolerance(...)` call; ``expr`` builds an argument, ``number`` folds a constant
    one (both the parser's own, so its limits apply)."""
    bound = _bind(node)
    x = expr(bound["x"])
    lower = number(expr(bound["lower"]), "tolerance lower bound")
    upper = number(expr(bound["upper"]), "tolerance upper bound")
    margin = number(expr(bound["margin"]), "tolerance margin") if "margin" in bound else 0.0
    vam = (
        number(expr(bound["value_at_margin"]), "tolerance value_at_margin")
        if "value_at_margin" in bound
        else fn.DEFAULT_VALUE_AT_MARGIN
    )
    if lower > upper:
        raise RewardRejected(f"tolerance bounds have lower {lower:g} > upper {upper:g}")
    if margin < 0:
        raise RewardRejected(f"tolerance margin {margin:g} is negative")
    if not 0 < vam < 1:
        raise RewardRejected(f"tolerance value_at_margin {vam:g} must be in (0, 1)")
    if margin > 0 and not math.isfinite(_gaussian_coefficient(margin, vam)):
        # found by fuzzing: margin**2 underflows and the compiled gaussian divides by zero (or gives nan)
        raise RewardRejected(f"tolerance margin {margin:g} is too small; use margin 0 for a hard bound")
    return cast(sympy.Expr, fn.tolerance(x, *(sympy.Float(v) for v in (lower, upper, margin, vam))))


def _gaussian_coefficient(margin: float, value_at_margin: float) -> float:
    """`fn.tolerance_coefficient`, with a division by an underflowed margin**2 reported as infinite."""
    try:
        return fn.tolerance_coefficient(margin, value_at_margin)
    except (ZeroDivisionError, OverflowError):
        return math.inf
