"""The `lares` command line (typer). Each command lives in its own module; this file only wires them."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
import typer.core
from typer.core import TyperGroup


class _OneLineErrors(TyperGroup):
    """Turns any failure of a command into one line on stderr (tracebacks with `--debug`): exit code 2 for a
    usage error or an invalid configuration (`ConfigError`), 1 for everything else.

    Done in the group rather than in `main()` so that typer's CliRunner sees exactly what a user sees.
    """

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]  # click passes its own Context
        from lares_agent.errors import ConfigError

        try:
            return super().invoke(ctx)
        except _usage_errors() as exc:
            where = exc.ctx.command_path if getattr(exc, "ctx", None) is not None else "lares"
            typer.echo(f"error: {exc.format_message()} (see `{where} --help`)", err=True)
            ctx.exit(2)
        except _click_control_flow():
            raise
        except Exception as exc:  # the CLI boundary
            if ctx.meta.get("lares.debug") or "--debug" in sys.argv:
                raise
            message = " ".join((str(exc).strip() or type(exc).__name__).split())
            typer.echo(f"error: {message}", err=True)
            if isinstance(exc, ConfigError):
                ctx.exit(2)
            if not _is_user_error(exc):
                typer.echo("(run again with --debug for the traceback)", err=True)
            ctx.exit(1)


def _click_control_flow() -> tuple[type[BaseException], ...]:
    """Exits, aborts and usage errors (typer's bundled click): typer reports those itself."""
    bundled = getattr(typer.core, "_click", None)
    names = ("Exit", "Abort", "ClickException")
    found = [getattr(bundled.exceptions, n, None) for n in names] if bundled is not None else []
    return (typer.Exit, typer.Abort, *(t for t in found if t is not None))


def _usage_errors() -> tuple[type[Any], ...]:
    """A mistyped flag or value: one line too, with the command's --help to turn to."""
    bundled = getattr(typer.core, "_click", None)
    usage = getattr(getattr(bundled, "exceptions", None), "UsageError", None)
    return (usage,) if usage is not None else ()


def _is_user_error(exc: BaseException) -> bool:
    from lares_agent.errors import LaresError

    return isinstance(exc, (LaresError, FileNotFoundError, ValueError, KeyError))


app = typer.Typer(
    cls=_OneLineErrors,
    help="LLM reward search for robot RL (LaRes) on a laptop.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks on errors.")] = False,
) -> None:
    ctx.meta["lares.debug"] = debug


# --- command registration (one import + one line per command) ---
from lares_agent.cli.baseline_cmd import baseline_command  # noqa: E402
from lares_agent.cli.run_cmd import resume_command, run_command  # noqa: E402

app.command("run")(run_command)
app.command("resume")(resume_command)
app.command("baseline")(baseline_command)
from lares_agent.cli.models_cmd import models_app  # noqa: E402

app.add_typer(models_app, name="models")
from lares_agent.cli.report_cmd import report_command  # noqa: E402

app.command("report")(report_command)
from lares_agent.cli.personas_cmd import personas_app  # noqa: E402

app.add_typer(personas_app, name="personas")
from lares_agent.cli.reward_cmd import reward_app  # noqa: E402

app.add_typer(reward_app, name="reward")
from lares_agent.cli.tasks_cmd import tasks_command  # noqa: E402

app.command("tasks")(tasks_command)
from lares_agent.cli.trace_cmd import trace_command  # noqa: E402

app.command("trace")(trace_command)
from lares_agent.cli.export_cmd import export_command  # noqa: E402

app.command("export")(export_command)
from lares_agent.cli.eval_cmd import eval_command  # noqa: E402

app.command("eval")(eval_command)
from lares_agent.cli.sweep_cmd import sweep_command  # noqa: E402

app.command("sweep")(sweep_command)
from lares_agent.cli.graph_cmd import graph_command  # noqa: E402

app.command("graph")(graph_command)
from lares_agent.cli.feedback_cmd import feedback_command  # noqa: E402

app.command("feedback")(feedback_command)


def main() -> None:
    app()
