"""`lares models list|path`: the GGUF models this install can use, and where the assembled file lives."""

from __future__ import annotations

import typer

from lares_agent.llm.errors import ModelNotFound
from lares_agent.llm.models import DEFAULT_MODEL, KNOWN_MODELS, cache_dir, model_statuses, resolve_model

models_app = typer.Typer(
    help="Installed GGUF models: list them, or print (and assemble) one's path.", no_args_is_help=True
)


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


@models_app.command("list")
def list_models() -> None:
    """Show known and cached GGUF models: installed?, size, sha256 (pinned: checked before use) and path.

    One block per model, each path on its own line: a table folds 64-digit hashes and long paths into an
    unreadable column at 80 characters.
    """
    typer.echo("GGUF models; cache folder:")
    typer.echo(f"  {cache_dir()}")
    pinned = {spec.name: spec.sha256 for spec in KNOWN_MODELS.values()}
    for status in model_statuses():
        sha = status.sha256 or pinned.get(status.name)
        name = status.name + (" (default)" if status.default else "")
        typer.echo("")
        typer.echo(f"{name}: {'installed' if status.installed else 'not installed'}, {_size(status.size)}")
        # "sha256:" the assembled file's recorded hash; "pinned:" the hash it must have (not assembled yet)
        typer.echo(f"  {'sha256' if status.sha256 or not sha else 'pinned'}: {sha or 'not hashed'}")
        typer.echo("  assembled file:" if status.path else "  assembled file: not yet (assembled on first use)")
        if status.path:
            typer.echo(f"    {status.path}")


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
