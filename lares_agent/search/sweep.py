"""`lares sweep` on Ray Tune: one Tune trial per (task, method, seed), each an ordinary run folder.

Why Tune rather than a process pool (the old experiments/sample_efficiency.py): Tune places trials on the cores
(or on a cluster with `--ray-address`), records which trials finished, and restores an interrupted experiment
(`Tuner.restore`). The run folder stays the record: a trial starts its run with `start_run`, or continues it with
`resume_run` when the folder exists, so a killed trial loses at most the steps since its last engine checkpoint
and never repeats a finished evaluation; a finished trial is never run again. Evaluations reach Tune as they are
written (one `tune.report` per metrics.jsonl row).

Ray is an optional extra (`pip install 'lares-agent[ray]'`); nothing here imports it at module import.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lares_agent.errors import ConfigError, LaresError
from lares_agent.runs import RunLayout
from lares_agent.runs.jsonl import JsonlTail
from lares_agent.runs.sweep_layout import SweepLayout
from lares_agent.search.sweep_spec import SweepSpec, Trial

__all__ = ["RAY_INSTALL", "SweepOutcome", "TrialUnfinished", "ray_missing", "resume_sweep", "run_trial",
           "start_sweep"]

RAY_INSTALL = "lares sweep needs Ray Tune: pip install 'lares-agent[ray]' (ray[tune]==2.60.0)"


class TrialUnfinished(LaresError):
    """A trial's run stopped before its budget (a signal, --max-minutes): Tune marks it errored, and
    `lares sweep --resume` continues it from its run folder."""


@dataclass(frozen=True)
class SweepOutcome:
    """How a sweep (or one sitting of it) ended."""

    layout: SweepLayout
    trials: int
    finished: int
    errored: tuple[str, ...]  # trial ids whose run is not finished


def ray_missing() -> str | None:
    """None when Ray Tune imports, else the one line that says how to install it."""
    try:
        import ray.tune  # noqa: F401
    except ImportError:
        return RAY_INSTALL
    return None


# ----------------------------------------------------------------------------------------------- one trial
def _metric_payload(row: Mapping[str, Any]) -> dict[str, Any]:
    """What Tune gets of a metrics.jsonl row: the success of the ranked-first slot (the policy the run hands
    over), the population best, and the ranked slot's task return."""
    best = row.get("best_slot")
    slots = [s for s in row.get("slots", []) if isinstance(s, Mapping)]
    ranked = next((s for s in slots if s.get("slot") == best), slots[0] if slots else {})
    return {
        "env_steps": int(row.get("env_steps", 0)),
        "timesteps_total": int(row.get("env_steps", 0)),  # Tune's TensorBoard logger plots at this step
        "round": int(row.get("round", 0)),
        "kind": str(row.get("kind", "eval")),
        "success": row.get("success_best_slot", ranked.get("success")),
        "success_max": row.get("success_max"),
        "task_return": ranked.get("task_return"),
        "run_wall_time": row.get("wall_time"),
    }


def _metric_rows(tail: JsonlTail) -> Iterator[dict[str, Any]]:
    """The evaluation and update rows among a metrics tail's new lines."""
    return (row for row in tail.rows() if "env_steps" in row)


def run_trial(config: Mapping[str, Any]) -> None:
    """Tune's trainable: start or continue the trial's run folder, reporting each evaluation row to Tune.

    `config` is the trial's point of the grid (task, method, seed) and the sweep folder; the options come from
    the folder's sweep.json, so a restored experiment runs with what the sweep was started with.
    """
    from ray import tune

    from lares_agent.engine.tasks import allow_task_reference
    from lares_agent.search.runner import finished_outcome, resume_run, start_run

    layout = SweepLayout(Path(config["sweep"]))
    spec = SweepSpec.load(layout.spec)
    trial = Trial(str(config["task"]), config["method"], int(config["seed"]))
    for task in config.get("allow_tasks", ()):  # the references the user typed with --tasks (`_tuner`)
        allow_task_reference(str(task))
    # Retrieval reads the trial's own case store unless --shared-cases (memory/cases.py: LARES_HOME).
    os.environ["LARES_HOME"] = str(layout.case_home(trial.id, spec.shared_cases))
    run = RunLayout(layout.run(trial.id))
    existing = run.config.is_file()
    tail = JsonlTail(run.metrics, skip_existing=existing)  # rows of an earlier sitting reached Tune then

    def report(_status: object = None) -> None:
        for row in _metric_rows(tail):
            tune.report(_metric_payload(row))

    if existing:
        done = finished_outcome(run)
        if done is not None:  # finished before Tune recorded it: hand Tune the last row, run nothing
            rows = list(_metric_rows(JsonlTail(run.metrics)))
            if rows:
                tune.report({**_metric_payload(rows[-1]), "finished": True})
            return
        outcome = resume_run(run.root, progress=report)
    else:
        outcome = start_run(spec.config(trial), layout.runs, run_id=trial.id, progress=report)
    report()
    if not outcome.finished:
        raise TrialUnfinished(f"trial {trial.id} stopped at {outcome.env_steps} env steps; `lares sweep --resume "
                              f"{layout.root}` continues it")


