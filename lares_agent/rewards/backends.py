"""The two array backends that run a compiled reward program: numpy (float64) and torch (differentiable).

Each method is one instruction of `compile._Instr`; both backends take the same branches (e.g. x**2 as
x*x, x**0.5 as sqrt) so that their results agree to rounding, which the tests check on every function.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np

from lares_agent.rewards import functions as fn
from lares_agent.rewards.shaping import caging_value, prism_value, tolerance_value

if TYPE_CHECKING:
    import torch

__all__ = ["NumpyBackend", "TorchBackend"]


def _pow_branch(p: float) -> str:
    if p == 1.0:
        return "identity"
    if p == 2.0:
        return "square"
    if p == 0.5:
        return "sqrt"
    if p == -1.0:
        return "reciprocal"
    return "power"


class NumpyBackend:
    """Vectorised float64 numpy; stateless, so the class itself is the backend."""

    @staticmethod
    def const(value: float) -> np.float64:
        return np.float64(value)

    @staticmethod
    def bool_const(value: bool) -> np.bool_:
        return np.bool_(value)

    @staticmethod
    def add(*xs: Any) -> Any:
        return reduce(np.add, xs)

    @staticmethod
    def mul(*xs: Any) -> Any:
        return reduce(np.multiply, xs)

    @staticmethod
    def min(*xs: Any) -> Any:
        return reduce(np.minimum, xs)

    @staticmethod
    def max(*xs: Any) -> Any:
        return reduce(np.maximum, xs)

    @staticmethod
    def and_(*xs: Any) -> Any:
        return reduce(np.logical_and, xs)

    @staticmethod
    def or_(*xs: Any) -> Any:
        return reduce(np.logical_or, xs)

    @staticmethod
    def xor(*xs: Any) -> Any:
        return reduce(np.logical_xor, xs)

    @staticmethod
    def not_(x: Any) -> Any:
        return np.logical_not(x)

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        return np.where(cond, a, b)

    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    tanh = staticmethod(np.tanh)
    abs = staticmethod(np.abs)
    sigmoid = staticmethod(fn.np_sigmoid)
    hamacher = staticmethod(fn.np_hamacher)
    tolerance = staticmethod(fn.np_tolerance)
    shaped_tolerance = staticmethod(fn.np_shaped_tolerance)
    lt = staticmethod(np.less)
    le = staticmethod(np.less_equal)
    gt = staticmethod(np.greater)
    ge = staticmethod(np.greater_equal)
    eq = staticmethod(np.equal)
    ne = staticmethod(np.not_equal)

    @staticmethod
    def pow(x: Any, p: float) -> Any:
        branch = _pow_branch(p)
        if branch == "identity":
            return x
        if branch == "square":
            return x * x
        if branch == "sqrt":
            return np.sqrt(x)
        if branch == "reciprocal":
            return 1.0 / x
        return np.power(x, p)

    @staticmethod
    def rect_prism(x: Any, y: Any, z: Any, zero: tuple[float, ...], one: tuple[float, ...]) -> Any:
        x, y, z = (np.asarray(a, dtype=np.float64) for a in (x, y, z))
        return prism_value(np, x, y, z, zero, one)

    @staticmethod
    def gripper_caging(*args: Any) -> Any:
        """`shaping.caging_value` on numpy: seven feature columns, then the seven parameters."""
        columns = [np.asarray(a, dtype=np.float64) for a in args[:7]]
        return caging_value(np, *columns, *args[7:])  # type: ignore[arg-type]  # 7 arrays, then 7 floats

    @staticmethod
    def piecewise(*args: Any) -> Any:
        """args = value1, cond1, value2, cond2, ...; the first true condition wins (sympy semantics)."""
        result: Any = np.float64(np.nan)
        for i in range(len(args) - 2, -1, -2):
            result = np.where(args[i + 1], args[i], result)
        return result


class TorchBackend:
    """Torch ops mirroring NumpyBackend; every op is differentiable where the math is."""

    def __init__(self, dtype: torch.dtype, device: torch.device) -> None:
        self.dtype = dtype
        self.device = device

    def as_tensor(self, value: Any) -> torch.Tensor:
        import torch

        if isinstance(value, torch.Tensor):
            return value
        return torch.as_tensor(value, dtype=self.dtype, device=self.device)

    def const(self, value: float) -> torch.Tensor:
        import torch

        return torch.tensor(value, dtype=self.dtype, device=self.device)

    def bool_const(self, value: bool) -> torch.Tensor:
        import torch

        return torch.tensor(value, dtype=torch.bool, device=self.device)

    def add(self, *xs: torch.Tensor) -> torch.Tensor:
        return reduce(lambda a, b: a + b, xs)

    def mul(self, *xs: torch.Tensor) -> torch.Tensor:
        return reduce(lambda a, b: a * b, xs)

    def min(self, *xs: torch.Tensor) -> torch.Tensor:
        import torch

        return reduce(torch.minimum, xs)

    def max(self, *xs: torch.Tensor) -> torch.Tensor:
        import torch

        return reduce(torch.maximum, xs)

    def and_(self, *xs: torch.Tensor) -> torch.Tensor:
        import torch

        return reduce(torch.logical_and, xs)

    def or_(self, *xs: torch.Tensor) -> torch.Tensor:
        import torch

        return reduce(torch.logical_or, xs)

    def xor(self, *xs: torch.Tensor) -> torch.Tensor:
        import torch

        return reduce(torch.logical_xor, xs)

    def not_(self, x: torch.Tensor) -> torch.Tensor:
        import torch

        return torch.logical_not(x)

    def where(self, cond: Any, a: Any, b: Any) -> torch.Tensor:
        import torch

        # bool branches (ITE) stay bool; numeric ones are tensors of the backend dtype
        return torch.where(cond, self.as_tensor(a), self.as_tensor(b))

    def _unary(self, name: str, x: torch.Tensor) -> torch.Tensor:
        import torch

        op: Callable[[torch.Tensor], torch.Tensor] = getattr(torch, name)
        return op(x)

    def exp(self, x: torch.Tensor) -> torch.Tensor:
        return self._unary("exp", x)

    def log(self, x: torch.Tensor) -> torch.Tensor:
        return self._unary("log", x)

    def tanh(self, x: torch.Tensor) -> torch.Tensor:
        return self._unary("tanh", x)

    def abs(self, x: torch.Tensor) -> torch.Tensor:
        return self._unary("abs", x)

    def sigmoid(self, x: torch.Tensor) -> torch.Tensor:
        import torch

        # the numpy formula, not torch.sigmoid: both sides then round alike near comparison thresholds
        return torch.exp(-torch.logaddexp(torch.zeros_like(x), -x))

    def lt(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a < b

    def le(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a <= b

    def gt(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a > b

    def ge(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a >= b

    def eq(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a == b

    def ne(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a != b

    def pow(self, x: torch.Tensor, p: float) -> torch.Tensor:
        import torch

        branch = _pow_branch(p)
        if branch == "identity":
            return x
        if branch == "square":
            return x * x
        if branch == "sqrt":
            return torch.sqrt(x)
        if branch == "reciprocal":
            return 1.0 / x
        return torch.pow(x, p)

    def piecewise(self, *args: Any) -> torch.Tensor:
        import torch

        result = self.const(math.nan)
        for i in range(len(args) - 2, -1, -2):
            result = torch.where(args[i + 1], self.as_tensor(args[i]), result)
        return result

    def tolerance(self, x: Any, lower: float, upper: float, margin: float, value_at_margin: float) -> torch.Tensor:
        import torch

        if margin == 0:
            return torch.where((x >= lower) & (x <= upper), self.const(1.0), self.const(0.0))
        d = torch.clamp_min(torch.maximum(lower - x, x - upper), 0.0)
        return torch.exp(d * d * fn.tolerance_coefficient(margin, value_at_margin))

    def shaped_tolerance(
        self, x: Any, margin: Any, lower: float, upper: float, value_at_margin: float, sigmoid: str
    ) -> torch.Tensor:
        import torch

        value: torch.Tensor = tolerance_value(torch, self.as_tensor(x), self.as_tensor(margin), lower, upper,
                                              value_at_margin, sigmoid)
        return value

    def rect_prism(self, x: Any, y: Any, z: Any, zero: tuple[float, ...], one: tuple[float, ...]) -> torch.Tensor:
        import torch

        value: torch.Tensor = prism_value(torch, self.as_tensor(x), self.as_tensor(y), self.as_tensor(z), zero, one)
        return value

    def gripper_caging(self, *args: Any) -> torch.Tensor:
        import torch

        columns = [self.as_tensor(a) for a in args[:7]]
        value: torch.Tensor = caging_value(torch, *columns, *args[7:])  # type: ignore[arg-type]  # as numpy's
        return value

    def hamacher(self, a: Any, b: Any) -> torch.Tensor:
        import torch

        den = a + b - a * b
        zero = den == 0
        return torch.where(zero, self.const(0.0), a * b / torch.where(zero, self.const(1.0), den))
