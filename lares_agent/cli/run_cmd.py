"""`lares run`, `lares resume` and `lares baseline`: the main job and its companions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lares_agent.search.presets import preset_config

if TYPE_CHECKING:
    from lares_agent.search.outcome import RunOutcome, RunStatus

RUNS_DIR = Path("runs")

Task = Annotated[str, typer.Option("--task", "-t", help=(
    "Task name (see `lares tasks`), or package.module:function returning your own TaskSpec "
    "(examples/inverted_pendulum.py)."))]


def _percent(value: float | None) -> str:
    return "--" if value is None else f"{value:.0%}"


@contextmanager
def _progress(budget: int) -> Iterator[Callable[[RunStatus], None]]:
    """A rich progress line that fits 80 columns: env steps, reward round, the success of the learner the run
    ranks first at the newest evaluation with the best success of any evaluation so far, the LLM, ETA."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        BarColumn(bar_width=10),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
        TextColumn("round {task.fields[round]}"),
        TextColumn("success {task.fields[ranked]} (best {task.fields[best]})"),
        TextColumn("{task.fields[llm]}"),
        TextColumn("ETA"),
        TimeRemainingColumn(compact=True),
    )
    with Progress(*columns, console=Console(), transient=False) as bar:  # this terminal's width, not a cached one
        tid = bar.add_task("training", total=budget, round=0, ranked=_percent(None), best=_percent(0.0), llm="")

        def update(status: RunStatus) -> None:
            bar.update(tid, completed=status.env_steps, round=status.round, ranked=_percent(status.ranked_success),
                       best=_percent(status.best_success), llm="LLM busy" if status.llm_in_flight else "LLM idle")

        yield update


FALLBACK_EXIT = 3  # every reward was the built-in fallback and --allow-fallback was not given


def _notify(line: str) -> None:
    typer.echo(f"note: {line}", err=True)


def _finish(outcome: RunOutcome, report: bool, allow_fallback: bool = False) -> None:
    """The last screen: how the run ended, whether the LLM delivered anything, where the results are; then the
    exit status (128 + signal after a graceful stop, 3 for a run of fallback rewards only)."""
    if outcome.already_finished:
        typer.echo(f"run already finished: {outcome.env_steps:,} env steps, best success {outcome.best_success:.0%} "
                   "(nothing to resume; nothing was written)")
        typer.echo(f"results: {outcome.run.root}")
        return
    if outcome.finished:
        state = "finished"
    elif outcome.stopped_by:
        state = f"stopped by {outcome.stopped_by} after the current step, checkpoint written"
    else:
        state = "stopped (resume with `lares resume`)"
    typer.echo(
        f"run {state}: {outcome.env_steps:,} env steps in {outcome.wall_s / 60:.1f} min, "
        f"success {_percent(outcome.ranked_success)} (ranked first), best {outcome.best_success:.0%}"
    )
    if outcome.llm is not None:
        typer.echo(outcome.wait_sentence())
    only_fallbacks = outcome.llm is not None and outcome.llm.only_fallbacks
    if outcome.llm is not None and only_fallbacks:
        typer.echo(f"warning: {outcome.llm.sentence()}")
    index = None
    if report:
        from lares_agent.report.html import write_report

        index = write_report(outcome.run.root)
    from lares_agent.cli.takeaway import takeaway_lines

    got = takeaway_lines(outcome.run.root, outcome.ranked_success, index)  # reward, policy, eval/export commands
    for line in got:
        typer.echo(line)
    if index is not None and not got:
        typer.echo(f"report: {index}")
    typer.echo(f"results: {outcome.run.root}")
    typer.echo(f"  trace: lares trace {outcome.run.root}    resume: lares resume {outcome.run.root}")
    if outcome.stopped_by:
        raise typer.Exit(outcome.exit_code)
    if only_fallbacks and not allow_fallback:
        then = "run again" if outcome.finished else "`lares resume` the run"
        typer.echo(f"exit status {FALLBACK_EXIT}: the LLM delivered no reward; fix the endpoint or model and {then} "
                   "(or pass --allow-fallback to accept fallback rewards)")
        raise typer.Exit(FALLBACK_EXIT)


