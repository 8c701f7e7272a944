"""Task lookup by name: the built-in catalogue plus tasks a user registers for their own Gymnasium env.

The built-ins are built on first use, not at import (no module-level side effects); building them makes no
env, so listing tasks is instant.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import sys
from collections.abc import Iterable

from lares_agent.engine.tasks.spec import TaskError, TaskSpec, TaskSpecError, check_unique
from lares_agent.errors import ConfigError

__all__ = [
    "DuplicateTaskError",
    "TaskRegistry",
    "UnknownTaskError",
    "UntrustedTaskError",
    "allow_task_reference",
    "builtin_specs",
    "default_registry",
    "get_task",
    "is_reference",
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


class UntrustedTaskError(TaskError, ConfigError):
    """A `package.module:function` reference that the user did not name in this command: read from a run folder's
    config.json or a `--config` file, whose module lares never imports on its own (importing it runs its code)."""

    def __init__(self, reference: str) -> None:
        self.reference = reference
        super().__init__(
            f"task {reference!r} is a package.module:function reference, and lares imports a task's module (which "
            f"runs its code) only when you name it in the command: add --task {reference} if you trust that code "
            f"(in Python: allow_task_reference({reference!r}) first)")


def is_reference(name: str) -> bool:
    """A `package.module:function` task reference rather than a registered name."""
    return ":" in name


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
        self._allowed: set[str] = set()  # the references `get` may import: named by the user (`allow`)
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

    def allow(self, reference: str) -> None:
        """Let `get` import `reference`'s module: the user named it (`--task` on this command line)."""
        self._allowed.add(reference)

    def allowed(self, name: str) -> bool:
        """Whether `get(name)` may resolve `name` without importing code the user did not name."""
        return not is_reference(name) or name in self._specs or name in self._allowed

    def get(self, name: str) -> TaskSpec:
        """The task called `name`, or the one an allowed `package.module:function` reference returns
        (`load_reference`); UntrustedTaskError for a reference not allowed (`allow`), UnknownTaskError with up to
        three close matches for an unknown name. A name may come from a run folder or a config file that someone
        else wrote, so `get` never imports a module that the user did not name."""
        if is_reference(name) and name not in self._specs:
            if name not in self._allowed:
                raise UntrustedTaskError(name)
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
        and recorded in config.json; resume, report and export find it again when it is named again). Importing
        the module the caller named is the point, so nothing here checks `allow`; the current folder is tried as
        an import root while the module is imported, as `python -m` does, and taken off the path after."""
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
    # `lares` is a console script: its sys.path lacks the folder it runs in. That folder is an import root only
    # while the named module is imported, so no later import of the process finds a file of the folder instead
    # of an installed module.
    sys.path.insert(0, here)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise TaskSpecError(f"task {reference!r}: cannot import {module_name} ({exc}); run lares from the folder "
                            "that holds it, or put that folder on PYTHONPATH") from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(here)


_DEFAULT: list[TaskRegistry] = []  # filled on first use


def default_registry() -> TaskRegistry:
    """The process-wide registry that `get_task`, `list_tasks` and `register_task` use."""
    if not _DEFAULT:
        _DEFAULT.append(TaskRegistry(builtin_specs()))
    return _DEFAULT[0]


def allow_task_reference(reference: str) -> None:
    """Let `get_task` import the module of `reference` (`package.module:function`): the CLI calls it for a task
    the user typed with `--task`, never for one read from a file."""
    if is_reference(reference):
        default_registry().allow(reference)


def get_task(name: str) -> TaskSpec:
    """The task called `name`, or an allowed `package.module:function` reference (`allow_task_reference`; raises
    UntrustedTaskError for another, UnknownTaskError with the close matches for an unknown name, TaskSpecError for
    a reference that does not give a TaskSpec)."""
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
