"""Which task module a command may import: only one the user names in that command.

A task may be `package.module:function`, a user's own TaskSpec, and resolving it imports that module, which runs
its code. A run folder's `config.json`, a `--config` file or a sweep's `sweep.json` may come from someone else, so
a reference read from one is never imported on its own (`engine/tasks/registry.py`, `UntrustedTaskError`): the
user names it again with `--task` in the command that needs the task, and only then is it imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lares_agent.errors import ConfigError

__all__ = ["RunTask", "allow_run_task", "allow_typed_task", "refuse_untrusted_task", "untrusted"]

RunTask = Annotated[str | None, typer.Option("--task", "-t", help=(
    "The run's task, where it is your own package.module:function: lares imports a task's module (running its "
    "code) only when you name it in the command, never from a run folder."))]


def allow_typed_task(task: str | None) -> None:
    """A task typed on this command line: its module may be imported."""
    from lares_agent.engine.tasks import allow_task_reference

    if task:
        allow_task_reference(task)


def allow_run_task(run: Path, run_task: str, typed: str | None) -> None:
    """The task a run folder names, allowed where the user typed the same with `--task`; a `--task` that is not
    the run's is refused (one line, before anything is read or written)."""
    if typed is None:
        return
    if typed != run_task:
        raise ConfigError(f"--task {typed}: run {run} is a run of task {run_task!r}; give --task {run_task} "
                          "(or leave --task out)")
    allow_typed_task(typed)


def untrusted(run_task: str) -> bool:
    """Whether resolving `run_task` would need a `--task` the user has not given."""
    from lares_agent.engine.tasks import default_registry

    return not default_registry().allowed(run_task)


def refuse_untrusted_task(run: Path, typed: str | None, needed: str) -> None:
    """For a command that needs a run's task: the run's task allowed where the user typed it (`allow_run_task`);
    a reference the user did not type is one line naming the `--task` that allows it, and nothing is imported.
    `needed` says what the task is needed for ("export its reward")."""
    run_task = _run_task(run)
    if run_task is None:  # not a readable run: the command's own reading says why
        return
    allow_run_task(run, run_task, typed)
    if untrusted(run_task):
        raise ConfigError(f"run {run} is a run of your own task {run_task!r}, and lares imports a task's module "
                          f"(running its code) only when you name it in the command: add --task {run_task} to "
                          f"{needed}, if you trust that code")


def _run_task(run: Path) -> str | None:
    """The task a run's config.json names, or None where it names none (or is not a run's)."""
    from lares_agent.errors import LaresError
    from lares_agent.runs import RunLayout
    from lares_agent.runs.marker import read_marked_config

    try:
        task = read_marked_config(RunLayout.open(run)).get("task")
    except (LaresError, OSError, ValueError):
        return None
    return task if isinstance(task, str) else None
