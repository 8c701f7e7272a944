"""The round graph as LangGraph draws it: what `lares graph` prints, the report shows and docs/ARCHITECTURE.md holds.

Drawn from the compiled graph (`build_graph`), never written by hand, so the picture cannot drift from the wiring;
tests/test_graph_drawing.py holds the doc's copy equal to it. Compiling needs no model and no run: the nodes read
the run's `RunContext` only when they are invoked. Conditional edges (the start's routing, validate's retry) are
dotted, fixed ones solid.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MERMAID_HOWTO", "round_graph_mermaid", "round_graph_png"]

MERMAID_HOWTO = (
    "a PNG needs pygraphviz (LangGraph's offline drawer; pip install pygraphviz, which builds against Graphviz: "
    "apt-get install graphviz libgraphviz-dev); LangGraph's Mermaid PNG goes through the mermaid.ink web "
    "service, which is not used. Render the Mermaid text instead: `lares graph > graph.mmd`, then "
    "`npx -p @mermaid-js/mermaid-cli mmdc -i graph.mmd -o graph.png`, or paste it into any Mermaid viewer "
    "(GitHub and many editors draw ```mermaid blocks)"
)
"""Why no PNG was written and how to get a picture from the text (one line for the CLI)."""


def round_graph_mermaid() -> str:
    """The round graph as Mermaid flowchart text (LangGraph's `draw_mermaid`), ending in a newline."""
    from lares_agent.graphs.build import build_graph

    text = build_graph().get_graph().draw_mermaid()
    return text if text.endswith("\n") else text + "\n"


def round_graph_png(path: Path) -> bool:
    """Write the graph as a PNG with LangGraph's Graphviz drawer where pygraphviz is installed; False (nothing
    written) where it is not. LangGraph's Mermaid PNG is not tried: it calls a web service (or a browser that
    pyppeteer downloads), and a run's tools must work offline."""
    try:
        import pygraphviz  # noqa: F401
    except ImportError:
        return False
    from lares_agent.graphs.build import build_graph

    path.parent.mkdir(parents=True, exist_ok=True)
    build_graph().get_graph().draw_png(str(path))
    return True
