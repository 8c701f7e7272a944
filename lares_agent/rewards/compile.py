"""Compile a parsed reward once into a straight-line program run by a numpy or a torch backend.

No generated source and no `exec` (unlike `lambdify`): the sympy tree is walked once into a list of
instructions with common subexpressions shared across components, and both backends run the same list,
so numpy (relabelling whole buffer columns, docs/lares-reference.md §12 item 19) and torch (gradients w.r.t.
features) cannot drift apart. Evaluation costs one array operation per instruction, whatever N is.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy
from sympy.core import relational as rel
from sympy.logic.boolalg import BooleanFalse, BooleanTrue

from lares_agent.rewards import functions as fn
from lares_agent.rewards.backends import NumpyBackend, TorchBackend
from lares_agent.rewards.candidate import ParsedReward, candidate_id, parse_candidate, reward_key
from lares_agent.rewards.limits import Limits, RewardRejected
from lares_agent.rewards.shaping import CAGING_FEATURES
from lares_agent.rewards.task import RewardTask, allowed_features

if TYPE_CHECKING:
    import torch

__all__ = ["CompiledReward", "FeatureError", "compile_record", "compile_reward", "load_reward"]


class FeatureError(KeyError):
    """The feature arrays given to a compiled reward lack a name or disagree in shape."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "feature error"


@dataclass(frozen=True)
class _Instr:
    op: str  # backend method name
    args: tuple[int, ...] = ()  # earlier instruction indices
    param: tuple[Any, ...] = ()  # constants: feature name, value, exponent, tolerance parameters


_UNARY_OPS = {sympy.exp: "exp", sympy.log: "log", sympy.tanh: "tanh", sympy.Abs: "abs", fn.sigmoid: "sigmoid"}
_REL_OPS = {
    rel.StrictLessThan: "lt",
    rel.LessThan: "le",
    rel.StrictGreaterThan: "gt",
    rel.GreaterThan: "ge",
    rel.Equality: "eq",
    rel.Unequality: "ne",
}
_NARY_OPS = {sympy.Add: "add", sympy.Mul: "mul", fn.Min: "min", fn.Max: "max", sympy.Min: "min", sympy.Max: "max",
             sympy.And: "and_", sympy.Or: "or_", sympy.Xor: "xor"}  # fmt: skip
# where(cond, a, b) and sympy's boolean if-then-else ITE(cond, a, b) are the same select
_SELECT_OPS = (fn.where, sympy.ITE)


class _Emitter:
    def __init__(self) -> None:
        self.program: list[_Instr] = []
        self.memo: dict[sympy.Basic, int] = {}

    def emit(self, instr: _Instr) -> int:
        self.program.append(instr)
        return len(self.program) - 1

    def visit(self, node: sympy.Basic) -> int:
        slot = self.memo.get(node)
        if slot is None:
            slot = self.emit(self.lower(node))
            self.memo[node] = slot
        return slot

    def lower(self, node: sympy.Basic) -> _Instr:
        if isinstance(node, sympy.Symbol):
            return _Instr("feature", param=(node.name,))
        if isinstance(node, (BooleanTrue, BooleanFalse)):
            return _Instr("bool_const", param=(bool(node),))
        if isinstance(node, sympy.Expr) and not node.free_symbols:
            return _Instr("const", param=(float(node),))
        cls = type(node)
        if cls in _UNARY_OPS:
            return _Instr(_UNARY_OPS[cls], (self.visit(node.args[0]),))
        if cls in _NARY_OPS:
            return _Instr(_NARY_OPS[cls], tuple(self.visit(a) for a in node.args))
        if cls in _REL_OPS:
            return _Instr(_REL_OPS[cls], (self.visit(node.lhs), self.visit(node.rhs)))
        if isinstance(node, sympy.Not):
            return _Instr("not_", (self.visit(node.args[0]),))
        if isinstance(node, _SELECT_OPS):
            return _Instr("where", tuple(self.visit(a) for a in node.args))
        if isinstance(node, sympy.Pow):
            if not node.exp.is_Number:
                raise RewardRejected(f"cannot compile non-constant exponent in '{node}'")
            return _Instr("pow", (self.visit(node.base),), (float(node.exp),))
        if isinstance(node, sympy.Piecewise):
            args: list[int] = []
            for pair in node.args:
                args.extend((self.visit(pair.expr), self.visit(pair.cond)))
            return _Instr("piecewise", tuple(args))
        if isinstance(node, fn.tolerance):
            x, lower, upper, margin, vam = node.args[:5]
            if len(node.args) == 5:  # the gaussian with a constant margin
                return _Instr("tolerance", (self.visit(x),), tuple(float(a) for a in node.args[1:]))
            return _Instr("shaped_tolerance", (self.visit(x), self.visit(margin)),
                          (float(lower), float(upper), float(vam), fn.shape_name(node.args)))
        if isinstance(node, fn.rect_prism):
            return _Instr("rect_prism", tuple(self.visit(a) for a in node.args[:3]),
                          (tuple(float(a) for a in node.args[3:6]), tuple(float(a) for a in node.args[6:])))
        if isinstance(node, fn.gripper_caging):
            inputs = node.args[: len(CAGING_FEATURES)]
            return _Instr("gripper_caging", tuple(self.visit(a) for a in inputs),
                          tuple(float(a) for a in node.args[len(CAGING_FEATURES):]))
        if isinstance(node, fn.hamacher):
            return _Instr("hamacher", (self.visit(node.args[0]), self.visit(node.args[1])))
        raise RewardRejected(f"cannot compile '{type(node).__name__}' (in '{str(node)[:60]}')")


