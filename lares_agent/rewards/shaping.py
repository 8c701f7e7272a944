"""The numeric definitions of the shaped `tolerance` and of `gripper_caging`, written once for numpy and torch.

MetaWorld's own rewards are built from dm_control's `tolerance` with several sigmoid shapes, margins that are the
episode's own starting distances, Hamacher products and a gripper-caging helper. To write those rewards in the
reward language (and let an LLM refine them), the language needs the same shapes with the same arithmetic: each
function here takes the array module `xp` (numpy or torch, whose `where`, `abs`, `exp`, `cos`, `cosh`, `tanh`
agree in name and meaning) so the numpy backend, the torch backend and an exported module run the very same
operations in the same order as `metaworld.utils.reward_utils` does, and agree with the env to rounding.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "CAGING_DEFAULTS",
    "CAGING_FEATURES",
    "CAGING_PARAMS",
    "SIGMOIDS",
    "caging_value",
    "hamacher_value",
    "prism_value",
    "sigmoid_scale",
    "tolerance_value",
    "unit_shape",
]

SIGMOIDS = ("gaussian", "hyperbolic", "long_tail", "reciprocal", "cosine", "linear", "quadratic", "tanh_squared")
"""dm_control's (and MetaWorld's `reward_utils`) tolerance shapes; the index is what a parsed reward stores."""

CAGING_FEATURES = (
    "left_pad_gap",
    "right_pad_gap",
    "left_pad_ref_gap",
    "right_pad_ref_gap",
    "tcp_to_obj_xz",
    "initial_tcp_to_obj_xz",
    "gripper_command",
)
"""The task features `gripper_caging` reads, in argument order; a task that lacks one cannot use the function."""

CAGING_PARAMS = ("obj_radius", "pad_success", "xz_success", "effort", "gate", "high_density", "grip_band")
"""Its tunable parameters, in argument order (after the features)."""

CAGING_DEFAULTS: dict[str, float] = {"effort": 1.0, "gate": 0.97, "high_density": 0.0, "grip_band": 0.0}
"""Defaults of the optional parameters: MetaWorld's `_gripper_caging_reward` defaults."""


def sigmoid_scale(sigmoid: str, value_at_margin: float) -> float:
    """The scale that makes the shape equal `value_at_margin` one margin past the bounds (dm_control's `_sigmoids`)."""
    v = value_at_margin
    if sigmoid == "gaussian":
        return math.sqrt(-2.0 * math.log(v))
    if sigmoid == "hyperbolic":
        return math.acosh(1.0 / v)
    if sigmoid == "long_tail":
        return math.sqrt(1.0 / v - 1.0)
    if sigmoid == "reciprocal":
        return 1.0 / v - 1.0
    if sigmoid == "cosine":
        return math.acos(2.0 * v - 1.0) / math.pi
    if sigmoid == "linear":
        return 1.0 - v
    if sigmoid == "quadratic":
        return math.sqrt(1.0 - v)
    if sigmoid == "tanh_squared":
        return math.atanh(math.sqrt(1.0 - v))
    raise ValueError(f"unknown sigmoid {sigmoid!r}")


def unit_shape(xp: Any, d: Any, scale: float, sigmoid: str) -> Any:
    """The shape at `d` margins past the bounds: 1 at d = 0, falling towards 0 (dm_control's formulas, in order)."""
    if sigmoid == "gaussian":
        return xp.exp(-0.5 * (d * scale) ** 2)
    if sigmoid == "hyperbolic":
        return 1 / xp.cosh(d * scale)
    if sigmoid == "long_tail":
        return 1 / ((d * scale) ** 2 + 1)
    if sigmoid == "reciprocal":
        return 1 / (xp.abs(d) * scale + 1)
    if sigmoid == "tanh_squared":
        return 1 - xp.tanh(d * scale) ** 2
    s = d * scale
    inside = xp.abs(s) < 1
    if sigmoid == "cosine":
        return xp.where(inside, (1 + xp.cos(math.pi * s)) / 2, 0.0)
    if sigmoid == "linear":
        return xp.where(inside, 1 - s, 0.0)
    if sigmoid == "quadratic":
        return xp.where(inside, 1 - s**2, 0.0)
    raise ValueError(f"unknown sigmoid {sigmoid!r}")


