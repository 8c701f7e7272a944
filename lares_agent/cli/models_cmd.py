"""`lares models list|path`: the GGUF models this install can use, and where the assembled file lives."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from lares_agent.llm.errors import ModelNotFound
from lares_agent.llm.models import DEFAULT_MODEL, KNOWN_MODELS, cache_dir, model_statuses, resolve_model

models_app = typer.Typer(
    help="Installed GGUF models: list them, or print (and assemble) one's path.", no_args_is_help=True
)


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


@models_app.command("list")
def list_models() -> None:
    """Show known and cached GGUF models: installed?, size, sha256 (pinned, checked before use) and path."""
    table = Table(title=f"GGUF models (cache: {cache_dir()})")
    table.add_column("name", no_wrap=True)
    table.add_column("installed")
    table.add_column("size", no_wrap=True)
    table.add_column("sha256", overflow="fold")
    table.add_column("assembled file", overflow="fold")
    pinned = {spec.name: spec.sha256 for spec in KNOWN_MODELS.values()}
    for status in model_statuses():
        sha = status.sha256 or (pinned.get(status.name, "not hashed") + " (pinned)")
        table.add_row(
            status.name + (" (default)" if status.default else ""),
            "yes" if status.installed else "no",
            _size(status.size),
            sha,
            str(status.path) if status.path else "not yet (assembled on first use)",
        )
    Console().print(table)


@models_app.command("path")
def model_path(
    model: str = typer.Argument(DEFAULT_MODEL, help="known model name or GGUF path"),
) -> None:
    """Print the verified GGUF path of MODEL, assembling it from its installed parts first if needed."""
    try:
        path = resolve_model(model)
    except ModelNotFound as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(str(path))