def _run(program: list[_Instr], backend: Any, columns: Mapping[str, Any]) -> list[Any]:
    values: list[Any] = []
    for instr in program:
        if instr.op == "feature":
            values.append(columns[instr.param[0]])
        else:
            values.append(getattr(backend, instr.op)(*(values[i] for i in instr.args), *instr.param))
    return values


class CompiledReward:
    """A parsed reward compiled once; satisfies the engine's RewardFunction protocol.

    Call it with feature columns (name -> array [N]); it returns the total reward [N] as float64. `id` names it
    (a slot's reward in logs and checkpoints); `key` is its identity (`reward_key`: equal keys, same reward).
    """

    def __init__(self, parsed: ParsedReward, id: str) -> None:
        emitter = _Emitter()
        self.outputs = {name: emitter.visit(expr) for name, expr in parsed.components.items()}
        self.program = emitter.program
        self.parsed = parsed
        self.id = id
        self.key = reward_key(parsed)
        self.complexity = parsed.complexity
        self.feature_names: tuple[str, ...] = tuple(sorted(parsed.features_used))

    def __repr__(self) -> str:
        return f"CompiledReward(id={self.id!r}, components={dict(self.parsed.canonical)!r})"

    @property
    def expression(self) -> Mapping[str, str]:
        """The canonical components (the engine's `RewardFunction.expression`): what the search shows and refines."""
        return self.parsed.canonical

    def with_rationale(self, rationale: str) -> CompiledReward:
        """This reward under another rationale, the one `to_json` keeps (a run's record of a candidate keeps the
        LLM's rationale cut short); the program is shared, not compiled again."""
        if rationale == self.parsed.rationale:
            return self
        other = copy.copy(self)
        other.parsed = dataclasses.replace(self.parsed, rationale=rationale)
        return other

    def _shape(self, features: Mapping[str, Any]) -> tuple[int, ...]:
        shape: tuple[int, ...] | None = None
        for name in self.feature_names:
            if name not in features:
                raise FeatureError(f"reward {self.id} needs feature '{name}', which the given features lack")
            this = tuple(features[name].shape)
            if shape is not None and this != shape:
                raise FeatureError(f"feature '{name}' has shape {this}, others {shape}")
            shape = this
        assert shape is not None  # a parsed reward always uses a feature
        return shape

    def evaluate(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Total and per-component rewards, float64, in one pass over the program."""
        columns = {
            name: np.asarray(features[name], dtype=np.float64) for name in self.feature_names if name in features
        }
        shape = self._shape(columns)
        with np.errstate(all="ignore"):  # non-finite values are the numeric check's business, not warnings
            values = _run(self.program, NumpyBackend, columns)
            inputs = {id(c) for c in columns.values()}
            parts: dict[str, np.ndarray] = {}
            for name, slot in self.outputs.items():
                out = values[slot]
                if isinstance(out, np.ndarray) and out.shape == shape and id(out) not in inputs:
                    inputs.add(id(out))  # a second component with the same tree gets its own copy
                    parts[name] = out
                else:  # a bare feature (never hand back the caller's array) or a broadcast scalar
                    parts[name] = np.broadcast_to(np.asarray(out, dtype=np.float64), shape).copy()
            total = np.zeros(shape, dtype=np.float64)
            for part in parts.values():
                total += part
        return total, parts

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.evaluate(features)[0]

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.evaluate(features)[1]

    def torch(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Differentiable evaluation: gradients flow to the feature tensors (feature-influence plots)."""
        import torch

        columns = {name: features[name] for name in self.feature_names if name in features}
        shape = self._shape(columns)
        first = columns[self.feature_names[0]]
        dtype = first.dtype if first.is_floating_point() else torch.float64
        backend = TorchBackend(dtype=dtype, device=first.device)
        columns = {name: t.to(dtype) for name, t in columns.items()}
        values = _run(self.program, backend, columns)
        parts = {
            name: torch.broadcast_to(backend.as_tensor(values[slot]), shape) for name, slot in self.outputs.items()
        }
        total = torch.stack(list(parts.values())).sum(dim=0)
        return total, parts

    def to_json(self) -> dict[str, Any]:
        """What a checkpoint stores; `load_reward` rebuilds the same reward from it."""
        return {
            "id": self.id,
            "components": dict(self.parsed.canonical),
            "rationale": self.parsed.rationale,
            "complexity": self.complexity,
        }


def compile_reward(parsed: ParsedReward, id: str | None = None) -> CompiledReward:
    """Compile once per candidate; the id defaults to a hash of the canonical components."""
    return CompiledReward(parsed, id if id is not None else candidate_id(parsed))


def compile_record(record: Mapping[str, Any], task: RewardTask, limits: Limits = Limits()) -> CompiledReward:
    """The compiled reward of an accepted record (`{"id", "components", "rationale"}`): a round's accepted candidate
    where validate's own function is not at hand (the round came back from the trace after a resume), the task's
    own reward, a fallback. Raises RewardRejected."""
    return _rebuild(record, allowed_features(task), limits)


def load_reward(
    data: Mapping[str, Any], feature_names: Collection[str], limits: Limits = Limits()
) -> CompiledReward:
    """Rebuild a compiled reward from `CompiledReward.to_json()` (checkpoints): the text is parsed again."""
    return _rebuild(data, feature_names, limits)


def _rebuild(data: Mapping[str, Any], feature_names: Collection[str], limits: Limits) -> CompiledReward:
    parsed = parse_candidate(
        {"components": dict(data["components"]), "rationale": data.get("rationale") or ""}, feature_names, limits
    )
    return compile_reward(parsed, str(data["id"]) if data.get("id") is not None else None)
