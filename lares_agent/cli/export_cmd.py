"""`lares export RUN`: the run's reward as a standalone numpy module, its candidate JSON, or LaTeX."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lares_agent.errors import LaresError

FORMATS = ("python", "json", "latex")


def export_command(
    run: Annotated[Path, typer.Argument(help="The run folder.")],
    reward: Annotated[str | None, typer.Option(
        "--reward", help="Reward id (see the report); default: the run's selected reward.")] = None,
    format: Annotated[str, typer.Option("--format", help="python (numpy module), json or latex.")] = "python",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file (default: stdout).")] = None,
) -> None:
    """Write a found reward for use outside lares: `python` is a module needing numpy only, with one function
    per component, `reward(features)`, the features' meanings and units, how a built-in task computes them,
    and an optional Gymnasium RewardWrapper."""
    from lares_agent.engine.tasks import get_task
    from lares_agent.report.run_reader import read_run
    from lares_agent.report.selected import selected_reward
    from lares_agent.rewards import allowed_features, parse_candidate
    from lares_agent.rewards.export import ExportedFeature, candidate_document, latex_document, python_module

    if format not in FORMATS:
        raise typer.BadParameter(f"must be one of {', '.join(FORMATS)}, not {format!r}", param_hint="--format")
    data = read_run(run)
    why = "given with --reward"
    if reward is None:
        chosen = selected_reward(run, data)
        if chosen is None:
            raise LaresError(f"{run} holds no reward yet (no accepted candidate in its candidates)")
        reward, why = chosen.reward_id, chosen.why
    candidate = data.candidate(reward)
    if candidate is None or not candidate.components:
        known = ", ".join(sorted(c.id for c in data.by_id.values() if c.components)[:8]) or "none"
        raise LaresError(f"reward {reward!r} has no expression in this run's candidates (known: {known})")
    task = get_task(data.task)
    parsed = parse_candidate({"components": dict(candidate.components), "rationale": candidate.rationale},
                             allowed_features(task))
    if format == "python":
        from lares_agent.engine.tasks.recipe import RECIPE_KIND, feature_recipe

        features = [ExportedFeature(f.name, f.meaning, f.unit) for f in task.feature_defs]
        text = python_module(parsed, features, reward_id=reward, task=task.name, recipe=feature_recipe(task),
                             recipe_kind=RECIPE_KIND)
    elif format == "json":
        text = candidate_document(parsed, reward, task.name, {"selected": why, "fitness": candidate.fitness})
    else:
        text = latex_document(parsed)
    if out is None:
        typer.echo(text, nl=False)
        return
    from lares_agent.runs import atomic_write_text

    atomic_write_text(out, text)
    typer.echo(f"reward {reward} ({why}) written to", err=True)
    typer.echo(f"  {out}", err=True)
