"""How a task's features come from its environment, as text an exported reward carries.

The features are lares' vectorised functions of a "raw state" row captured after each step (`spec.py`); the
exact code is the best recipe, so the recipe is that code, copied from the task's own functions with the task's
parameters (MetaWorld's per-task dataclass) printed next to it. It calls a few lares helpers, which the recipe
defines in words; it is text for a reader, not code to import.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any

from lares_agent.engine.tasks.spec import TaskSpec

__all__ = ["RECIPE_KIND", "feature_recipe"]

RECIPE_KIND = "a textual recipe: lares' own code, which calls lares helpers that it defines in words"

_HELPERS_IN_WORDS = """\
Helpers the code below uses (lares internals):
  row_norm(x)             Euclidean norm of each row of an [N, D] array: np.linalg.norm(x, axis=1)
  info_float(info, key)   float(info[key]), 0.0 where the step's info lacks the key
  recorder_of(env)        lares' episode recorder wrapper: episode_step (steps since reset) and reset_qpos
                          (MuJoCo qpos right after the reset)
  _body(env, name)        env.unwrapped.data.body(name).xpos (world position, m)
  _linear_velocity(env, name)  linear part of mujoco.mj_objectVelocity(..., mjOBJ_XBODY, ...) (world frame, m/s)
  SUCCESS, HUMAN_REWARD   the keys "success" and "human_reward"
Each step: raw = raw_state(env, obs, info) right after env.step(action); then
features = features(raw[None, :], action[None, :]) gives {name: array [1]}.
"""


def _function_of(fn: Callable[..., Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    if isinstance(fn, functools.partial):
        return fn.func, fn.args
    return fn, ()


def _source(fn: Callable[..., Any]) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return f"# source of {getattr(fn, '__qualname__', fn)!r} is not available\n"


def _constants(func: Callable[..., Any], source: str) -> list[str]:
    """The module constants (numbers, slices, tuples) the source names, as `NAME = value` lines."""
    words = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", source))
    found = []
    for name, value in sorted(getattr(func, "__globals__", {}).items()):
        if name in words and isinstance(value, (int, float, slice, tuple)) and not isinstance(value, bool):
            found.append(f"{name} = {value!r}")
    return found


def feature_recipe(spec: TaskSpec) -> str | None:
    """The raw-state and feature functions of a built-in task as text, with the helpers in words; None for a
    user task (its author has the code)."""
    if spec.family == "custom":
        return None
    parts = [f"Task {spec.name} ({spec.family}); success: {spec.success_test}.", "", _HELPERS_IN_WORDS]
    helpers: list[Callable[..., Any]] = []
    for label, fn in (("raw state", spec.raw_state_fn), ("features", spec.feature_fn)):
        func, bound = _function_of(fn)
        if bound:
            parts.append(f"# {label}: {func.__name__} with its first argument(s) bound to:")
            parts.extend(f"#   {arg!r}" for arg in bound)
        source = _source(func)
        parts.extend(_constants(func, source))
        parts.append(source)
        # a family module names the functions of its own that its code calls (MetaWorld's extra features)
        helpers.extend(h for h in getattr(func, "__globals__", {}).get("RECIPE_HELPERS", ()) if h not in helpers)
    for helper in helpers:
        parts.append(f"# called above: {helper.__name__}")
        parts.append(_source(helper))
    return "\n".join(parts)
