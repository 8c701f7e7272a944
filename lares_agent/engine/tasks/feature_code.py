"""A built-in task's feature code as standalone Python, for the module `lares export` writes.

The features are lares' vectorised functions of a "raw state" row captured after each step (`spec.py`). The
exported module carries those very functions: their source is printed from the function objects the engine runs
(`inspect.getsource`, following every global name they read: functions, dataclasses, constants), so the two can
not drift apart. Three kinds of lares pieces are printed differently, because they would pull in lares itself:
the episode recorder lookup (`recorder_of`) becomes a stand-in that finds the exported wrapper, which records the
same reset state; a cached function of the task (MetaWorld's `extra_names`) becomes its value for this task; and
the `functools.partial` arguments that bind a feature function to its task (MetaWorld's per-task dataclass) are
printed with `repr`. `tests/test_export_features.py` runs the printed code without lares on real episodes and
compares its rewards with lares' own.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Callable, Iterator
from typing import Any

from lares_agent.engine.tasks.envs import recorder_of
from lares_agent.engine.tasks.spec import TaskSpec, TaskSpecError

__all__ = ["FEATURE_CODE_KIND", "feature_code"]

FEATURE_CODE_KIND = "lares' own raw-state and feature code for this task, printed at export"

_RECORDER_STAND_IN = '''def recorder_of(env):
    """The wrapper that records the episode's reset state (LaresRewardWrapper below, or lares' EpisodeRecorder)."""
    current = env
    while current is not None:
        if all(hasattr(current, name) for name in ("episode_step", "reset_obs", "reset_qpos")):
            return current
        current = getattr(current, "env", None)
    raise ValueError("the features read the episode's reset state: wrap the env in LaresRewardWrapper")
'''

# Modules whose names the printed code may import (the exported module already imports numpy as np).
_IMPORTABLE = frozenset({"math", "functools", "dataclasses", "typing", "collections.abc", "re"})
_CONSTANT_TYPES = (int, float, str, slice, tuple, frozenset, type(None))


def _target(fn: Callable[..., Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    if isinstance(fn, functools.partial):
        if fn.keywords:
            raise TaskSpecError(f"cannot export {fn!r}: keyword arguments are bound")
        return fn.func, fn.args
    return fn, ()


def _code_names(code: types.CodeType) -> Iterator[str]:
    """Every name a code object and the code nested in it (lambdas, comprehensions) reads."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_names(const)


def _is_lares(obj: Any) -> bool:
    return str(getattr(obj, "__module__", "")).split(".")[0] == "lares_agent"


