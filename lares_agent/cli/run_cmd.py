"""`lares run` and `lares resume`: the main job (`lares baseline` is in cli/baseline_cmd.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lares_agent.cli.task_option import RunTask
from lares_agent.errors import ConfigError
from lares_agent.search.presets import is_tuple_field, parse_field, preset_config

if TYPE_CHECKING:
    from lares_agent.search.config import SearchConfig
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
    only_fallbacks = outcome.llm is not None and outcome.llm.only_fallbacks
    if outcome.already_finished:
        typer.echo(f"run already finished: {outcome.env_steps:,} env steps, best success {outcome.best_success:.0%} "
                   "(nothing to resume; nothing was written)")
        if outcome.llm is not None and only_fallbacks:
            typer.echo(f"warning: {outcome.llm.sentence()}")
        typer.echo(f"results: {outcome.run.root}")
        _fallback_exit(only_fallbacks and not allow_fallback, finished=True)
        return
    if outcome.finished:
        state = "finished"
    elif outcome.stopped_by and outcome.abandoned_round is not None:
        state = (f"stopped by {outcome.stopped_by}: reward round {outcome.abandoned_round} given up, no checkpoint "
                 "after it (`lares resume` redoes the round)")
    elif outcome.stopped_by:
        state = f"stopped by {outcome.stopped_by} after the current step, checkpoint written"
    else:
        state = "stopped (resume with `lares resume`)"
    handover = outcome.handover
    winner = handover.winner if handover is not None else None
    success = (f"success {_percent(winner.success)} on {handover.episodes} fresh episodes (handed over)"
               if handover is not None and winner is not None
               else f"success {_percent(outcome.ranked_success)} (ranked first)")
    typer.echo(f"run {state}: {outcome.env_steps:,} env steps in {outcome.wall_s / 60:.1f} min, {success}, "
               f"best {outcome.best_success:.0%}")
    if handover is not None:  # each candidate's replayed success and which won (engine/loop/handover.py)
        typer.echo(f"hand-over {handover.sentence()}")
    if outcome.llm is not None:
        typer.echo(outcome.wait_sentence())
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
    _fallback_exit(only_fallbacks and not allow_fallback, outcome.finished)


def _fallback_exit(refuse: bool, finished: bool) -> None:
    """Exit 3 for a run whose every reward is a fallback: `lares run` and `lares resume` alike, the latter also
    for a run that had already finished."""
    if refuse:
        then = "run again" if finished else "`lares resume` the run"
        typer.echo(f"exit status {FALLBACK_EXIT}: the LLM delivered no reward; fix the endpoint or model and {then} "
                   "(or pass --allow-fallback to accept fallback rewards)")
        raise typer.Exit(FALLBACK_EXIT)


# `lares run`'s options are `SearchConfig`'s fields, by the same name (`--reward-period` is `reward_period`);
# tests/test_cli_options.py holds the two lists in step. The options that are not fields:
NOT_FIELDS = ("run_dir", "report", "allow_fallback", "config", "feedback_file")  # where the run goes, what the CLI
# does, --config, a note to the first round (runs/feedback.py)
# The earlier names of three options, still accepted (scripts, tests and examples use them) but hidden from --help.
OLD_NAMES = {"llm": "llm_backend", "model": "llm_model", "rewards": "rewards_file"}
MORE = "More settings (default: the preset's)"  # the --help panel of the options a first run leaves alone


def run_command(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(
        help="A TOML, YAML or JSON file of these options by name (reward_period = 2000), e.g. a run's own "
             "config.json; an option given here overrides the file.")] = None,
    task: Task = "reach-v3",
    llm_backend: Annotated[str | None, typer.Option(
        help="LLM backend: local (GGUF via llama.cpp, the default), openai (any OpenAI-compatible server) or "
             "replay.")] = None,
    llm_model: Annotated[str | None, typer.Option(
        help="Local: a known model name (`lares models list`) or a GGUF path; openai: the model name.")] = None,
    base_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 (key from OPENAI_API_KEY).")] = None,
    replay_from: Annotated[Path | None, typer.Option(
        help="With --llm-backend replay: the run whose recorded LLM calls answer this one.")] = None,
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
        help="Complexity penalty, this x reward complexity: > 0 lets the simpler reward win an exact tie of fitness "
             "and tie-break, 0 ranks without complexity (the reference's); default 0.001.")] = None,
    fitness: Annotated[str, typer.Option(
        help="What ranks the rewards before any policy succeeds: success-then-return (the task's own reward per "
             "episode, as the LaRes reference), success-then-progress (the share of the start distance closed) or "
             "auto (the first where the task has its own reward, else the second).")] = "auto",
    inherit: Annotated[str, typer.Option(
        help="When a replaced reward's learner starts from the best learner, pulled toward it: on-success (only "
             "once that learner has succeeded; before, it keeps its own weights) or always (the LaRes "
             "reference).")] = "on-success",
    setting: Annotated[str, typer.Option(
        help="init (refine the task's own reward and keep a learner on it, as the paper's \"with init\"), scratch "
             "(every reward written from the task description) or auto (init where the task has its own reward, "
             "else scratch).")] = "auto",
    rewards_file: Annotated[Path | None, typer.Option(help="JSON file of starting reward candidates.")] = None,
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
    retrieval: Annotated[bool | None, typer.Option(
        "--retrieval/--no-retrieval", help="Retrieve past reward cases for the proposer (default: on).")] = None,
    max_llm_tokens: Annotated[int | None, typer.Option(help="Token budget for all LLM calls of the run.")] = None,
    llm_timeout: Annotated[float | None, typer.Option(
        help="Seconds one LLM attempt may take (the local model: of generation, from its first token); default: "
             "120 for the local model, 60 for a server. A slow or busy CPU needs more.")] = None,
    llm_context: Annotated[int | None, typer.Option(
        help="Tokens a prompt plus its answer may take; prompts are trimmed to fit. Default: the local model's "
             "4096, 2048 for a server (llama.cpp's default); give the server's own, e.g. 8192 for "
             "`python -m llama_cpp.server --n_ctx 8192`.")] = None,
    max_minutes: Annotated[float | None, typer.Option(help="Stop (resumably) after this many minutes.")] = None,
    report: Annotated[bool, typer.Option(help="Write the HTML report at the end.")] = True,
    allow_fallback: Annotated[bool, typer.Option(
        help="Exit 0 even when no LLM candidate was accepted (every reward the built-in fallback).")] = False,
    feedback_file: Annotated[Path | None, typer.Option(
        help="A note to the first reward round, as `lares feedback RUN \"text\"` gives one to a later round: it "
             "reaches the round's critique as a defect of its own (one line, at most 1000 characters).")] = None,
    sync_llm: Annotated[bool | None, typer.Option(
        "--sync-llm/--no-sync-llm", help="Learners wait for each reward round's LLM calls, as the LaRes reference "
        "(default: the round runs in the background while they train; ES always waits).")] = None,
    candidates_per_slot: Annotated[float | None, typer.Option(
        help="LLM candidates asked per free slot; with the numeric children, the best by --screen's score fill the "
        "slots (default 1).")] = None,
    screen: Annotated[str | None, typer.Option(
        help="Which valid candidates fill the free slots: verifier (default: the best by how their returns order "
             "the last update's evaluation episodes; round 0 keeps order); order (the first ones, as the reference); "
             "proxy (the best by the offline pre-screen on single transitions). Both scores are logged either way; "
             "over real runs the verifier's order of a round's candidates predicted their later fitness, the "
             "proxy's did not (docs/RESULTS.md).")] = None,
    numeric_children: Annotated[int | None, typer.Option(
        help="Numeric children of the elites (constants perturbed) per proposal pass (default 2).")] = None,
    analysis: Annotated[str, typer.Option(
        help="facts: analyse and critique state computed facts and defects, no LLM call; llm: the model words "
             "them, checked against the facts.")] = "facts",
    task_examples: Annotated[str, typer.Option(
        help="none: the system prompt shows the reward language's building blocks and no example answer (the "
             "reference shows none); other: also an example answer for a different task; own: also two for this "
             "task. The local model copies an example it is shown.")] = "none",
    designer_features: Annotated[bool | None, typer.Option(
        "--designer-features/--no-designer-features", help="From scratch, also offer the LLM the features made "
        "to write the task's own reward (start distances, the designer's weighted errors, finger-pad gaps; "
        "docs/scratch-features.md). Default off: every task's scratch setting holds its generic features only. "
        "The init setting always offers them.")] = None,
    shaping: Annotated[str, typer.Option(
        help="additive: the LLM writes the reward (LaRes); potential: it writes a potential Phi of the state (higher "
             "closer to solving the task) and the learners train on the task's success indicator (with init: its "
             "own reward) plus gamma*Phi(s') - Phi(s), which leaves the best policy unchanged (Ng, Harada and "
             "Russell 1999; --learner sac or crossq).")] = "additive",
    personas: Annotated[str | None, typer.Option(
        help="Critic ensemble: persona names or files separated by commas; defects are merged by vote.")] = None,
    reward_normalisation: Annotated[str, typer.Option(
        help="affine: LaRes' match of a new reward to the best elite's scale; sigmoid or tanh: squash the reward "
             "standardised on the buffer first (for wildly varying rewards; --learner sac or crossq).")] = "affine",
    reward_gain: Annotated[float | None, typer.Option(
        help="Scale each starting reward the LLM wrote (or --reward-from/--reward-file) on the warm-up buffer so "
             "that it pays this much more at the goal than there (docs/RESULTS.md, \"A reward's scale\", measures "
             "the tasks' own); later rewards follow the best one's scale. Default: as written (LaRes).")] = None,
    learners_per_reward: Annotated[int, typer.Option(
        help="Learners (distinct seeds) per reward candidate, all on its buffer column; a candidate's fitness is "
             "their mean (1: LaRes; --learner sac or crossq). Total learners = --population x this.")] = 1,
    tensorboard: Annotated[bool | None, typer.Option(
        "--tensorboard/--no-tensorboard", help="Also write TensorBoard scalars into RUN/tensorboard/ (success, "
        "returns, losses, fitness, LLM tokens): `tensorboard --logdir RUN/tensorboard`.")] = None,
    device: Annotated[str, typer.Option(
        help="Where the sac or crossq learners compute: cpu, cuda (refused where torch sees no GPU) or auto (cuda "
             "where there is one). Checkpoints and policy files load on either.")] = "cpu",
    warmup_steps: Annotated[int | None, typer.Option(
        help="Random-action env steps stored before learning (not counted in --budget).", rich_help_panel=MORE)] = None,
    eval_every: Annotated[int | None, typer.Option(
        help="Env steps between evaluations of every learner.", rich_help_panel=MORE)] = None,
    eval_episodes: Annotated[int | None, typer.Option(
        help="Episodes per learner at each evaluation and reward update.", rich_help_panel=MORE)] = None,
    eval_at_updates: Annotated[bool | None, typer.Option(
        "--eval-at-updates/--no-eval-at-updates",
        help="--no-eval-at-updates: leave out a periodic evaluation where a reward update evaluates the same "
             "learners at the same step (its row is the curves' point there; later evaluations play other "
             "seeds).", rich_help_panel=MORE)] = None,
    handover_episodes: Annotated[int | None, typer.Option(
        help="Fresh episodes on which the top learners by fitness are replayed before a policy is handed over "
             "(each round's and the final one); the best there is handed over. 0: the one ranked first, as the "
             "reference (default 20).", rich_help_panel=MORE)] = None,
    handover_rounds: Annotated[bool | None, typer.Option(
        "--handover-rounds/--no-handover-rounds",
        help="Choose each round's policy file on the fresh episodes too (default); --no-handover-rounds: only the "
             "final policy, which saves a replay of the top learners at every reward update and changes nothing "
             "the learners do.", rich_help_panel=MORE)] = None,
    checkpoint_every: Annotated[int | None, typer.Option(
        help="Env steps between checkpoints (besides those at reward updates).", rich_help_panel=MORE)] = None,
    horizon: Annotated[int | None, typer.Option(
        help="Episode length in env steps (default: the task's own).", rich_help_panel=MORE)] = None,
    hidden: Annotated[str | None, typer.Option(
        help="Layer widths, e.g. 256x256: SAC's actor and critics, CrossQ's actor.", rich_help_panel=MORE)] = None,
    critic_hidden: Annotated[str | None, typer.Option(
        help="CrossQ's critic widths, e.g. 512x512 (default: CrossQ's own).", rich_help_panel=MORE)] = None,
    batch_size: Annotated[int | None, typer.Option(
        help="Minibatch size of the sac or crossq learner.", rich_help_panel=MORE)] = None,
    utd: Annotated[float | None, typer.Option(
        help="Learner updates per env step, per learner.", rich_help_panel=MORE)] = None,
    init_alpha: Annotated[float | None, typer.Option(
        help="Initial entropy temperature of the sac or crossq learner.", rich_help_panel=MORE)] = None,
    anchor_weight: Annotated[float | None, typer.Option(
        help="L2 pull of a replaced learner toward the inherited parameters (0: off).", rich_help_panel=MORE)] = None,
    ts_window: Annotated[int | None, typer.Option(
        help="Thompson sampling window: outcomes remembered per learner.", rich_help_panel=MORE)] = None,
    es_population: Annotated[int | None, typer.Option(
        help="ES perturbations per generation (--learner es).", rich_help_panel=MORE)] = None,
    tournament_size: Annotated[int | None, typer.Option(
        help="Candidates per tournament (--selection tournament).", rich_help_panel=MORE)] = None,
    torch_threads: Annotated[int | None, typer.Option(
        help="Torch threads (0: torch's default).", rich_help_panel=MORE)] = None,
    cores: Annotated[int | None, typer.Option(
        help="Cores the run may use (0: every core it may run on): round 0's local model uses all of them, later "
             "rounds those torch leaves.", rich_help_panel=MORE)] = None,
    temperature: Annotated[float | None, typer.Option(
        help="LLM sampling temperature.", rich_help_panel=MORE)] = None,
    ablations: Annotated[str | None, typer.Option(
        help="Parts of LaRes switched off, comma-separated: no-relabel, no-thompson, no-scaling, no-constraint, "
             "no-reflection, no-retrieval, no-llm (numeric children of the elites only), random-edit (structural "
             "edits made at random, constants tuned), critique-edit (the critique's computed edits made as "
             "computed); the last three need no LLM backend.",
        rich_help_panel=MORE)] = None,
    llm: Annotated[str | None, typer.Option(hidden=True)] = None,  # OLD_NAMES
    model: Annotated[str | None, typer.Option(hidden=True)] = None,
    rewards: Annotated[Path | None, typer.Option(hidden=True)] = None,
) -> None:
    """Search reward functions with an LLM while a population of policies learns from them (LaRes).

    With no options: reach-v3, the bundled local model, a small population, done in under 10 minutes on 2 cores.
    """
    from lares_agent.search.runner import check_start, start_run

    cfg, params, said = _run_config(ctx, config)
    note = _feedback_note(cfg, feedback_file)
    check_start(cfg)  # one error line before the progress bar appears
    for line in said:
        typer.echo(line, err=True)
    from lares_agent.runs import RunLayout

    run_dir = Path(str(params["run_dir"]))
    RunLayout.prepare_base(run_dir)
    with _progress(cfg.budget) as update:
        outcome = start_run(cfg, run_dir, progress=update, notify=_notify, feedback=note)
    _finish(outcome, bool(params["report"]), bool(params["allow_fallback"]))


def _feedback_note(cfg: SearchConfig, path: Path | None) -> str | None:
    """`--feedback-file`'s note, read and checked before a run folder exists; refused where no LLM reads it."""
    if path is None:
        return None
    from lares_agent.runs.feedback import read_note_file
    from lares_agent.search.live_run import asks_llm

    if not asks_llm(cfg):
        raise ConfigError("--feedback-file gives the LLM a note, and this run asks no LLM (a learner alone, or "
                          "--ablations no-llm, random-edit or critique-edit)")
    return read_note_file(path)