# ----------------------------------------------------------------------------------------------- the sweep
def _trainable(spec: SweepSpec) -> Any:
    from ray import tune

    return tune.with_resources(run_trial, {"cpu": spec.cpus_per_trial})


def _trial_name(trial: Any) -> str:
    cfg = trial.config
    return Trial(str(cfg["task"]), cfg["method"], int(cfg["seed"])).id


def _init_ray(ray_address: str | None, layout: SweepLayout) -> None:
    """A local Ray with one CPU per core this process may use (one trial per core at --cpus-per-trial 1), or
    the cluster at `ray_address`.

    Ray puts the driver's working directory first on its workers' path and makes it their cwd, so a sweep
    started inside another checkout would run that checkout's lares_agent in its trials, not the driver's (the
    code its run folders would then record). Ray starts in the sweep's folder instead; the options' paths are
    absolute by then (`sweep_spec.parse_sets`)."""
    import ray

    os.environ.setdefault("RAY_CHDIR_TO_TRIAL_DIR", "0")  # trials keep the sweep's folder as their cwd
    if ray.is_initialized():
        return
    with contextlib.chdir(layout.root):
        if ray_address:
            ray.init(address=ray_address, include_dashboard=False, log_to_driver=False)
            return
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        # "local": a new instance even where a `ray start` left its address on this machine (Ray would join that
        # cluster, with its CPUs, or fail once it is gone)
        ray.init(address="local", num_cpus=cores, include_dashboard=False, log_to_driver=False)


def _tuner(spec: SweepSpec, layout: SweepLayout) -> Any:
    from ray import tune
    from ray.tune.logger import TBXLoggerCallback

    from lares_agent.engine.tasks import default_registry
    from lares_agent.engine.tasks.registry import is_reference

    grid = {
        "task": tune.grid_search(list(spec.tasks)),
        "method": tune.grid_search(list(spec.methods)),
        "seed": tune.grid_search(list(spec.seeds)),
        "sweep": str(layout.root),
        # a trial's process imports a task module only where the driver's user typed it (cli/task_option.py)
        "allow_tasks": [t for t in spec.tasks if is_reference(t) and default_registry().allowed(t)],
    }
    return tune.Tuner(
        _trainable(spec),
        param_space=grid,
        tune_config=tune.TuneConfig(trial_name_creator=_trial_name, trial_dirname_creator=_trial_name,
                                    reuse_actors=False),  # a fresh process per trial frees the model and MuJoCo
        run_config=tune.RunConfig(storage_path=str(layout.root), name=layout.tune_name,
                                  failure_config=tune.FailureConfig(max_failures=0), verbose=0,
                                  # each trial's reports as TensorBoard scalars in tune/<trial>/ (named, so that
                                  # TUNE_DISABLE_AUTO_CALLBACK_LOGGERS cannot switch it off)
                                  callbacks=[TBXLoggerCallback()]),  # type: ignore[no-untyped-call]  # Ray's
    )


def _outcome(layout: SweepLayout, spec: SweepSpec) -> SweepOutcome:
    """Read from the run folders (the record), not from Tune's result table."""
    from lares_agent.search.runner import finished_outcome

    trials = spec.trials()
    done = [t.id for t in trials if RunLayout(layout.run(t.id)).config.is_file()
            and finished_outcome(RunLayout(layout.run(t.id))) is not None]
    return SweepOutcome(layout, len(trials), len(done), tuple(t.id for t in trials if t.id not in done))


def start_sweep(spec: SweepSpec, out: Path, ray_address: str | None = None) -> SweepOutcome:
    """A new sweep in `out`: every trial's options checked, then sweep.json, then the trials on Ray Tune."""
    layout = SweepLayout(out.resolve())
    if layout.is_sweep():
        raise ConfigError(f"{out} holds a sweep already; continue it with `lares sweep --resume {out}` or pass "
                          "another --out")
    spec.check()  # before the folder or Ray exists
    try:
        layout.runs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LaresError(f"cannot create the sweep folder {out}: {exc.strerror or exc}") from None
    spec.save(layout.spec)
    _init_ray(ray_address, layout)
    _tuner(spec, layout).fit()
    return _outcome(layout, spec)


# Tune's restore reads every trial's results and warns, one line each, about the trials that have none yet: on a
# sweep killed early that is most of the grid, and nothing is wrong (they start now).
_RESTORE_LOGGER = "ray.tune.analysis.experiment_analysis"


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Only errors from logger ``name`` while the block runs."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def resume_sweep(out: Path, ray_address: str | None = None) -> SweepOutcome:
    """Continue a killed or stopped sweep: Tune's restore runs the trials it had not finished (errored ones
    too: a stopped run raised TrialUnfinished), and each of them continues its run folder."""
    from ray import tune

    layout = SweepLayout.open(out.resolve())
    spec = SweepSpec.load(layout.spec)
    _init_ray(ray_address, layout)
    if tune.Tuner.can_restore(str(layout.tune)):
        with _quiet(_RESTORE_LOGGER):
            tuner = tune.Tuner.restore(str(layout.tune), _trainable(spec), resume_unfinished=True,
                                       resume_errored=True)
    else:  # killed before Tune saved its state: a new experiment, whose trials find their run folders
        tuner = _tuner(spec, layout)
    tuner.fit()
    return _outcome(layout, spec)
