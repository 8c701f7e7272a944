"""A found reward as a file a user takes home: a standalone numpy module, the candidate as JSON, or LaTeX.

The numpy source comes from a small printer over exactly the node types the parser builds (`parse.py`,
`functions.py`) and takes the compiled numpy backend's branches (`backends.NumpyBackend`: x**2 as x*x, x**0.5 as
sqrt, left-folded sums and products), so the exported reward equals the compiled one to rounding. Nothing here
evaluates text: the module is written for the user to import (Eureka users asked for the reward code
itself).
"""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
from sympy.core import relational as rel
from sympy.logic.boolalg import BooleanFalse, BooleanTrue

from lares_agent.rewards import functions as fn
from lares_agent.rewards import shaping
from lares_agent.rewards.candidate import ParsedReward, reward_key
from lares_agent.rewards.export_potential import PotentialForm, potential_source, potential_wrapper
from lares_agent.rewards.limits import RewardRejected

__all__ = ["ExportedFeature", "candidate_document", "latex_document", "numpy_expression", "python_module"]


@dataclass(frozen=True)
class ExportedFeature:
    """A feature as the exported module's docstring lists it."""

    name: str
    meaning: str
    unit: str


_UNARY = {sympy.exp: "np.exp", sympy.log: "np.log", sympy.tanh: "np.tanh", sympy.Abs: "np.abs"}
_HELPERS: dict[type, tuple[str, ...]] = {
    fn.sigmoid: ("np_sigmoid",),
    fn.tolerance: ("tolerance_coefficient", "np_tolerance"),
    fn.hamacher: ("np_hamacher",),
    fn.gripper_caging: ("sigmoid_scale", "unit_shape", "tolerance_value", "hamacher_value", "caging_value"),
    fn.rect_prism: ("prism_value",),
}
_SHAPED = ("sigmoid_scale", "unit_shape", "tolerance_value")
_HELPER_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "np_sigmoid": fn.np_sigmoid,
    "tolerance_coefficient": fn.tolerance_coefficient,
    "np_tolerance": fn.np_tolerance,
    "np_hamacher": fn.np_hamacher,
    "sigmoid_scale": shaping.sigmoid_scale,
    "unit_shape": shaping.unit_shape,
    "tolerance_value": shaping.tolerance_value,
    "hamacher_value": shaping.hamacher_value,
    "caging_value": shaping.caging_value,
    "prism_value": shaping.prism_value,
}
_COMPARE = {rel.StrictLessThan: "np.less", rel.LessThan: "np.less_equal", rel.StrictGreaterThan: "np.greater",
            rel.GreaterThan: "np.greater_equal", rel.Equality: "np.equal", rel.Unequality: "np.not_equal"}  # fmt: skip
_FOLD = {sympy.Add: "np.add", sympy.Mul: "np.multiply", fn.Min: "np.minimum", fn.Max: "np.maximum",
         sympy.And: "np.logical_and", sympy.Or: "np.logical_or", sympy.Xor: "np.logical_xor"}  # fmt: skip


