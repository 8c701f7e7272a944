"""`lares tasks`: the tasks a run can use, as a table, one task in full (`--show`), or JSON (`--json`)."""

from __future__ import annotations

import json as _json
import textwrap
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from lares_agent.engine.tasks import TaskSpec, allow_task_reference, list_tasks, resolve_task


def _show(spec: TaskSpec, width: int) -> None:
    """One task in full, every line within `width`: description, horizon, success, the env's own reward as an
    expression where it is written, features with units."""
    wrap = textwrap.TextWrapper(width=width, initial_indent="  ", subsequent_indent="  ")
    typer.echo(f"{spec.name} ({spec.family}), horizon {spec.horizon} steps of {spec.dt:g} s")
    typer.echo(wrap.fill(spec.description))
    typer.echo(f"success: {spec.success_test}")
    typer.echo(f"progress (lower is better): {spec.progress_feature}")
    typer.echo(f"approach: {spec.approach_feature or '-'}")
    typer.echo(f"human reward: {'yes' if spec.has_human_reward else 'no'}")
    if spec.human_components:
        typer.echo("human reward as an expression (the sum of its components; lares export --human):")
        expression = textwrap.TextWrapper(width=width, initial_indent="  ", subsequent_indent="      ",
                                          break_long_words=False, break_on_hyphens=False)
        for name, text in spec.human_components:
            typer.echo(expression.fill(f"{name} = {text}"))
    typer.echo(f"features ({len(spec.feature_defs)}):")
    meaning = textwrap.TextWrapper(width=width, initial_indent="      ", subsequent_indent="      ")
    for feature in spec.feature_defs:
        typer.echo(f"  {feature.name} [{feature.unit}]")
        typer.echo(meaning.fill(feature.meaning))


def tasks_command(
    json: Annotated[bool, typer.Option("--json", help="Print every task with its features as JSON.")] = False,
    show: Annotated[str | None, typer.Option(
        "--show", help="One task in full: a name, or package.module:function for your own task.")] = None,
) -> None:
    """List the registered tasks: name, family, horizon, progress feature, human reward (details: --show NAME)."""
    console = Console()  # this terminal's width
    width = min(console.width, 100)
    if show is not None:
        allow_task_reference(show)  # named on this command line: its module may be imported
        spec = resolve_task(show)
        if json:
            typer.echo(_json.dumps(spec.to_dict(), indent=2))
        else:
            _show(spec, width)
        return
    specs = list_tasks()
    if json:
        typer.echo(_json.dumps([spec.to_dict() for spec in specs], indent=2))
        return
    table = Table(title=f"{len(specs)} tasks", box=None, pad_edge=False,
                  caption="progress: the feature that measures what is left (lower is better); "
                          "human: the task has its own reward. Success tests, features: lares tasks --show NAME")
    for column in ("name", "family", "horizon", "progress", "human"):
        table.add_column(column, no_wrap=True)
    for spec in specs:
        table.add_row(spec.name, spec.family, str(spec.horizon), spec.progress_feature,
                      "yes" if spec.has_human_reward else "no")
    console.print(table)
