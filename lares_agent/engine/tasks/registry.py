"""Task lookup by name: the built-in catalogue plus tasks a user registers for their own Gymnasium env.

The built-ins are built on first use, not at import (no module-level side effects); building them makes no
env, so listing tasks is instant.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Iterable

from lares_agent.engine.tasks.spec import TaskError, TaskSpec, TaskSpecError, check_unique

__all__ = [
    "DuplicateTaskError",
    "TaskRegistry",
    "UnknownTaskError",
    "builtin_specs",
    "default_registry",
    "get_task",
    "list_tasks",
    "register_task",
    "resolve_task",
    "unregister_task",
]


class UnknownTaskError(TaskError, LookupError):
    """No task of that name; the message lists the closest names."""

    def __init__(self, name: str, suggestions: Iterable[str]) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"unknown task {name!r}{hint} (`lares tasks` lists them all)")

    def __str__(self) -> str:  # LookupError/KeyError-style quoting would wrap the message in quotes
        return str(self.args[0])


class DuplicateTaskError(TaskError, ValueError):
    """A task of that name is already registered."""


def builtin_specs() -> tuple[TaskSpec, ...]:
    """The built-in tasks: 22 MetaWorld v3 tasks (the LaRes benchmark family), then 3 Gymnasium MuJoCo tasks."""
    from lares_agent.engine.tasks.gym_mujoco import gym_mujoco_specs
    from lares_agent.engine.tasks.metaworld import metaworld_spec
    from lares_agent.engine.tasks.metaworld_catalog import METAWORLD_TASKS

    specs = tuple(metaworld_spec(task) for task in METAWORLD_TASKS) + gym_mujoco_specs()
    check_unique(specs)
    return specs


class TaskRegistry:
    """Name -> TaskSpec, built-ins first, then user tasks in registration order."""

    def __init__(self, specs: Iterable[TaskSpec] = ()) -> None:
        self._specs: dict[str, TaskSpec] = {}
        self._references: dict[str, TaskSpec] = {}  # "module:function" -> the spec it returned (built once)
        for spec in specs:
            self.register(spec)

    def register(self, spec: TaskSpec, replace: bool = False) -> None:
        """Add `spec`; DuplicateTaskError if its name is taken and `replace` is False."""
        if not isinstance(spec, TaskSpec):
            raise TypeError(f"register expects a TaskSpec, got {type(spec).__name__}")
        if spec.name in self._specs and not replace:
            raise DuplicateTaskError(f"task {spec.name!r} is already registered (pass replace=True to override it)")
        self._specs[spec.name] = spec

    def unregister(self, name: str) -> None:
        """Remove a task (UnknownTaskError if absent)."""
        self.get(name)
        del self._specs[name]

    def get(self, name: str) -> TaskSpec:
        """The task called `name`, or the one a `package.module:function` reference returns (`load_reference`);
        UnknownTaskError with up to three close matches otherwise."""
        if ":" in name and name not in self._specs:
            return self.load_reference(name)
        spec = self._specs.get(name)
        if spec is not None:
            return spec
        by_lower = {n.lower(): n for n in self._specs}
        matches = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.5)
        prefix = [n for n in self._specs if n.lower().startswith(name.lower())] if name else []
        suggestions = list(dict.fromkeys([*(by_lower[m] for m in matches), *prefix]))[:3]
        raise UnknownTaskError(name, suggestions)

    def load_reference(self, reference: str) -> TaskSpec:
        """The TaskSpec that `function()` of `package.module` returns (a user's task named on the command line
        and recorded in config.json, so resume, report, trace and export find it again). Importing the module
        the user named is the point; the current folder is tried as an import root, as `python -m` does."""
        cached = self._references.get(reference)
        if cached is not None:
            return cached
        module_name, _, function_name = reference.partition(":")
        if not all(p.isidentifier() for p in module_name.split(".")) or not function_name.isidentifier():
            raise TaskSpecError(f"task {reference!r}: write a task reference as package.module:function")
        module = _import_user_module(module_name, reference)
        factory = getattr(module, function_name, None)
        if not callable(factory):
            raise TaskSpecError(f"task {reference!r}: module {module_name} has no function {function_name!r}")
        spec = factory()
        if not isinstance(spec, TaskSpec):
            raise TaskSpecError(f"task {reference!r}: {function_name}() returned {type(spec).__name__}, not a TaskSpec")
        self._references[reference] = spec
        return spec

    def names(self) -> list[str]:
        return list(self._specs)

    def specs(self) -> list[TaskSpec]:
        return list(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)


def _import_user_module(module_name: str, reference: str) -> object:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        missing = (exc.name or "").split(".")[0] == module_name.split(".")[0]
        if not missing or here in sys.path:
            raise TaskSpecError(f"task {reference!r}: cannot import {module_name} ({exc})") from None
    sys.path.insert(0, here)  # `lares` is a console script: its sys.path lacks the folder it runs in
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise TaskSpecError(f"task {reference!r}: cannot import {module_name} ({exc}); run lares from the folder "
                            "that holds it, or put that folder on PYTHONPATH") from None


_DEFAULT: list[TaskRegistry] = []  # filled on first use


def default_registry() -> TaskRegistry:
    """The process-wide registry that `get_task`, `list_tasks` and `register_task` use."""
    if not _DEFAULT:
        _DEFAULT.append(TaskRegistry(builtin_specs()))
    return _DEFAULT[0]


def get_task(name: str) -> TaskSpec:
    """The task called `name`, or a `package.module:function` reference (raises UnknownTaskError with the close
    matches, TaskSpecError for a reference that does not give a TaskSpec)."""
    return default_registry().get(name)


def resolve_task(name: str) -> TaskSpec:
    """The one place a task name from the CLI or a config.json becomes a TaskSpec: a built-in or registered name,
    or `package.module:function` (a function returning a TaskSpec). `get_task` under its other name."""
    return get_task(name)


def list_tasks() -> list[TaskSpec]:
    """Every known task: built-ins, then user-registered ones."""
    return default_registry().specs()


def register_task(spec: TaskSpec, replace: bool = False) -> None:
    """Make a user task (family "custom", own env factory and feature function) available by name."""
    default_registry().register(spec, replace=replace)


def unregister_task(name: str) -> None:
    """Remove a registered task by name (mostly for tests and notebooks)."""
    default_registry().unregister(name)