class _NumpyPrinter:
    """sympy tree -> one numpy expression over `f["name"]`; records the helpers it calls."""

    def __init__(self) -> None:
        self.helpers: set[str] = set()

    def print(self, node: sympy.Basic) -> str:
        if isinstance(node, sympy.Symbol):
            return f"f[{node.name!r}]"
        if isinstance(node, (BooleanTrue, BooleanFalse)):
            return f"np.bool_({bool(node)})"
        if isinstance(node, sympy.Expr) and not node.free_symbols:
            return f"np.float64({float(node)!r})"
        cls = type(node)
        if cls in _UNARY:
            return f"{_UNARY[cls]}({self.print(node.args[0])})"
        if cls in _FOLD:
            return self.fold(_FOLD[cls], node.args)
        if cls in _COMPARE:
            return f"{_COMPARE[cls]}({self.print(node.lhs)}, {self.print(node.rhs)})"
        if isinstance(node, sympy.Not):
            return f"np.logical_not({self.print(node.args[0])})"
        if isinstance(node, (fn.where, sympy.ITE)):
            cond, a, b = (self.print(arg) for arg in node.args)
            return f"np.where({cond}, {a}, {b})"
        if isinstance(node, sympy.Pow):
            return self.power(node)
        if isinstance(node, fn.tolerance) and len(node.args) == 6:
            self.helpers.update(_SHAPED)
            x, lower, upper, margin, vam = (self.print(a) for a in node.args[:5])
            return f"tolerance_value(np, {x}, {margin}, {lower}, {upper}, {vam}, {fn.shape_name(node.args)!r})"
        if cls in _HELPERS:
            self.helpers.update(_HELPERS[cls])
            return self.helper(node)
        raise RewardRejected(f"cannot export '{type(node).__name__}' (in '{str(node)[:60]}')")

    def fold(self, op: str, args: Sequence[sympy.Basic]) -> str:
        text = self.print(args[0])
        for arg in args[1:]:
            text = f"{op}({text}, {self.print(arg)})"
        return text

    def power(self, node: sympy.Pow) -> str:
        if not node.exp.is_Number:
            raise RewardRejected(f"cannot export non-constant exponent in '{node}'")
        p, base = float(node.exp), self.print(node.base)
        if p == 1.0:
            return base
        if p == 2.0:
            return f"np.multiply({base}, {base})" if base.startswith("f[") else f"_square({base})"
        if p == 0.5:
            return f"np.sqrt({base})"
        if p == -1.0:
            return f"np.divide(1.0, {base})"
        return f"np.power({base}, {p!r})"

    def helper(self, node: sympy.Basic) -> str:
        if isinstance(node, fn.sigmoid):
            return f"np_sigmoid({self.print(node.args[0])})"
        if isinstance(node, fn.hamacher):
            return f"np_hamacher({self.print(node.args[0])}, {self.print(node.args[1])})"
        if isinstance(node, fn.rect_prism):
            point = ", ".join(self.print(a) for a in node.args[:3])
            zero, one = (tuple(float(a) for a in node.args[i:i + 3]) for i in (3, 6))
            return f"prism_value(np, {point}, {zero!r}, {one!r})"
        if isinstance(node, fn.gripper_caging):
            return f"caging_value(np, {', '.join(self.print(a) for a in node.args[:7])}, " + ", ".join(
                repr(float(a)) for a in node.args[7:]) + ")"
        params = ", ".join(repr(float(a)) for a in node.args[1:])
        return f"np_tolerance({self.print(node.args[0])}, {params})"


def numpy_expression(expr: sympy.Basic) -> tuple[str, frozenset[str]]:
    """The numpy source of one component over a mapping `f` of float64 columns, and the helpers it calls."""
    printer = _NumpyPrinter()
    text = printer.print(expr)
    if "_square(" in text:
        printer.helpers.add("_square")
    return text, frozenset(printer.helpers)


_SQUARE = '''def _square(x):
    """x*x, evaluated once (the compiled reward's x**2)."""
    return x * x
'''


def _helper_source(names: frozenset[str]) -> str:
    """The package's own numpy definitions of the helpers used, copied verbatim (dependencies first)."""
    order = ("_square", "np_sigmoid", "tolerance_coefficient", "np_tolerance", "np_hamacher", "sigmoid_scale",
             "unit_shape", "tolerance_value", "hamacher_value", "caging_value", "prism_value")
    parts = []
    for name in order:
        if name in names:
            parts.append(_SQUARE if name == "_square" else inspect.getsource(_HELPER_FUNCTIONS[name]))
    return "\n\n".join(parts)


def _docstring_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


