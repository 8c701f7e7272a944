"""Start, resume and finish a reward-search run: the outer loop of docs/DESIGN.md §1 over the engine and the graph.

`start_run` writes `config.json` first, so that whatever happens next the folder is a run that `resume_run`
can continue: a run killed before its first engine checkpoint starts the engine again (the graph's round 0
is stored in `trace.sqlite`, so accepted candidates are not asked for twice); a later kill restores the
newest atomic checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lares_agent.engine import get_task
from lares_agent.errors import Cancelled, ConfigError, LaresError
from lares_agent.runs import RunLayout, RunLog, llm_health, read_marked_config, recorded_outcome
from lares_agent.runs.feedback import FeedbackNote
from lares_agent.runs.lock import hold_run
from lares_agent.runs.oserrors import run_file_error
from lares_agent.search.config import SearchConfig, missing_keys, resolved_for_task
from lares_agent.search.config_checks import scratch_problem
from lares_agent.search.found_reward import found_rewards
from lares_agent.search.given_rewards import load_rewards_file
from lares_agent.search.live_run import Search, asks_llm, uses_retrieval
from lares_agent.search.outcome import NotifyFn, ProgressFn, RunOutcome
from lares_agent.search.resume_checks import prepare_resume
from lares_agent.search.signals import graceful_signals
from lares_agent.search.start_checks import (
    check_case_store,
    check_constants_to_search,
    check_device,
    check_llm,
    device_for_resume,
)


def read_config(run: RunLayout) -> SearchConfig:
    """A run's `config.json`; a damaged one, or one without the run format marker, is a one-line error."""
    data = read_marked_config(run)  # refuses another program's config.json before anything is written
    missing = missing_keys(data)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise LaresError(f"{run.config} is not a whole run configuration: it lacks {shown}; nothing was written "
                         "(restore the file `lares run` wrote)")
    try:
        return SearchConfig.from_json(data)
    except ConfigError as exc:
        raise ConfigError(f"{run.config}: {exc}") from None
    except (OSError, ValueError, TypeError) as exc:
        raise LaresError(f"{run.config} is not a readable run configuration ({exc})") from None


def check_start(cfg: SearchConfig) -> None:
    """Everything about a new run's input that can be wrong, checked before a folder or a progress bar exists:
    task, fitness rule, device, persona, `--rewards` file and the LLM (where the run asks it: `asks_llm`)."""
    task = get_task(cfg.task)  # the option ranges were checked when `cfg` was made (SearchConfig.__post_init__)
    check_device(cfg)
    # init and success-then-return need the task's own reward; auto is init only where it is an expression
    cfg = resolved_for_task(cfg, task.has_human_reward, task.human_components is not None)
    if cfg.setting == "baseline":
        found_rewards(cfg, task)  # a found reward passes the one validator
        return
    for ablation in (a for a in cfg.ablations if scratch_problem((a,))):  # a control that starts from its constants
        check_constants_to_search(task, ablation)
    from lares_agent.search.personas import resolve_persona

    resolve_persona(cfg.persona)
    for name in cfg.personas:
        resolve_persona(name)
    if uses_retrieval(cfg):
        check_case_store()
    if cfg.rewards_file:
        load_rewards_file(Path(cfg.rewards_file), task, state_only=cfg.shaping == "potential")
    if asks_llm(cfg):  # a control without the LLM needs no backend
        check_llm(cfg)


def _stopping(notify: NotifyFn | None) -> Callable[[int], None]:
    def say(signum: int) -> None:
        if notify is not None:
            notify("stopping after the current step (a checkpoint is written); send the signal again to stop at once")
    return say


