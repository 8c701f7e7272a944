"""`lares graph`: the round graph (analyse -> critique -> propose -> validate) as LangGraph draws it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def graph_command(
    png: Annotated[Path | None, typer.Option(
        "--png", help="Also write a PNG (needs pygraphviz; otherwise says how to render the Mermaid text).")] = None,
) -> None:
    """Print the round graph as Mermaid text, drawn by LangGraph from the compiled graph (dotted: conditional)."""
    from lares_agent.graphs.drawing import MERMAID_HOWTO, round_graph_mermaid, round_graph_png

    typer.echo(round_graph_mermaid(), nl=False)
    if png is None:
        return
    if not round_graph_png(png):
        typer.echo(f"error: no PNG written: {MERMAID_HOWTO}", err=True)
        raise typer.Exit(1)
    typer.echo(f"png: {png}", err=True)