def _dataclass_types(value: Any) -> Iterator[type]:
    """The dataclasses a bound argument is made of (MetaWorldTask and its JointFeature), innermost first."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            yield from _dataclass_types(getattr(value, item.name))
        yield type(value)
    elif isinstance(value, tuple):
        for item in value:
            yield from _dataclass_types(item)


class _Printer:
    """Collects the source of a set of functions and everything they read, each name once."""

    def __init__(self, bound: tuple[Any, ...]) -> None:
        self.bound = bound
        self.imports: dict[str, str] = {}
        self.constants: dict[str, str] = {}
        self.classes: dict[str, str] = {}
        self.functions: dict[str, str] = {}
        self.seen: dict[str, Any] = {}

    def claim(self, name: str, obj: Any) -> bool:
        """True the first time `name` is met; an error where two different objects share it."""
        if name in self.seen:
            same = self.seen[name] is obj or (isinstance(obj, _CONSTANT_TYPES) and self.seen[name] == obj)
            if not same:
                raise TaskSpecError(f"cannot export the feature code: two different objects are called {name!r}")
            return False
        self.seen[name] = obj
        return True

    def add_class(self, cls: type) -> None:
        if self.claim(cls.__name__, cls):
            self.classes[cls.__name__] = inspect.getsource(cls)
            if dataclasses.is_dataclass(cls):
                self.imports["dataclass"] = "from dataclasses import dataclass"

    def add_function(self, func: types.FunctionType) -> None:
        if not self.claim(func.__name__, func):
            return
        self.functions[func.__name__] = inspect.getsource(func)
        for name in dict.fromkeys(_code_names(func.__code__)):
            if name in func.__globals__:
                self.add_global(name, func.__globals__[name])

    def add_global(self, name: str, value: Any) -> None:
        if value is recorder_of:
            if self.claim(name, value):
                self.functions[name] = _RECORDER_STAND_IN
        elif isinstance(value, types.ModuleType):
            if value.__name__ != "numpy" and self.claim(name, value):
                if value.__name__ not in _IMPORTABLE:
                    raise TaskSpecError(f"cannot export the feature code: it imports {value.__name__}")
                self.imports[name] = f"import {value.__name__}" + (f" as {name}" if name != value.__name__ else "")
        elif isinstance(value, functools._lru_cache_wrapper) and _is_lares(value):
            # a cached function of the task: its value for the one task this module serves
            if self.claim(name, value):
                self.functions[name] = (f"def {name}(*args):\n    \"\"\"lares' {name}, printed as its value for "
                                        f"this task.\"\"\"\n    return {value(*self.bound)!r}\n")
        elif isinstance(value, (types.FunctionType, type)) and _is_lares(value):
            if value.__name__ != name:  # printed under its own name, so an alias would not resolve
                raise TaskSpecError(f"cannot export the feature code: {value.__name__} is read as {name!r}")
            if isinstance(value, type):
                self.add_class(value)
            else:
                self.add_function(value)
        elif isinstance(value, _CONSTANT_TYPES) and not isinstance(value, bool):
            if self.claim(name, value):
                self.constants[name] = f"{name} = {value!r}"
        elif getattr(value, "__module__", None) in _IMPORTABLE and getattr(value, "__name__", None):
            if self.claim(name, value):
                self.imports[name] = f"from {value.__module__} import {value.__name__}" + (
                    f" as {name}" if name != value.__name__ else "")
        else:
            raise TaskSpecError(f"cannot export the feature code: it reads {name!r} ({type(value).__name__})")


def feature_code(spec: TaskSpec) -> str | None:
    """Python source defining `env_features(env, obs, info, action) -> {name: float}` for a built-in task: the
    raw state right after a step, then the task's features of it; None for a user task (its author has the code).

    The source needs numpy (and what the env needs: MuJoCo); it expects the module's `LaresRewardWrapper` to
    record the episode's reset state, as lares' `EpisodeRecorder` does."""
    if spec.family == "custom":
        return None
    raw_fn, raw_bound = _target(spec.raw_state_fn)
    feat_fn, feat_bound = _target(spec.feature_fn)
    if raw_bound != feat_bound or not isinstance(raw_fn, types.FunctionType) or not isinstance(
            feat_fn, types.FunctionType):
        raise TaskSpecError(f"task {spec.name}: its raw-state and feature functions are not exportable")
    printer = _Printer(raw_bound)
    for cls in _dataclass_types(raw_bound):
        printer.add_class(cls)
    printer.add_function(raw_fn)
    printer.add_function(feat_fn)
    bound = f"TASK_ARGS = {raw_bound!r}\n" if raw_bound else "TASK_ARGS = ()\n"
    entry = (
        "def raw_state(env, obs, info):\n"
        f"    \"\"\"float64 [{spec.state_dim}]: what the features need, right after a reset or step.\"\"\"\n"
        f"    return np.asarray({raw_fn.__name__}(*TASK_ARGS, env, obs, info), dtype=np.float64).reshape(-1)\n"
        "\n\n"
        "def task_features(raw, action):\n"
        "    \"\"\"{name: float64 [N]} of N raw states and the env actions that led to them.\"\"\"\n"
        f"    return {feat_fn.__name__}(*TASK_ARGS, np.asarray(raw, dtype=np.float64), "
        "np.asarray(action, dtype=np.float64))\n"
        "\n\n"
        "def env_features(env, obs, info, action):\n"
        "    \"\"\"{name: float} of one step: `env` records the reset state (LaresRewardWrapper does).\"\"\"\n"
        "    raw = raw_state(env, obs, info)[None, :]\n"
        "    values = task_features(raw, np.asarray(action, dtype=np.float64).reshape(1, -1))\n"
        "    return {name: float(np.asarray(value).reshape(-1)[0]) for name, value in values.items()}\n"
    )
    sections = [
        "\n".join(sorted(printer.imports.values())),
        "\n".join(printer.constants.values()),
        "\n\n".join(printer.classes.values()),
        bound,
        "\n\n".join(printer.functions.values()),
        entry,
    ]
    return "\n\n".join(section.rstrip("\n") + "\n" for section in sections if section.strip())