def start_run(cfg: SearchConfig, runs_base: Path, run_id: str | None = None,
              progress: ProgressFn | None = None, notify: NotifyFn | None = None,
              feedback: str | None = None) -> RunOutcome:
    """A new run: folder, config, initial population, training to the budget (or a signal, `signals.py`).
    `feedback`: a user's note to the first reward round (`lares run --feedback-file`, runs/feedback.py)."""
    check_start(cfg)  # fail on bad input before creating anything
    task = get_task(cfg.task)
    cfg = resolved_for_task(cfg, task.has_human_reward, task.human_components is not None)  # config.json: not "auto"
    run = RunLayout.create(runs_base, task.name, run_id)  # not a module:function reference
    with hold_run(run.root):  # one writer per run folder (runs/lock.py)
        return _start_in(cfg, run, progress, notify, feedback)


def _start_in(cfg: SearchConfig, run: RunLayout, progress: ProgressFn | None, notify: NotifyFn | None,
              feedback: str | None = None) -> RunOutcome:
    try:
        cfg.save(run.config)
    except OSError as exc:
        if not any(run.root.iterdir()):
            run.root.rmdir()  # nothing half-made stays behind
        raise run_file_error("write", run.config, exc) from None
    if feedback is not None:
        try:
            RunLog(run).feedback.append(FeedbackNote.new(feedback, [], source="file"))
        except OSError as exc:
            raise run_file_error("write", run.feedback, exc) from None
    with graceful_signals(_stopping(notify)) as stop:
        search = Search(cfg, run, stop)
        search.notify = notify
        try:
            try:
                engine = search.new_engine()
            except Cancelled:  # a stop during round 0
                return search.abandoned_round_0()
            try:
                return search.drive(engine, progress)
            finally:
                engine.close()
        finally:
            search.close()


def finished_outcome(run: RunLayout) -> RunOutcome | None:
    """The recorded outcome of a run that already finished (None when it did not)."""
    done = recorded_outcome(RunLog(run))
    if not done.finished:
        return None
    return RunOutcome(run, done.env_steps, True, done.best_success, done.wall_s,
                      llm=llm_health(RunLog(run)) if asks_llm(read_config(run)) else None, already_finished=True)


def resume_run(path: Path, progress: ProgressFn | None = None, extra_minutes: float | None = None,
               notify: NotifyFn | None = None) -> RunOutcome:
    """Continue a stopped or killed run from its newest loadable checkpoint (or from the start if it has none).

    Nothing is written into a folder that is not a lares run (`read_config`) or into a finished run (its
    recorded outcome comes back); what the resume mends first is said through `notify` (`resume_checks.py`).
    """
    run = RunLayout.open(path)
    cfg = read_config(run)
    with hold_run(run.root):  # refuses a second writer before anything is mended (runs/lock.py)
        return _resume_in(run, cfg, progress, extra_minutes, notify)


def _resume_in(run: RunLayout, cfg: SearchConfig, progress: ProgressFn | None, extra_minutes: float | None,
               notify: NotifyFn | None) -> RunOutcome:
    done = finished_outcome(run)
    if done is not None:
        return done
    if extra_minutes is not None:
        cfg = SearchConfig.from_json({**cfg.to_json(), "max_minutes": extra_minutes})
    if asks_llm(cfg):
        check_llm(cfg)
    cfg = device_for_resume(cfg, notify or (lambda line: None))
    plan = prepare_resume(run, notify or (lambda line: None))
    with graceful_signals(_stopping(notify)) as stop:
        search = Search(cfg, run, stop)
        search.resume = plan
        search.notify = notify
        try:
            if plan.checkpoint is not None:
                engine = search.restored_engine(plan.checkpoint)
            else:  # `resumed` first: it ends the killed session's time before this one's initial proposals
                search.log.event("resumed", env_steps=0, round=0, **plan.summary())
                try:
                    engine = search.new_engine()
                except Cancelled:  # a stop during round 0, again
                    return search.abandoned_round_0()
            engine.install_steps = dict(plan.install_steps)  # rounds replayed from the trace install where they did
            try:
                return search.drive(engine, progress)
            finally:
                engine.close()
        finally:
            search.close()
