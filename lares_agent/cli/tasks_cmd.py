"""`lares tasks`: the tasks a run can use, as a table or (`--json`) as machine-readable JSON."""

from __future__ import annotations

import json as _json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from lares_agent.engine.tasks import list_tasks


def tasks_command(
    json: Annotated[bool, typer.Option("--json", help="Print every task with its features as JSON.")] = False,
) -> None:
    """List the registered tasks: name, family, horizon, progress and approach features, success test."""
    specs = list_tasks()
    if json:
        typer.echo(_json.dumps([spec.to_dict() for spec in specs], indent=2))
        return
    table = Table(title=f"{len(specs)} tasks (details and feature meanings: lares tasks --json)")
    for column in ("name", "family", "horizon", "features", "progress (lower is better)", "approach",
                   "success", "human reward"):
        table.add_column(column)
    for spec in specs:
        table.add_row(
            spec.name,
            spec.family,
            str(spec.horizon),
            str(len(spec.feature_defs)),
            spec.progress_feature,
            spec.approach_feature or "-",
            spec.success_test,
            "yes" if spec.has_human_reward else "no",
        )
    Console(width=200).print(table)
