"""`lares report RUN [--compare BASELINE_RUN]`: write RUN/report/index.html and its PNG figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report_command(
    run: Annotated[Path, typer.Argument(help="run directory (runs/<run-id>)")],
    compare: Annotated[
        Path | None,
        typer.Option("--compare", help="a baseline run directory (lares baseline) to overlay on the curves"),
    ] = None,
) -> None:
    """Write RUN/report/index.html: summary, final reward population and figures (success, return, lineage,
    reward influence, LLM cost); with --compare, the baseline's curves are overlaid."""
    # lazy: matplotlib is imported only when a report is written, not whenever `lares` starts.
    # A path that is not a run raises NotARunError (a LaresError): the app prints it as one line, exit code 1.
    from lares_agent.report.html import write_report

    typer.echo(str(write_report(run, compare=compare)))
