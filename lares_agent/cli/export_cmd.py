"""`lares export RUN`: the run's reward as a standalone numpy module, its candidate JSON, or LaTeX; `--human` the
task's own reward, written as an expression (`lares export --human --task T`, or the run's task)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lares_agent.cli.out_paths import EXPORT_MODE, check_out_path
from lares_agent.cli.task_option import allow_typed_task, refuse_untrusted_task
from lares_agent.errors import LaresError

if TYPE_CHECKING:
    from lares_agent.engine.tasks import TaskSpec
    from lares_agent.rewards import ParsedReward
    from lares_agent.rewards.export_potential import PotentialForm

FORMATS = ("python", "json", "latex")


def export_command(
    run: Annotated[Path | None, typer.Argument(help="The run folder (not needed with --human --task).")] = None,
    reward: Annotated[str | None, typer.Option(
        "--reward", help="Reward id (see the report); default: the run's selected reward.")] = None,
    format: Annotated[str, typer.Option("--format", help="python (numpy module), json or latex.")] = "python",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file (default: stdout).")] = None,
    human: Annotated[bool, typer.Option(
        "--human", help="Export the task's own reward, written as an expression, instead of a found one.")] = False,
    task: Annotated[str | None, typer.Option(
        "--task", help="With --human: the task (default: the run's). With a run of your own package.module:function "
                       "task: that task (lares imports a task's module only when you name it in the command).")]
    = None,
) -> None:
    """Write a found reward for use outside lares: `python` is a module needing numpy only, with one function
    per component, `reward(features)`, the features' meanings and units, a built-in task's feature code
    (lares' own) and an optional Gymnasium RewardWrapper, which needs no code of yours for a built-in task.
    `--human` writes the task's own reward the same way."""
    from lares_agent.engine.tasks import get_task, resolve_task
    from lares_agent.rewards import allowed_features, parse_candidate
    from lares_agent.runs.reader import read_run
    from lares_agent.runs.selected import HUMAN_REWARD_ID, selected_reward
    from lares_agent.search.found_reward import given_components

    if format not in FORMATS:
        raise typer.BadParameter(f"must be one of {', '.join(FORMATS)}, not {format!r}", param_hint="--format")
    if out is not None:
        check_out_path(out, "--out")  # before any work; no folder is made for it
    if human:
        if reward is not None:
            raise typer.BadParameter("--reward names a found reward; --human exports the task's own",
                                     param_hint="--reward")
        if task is None and run is None:
            raise typer.BadParameter("give --task NAME (or a run folder, for its task)", param_hint="--task")
        if task is None:
            assert run is not None  # checked above
            refuse_untrusted_task(run, None, "export its own reward")
            task = read_run(run).task
        else:
            allow_typed_task(task)
        spec = resolve_task(task)
        _write_own(spec, "the task's own reward", format, out, {},
                   f"task {spec.name} has no own reward written as an expression")
        return
    if run is None:
        raise typer.BadParameter("give the run folder (or --human --task NAME)", param_hint="RUN")
    if task is not None and task != read_run(run).task:
        raise typer.BadParameter("--task goes with --human (a run's reward belongs to the run's task; without "
                                 "--human, --task names the run's own package.module:function task)",
                                 param_hint="--task")
    refuse_untrusted_task(run, task, "export its reward")
    data = read_run(run)
    why = "given with --reward"
    if reward is None:
        chosen = selected_reward(run, data)
        if chosen is None:
            raise LaresError(f"{run} holds no reward yet (no accepted candidate in its candidates)")
        reward, why = chosen.reward_id, chosen.why
    candidate = data.candidate(reward)
    given = given_components(data.config, reward)  # a baseline on a found reward: its config.json holds it
    if (candidate is None or not candidate.components) and given is None:
        known = ", ".join(sorted(c.id for c in data.by_id.values() if c.components)[:8]) or "none"
        if reward != HUMAN_REWARD_ID:
            raise LaresError(f"reward {reward!r} has no expression in this run's candidates (known: {known})")
        # The run hands over the learner on the task's own reward: that reward, written as an expression.
        spec = resolve_task(data.task)
        _write_own(spec, why, format, out, {"selected": why},
                   f"{run} hands over the learner on the task's own reward, which task {spec.name} does not write "
                   f"as an expression; export a found reward with --reward ID (known: {known})")
        return
    spec = get_task(data.task)
    fitness = None
    if candidate is None or not candidate.components:
        record = {"components": given, "rationale": str(data.config.get("reward_source") or "")}
    else:
        record = {"components": dict(candidate.components), "rationale": candidate.rationale}
        fitness = candidate.fitness
    parsed = parse_candidate(record, allowed_features(spec))
    from lares_agent.rewards.export_potential import potential_forms

    form = potential_forms(data.events).get(reward)  # `--shaping potential`: the reward is a potential's shaping
    extra = {"selected": why, "fitness": fitness, **({"shaping": "potential", **vars(form)} if form else {})}
    _write(parsed, spec, reward, why, format, out, extra, potential=form)


def _write_own(spec: TaskSpec, why: str, format: str, out: Path | None, extra: dict[str, object],
               missing: str) -> None:
    """The task's own reward, written as an expression; `missing` is the error where the task has none."""
    from lares_agent.rewards import allowed_features, human_record, parse_candidate

    record = human_record(spec)
    if record is None:
        raise LaresError(missing)
    parsed = parse_candidate(record, allowed_features(spec))
    _write(parsed, spec, str(record["id"]), why, format, out, {**extra, "human": True})


def _write(parsed: ParsedReward, spec: TaskSpec, reward: str, why: str, format: str, out: Path | None,
           extra: dict[str, object], potential: PotentialForm | None = None) -> None:
    """The reward in `format`, to `out` or stdout; `potential`: it is a potential and how it shaped its base (the
    python module computes the shaped reward, the JSON says so, the LaTeX is Phi's)."""
    from lares_agent.rewards.export import ExportedFeature, candidate_document, latex_document, python_module

    if format == "python":
        from lares_agent.engine.tasks.feature_code import FEATURE_CODE_KIND, feature_code

        features = [ExportedFeature(f.name, f.meaning, f.unit) for f in spec.feature_defs]
        heading = (f"The own reward of task {spec.name}, written as a lares reward expression ({reward})."
                   if extra.get("human") else None)
        text = python_module(parsed, features, reward_id=reward, task=spec.name, feature_code=feature_code(spec),
                             feature_kind=FEATURE_CODE_KIND, heading=heading, potential=potential)
    elif format == "json":
        text = candidate_document(parsed, reward, spec.name, extra)
    else:
        text = latex_document(parsed)
    if out is None:
        typer.echo(text, nl=False)
        return
    from lares_agent.runs import atomic_write_text
    from lares_agent.runs.oserrors import run_file_error

    try:
        atomic_write_text(out, text, mode=EXPORT_MODE)
    except OSError as exc:  # [Errno 21] or [Errno 30] in words
        raise run_file_error("write", out, exc) from None
    typer.echo(f"reward {reward} ({why}) written to", err=True)
    typer.echo(f"  {out}", err=True)
