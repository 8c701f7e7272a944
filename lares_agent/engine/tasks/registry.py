"""Task lookup by name: the built-in catalogue plus tasks a user registers for their own Gymnasium env.

The built-ins are built on first use, not at import (no module-level side effects); building them makes no
env, so listing tasks is instant.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from lares_agent.engine.tasks.spec import TaskError, TaskSpec, check_unique

__all__ = [
    "DuplicateTaskError",
    "TaskRegistry",
    "UnknownTaskError",
    "builtin_specs",
    "default_registry",
    "get_task",
    "list_tasks",
    "register_task",
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
    """The built-in tasks: 16 MetaWorld v3 tasks (the LaRes benchmark family), then 3 Gymnasium MuJoCo tasks."""
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
        """The task called `name`; UnknownTaskError with up to three close matches otherwise."""
        spec = self._specs.get(name)
        if spec is not None:
            return spec
        by_lower = {n.lower(): n for n in self._specs}
        matches = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.5)
        prefix = [n for n in self._specs if n.lower().startswith(name.lower())] if name else []
        suggestions = list(dict.fromkeys([*(by_lower[m] for m in matches), *prefix]))[:3]
        raise UnknownTaskError(name, suggestions)

    def names(self) -> list[str]:
        return list(self._specs)

    def specs(self) -> list[TaskSpec]:
        return list(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)


_DEFAULT: list[TaskRegistry] = []  # filled on first use


def default_registry() -> TaskRegistry:
    """The process-wide registry that `get_task`, `list_tasks` and `register_task` use."""
    if not _DEFAULT:
        _DEFAULT.append(TaskRegistry(builtin_specs()))
    return _DEFAULT[0]


def get_task(name: str) -> TaskSpec:
    """The task called `name` (raises UnknownTaskError with the close matches)."""
    return default_registry().get(name)


def list_tasks() -> list[TaskSpec]:
    """Every known task: built-ins, then user-registered ones."""
    return default_registry().specs()


def register_task(spec: TaskSpec, replace: bool = False) -> None:
    """Make a user task (family "custom", own env factory and feature function) available by name."""
    default_registry().register(spec, replace=replace)


def unregister_task(name: str) -> None:
    """Remove a registered task by name (mostly for tests and notebooks)."""
    default_registry().unregister(name)