_WRAPPER = '''
# --- optional: a Gymnasium wrapper, so the reward trains an agent in any library ------------------------
try:  # gymnasium is optional: reward() above needs numpy only
    import gymnasium as _gymnasium
except ImportError:  # pragma: no cover - without gymnasium there is no wrapper
    _gymnasium = None

if _gymnasium is not None:

    class LaresRewardWrapper(_gymnasium.RewardWrapper):
        """Replaces the env's reward by `reward(...)` of this module.

        `features_fn(env, obs, info, action) -> dict[str, float]` computes the features right after each step
        (the module docstring lists them); without one, this module's `env_features` (lares' own feature code
        for a built-in task) does. The wrapper records what the features read from the episode's start (the
        reset observation and qpos, the steps since the reset), so it goes directly around the env, outside any
        wrapper that resets the env by itself. The env's own reward is kept as info["env_reward"].
        """

        def __init__(self, env, features_fn=None):
            super().__init__(env)
            if features_fn is None:
                features_fn = globals().get("env_features")
            if features_fn is None:
                raise TypeError("this task's features are not in the module: pass features_fn(env, obs, info, action)")
            self.features_fn = features_fn
            self.episode_step = 0
            self.reset_obs = np.zeros(0, dtype=np.float64)
            self.reset_qpos = np.zeros(0, dtype=np.float64)

        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            self.episode_step = 0
            self.reset_obs = np.array(obs, dtype=np.float64, copy=True).reshape(-1)
            data = getattr(self.env.unwrapped, "data", None)
            self.reset_qpos = np.array(data.qpos, dtype=np.float64, copy=True) if data is not None else np.zeros(0)
            return obs, info

        def step(self, action):
            obs, env_reward, terminated, truncated, info = self.env.step(action)
            self.episode_step += 1
            values = self.features_fn(self, obs, info, action)
            info = dict(info, env_reward=env_reward)
            return obs, self.reward(values), terminated, truncated, info

        def reward(self, values):
            columns = {name: np.asarray([values[name]], dtype=np.float64) for name in FEATURES}
            return float(reward(columns)[0])
'''


