"""`lares sweep`: tasks x methods x seeds on Ray Tune, one run folder per trial (search/sweep.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def _split(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def sweep_command(
    tasks: Annotated[str | None, typer.Option(help="Comma-separated task names (`lares tasks`).")] = None,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0",
    methods: Annotated[str, typer.Option(
        help="Comma-separated: lares (reward search), lares-init and lares-scratch (the search in setting init or "
             "scratch, both arms in one sweep), lares-potential (from scratch, the LLM writes a potential over the "
             "success reward: --shaping potential), human (the learner on the task's own reward), sparse (the "
             "learner on the task's success indicator alone), retrain (the learner alone on the reward of --set "
             "reward_from=RUN[:REWARD_ID] or --set reward_file=FILE), or an ablation of the search (no-relabel, "
             "no-thompson, no-scaling, no-constraint, no-reflection, no-retrieval, no-llm, random-edit, critique-edit: "
             "the last three write no reward with the LLM).")] = "lares,human",
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="A `lares run` option for every trial, without its dashes: NAME=VALUE (budget=20000, "
                      "llm-backend=openai, hidden=256x256, reward_from=RUN for retrain); repeat it.")] = None,
    preset: Annotated[str, typer.Option(help="demo or paper (as `lares run --preset`).")] = "demo",
    cpus_per_trial: Annotated[float, typer.Option(help="CPUs Ray reserves for each trial.")] = 1.0,
    ray_address: Annotated[str | None, typer.Option(
        help="A running Ray cluster; default: a local Ray for the sweep, one CPU per core.")] = None,
    shared_cases: Annotated[bool, typer.Option(
        "--shared-cases", help="LaRes trials share one case store (default: each its own).")] = False,
    out: Annotated[Path | None, typer.Option(help="The sweep folder (its trials' run folders are in runs/).")] = None,
    resume: Annotated[Path | None, typer.Option(
        help="Continue the sweep in this folder: unfinished trials resume their runs, finished ones are kept.")] = None,
) -> None:
    """Run a grid of runs on Ray Tune; `lares report --sweep DIR` compares them, and `lares report/trace/resume`
    work on each trial's folder in DIR/runs/."""
    from lares_agent.errors import ConfigError
    from lares_agent.search.sweep import ray_missing

    missing = ray_missing()
    if missing is not None:
        typer.echo(f"error: {missing}", err=True)
        raise typer.Exit(2)
    from lares_agent.search.sweep import resume_sweep, start_sweep

    if resume is not None:
        if tasks or set_ or out:
            raise ConfigError("--resume DIR continues the sweep with its own options (DIR/sweep.json); pass no "
                              "--tasks, --set or --out with it")
        outcome = resume_sweep(resume, ray_address)
    else:
        if not tasks or out is None:
            raise ConfigError("a new sweep needs --tasks and --out DIR (or --resume DIR)")
        from lares_agent.search.sweep_spec import SweepSpec, parse_sets

        try:
            seed_values = tuple(int(s) for s in _split(seeds))
        except ValueError:
            raise ConfigError(f"--seeds {seeds!r}: write comma-separated integers, e.g. 0,1,2") from None
        from lares_agent.cli.task_option import allow_typed_task

        for task in _split(tasks):  # typed here: a task module may be imported (cli/task_option.py)
            allow_typed_task(task)
        spec = SweepSpec(tasks=tuple(_split(tasks)), seeds=seed_values, methods=tuple(_split(methods)),  # type: ignore[arg-type]
                         options=parse_sets(set_ or []), preset=preset, cpus_per_trial=cpus_per_trial,
                         shared_cases=shared_cases)
        outcome = start_sweep(spec, out, ray_address)
    root = outcome.layout.root
    typer.echo(f"sweep: {outcome.finished}/{outcome.trials} trials finished; runs in {outcome.layout.runs}")
    if outcome.errored:
        typer.echo(f"unfinished: {', '.join(outcome.errored)}; continue with `lares sweep --resume {root}`")
        raise typer.Exit(1)
    typer.echo(f"  compare: lares report --sweep {root}")
