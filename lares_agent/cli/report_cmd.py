"""`lares report RUN [--compare BASELINE_RUN]`: write RUN/report/index.html and its PNG figures; `lares report
--sweep DIR`: the comparison table of a sweep's methods (report/sweep_table.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lares_agent.cli.task_option import RunTask, refuse_untrusted_task


def report_command(
    run: Annotated[Path | None, typer.Argument(help="run directory (runs/<run-id>)")] = None,
    compare: Annotated[
        Path | None,
        typer.Option("--compare", help="a baseline run directory (lares baseline) to overlay on the curves"),
    ] = None,
    sweep: Annotated[
        Path | None,
        typer.Option("--sweep", help="a sweep folder (lares sweep --out DIR): write DIR/report/table.md, "
                                     "table.csv and success.png"),
    ] = None,
    with_sweep: Annotated[
        list[Path] | None,
        typer.Option("--with-sweep", metavar="DIR",
                     help="with --sweep: another sweep whose trials on DIR's tasks join the table (e.g. the main "
                          "grid's lares runs beside an ablation sweep); repeatable"),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option("--replay", metavar="FILE",
                     help="with --sweep: each trial's handed-over policy replayed on fresh episodes (the --csv "
                          "FILE of experiments/sample_efficiency/final_policies.py), shown beside the population's "
                          "best learner"),
    ] = None,
    video: Annotated[
        bool,
        typer.Option("--video/--no-video", help="render one episode of the policy the run hands over into "
                                                "report/policy.gif (MuJoCo off screen; a few seconds)"),
    ] = True,
    task: RunTask = None,
) -> None:
    """Write RUN/report/index.html: summary, a GIF of the handed-over policy's episode, final reward population
    and figures (success, return, lineage, reward influence, LLM cost); with --compare, the baseline's curves are
    overlaid. With --sweep DIR, the
    comparison table of the sweep's tasks and methods instead."""
    from lares_agent.errors import ConfigError

    if with_sweep and sweep is None:
        raise ConfigError("--with-sweep adds trials to a --sweep DIR table; pass --sweep DIR too")
    if replay is not None and sweep is None:
        raise ConfigError("--replay adds replayed success to a --sweep DIR table; pass --sweep DIR too")
    if (run is None) == (sweep is None):
        raise ConfigError("pass a run directory, or --sweep DIR (not both)")
    if sweep is not None and not video:
        raise ConfigError("--no-video is for a run's report; a --sweep table has no video")
    if sweep is not None:
        from lares_agent.report.sweep_table import TABLE_MD, write_sweep_report

        paths = write_sweep_report(sweep, also=with_sweep or (), replay=replay)
        table = next(p for p in paths if p.name == TABLE_MD)
        typer.echo(table.read_text(encoding="utf-8"), nl=False)
        for path in paths:
            typer.echo(str(path))
        return
    # lazy: matplotlib is imported only when a report is written, not whenever `lares` starts.
    # A path that is not a run raises NotARunError (a LaresError): the app prints it as one line, exit code 1.
    from lares_agent.report.html import write_report

    assert run is not None
    if video:  # the video needs the task's env: a task module only where named now (cli/task_option.py)
        refuse_untrusted_task(run, task, "render the policy's video (or pass --no-video)")
    typer.echo(str(write_report(run, compare=compare, video=video)))