def python_module(
    parsed: ParsedReward,
    features: Sequence[ExportedFeature],
    *,
    reward_id: str,
    task: str,
    feature_code: str | None = None,
    feature_kind: str = "",
    heading: str | None = None,
    potential: PotentialForm | None = None,
) -> str:
    """A standalone module (numpy only): one function per component, `components()`, `reward()`, the feature
    docs, the optional feature code (`env_features(env, obs, info, action)`, for a built-in task) and a Gymnasium
    `LaresRewardWrapper`. `heading` replaces the first docstring line (a task's own reward was not found by a
    search). `potential`: the components are a potential's (`--shaping potential`), whose sum is `potential_sum`,
    and `reward` the shaped reward the learners trained on (rewards/export_potential.py)."""
    used = sorted(parsed.features_used)
    known = {f.name: f for f in features}
    bodies: list[str] = []
    helpers: set[str] = set()
    for name, expr in parsed.components.items():
        text, needs = numpy_expression(expr)
        helpers |= needs
        bodies.append(
            f"def component_{name}(features):\n"
            f'    """{_docstring_text(parsed.canonical[name])}"""\n'
            f"    f = _columns(features)\n"
            f"    with np.errstate(all=\"ignore\"):\n"
            f"        return _full(features, {text})\n"
        )
    lines = [f"  {name} = {parsed.canonical[name]}" for name in parsed.components]
    feature_lines = []
    for name in used:
        feat = known.get(name)
        feature_lines.append(f"  {name} [{feat.unit}]: {feat.meaning}" if feat else f"  {name}")
    recipe_note = (
        f"How each feature is computed from the environment: env_features(env, obs, info, action) below,\n"
        f"{feature_kind}; LaresRewardWrapper(env) uses it."
        if feature_code
        else "Compute the features from your environment yourself (their meanings and units are above) and pass\n"
             "them to LaresRewardWrapper(env, features_fn)."
    )
    doc = "\n".join([
        heading or f"Reward {reward_id} found by lares-agent on task {task}.",
        "",
        *([*potential.lines(), ""] if potential is not None else []),
        "Standalone: needs numpy only (gymnasium only for the optional LaresRewardWrapper at the end).",
        ("potential_sum(features) takes {feature name: float64 array [N]} and returns Phi as written [N], the sum of:"
         if potential else
         "reward(features) takes {feature name: float64 array [N]} and returns the reward [N], the sum of:"),
        "",
        *lines,
        "",
        "Features (name [unit]: meaning):",
        "",
        *feature_lines,
        "",
        recipe_note,
        f"Identity (lares reward_key): {reward_key(parsed)}",
    ])
    parts = [
        f'"""{_docstring_text(doc)}\n"""\n',
        "from __future__ import annotations\n\nimport math\n\nimport numpy as np\n",
        f"FEATURES = {tuple(used)!r}\nCOMPONENTS = {tuple(parsed.components)!r}\n",
        "\ndef _columns(features):\n"
        "    return {name: np.asarray(features[name], dtype=np.float64) for name in FEATURES}\n",
        "\ndef _full(features, value):\n"
        "    shape = np.shape(np.asarray(features[FEATURES[0]]))\n"
        "    return np.broadcast_to(np.asarray(value, dtype=np.float64), shape).copy()\n",
    ]
    if helpers:
        parts.append("\n# --- helpers: lares' reward functions, inlined ---\n" + _helper_source(frozenset(helpers)))
    parts.append("\n# --- one function per component ---\n" + "\n\n".join(bodies))
    calls = "\n".join(f"        {n!r}: component_{n}(features)," for n in parsed.components)
    total, what = ("potential_sum", "The potential as written") if potential else ("reward", "The total reward")
    parts.append(
        "\ndef components(features):\n"
        '    """Each component of the reward: {name: float64 array [N]}."""\n'
        f"    return {{\n{calls}\n    }}\n"
        f"\n\ndef {total}(features: dict[str, np.ndarray]) -> np.ndarray:\n"
        f'    """{what} [N]: the sum of the components."""\n'
        "    parts = components(features)\n"
        "    total = np.zeros(np.shape(next(iter(parts.values()))), dtype=np.float64)\n"
        "    for part in parts.values():\n"
        "        total += part\n"
        "    return total\n"
    )
    if potential is not None:
        parts.append(potential_source(potential))
    if feature_code:
        _check_no_clash("\n".join(parts), feature_code)
        parts.append(f"\n# --- the features from the environment: {feature_kind} ---\n{feature_code}")
    parts.append(_WRAPPER if potential is None else potential_wrapper(_WRAPPER))
    source = "\n".join(parts)
    return source if "math." in source.replace("import math", "") else source.replace("import math\n\n", "")


def _top_names(source: str) -> set[str]:
    """The names a module's top level defines (parsed, never run)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _check_no_clash(reward_source: str, feature_code: str) -> None:
    """The feature code may not redefine a name of the reward's part of the module (`reward`, a helper)."""
    clash = sorted(_top_names(reward_source) & _top_names(feature_code))
    if clash:
        raise RewardRejected(f"cannot export: the feature code redefines {', '.join(clash)}")


def latex_document(parsed: ParsedReward) -> str:
    """Each component's sympy LaTeX and the total, as lines `name: $...$`."""
    lines = [f"{name}: $${sympy.latex(expr)}$$" for name, expr in parsed.components.items()]
    lines.append(f"total: $${sympy.latex(sympy.Add(*parsed.components.values()))}$$")
    return "\n".join(lines) + "\n"


def candidate_document(parsed: ParsedReward, reward_id: str, task: str, extra: Mapping[str, Any]) -> str:
    """The candidate as JSON: components (canonical text), rationale, complexity, key, features used."""
    data = {
        "id": reward_id,
        "task": task,
        "components": dict(parsed.canonical),
        "rationale": parsed.rationale,
        "complexity": parsed.complexity,
        "component_complexity": dict(parsed.component_complexity),
        "key": reward_key(parsed),
        "features_used": sorted(parsed.features_used),
        **extra,
    }
    return json.dumps(data, indent=2) + "\n"