def _run_config(ctx: typer.Context, config: Path | None) -> tuple[SearchConfig, dict[str, object], list[str]]:
    """The run's config from the command line over `--config FILE` over the preset, its options by name, and
    what to say before it starts (values dropped, parts of the search skipped); a silent option is refused."""
    from lares_agent.cli.config_file import from_command_line, merge_config_file, shadowed_preset
    from lares_agent.cli.task_option import allow_typed_task
    from lares_agent.search.option_checks import (
        option_warnings,
        paper_differences,
        refuse_silent_options,
        setting_notes,
    )

    typed = from_command_line(ctx, OLD_NAMES)
    params, from_file = merge_config_file(ctx, config, OLD_NAMES) if config else (dict(ctx.params), set())
    if "task" in typed:  # a task module is imported only where typed now, never from --config (cli/task_option.py)
        allow_typed_task(str(params["task"]))
    cfg = preset_config(str(params["preset"]), run_overrides(params))
    cfg, notes = refuse_silent_options(cfg, typed, from_file, f"--config {config}")
    shadowed = shadowed_preset(cfg.preset, typed, from_file, f"--config {config}")
    said = [f"note: {line}" for line in [*notes, *([shadowed] if shadowed else []), *setting_notes(cfg)]]
    said += [f"warning: {line}" for line in option_warnings(cfg)]
    differences = paper_differences(cfg)
    if differences:
        said.append(f"note: --preset paper differs from the reference in {len(differences)} setting(s); the flags "
                    "make each the reference's:")
        said += [f"  {line}" for line in differences]
    return cfg, params, said


