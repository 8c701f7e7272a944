"""`lares graph`: LangGraph's Mermaid drawing of the round graph, the same text in docs/ARCHITECTURE.md (so the doc
cannot go stale) and in the HTML report; `--png` only where it can be drawn offline."""

from __future__ import annotations

import html
import re
from pathlib import Path

from test_report import make_run
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.graphs.drawing import round_graph_mermaid
from lares_agent.report.html import write_report

ROOT = Path(__file__).resolve().parents[1]
DOC_BLOCK = re.compile(r"<!-- lares graph: begin -->\n```mermaid\n(.*?)```\n<!-- lares graph: end -->", re.S)


def graph_output() -> str:
    result = CliRunner().invoke(app, ["graph"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_command_prints_langgraphs_own_drawing() -> None:
    text = graph_output()
    assert text == round_graph_mermaid()
    edges = set(re.findall(r"^\s*(\w+) (-->|-\.->) (\w+);$", text, re.M))
    assert {("analyse", "-->", "critique"), ("critique", "-->", "propose"), ("propose", "-->", "validate"),
            ("validate", "-.->", "propose"), ("validate", "-.->", "__end__"), ("__start__", "-.->", "analyse"),
            ("__start__", "-.->", "critique"), ("__start__", "-.->", "propose")} <= edges


def test_the_architecture_doc_holds_the_commands_output() -> None:
    found = DOC_BLOCK.findall((ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert len(found) == 1, "docs/ARCHITECTURE.md needs one `lares graph` block between its markers"
    assert found[0] == graph_output(), "docs/ARCHITECTURE.md's graph is stale: paste `lares graph`'s output there"


def test_png_says_how_to_render_the_text_where_it_cannot_draw(tmp_path: Path) -> None:
    out = tmp_path / "graph.png"
    result = CliRunner().invoke(app, ["graph", "--png", str(out)])
    try:
        import pygraphviz  # noqa: F401
    except ImportError:
        assert result.exit_code == 1 and not out.exists()
        assert result.stdout == round_graph_mermaid()  # the text still comes
        assert "no PNG written" in result.stderr and "mmdc" in result.stderr
        return
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_shows_the_graph_without_loading_anything(tmp_path: Path) -> None:
    run = make_run(tmp_path, "run1", rounds=1)["path"]
    page = write_report(run).read_text(encoding="utf-8")
    block = re.search(r'<pre class="mermaid" id="round-graph">(.*?)</pre>', page, re.S)
    assert block and html.unescape(block.group(1)) == round_graph_mermaid()
    assert "<script" not in page and not re.search(r"(src|href)=\"https?:", page)  # readable offline, as text


def test_a_baseline_report_has_no_graph(tmp_path: Path) -> None:
    run = make_run(tmp_path, "base", slots=1, rounds=1, llm=False)["path"]
    (run / "config.json").write_text('{"task": "reach-v3", "setting": "baseline", "population": 1}')
    assert "round-graph" not in write_report(run).read_text(encoding="utf-8")
