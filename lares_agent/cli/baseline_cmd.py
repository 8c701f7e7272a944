"""`lares baseline`: the learner alone on the task's own reward, its success indicator or a found reward; with
`--config FILE` as `lares run --config` reads one (cli/config_file.py), e.g. a run's own config.json, so a
baseline trains with the same engine settings as the search it is compared with."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from lares_agent.cli.run_cmd import RUNS_DIR, _finish, _notify, _progress
from lares_agent.search.presets import preset_config

__all__ = ["BASELINE_FIELDS", "baseline_command"]

# The SearchConfig fields a baseline reads: the task, the learner and its engine settings, the run's length and
# records, and the reward it trains on. A `--config` file's other fields (the search's population, LLM and
# prompts) are left out with one note: a search's config.json is a natural file to give, and all of them would
# do nothing here.
BASELINE_FIELDS = frozenset({
    "task", "learner", "budget", "warmup_steps", "eval_every", "eval_episodes", "checkpoint_every", "horizon",
    "hidden", "critic_hidden", "batch_size", "utd", "init_alpha", "lr", "obs_norm", "critic_layer_norm",
    "es_population", "backend", "ray_address", "torch_threads", "cores", "seed", "max_minutes",
    "baseline_reward", "reward_components", "reward_id", "reward_source", "reward_normalisation", "reward_gain",
    "learners_per_reward", "tensorboard", "device",
})
_REWARD_FIELDS = ("baseline_reward", "reward_components", "reward_id", "reward_source")
_ALIASES = {"reward": "baseline_reward"}  # `--reward` is the field baseline_reward


def baseline_command(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(
        help="A TOML, YAML or JSON file of run options by name (budget = 20000), e.g. a run's own config.json: "
             "the settings a baseline reads are taken (an option given here overrides the file), the search's "
             "are left out with a note.")] = None,
    task: Annotated[str | None, typer.Option("--task", "-t", help=(
        "Task name (see `lares tasks`) or package.module:function; default: the task of --reward-from's run or "
        "--reward-file's candidate, else reach-v3."))] = None,
    budget: Annotated[int | None, typer.Option(help="Env steps to train.")] = None,
    learner: Annotated[str | None, typer.Option(
        help="Policy learner: sac, crossq or es (default: the preset's).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    run_dir: Annotated[Path, typer.Option(help="Folder that receives the run folder.")] = RUNS_DIR,
    preset: Annotated[str, typer.Option(help="demo or paper (network sizes, warm-up, evaluation).")] = "demo",
    report: Annotated[bool, typer.Option(help="Write the HTML report at the end.")] = True,
    reward: Annotated[str, typer.Option(
        help="human (the task's own reward) or success (its success indicator alone: the sparse baseline).")] = "human",
    reward_from: Annotated[str | None, typer.Option(
        help="RUN or RUN:REWARD_ID: train on a reward a run found (without an id: the one it handed over, as "
             "`lares export` picks it), e.g. to retrain it on fresh seeds.")] = None,
    reward_file: Annotated[Path | None, typer.Option(
        help='A reward to train on: a JSON candidate {"components": {...}} (`lares export --format json`), a '
             "--rewards-file list of one, or a text file of one expression.")] = None,
) -> None:
    """The learner alone on the task's own (human) reward with the same engine: the comparison for
    `report --compare`; or alone on a found reward (--reward-from, --reward-file)."""
    from lares_agent.cli.config_file import from_command_line, merge_config_file
    from lares_agent.cli.task_option import allow_typed_task
    from lares_agent.search.found_reward import notes, resolve
    from lares_agent.search.runner import check_start, start_run

    allow_typed_task(task)  # never the task of --reward-from's run or the file: named here or not imported
    typed = from_command_line(ctx, _ALIASES)
    params, from_file = merge_config_file(ctx, config, _ALIASES) if config else (dict(ctx.params), set())
    values, left_out = _file_values(params, from_file, typed)
    chosen = str(params["reward"] if params.get("reward") is not None else params.get("baseline_reward", "human"))
    source, file = params["reward_from"], params["reward_file"]
    found = resolve(None if source is None else str(source), None if file is None else Path(str(file)),
                    chosen)  # refused before a run folder exists
    if found is not None or "baseline_reward" in typed:  # a reward given now replaces the file's
        values = {k: v for k, v in values.items() if k not in _REWARD_FIELDS}
    values.pop("task", None)  # the file's task is params["task"] already (an option of this command)
    name = params["task"] or (found.task if found is not None else None) or "reach-v3"
    cfg = preset_config(str(params["preset"]), {
        **values, "task": name, "budget": params["budget"], "learner": params["learner"], "seed": params["seed"],
        "setting": "baseline", "population": 1, "elites": 1, "baseline_reward": chosen,
        **(found.overrides() if found is not None else {})})
    check_start(cfg)
    if left_out:
        _notify(f"--config {config} sets {', '.join(left_out)}, which only a search reads: left out")
    for line in notes(found, str(name)) if found is not None else []:
        _notify(line)
    from lares_agent.runs import RunLayout

    base = Path(str(params["run_dir"]))
    RunLayout.prepare_base(base)
    with _progress(cfg.budget) as update:
        outcome = start_run(cfg, base, progress=update)
    _finish(outcome, bool(params["report"]))


def _file_values(params: dict[str, object], from_file: set[str], typed: set[str]) -> tuple[dict[str, object],
                                                                                          list[str]]:
    """The file's values a baseline reads (by field name; the command line's win) and the names of the search
    settings it sets to other than their defaults, which the baseline leaves out."""
    from lares_agent.search.config import SearchConfig

    defaults = {f.name: f.default for f in dataclasses.fields(SearchConfig)}
    forced = {"setting", "population", "elites", "preset"}  # fixed by a baseline, or an option of this command
    values = {k: params[k] for k in from_file if k in BASELINE_FIELDS and k not in typed}
    left_out = sorted(k for k in from_file if k not in BASELINE_FIELDS and k in defaults and k not in forced
                      and params[k] != defaults[k])
    return values, left_out
