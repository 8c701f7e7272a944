"""`lares reward check EXPR --task NAME`: run a reward candidate through the same checks a search applies.

Exit 0 when accepted, 1 with the reason when not; `--json` prints the verdict as one JSON object.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import numpy as np
import typer

from lares_agent.rewards import Verdict, feature_names_of, synthetic_sample, validate

reward_app = typer.Typer(help="The reward language: check a candidate against a task.", no_args_is_help=True)


class SampleKind(StrEnum):
    synthetic = "synthetic"
    rollout = "rollout"


def _load_task(name: str) -> Any:
    """The task spec (engine layer); a function of its own so tests can stand in a small task."""
    from lares_agent.engine.tasks import get_task

    return get_task(name)


def _rollout_sample(task: Any, n: int, seed: int) -> dict[str, np.ndarray]:
    """Real states: n steps of uniformly random actions in the task's env (resetting at the horizon)."""
    rng = np.random.default_rng(seed)
    env = task.make_env(seed)
    try:
        low, high = env.action_space.low, env.action_space.high
        obs, info = env.reset(seed=seed)
        raws, actions = [], []
        steps_in_episode = 0
        for _ in range(n):
            action = rng.uniform(low, high).astype(env.action_space.dtype)
            obs, _, terminated, truncated, info = env.step(action)
            raws.append(task.raw_state(env, obs, info))
            actions.append(action)
            steps_in_episode += 1
            if terminated or truncated or steps_in_episode >= task.horizon:
                obs, info = env.reset()
                steps_in_episode = 0
    finally:
        env.close()
    features = task.features(np.asarray(raws, dtype=np.float64), np.asarray(actions, dtype=np.float64))
    return {name: np.asarray(features[name], dtype=np.float64) for name in feature_names_of(task)}


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


@reward_app.command("check")
def check_command(
    expression: Annotated[
        str, typer.Argument(help='an expression, or a JSON candidate {"components": {"name": "expr", ...}}')
    ],
    task: Annotated[str, typer.Option("--task", "-t", help="task whose features the reward may use")] = "reach-v3",
    as_json: Annotated[bool, typer.Option("--json", help="print the verdict as one JSON object")] = False,
    sample: Annotated[
        SampleKind,
        typer.Option("--sample", help="states to check on: synthetic ranges per unit, or random-action rollouts"),
    ] = SampleKind.synthetic,
    states: Annotated[int, typer.Option("--states", min=1, max=1_000_000, help="number of sample states")] = 4096,
    seed: Annotated[int, typer.Option("--seed", help="seed of the sample")] = 0,
) -> None:
    """Parse, compile and numerically check EXPRESSION; print the verdict, complexity and canonical form."""
    spec = _load_task(task)
    if sample is SampleKind.rollout:
        states_sample = _rollout_sample(spec, states, seed)
    else:
        states_sample = synthetic_sample(spec.features, states, np.random.default_rng(seed))
    verdict, _ = validate(expression, spec, states_sample)
    if as_json:
        payload = {"task": getattr(spec, "name", task), "sample": sample.value, "states": states, **verdict.to_json()}
        typer.echo(json.dumps(payload, sort_keys=True))
    else:
        _print_human(verdict, getattr(spec, "name", task))
    if not verdict.accepted:
        raise typer.Exit(code=1)
