"""`lares reward check EXPR --task NAME`: run a reward candidate through the validator a search applies.

The command calls `rewards.validate`, the function the graph's validate node calls, with the same settings.
Parse, limits, complexity cap, progress use and approach term do not depend on the states, so their verdict is
exactly a search's; the numeric checks and the progress sign are judged on the chosen sample (a search
judges them on its own states: random-action states in round 0, buffer states later); duplicates are not checked
(there is no population). Exit 0 when accepted, 1 with the reason when not; `--json` prints the verdict.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
import typer.core

from lares_agent.rewards import CheckConfig, Verdict, allowed_features, synthetic_sample, validate

if TYPE_CHECKING:
    from lares_agent.engine.tasks import TaskSpec

reward_app = typer.Typer(help="The reward language: check a candidate against a task.", no_args_is_help=True)


class _ExpressionFirst(typer.core.TyperCommand):
    """`lares reward check "-2*obj_to_target"`: a word that starts with one minus and is not an option of the
    command (`-t`) is the expression, not an unknown option (a negative reward is common; `--` works too). It is
    read with a leading space, which the parser ignores; `-tcp_to_target` is an expression here, not `-t cp_...`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        shorts = {name for param in self.params for name in getattr(param, "opts", ()) if not name.startswith("--")}
        words, after = [], False
        for word in args:
            negative = not after and word.startswith("-") and not word.startswith("--") and len(word) > 1
            words.append(f" {word}" if negative and word not in shorts else word)
            after = after or word == "--"
        return super().parse_args(ctx, words)


class SampleKind(StrEnum):
    synthetic = "synthetic"
    rollout = "rollout"


def _load_task(name: str) -> TaskSpec:
    """The task spec (engine layer); a function of its own so tests can stand in a small task."""
    from lares_agent.engine.tasks import allow_task_reference, get_task

    allow_task_reference(name)  # named on this command line (--task): its module may be imported
    return get_task(name)


def _rollout_sample(task: TaskSpec, n: int, seed: int) -> dict[str, np.ndarray]:
    """Real states: the first ``n`` steps of the engine's uniform-random sampler (what a search's round 0
    validates on), in episodes no longer than the task's horizon or ``n``, restricted to the reward features."""
    from lares_agent.engine import random_feature_sample

    sample = random_feature_sample(task, n, seed, horizon=min(n, task.horizon))
    return {name: sample[name][:n] for name in allowed_features(task)}


def _print_human(verdict: Verdict, task_name: str) -> None:
    if verdict.accepted:
        typer.echo(f"accepted for {task_name} (complexity {verdict.complexity:g})")
    else:
        typer.echo(f"rejected: {verdict.reason}")
        if verdict.complexity is not None:
            typer.echo(f"complexity {verdict.complexity:g}")
    for name, text in (verdict.canonical or {}).items():
        stats = verdict.stats.get(name)
        summary = (f"   [mean {stats.mean:.4g}, std {stats.std:.4g}, min {stats.min:.4g}, max {stats.max:.4g}]"
                   if stats else "")
        typer.echo(f"  {name} = {text}{summary}")
    for warning in verdict.warnings:
        typer.echo(f"warning: {warning}")


@reward_app.command("check", cls=_ExpressionFirst)
def check_command(
    expression: Annotated[
        str, typer.Argument(help='an expression (one that starts with a minus too: "-2*obj_to_target"), or a JSON '
                            'candidate {"components": {"name": "expr", ...}}')
    ],
    task: Annotated[str, typer.Option("--task", "-t", help="task whose features the reward may use")] = "reach-v3",
    as_json: Annotated[bool, typer.Option("--json", help="print the verdict as one JSON object")] = False,
    sample: Annotated[
        SampleKind,
        typer.Option("--sample", help="states for the numeric and progress-sign checks: synthetic ranges per unit "
                     "(fast, no simulator), or random-action rollouts (the states of a search's round 0)"),
    ] = SampleKind.synthetic,
    states: Annotated[int, typer.Option("--states", min=1, max=1_000_000, help="number of sample states")] = 4096,
    seed: Annotated[int, typer.Option("--seed", help="seed of the sample")] = 0,
) -> None:
    """Check EXPRESSION with the validator a search applies; print the verdict, complexity and canonical form.

    Parse, limits, complexity cap, progress use and approach term: exactly a search's verdict.

    Numeric checks and the progress sign: judged on --sample. Duplicates of a population: not checked.
    """
    spec = _load_task(task)
    if sample is SampleKind.rollout:
        states_sample = _rollout_sample(spec, states, seed)
    else:
        states_sample = synthetic_sample(spec.features, states, np.random.default_rng(seed))
    # CheckConfig() is the search's setting too (GraphLimits.checks defaults to it).
    verdict = validate(expression, spec, states_sample, config=CheckConfig())
    if as_json:
        payload = {"task": spec.name, "sample": sample.value, "states": states, **verdict.to_json()}
        typer.echo(json.dumps(payload, sort_keys=True))
    else:
        _print_human(verdict, spec.name)
    if not verdict.accepted:
        raise typer.Exit(code=1)
