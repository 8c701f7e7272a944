"""The reward language's non-sympy functions: sigmoid, tolerance, hamacher, and the sugar forms.

Every function here is an opaque sympy function that folds only numeric arguments, rather than an
expansion into exp/Piecewise or sympy's own Min/Max/Piecewise: hamacher repeats each argument three times,
so nested expansions would grow exponentially (a bounded text could print as gigabytes), and sympy's
Min/Max/Piecewise run symbolic comparisons and set solvers while being built (seconds on adversarial
input). Opaque, the tree stays linear in the text and the canonical form reads like what the LLM wrote.
Comparisons in arithmetic become `where(cond, 1, 0)`, `clip` becomes Min(Max(...)), and Piecewise nested
`where`s.

The numpy implementations here (and `shaping.py`'s, written once for numpy and torch) are the single numeric
definition: constant folding uses them, and the compiled numpy backend calls them; the torch backend mirrors them
op for op. `gripper_caging` is the one function whose inputs are implicit: it reads the task's caging features.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy
from sympy.logic.boolalg import Boolean

from lares_agent.rewards.shaping import (
    CAGING_DEFAULTS,
    CAGING_FEATURES,
    CAGING_PARAMS,
    SIGMOIDS,
    prism_value,
    tolerance_value,
)

__all__ = [
    "DEFAULT_VALUE_AT_MARGIN",
    "Max",
    "Min",
    "as_condition",
    "clip",
    "gripper_caging",
    "hamacher",
    "indicator",
    "is_condition",
    "np_hamacher",
    "np_shaped_tolerance",
    "np_sigmoid",
    "np_tolerance",
    "piecewise",
    "rect_prism",
    "shape_name",
    "sigmoid",
    "tolerance",
    "where",
]

# dm_control rewards.tolerance default with sigmoid="gaussian"; the reference's reward_utils uses the same.
DEFAULT_VALUE_AT_MARGIN = 0.1


def np_sigmoid(x: np.ndarray | float) -> np.ndarray:
    """Logistic function without overflow: exp(-log(1 + exp(-x))) keeps tiny values' relative accuracy."""
    return np.exp(-np.logaddexp(0.0, -np.asarray(x, dtype=np.float64)))


def np_tolerance(
    x: np.ndarray | float, lower: float, upper: float, margin: float, value_at_margin: float
) -> np.ndarray:
    """dm_control `rewards.tolerance(x, bounds=(lower, upper), margin, sigmoid="gaussian", value_at_margin)`.

    1 inside the bounds; outside, a gaussian of the distance to the nearest bound in units of `margin`
    that equals `value_at_margin` at one margin away. margin == 0 gives the plain bounds indicator.
    """
    x = np.asarray(x, dtype=np.float64)
    if margin == 0:
        return np.where((lower <= x) & (x <= upper), 1.0, 0.0)
    # distance outside the bounds (0 inside, so exp(0) = 1 exactly there); nan stays nan through maximum
    d = np.asarray(np.maximum(np.subtract(lower, x), np.subtract(x, upper)))  # 0-d stays an array
    np.maximum(d, 0.0, out=d)
    np.multiply(d, d, out=d)
    d *= tolerance_coefficient(margin, value_at_margin)
    out: np.ndarray = np.exp(d, out=d)
    return out


def tolerance_coefficient(margin: float, value_at_margin: float) -> float:
    """c in exp(c * d**2): the gaussian that equals value_at_margin at d = margin."""
    return math.log(value_at_margin) / (margin * margin)