def run_overrides(params: Mapping[str, object]) -> dict[str, object]:
    """`lares run`'s option values by field name, for `preset_config`: an option is its field by name, a hidden
    old name its new one's, paths become text and text the field's type (`--hidden 256x256`)."""
    out: dict[str, object] = {}
    for name, value in params.items():
        field = OLD_NAMES.get(name, name)
        if name in NOT_FIELDS or name == "preset" or value is None:
            continue
        if name in OLD_NAMES and params[field] is not None:
            raise ConfigError(f"--{name} is the old name of --{field.replace('_', '-')}: give one of them")
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, str) and is_tuple_field(field):
            value = parse_field(field, value, f"--{field.replace('_', '-')} {value}")
        out[field] = value
    return out


def resume_command(
    run: Annotated[Path, typer.Argument(help="The run folder to continue.")],
    max_minutes: Annotated[float | None, typer.Option(
        help="Stop again (resumably) after this many minutes.")] = None,
    report: Annotated[bool, typer.Option(help="Write the HTML report at the end.")] = True,
    allow_fallback: Annotated[bool, typer.Option(
        help="Exit 0 even when no LLM candidate was accepted (every reward the built-in fallback).")] = False,
    task: RunTask = None,
) -> None:
    """Continue a stopped or killed run from its newest checkpoint and graph state."""
    from lares_agent.cli.task_option import refuse_untrusted_task
    from lares_agent.runs import RunLayout
    from lares_agent.runs.lock import hold_run
    from lares_agent.search.live_run import asks_llm
    from lares_agent.search.runner import finished_outcome, read_config, resume_run
    from lares_agent.search.start_checks import check_llm

    layout = RunLayout.open(run)
    cfg = read_config(layout)  # refuses a folder that is not a lares run, before anything is written
    refuse_untrusted_task(run, task, "resume it")  # a task module only where named now (cli/task_option.py)
    with hold_run(layout.root):  # a second writer is refused before the progress bar appears (runs/lock.py)
        done = finished_outcome(layout)
        if done is not None:  # its true summary; nothing appended
            _finish(done, report=False, allow_fallback=allow_fallback)
            return
        if asks_llm(cfg):
            check_llm(cfg)  # one error line before the progress bar appears
        with _progress(cfg.budget) as update:
            outcome = resume_run(run, progress=update, extra_minutes=max_minutes, notify=_notify)
        _finish(outcome, report, allow_fallback)
