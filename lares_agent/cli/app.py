"""The `lares` command line (typer). Each command lives in its own module; this file only wires them."""

from __future__ import annotations

import sys
from typing import Annotated

import click
import typer
from typer.core import TyperGroup


class _OneLineErrors(TyperGroup):
    """Turns any failure of a command into one line on stderr and exit code 1 (tracebacks with `--debug`).

    Done in the group rather than in `main()` so that typer's CliRunner sees exactly what a user sees.
    """

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as exc:  # noqa: BLE001 - the CLI boundary
            if ctx.meta.get("lares.debug") or "--debug" in sys.argv:
                raise
            message = " ".join((str(exc).strip() or type(exc).__name__).split())
            click.echo(f"error: {message}", err=True)
            if not _is_user_error(exc):
                click.echo("(run again with --debug for the traceback)", err=True)
            ctx.exit(1)


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
from lares_agent.cli.models_cmd import models_app  # noqa: E402

app.add_typer(models_app, name="models")
from lares_agent.cli.report_cmd import report_command  # noqa: E402

app.command("report")(report_command)
from lares_agent.cli.personas_cmd import personas_app  # noqa: E402

app.add_typer(personas_app, name="personas")


def main() -> None:
    app()