def np_hamacher(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """Hamacher product a*b / (a + b - a*b), defined as 0 where the denominator is 0 (a = b = 0 on [0, 1])."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    den = a + b - a * b
    zero = den == 0
    # Double where: the unselected branch never divides by zero, so no nan leaks into gradients (torch twin).
    return np.where(zero, 0.0, a * b / np.where(zero, 1.0, den))


def _as_float(value: sympy.Expr) -> float:
    return float(value)  # only called on sympy Numbers


class sigmoid(sympy.Function):  # type: ignore[misc]  # sympy ships no type hints
    """1 / (1 + exp(-x)), opaque so that it prints as written and is evaluated stably."""

    nargs = 1

    @classmethod
    def eval(cls, x: sympy.Expr) -> sympy.Expr | None:
        if x.is_Number:
            return sympy.Float(float(np_sigmoid(_as_float(x))))
        return None

    def _eval_is_extended_real(self) -> bool | None:
        real: bool | None = self.args[0].is_extended_real
        return real


class tolerance(sympy.Function):  # type: ignore[misc]  # sympy ships no type hints
    """tolerance(x, lower, upper, margin, value_at_margin[, shape]).

    Bounds and value_at_margin are numbers (checked by the parser); the margin is a number or an expression of the
    features (MetaWorld's margins are the episode's starting distances). `shape` indexes `shaping.SIGMOIDS`; the
    gaussian with a constant margin has no sixth argument, so rewards written before the shapes existed keep their
    canonical text and identity.
    """

    nargs = (5, 6)

    @classmethod
    def eval(cls, *args: sympy.Expr) -> sympy.Expr | None:
        if all(a.is_Number for a in args):
            x, lower, upper, margin, vam = (_as_float(a) for a in args[:5])
            if len(args) == 5:  # the compiled program's own path for this form (np_tolerance)
                return sympy.Float(float(np_tolerance(x, lower, upper, margin, vam)))
            value = np_shaped_tolerance(x, margin, lower, upper, vam, shape_name(args))
            return sympy.Float(float(value))
        return None

    def _eval_is_extended_real(self) -> bool | None:
        real: bool | None = self.args[0].is_extended_real
        return real

    def _sympystr(self, printer: Any) -> str:
        parts = [printer._print(a) for a in self.args[:5]]
        if len(self.args) == 6:
            parts.append(repr(shape_name(self.args)))
        return f"tolerance({', '.join(parts)})"

    def _latex(self, printer: Any) -> str:
        parts = [printer._print(a) for a in self.args[:5]]
        if len(self.args) == 6:
            parts.append(r"\text{" + shape_name(self.args).replace("_", r"\_") + "}")
        return r"\operatorname{tolerance}{\left(" + ", ".join(parts) + r"\right)}"


def shape_name(args: tuple[sympy.Basic, ...]) -> str:
    """The sigmoid of a `tolerance` node's arguments (the gaussian where there is no sixth)."""
    return SIGMOIDS[int(args[5])] if len(args) == 6 else "gaussian"


def np_shaped_tolerance(
    x: np.ndarray | float, margin: np.ndarray | float, lower: float, upper: float, value_at_margin: float,
    sigmoid: str,
) -> np.ndarray:
    """`shaping.tolerance_value` on numpy: any shape, a margin that may be an array (0 there: the indicator)."""
    with np.errstate(all="ignore"):
        value: np.ndarray = tolerance_value(np, np.asarray(x, dtype=np.float64), np.asarray(margin, dtype=np.float64),
                                            lower, upper, value_at_margin, sigmoid)
    return value


class rect_prism(sympy.Function):  # type: ignore[misc]  # sympy ships no type hints
    """rect_prism(x, y, z, (x0, y0, z0), (x1, y1, z1)): MetaWorld's `rect_prism_tolerance` (`shaping.prism_value`).

    Stored flat as nine arguments, the two corners numbers (checked by the parser)."""

    nargs = 9

    @classmethod
    def eval(cls, *args: sympy.Expr) -> sympy.Expr | None:
        if all(a.is_Number for a in args):
            x, y, z, *corners = (_as_float(a) for a in args)
            return sympy.Float(float(prism_value(np, x, y, z, tuple(corners[:3]), tuple(corners[3:]))))
        return None

    def _eval_is_extended_real(self) -> bool | None:
        return True if all(a.is_extended_real for a in self.args[:3]) else None

    def _sympystr(self, printer: Any) -> str:
        point = ", ".join(printer._print(a) for a in self.args[:3])
        zero = ", ".join(printer._print(a) for a in self.args[3:6])
        one = ", ".join(printer._print(a) for a in self.args[6:])
        return f"rect_prism({point}, ({zero}), ({one}))"


class gripper_caging(sympy.Function):  # type: ignore[misc]  # sympy ships no type hints
    """MetaWorld's gripper-caging reward (`shaping.caging_value`) over the task's caging features.

    Written `gripper_caging(obj_radius=..., pad_success=..., xz_success=...[, effort, gate, high_density,
    grip_band])`: the parameters are numbers, the inputs are the task's features `shaping.CAGING_FEATURES`, which
    the parser supplies (the function reads the task's gripper pads and object, as MetaWorld's helper does). The
    node holds the seven feature symbols, then the seven parameters, so `free_symbols` names what it reads.
    """

    nargs = len(CAGING_FEATURES) + len(CAGING_PARAMS)

    @classmethod
    def eval(cls, *args: sympy.Expr) -> sympy.Expr | None:
        return None  # its inputs are always features: nothing to fold

    def _eval_is_extended_real(self) -> bool | None:
        return True

    def params(self) -> dict[str, float]:
        """The parameters by name."""
        return {name: _as_float(a) for name, a in zip(CAGING_PARAMS, self.args[len(CAGING_FEATURES):], strict=True)}

    def _sympystr(self, printer: Any) -> str:
        values = self.params()
        shown = [f"{name}={printer._print(sympy.Float(value))}" for name, value in values.items()
                 if name not in CAGING_DEFAULTS or value != CAGING_DEFAULTS[name]]
        return f"gripper_caging({', '.join(shown)})"

    def _latex(self, printer: Any) -> str:
        shown = ", ".join(name.replace("_", r"\_") + f"={value:g}" for name, value in self.params().items())
        return r"\operatorname{gripper\_caging}{\left(" + shown + r"\right)}"


class hamacher(sympy.Function):  # type: ignore[misc]  # sympy ships no type hints
    """Hamacher product (t-norm) of two rewards in [0, 1]: a soft AND, as in MetaWorld's v2 rewards."""

    nargs = 2

    @classmethod
    def eval(cls, a: sympy.Expr, b: sympy.Expr) -> sympy.Expr | None:
        if a.is_Number and b.is_Number:
            return sympy.Float(float(np_hamacher(_as_float(a), _as_float(b))))
        if a.is_zero or b.is_zero:
            return sympy.S.Zero
        return None

    def _eval_is_extended_real(self) -> bool | None:
        if self.args[0].is_extended_real and self.args[1].is_extended_real:
            return True
        return None


def is_condition(value: sympy.Basic) -> bool:
    """True for comparisons and logic. sympy's Symbol is also a Boolean subclass, so test for Expr too."""
    return isinstance(value, Boolean) and not isinstance(value, sympy.Expr)


class _MinMax(sympy.Function):  # type: ignore[misc]  # sympy ships no type hints
    """Opaque n-ary min/max. sympy's own Min/Max compare every pair of arguments symbolically (and solve
    inequalities when they hold Piecewise), which took seconds on 160-node inputs; these only fold numbers."""

    _pick: Callable[..., sympy.Expr] = staticmethod(min)

    @classmethod
    def eval(cls, *args: sympy.Expr) -> sympy.Expr | None:
        # canonical form without symbolic comparisons: flatten, dedupe, fold the numbers, sort
        flat: list[sympy.Expr] = []
        for arg in args:
            flat.extend(arg.args if isinstance(arg, cls) else (arg,))
        numbers = [a for a in flat if a.is_Number]
        others = {a for a in flat if not a.is_Number}
        kept = sorted(others, key=sympy.default_sort_key)
        if numbers:
            kept.insert(0, cls._pick(numbers, key=float))
        if len(kept) == 1:
            return kept[0]
        if tuple(kept) != args:
            return cls(*kept)
        return None

    def _eval_is_extended_real(self) -> bool | None:
        return True if all(a.is_extended_real for a in self.args) else None


class Min(_MinMax):
    """Min(a, b, ...)."""

    _pick = staticmethod(min)


class Max(_MinMax):
    """Max(a, b, ...)."""

    _pick = staticmethod(max)


class where(sympy.Function):  # type: ignore[misc]  # sympy ships no type hints
    """where(cond, a, b): a where cond holds, else b. Opaque for the same reason as Min/Max: sympy's Piecewise
    rewrites conditions that contain a Piecewise through set solvers (seconds, unbounded)."""

    nargs = 3

    @classmethod
    def eval(cls, cond: sympy.Basic, a: sympy.Expr, b: sympy.Expr) -> sympy.Expr | None:
        if cond is sympy.true:
            return a
        if cond is sympy.false:
            return b
        if a == b:
            return a
        return None

    def _eval_is_extended_real(self) -> bool | None:
        return True if self.args[1].is_extended_real and self.args[2].is_extended_real else None


def indicator(cond: Boolean) -> sympy.Expr:
    """A comparison used in arithmetic means 1.0 where it holds and 0.0 elsewhere."""
    return where(cond, sympy.S.One, sympy.S.Zero)


def as_condition(value: sympy.Basic) -> Boolean:
    """A number used as a condition means `value != 0` (Python truthiness, e.g. a 0/1 `grasp` feature)."""
    if is_condition(value):
        return value
    return sympy.Ne(value, 0)


def piecewise(pairs: list[tuple[sympy.Expr, Boolean]]) -> sympy.Expr:
    """Piecewise((a, c1), (b, c2), ..., (z, True)) as nested where: the first true condition wins."""
    result = pairs[-1][0]
    for value, cond in reversed(pairs[:-1]):
        result = where(cond, value, result)
    return result


def clip(x: sympy.Expr, low: sympy.Expr, high: sympy.Expr) -> sympy.Expr:
    """numpy-style clip(x, low, high)."""
    return Min(Max(x, low), high)