def tolerance_value(
    xp: Any, x: Any, margin: Any, lower: float, upper: float, value_at_margin: float, sigmoid: str
) -> Any:
    """dm_control `tolerance(x, bounds=(lower, upper), margin, sigmoid, value_at_margin)` with an array margin.

    1 inside the bounds; outside, the shape of the distance to the nearer bound in units of `margin`. Where the
    margin is 0 (or negative, or nan: MetaWorld margins are starting distances, which can be 0), the plain bounds
    indicator, as dm_control's margin == 0.
    """
    in_bounds = (lower <= x) & (x <= upper)
    outside = xp.where(x < lower, lower - x, x - upper)
    positive = margin > 0
    d = outside / xp.where(positive, margin, 1.0)  # the unselected branch never divides by 0 (torch gradients)
    shaped = unit_shape(xp, d, sigmoid_scale(sigmoid, value_at_margin), sigmoid)
    return xp.where(in_bounds, 1.0, xp.where(positive, shaped, 0.0))


def prism_value(xp: Any, x: Any, y: Any, z: Any, zero: tuple[float, ...], one: tuple[float, ...]) -> Any:
    """MetaWorld's `rect_prism_tolerance`: inside the box spanned by the corners `zero` and `one`, the product of
    the point's fractions of the way from `zero` to `one` along each axis (0 at `zero`, 1 at `one`); 1 outside."""
    inside = None
    scaled = None
    for value, low, high in zip((x, y, z), zero, one, strict=True):
        axis_in = (min(low, high) <= value) & (value <= max(low, high))
        inside = axis_in if inside is None else inside & axis_in
        fraction = (value - low) / (high - low)
        scaled = fraction if scaled is None else scaled * fraction
    return xp.where(inside, scaled, 1.0)


def hamacher_value(xp: Any, a: Any, b: Any) -> Any:
    """Hamacher product a*b / (a + b - a*b), 0 where the denominator is 0 (MetaWorld's `hamacher_product`)."""
    den = a + b - a * b
    zero = den == 0
    return xp.where(zero, 0.0, a * b / xp.where(zero, 1.0, den))


def caging_value(
    xp: Any,
    left_gap: Any,
    right_gap: Any,
    left_ref: Any,
    right_ref: Any,
    xz: Any,
    xz_ref: Any,
    grip: Any,
    obj_radius: float,
    pad_success: float,
    xz_success: float,
    effort: float,
    gate: float,
    high_density: float,
    grip_band: float,
) -> Any:
    """MetaWorld's `_gripper_caging_reward`: how well the two finger pads cage the object, then grip it.

    Each pad's gap to the object (y, the axis the fingers close along) is a long-tail tolerance with bounds
    (obj_radius, pad_success) and margin |ref_gap - pad_success|; the gripper centre's x-z distance to the object
    one with bounds (0, xz_success) and margin xz_ref - xz_success; caging is their Hamacher product. Where caging
    exceeds `gate`, gripping counts: the gripper command, clipped to [0, effort] and divided by effort, joined to
    caging by a Hamacher product (and averaged with caging when `high_density` is 1). With `grip_band` > 0 the
    gripping is instead the pads' own tolerance with bounds (obj_radius, grip_band), averaged with caging, as
    MetaWorld's soccer and push-back envs do.
    """
    left_margin = xp.abs(left_ref - pad_success)
    right_margin = xp.abs(right_ref - pad_success)
    left = tolerance_value(xp, left_gap, left_margin, obj_radius, pad_success, 0.1, "long_tail")
    right = tolerance_value(xp, right_gap, right_margin, obj_radius, pad_success, 0.1, "long_tail")
    caging_xz = tolerance_value(xp, xz, xz_ref - xz_success, 0.0, xz_success, 0.1, "long_tail")
    caging = hamacher_value(xp, hamacher_value(xp, left, right), caging_xz)
    if grip_band > 0:
        left_grip = tolerance_value(xp, left_gap, left_margin, obj_radius, grip_band, 0.1, "long_tail")
        right_grip = tolerance_value(xp, right_gap, right_margin, obj_radius, grip_band, 0.1, "long_tail")
        gripping = xp.where(caging > gate, hamacher_value(xp, right_grip, left_grip), 0.0)
        return (caging + gripping) / 2
    positive = xp.where(grip > 0, grip, 0.0)  # min(max(0, command), effort) / effort
    closed = xp.where(positive < effort, positive, effort) / effort
    gripped = hamacher_value(xp, caging, xp.where(caging > gate, closed, 0.0))
    return (gripped + caging) / 2 if high_density else gripped
