"""`lares personas list|show`: the prompt personas a run can take (`lares run --persona NAME`)."""

from __future__ import annotations

import textwrap
from typing import Annotated

import typer
from rich.console import Console

from lares_agent.prompts.loader import DEFAULT_PERSONA, UnknownPersonaError, list_personas, load_persona

personas_app = typer.Typer(help="Prompt personas: list them, or show one's full text.", no_args_is_help=True)


@personas_app.command("list")
def list_command() -> None:
    """Show every persona with its one-line summary."""
    # a block per persona, the summary wrapped under its name: readable at 80 columns
    wrap = textwrap.TextWrapper(width=max(40, min(Console().width, 100)) - 1, initial_indent="    ",
                                subsequent_indent="    ")
    for persona in list_personas():
        name = persona.name + (" (default)" if persona.name == DEFAULT_PERSONA else "")
        typer.echo(f"{name}: {persona.title}")
        typer.echo(wrap.fill(persona.summary))


@personas_app.command("show")
def show_command(name: Annotated[str, typer.Argument(help="persona name, as in `lares personas list`")]) -> None:
    """Print the full text of persona NAME, as it goes into the system prompt."""
    try:
        persona = load_persona(name)
    except UnknownPersonaError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(f"# {persona.title}\n\n{persona.text}")
