"""A `gripper_caging(...)` call in reward text: its parameters bound, checked, and its inputs supplied.

MetaWorld's gripper-caging reward nests six tolerances and four Hamacher products over both finger pads, so
written out it passes the language's size limits; the language offers it as one function whose parameters an LLM
tunes, as LaRes' "with init" prompt invites it to tune `_gripper_caging_reward`'s arguments. Its inputs are the
task's caging features (`shaping.CAGING_FEATURES`), never written in the call: the call only names numbers.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from typing import cast

import sympy

from lares_agent.rewards import functions as fn
from lares_agent.rewards.limits import RewardRejected
from lares_agent.rewards.shaping import CAGING_DEFAULTS, CAGING_FEATURES, CAGING_PARAMS

__all__ = ["caging_call"]

_REQUIRED = ("obj_radius", "pad_success", "xz_success")


def _bind(node: ast.Call) -> dict[str, ast.AST]:
    if len(node.args) > len(CAGING_PARAMS):
        raise RewardRejected(f"gripper_caging() takes at most {len(CAGING_PARAMS)} arguments")
    bound: dict[str, ast.AST] = dict(zip(CAGING_PARAMS, node.args, strict=False))
    for kw in node.keywords:
        if kw.arg is None or kw.arg not in CAGING_PARAMS:
            raise RewardRejected(
                f"gripper_caging() has no argument '{kw.arg or '**'}'; its arguments are {', '.join(CAGING_PARAMS)}"
            )
        if kw.arg in bound:
            raise RewardRejected(f"gripper_caging() got '{kw.arg}' twice")
        bound[kw.arg] = kw.value
    missing = [name for name in _REQUIRED if name not in bound]
    if missing:
        raise RewardRejected(f"gripper_caging() is missing {', '.join(repr(m) for m in missing)}")
    return bound


def _check(values: dict[str, float]) -> None:
    radius, pad, xz = values["obj_radius"], values["pad_success"], values["xz_success"]
    if radius < 0 or xz < 0:
        raise RewardRejected("gripper_caging() obj_radius and xz_success must be >= 0")
    if pad < radius:
        raise RewardRejected(f"gripper_caging() pad_success {pad:g} is below obj_radius {radius:g}")
    if not values["effort"] > 0:
        raise RewardRejected("gripper_caging() effort must be > 0")
    if not 0 <= values["gate"] < 1:
        raise RewardRejected("gripper_caging() gate must be in [0, 1)")
    if values["high_density"] not in (0.0, 1.0):
        raise RewardRejected("gripper_caging() high_density must be 0 or 1")
    band = values["grip_band"]
    if band != 0 and band < radius:
        raise RewardRejected(f"gripper_caging() grip_band {band:g} must be 0 or at least obj_radius {radius:g}")


def caging_call(
    node: ast.Call,
    expr: Callable[[ast.AST], sympy.Expr],
    number: Callable[[sympy.Expr, str], float],
    features: Collection[str],
    symbol: Callable[[str], sympy.Symbol],
) -> sympy.Expr:
    """The sympy term of one `gripper_caging(...)` call; `features` are the task's (all of `CAGING_FEATURES`
    must be among them), `symbol` the parser's feature symbol (so symbols compare equal)."""
    lacking = [name for name in CAGING_FEATURES if name not in features]
    if lacking:
        raise RewardRejected(
            f"gripper_caging() reads the task features {', '.join(CAGING_FEATURES)}; this task lacks "
            f"{', '.join(lacking)}"
        )
    bound = _bind(node)
    values = dict(CAGING_DEFAULTS)
    for name, arg in bound.items():
        values[name] = number(expr(arg), f"gripper_caging {name}")
    _check(values)
    inputs = [symbol(name) for name in CAGING_FEATURES]
    params = [sympy.Float(values[name]) for name in CAGING_PARAMS]
    return cast(sympy.Expr, fn.gripper_caging(*inputs, *params))