def run_command(
    task: Task = "reach-v3",
    llm: Annotated[str, typer.Option(
        help="LLM backend: local (GGUF via llama.cpp), openai (any OpenAI-compatible server) or replay.")] = "local",
    model: Annotated[str | None, typer.Option(
        help="Local: a known model name (`lares models list`) or a GGUF path; openai: the model name.")] = None,
    base_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 (key from OPENAI_API_KEY).")] = None,
    replay_from: Annotated[Path | None, typer.Option(
        help="With --llm replay: the run whose recorded LLM calls answer this one.")] = None,
    persona: Annotated[str, typer.Option(
        help="Prompt persona name (`lares personas list`) or a persona file.")] = "neutral",
    population: Annotated[int | None, typer.Option(help="K reward candidates (one learner each).")] = None,
    elites: Annotated[int | None, typer.Option(
        help="E candidates kept at each reward update (1 to K; the best one's learner is inherited).")] = None,
    budget: Annotated[int | None, typer.Option(help="Env steps to train (warm-up excluded).")] = None,
    reward_period: Annotated[int | None, typer.Option(help="Env steps between reward-population updates.")] = None,
    learner: Annotated[str | None, typer.Option(
        help="Policy learner: sac, crossq or es (default: the preset's).")] = None,
    backend: Annotated[str, typer.Option(help="Execution backend: local or ray (ray: --learner es only).")] = "local",
    ray_address: Annotated[str | None, typer.Option(
        help="Ray cluster address (with --backend ray); default: local Ray.")] = None,
    selection: Annotated[str, typer.Option(
        help="Reward-population selection: truncation (LaRes), tournament (--learner es only) or pareto "
             "(non-dominated over fitness, smooth actions, simple rewards).")] = "truncation",
    complexity_lambda: Annotated[float | None, typer.Option(
        help="Fitness = graded value - this x reward complexity (default 0.001).")] = None,
    setting: Annotated[str, typer.Option(
        help="scratch (all rewards proposed) or init (the task's human reward seeds the population).")] = "scratch",
    rewards: Annotated[Path | None, typer.Option(help="JSON file of starting reward candidates.")] = None,
    obs_norm: Annotated[bool | None, typer.Option(
        "--obs-norm/--no-obs-norm", help="Running observation normalisation (sac, crossq).")] = None,
    critic_layer_norm: Annotated[bool | None, typer.Option(
        "--critic-layer-norm/--no-critic-layer-norm", help="LayerNorm in SAC's critics.")] = None,
    lr: Annotated[float | None, typer.Option(
        help="Adam learning rate of the sac or crossq learner (default: the preset's, else the learner's).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    run_dir: Annotated[Path, typer.Option(help="Folder that receives the run folder.")] = RUNS_DIR,
    preset: Annotated[str, typer.Option(
        help="demo (minutes on a laptop) or paper (the LaRes reference settings).")] = "demo",
    no_retrieval: Annotated[bool, typer.Option("--no-retrieval", help="Do not retrieve past reward cases.")] = False,
    max_llm_tokens: Annotated[int | None, typer.Option(help="Token budget for all LLM calls of the run.")] = None,
    max_minutes: Annotated[float | None, typer.Option(help="Stop (resumably) after this many minutes.")] = None,
    report: Annotated[bool, typer.Option(help="Write the HTML report at the end.")] = True,
    allow_fallback: Annotated[bool, typer.Option(
        help="Exit 0 even when no LLM candidate was accepted (every reward the built-in fallback).")] = False,
    sync_llm: Annotated[bool, typer.Option(
        "--sync-llm", help="Learners wait for each reward round's LLM calls, as the LaRes reference (default: the "
        "round runs in the background while they train; ES always waits).")] = False,
    candidates_per_slot: Annotated[float | None, typer.Option(
        help="LLM candidates asked per free slot; the offline pre-screen keeps the best (default 2).")] = None,
    numeric_children: Annotated[int | None, typer.Option(
        help="Numeric children of the elites (constants perturbed) per proposal pass (default 2).")] = None,
    analysis: Annotated[str, typer.Option(
        help="facts: analyse and critique state computed facts and defects, no LLM call; llm: the model words "
             "them, checked against the facts.")] = "facts",
    task_examples: Annotated[str, typer.Option(
        help="own: the system prompt shows two example answers for this task (the local model tends to copy the "
             "first one's shape); other: only an example for a different task.")] = "own",
    personas: Annotated[str | None, typer.Option(
        help="Critic ensemble: persona names or files separated by commas; defects are merged by vote.")] = None,
    reward_normalisation: Annotated[str, typer.Option(
        help="affine: LaRes' match of a new reward to the best elite's scale; sigmoid or tanh: squash the reward "
             "standardised on the buffer first (for wildly varying rewards; --learner sac or crossq).")] = "affine",
    learners_per_reward: Annotated[int, typer.Option(
        help="Learners (distinct seeds) per reward candidate, all on its buffer column; a candidate's fitness is "
             "their mean (1: LaRes; --learner sac or crossq). Total learners = --population x this.")] = 1,
) -> None:
    """Search reward functions with an LLM while a population of policies learns from them (LaRes).

    With no options: reach-v3, the bundled local model, a small population, done in under 10 minutes on 2 cores.
    """
    from lares_agent.search.runner import check_start, start_run

    cfg = preset_config(
        preset,
        task=task,
        llm_backend=llm,
        llm_model=model,
        base_url=base_url,
        replay_from=str(replay_from) if replay_from else None,
        persona=persona,
        population=population,
        elites=elites,
        budget=budget,
        reward_period=reward_period,
        learner=learner,
        backend=backend,
        ray_address=ray_address,
        setting=setting,
        selection=selection,
        complexity_lambda=complexity_lambda,
        rewards_file=str(rewards) if rewards else None,
        obs_norm=obs_norm,
        critic_layer_norm=critic_layer_norm,
        lr=lr,
        seed=seed,
        retrieval=not no_retrieval,
        max_llm_tokens=max_llm_tokens,
        max_minutes=max_minutes,
        sync_llm=sync_llm or None,
        candidates_per_slot=candidates_per_slot,
        numeric_children=numeric_children,
        analysis=analysis,
        task_examples=task_examples,
        personas=tuple(p.strip() for p in personas.split(",")) if personas is not None else None,
        reward_normalisation=reward_normalisation,
        learners_per_reward=learners_per_reward,
    )
    check_start(cfg)  # one error line before the progress bar appears
    from lares_agent.runs import RunLayout

    RunLayout.prepare_base(run_dir)
    with _progress(cfg.budget) as update:
        outcome = start_run(cfg, run_dir, progress=update, notify=_notify)
    _finish(outcome, report, allow_fallback)


def resume_command(
    run: Annotated[Path, typer.Argument(help="The run folder to continue.")],
    max_minutes: Annotated[float | None, typer.Option(
        help="Stop again (resumably) after this many minutes.")] = None,
    report: Annotated[bool, typer.Option(help="Write the HTML report at the end.")] = True,
    allow_fallback: Annotated[bool, typer.Option(
        help="Exit 0 even when no LLM candidate was accepted (every reward the built-in fallback).")] = False,
) -> None:
    """Continue a stopped or killed run from its newest checkpoint and graph state."""
    from lares_agent.runs import RunLayout
    from lares_agent.search.runner import finished_outcome, read_config, resume_run
    from lares_agent.search.start_checks import check_llm

    layout = RunLayout.open(run)
    cfg = read_config(layout)  # refuses a folder that is not a lares run, before anything is written
    done = finished_outcome(layout)
    if done is not None:  # its true summary; nothing appended
        _finish(done, report=False)
        return
    if cfg.setting != "baseline":
        check_llm(cfg)  # one error line before the progress bar appears
    with _progress(cfg.budget) as update:
        outcome = resume_run(run, progress=update, extra_minutes=max_minutes, notify=_notify)
    _finish(outcome, report, allow_fallback)


def baseline_command(
    task: Task = "reach-v3",
    budget: Annotated[int | None, typer.Option(help="Env steps to train.")] = None,
    learner: Annotated[str | None, typer.Option(
        help="Policy learner: sac, crossq or es (default: the preset's).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    run_dir: Annotated[Path, typer.Option(help="Folder that receives the run folder.")] = RUNS_DIR,
    preset: Annotated[str, typer.Option(help="demo or paper (network sizes, warm-up, evaluation).")] = "demo",
    report: Annotated[bool, typer.Option(help="Write the HTML report at the end.")] = True,
    reward: Annotated[str, typer.Option(
        help="human (the task's own reward) or success (its success indicator alone: the sparse baseline).")] = "human",
) -> None:
    """The learner alone on the task's own (human) reward with the same engine: the comparison for
    `report --compare`."""
    from lares_agent.search.runner import check_start, start_run

    cfg = preset_config(preset, task=task, budget=budget, learner=learner, seed=seed, setting="baseline",
                        population=1, elites=1, baseline_reward=reward)
    check_start(cfg)
    from lares_agent.runs import RunLayout

    RunLayout.prepare_base(run_dir)
    with _progress(cfg.budget) as update:
        outcome = start_run(cfg, run_dir, progress=update)
    _finish(outcome, report)
