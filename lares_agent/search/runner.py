"""Start, resume and finish a reward-search run: the outer loop of docs/DESIGN.md §1 over the engine and the graph.

`start_run` writes `config.json` first, so that whatever happens next the folder is a run that `resume_run`
can continue: a run killed before its first engine checkpoint starts the engine again (the graph's round 0
is stored in `trace.sqlite`, so accepted candidates are not asked for twice); a later kill restores the
newest atomic checkpoint.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lares_agent.engine import (
    LaResEngine,
    RewardFunction,
    StepInfo,
    get_task,
    make_engine,
    random_feature_sample,
    restore_engine,
)
from lares_agent.errors import Cancelled, ConfigError, LaresError
from lares_agent.runs import (
    FINAL_POLICY,
    RunLayout,
    RunLog,
    llm_health,
    read_marked_config,
    recorded_outcome,
    spent_wall_s,
)
from lares_agent.runs.lock import hold_run
from lares_agent.runs.oserrors import run_file_error
from lares_agent.runs.provenance import source_revision
from lares_agent.runs.tensorboard import TensorBoardMirror
from lares_agent.search.config import (
    SearchConfig,
    engine_config,
    llm_config,
    missing_keys,
    resolved_for_task,
)
from lares_agent.search.cores import initial_llm_threads
from lares_agent.search.found_reward import found_rewards
from lares_agent.search.given_rewards import load_rewards_file, success_reward
from lares_agent.search.outcome import NotifyFn, ProgressFn, RunOutcome, RunStatus
from lares_agent.search.resume_checks import ResumePlan, prepare_resume
from lares_agent.search.signals import StopRequest, graceful_signals
from lares_agent.search.start_checks import check_case_store, check_device, check_llm, device_for_resume
from lares_agent.search.stopping import ROUND_ABANDONED, end_in_round_0

if TYPE_CHECKING:  # imported at run time only where used, so that `lares baseline` never loads the LLM stack
    from langgraph.checkpoint.sqlite import SqliteSaver

    from lares_agent.llm import LLMClient
    from lares_agent.llm.breaker import BreakerTrip
    from lares_agent.memory.cases import CaseStore
    from lares_agent.search.proposer import GraphProposer


def uses_retrieval(cfg: SearchConfig) -> bool:
    """Whether the proposer gets past cases (off with `retrieval=False` or the `no-retrieval` ablation)."""
    return cfg.retrieval and "no-retrieval" not in cfg.ablations


def reflects(cfg: SearchConfig) -> bool:
    """Whether the round graph runs analyse/critique before propose (off with the `no-reflection` ablation)."""
    return "no-reflection" not in cfg.ablations




class Search:
    """One run's live objects: task, engine, graph, LLM. Built by `start_run` / `resume_run`."""

    def __init__(self, cfg: SearchConfig, run: RunLayout, stop: StopRequest | None = None) -> None:
        self.cfg, self.run, self.log = cfg, run, RunLog(run)
        self.started = time.monotonic()  # wall time counts the initial proposals too
        self.stop = stop if stop is not None else StopRequest()
        self.resume: ResumePlan | None = None
        self.notify: NotifyFn | None = None
        self.initial_llm_s = 0.0
        self._earlier_wall_s: float | None = None  # set when this session's run_start is logged
        self.task = get_task(cfg.task)
        if cfg.torch_threads > 0:
            # OpenMP threads wait on each other once another process holds a core (docs/RESULTS.md, "Two process
            # settings: torch threads and freed memory").
            import torch

            torch.set_num_threads(cfg.torch_threads)
        self.proposer: GraphProposer | None = None
        self._trace: SqliteSaver | None = None
        self._cases: CaseStore | None = None
        self.llm: LLMClient | None = None
        if cfg.setting != "baseline":
            self._build_graph()

    def _build_graph(self) -> None:
        # Imported here so that `lares baseline` never loads the LLM stack.
        from lares_agent.graphs.build import build_graph, open_trace
        from lares_agent.graphs.context import GraphLimits, RunContext
        from lares_agent.llm import make_client
        from lares_agent.memory.cases import CaseStore
        from lares_agent.search.personas import resolve_persona
        from lares_agent.search.proposer import GraphProposer

        cfg = self.cfg
        llm_cfg = llm_config(cfg)
        replay = Path(cfg.replay_from) if cfg.replay_from else None  # check_llm already refused a missing one
        self.llm = llm = make_client(llm_cfg, self.run.root, replay_from=replay)
        if cfg.max_minutes:  # `--max-minutes` bounds the time spent waiting for the LLM too
            llm.deadline = self.started + 60 * cfg.max_minutes
        log = self.log

        def on_trip(trip: BreakerTrip, message: str) -> None:
            log.event("llm_breaker", round=trip.round, kind=trip.kind, failures=trip.count, for_run=trip.for_run,
                      reason=message)

        def on_format_step(endpoint: object, refused: str, step: str, error: str) -> None:
            log.event("llm_format_step", endpoint=str(endpoint), refused=refused, next=step, error=error)

        def on_context(line: str) -> None:  # once per cause: a context too small is said on the screen
            log.event("llm_context", message=line)
            if self.notify is not None:
                self.notify(line)

        llm.on_trip, llm.on_format_step, llm.window.on_note = on_trip, on_format_step, on_context
        llm.cancelled = self.stop  # a stop gives up the LLM's calls, and their round, at once (stopping.py)
        self._cases = CaseStore() if uses_retrieval(cfg) else None
        context = RunContext(
            llm=self.llm,
            task=self.task,
            persona=resolve_persona(cfg.persona),
            cases=self._cases,
            run_id=self.run.root.name,
            id_prefix=f"{self.run.root.name[-6:]}-",
            limits=GraphLimits(reflect=reflects(cfg), analysis=cfg.analysis, oversample=cfg.candidates_per_slot,
                               numeric_children=cfg.numeric_children, seed=cfg.seed, task_examples=cfg.task_examples,
                               prescreen=cfg.prescreen),
            critics=tuple(resolve_persona(p) for p in cfg.personas),
            # the init setting refines the task's own reward; from scratch the LLM never sees it
            human_reward=dict(self.task.human_components)
            if cfg.setting == "init" and self.task.human_components else None,
        )
        self._trace = open_trace(self.run.root)
        self.proposer = GraphProposer(build_graph(self._trace), context, self.log, self.task.name)

    def begin(self, env_steps: int, round_: int) -> float:
        """Log this session's `run_start` once, before anything the session does can log an event (the initial
        proposals' `fallback` and `llm_breaker` lines belong after it), and return the wall seconds of the
        earlier sessions, read before this session's line would count in them (`spent_wall_s`)."""
        if self._earlier_wall_s is None:
            self._earlier_wall_s = spent_wall_s(self.log)
            resumed = self.resume.summary() if self.resume is not None else {}
            self.log.event("run_start", env_steps=env_steps, round=round_, source=source_revision(), **resumed)
        return self._earlier_wall_s

    # ------------------------------------------------------------------ engine
    def new_engine(self) -> LaResEngine:
        ecfg = engine_config(self.cfg)
        initial: list[RewardFunction] = []
        if self.cfg.setting != "baseline":
            n = ecfg.num_slots
            given = load_rewards_file(Path(self.cfg.rewards_file), self.task) if self.cfg.rewards_file else []
            sample = random_feature_sample(self.task, max(self.cfg.warmup_steps, 500), self.cfg.seed, self.cfg.horizon)
            self.begin(0, 0)  # a new engine starts at step 0, round 0
            began = time.monotonic()
            if self.proposer is None:
                raise LaresError("a reward search needs its proposer (the graph was not built)")
            burst = (self.llm.threads_while(initial_llm_threads(self.cfg)) if self.llm is not None
                     else contextlib.nullcontext())
            with burst:  # the learners wait for round 0: the local model gets every core
                initial = self.proposer.initial(n, sample, given)
            self.initial_llm_s = time.monotonic() - began
        elif self.cfg.reward_components:  # a found reward trained alone (search/found_reward.py)
            initial = found_rewards(self.cfg, self.task)
        elif self.cfg.baseline_reward == "success":
            initial = [success_reward(self.task)]
        return make_engine(self.task, ecfg, initial, self.proposer, self.run.root)

    def restored_engine(self, checkpoint: Path) -> LaResEngine:
        from lares_agent.rewards import allowed_features, load_reward

        names = allowed_features(self.task)

        def load(data: Mapping[str, Any]) -> RewardFunction:
            return load_reward(data, names)

        # config.json names the learner; a checkpoint of another kind is refused in one line
        return restore_engine(checkpoint, self.task, load, self.proposer, self.run.root, learner=self.cfg.learner,
                              device=self.cfg.device)

    def drive(self, engine: LaResEngine, progress: ProgressFn | None = None) -> RunOutcome:
        """Run the engine to its budget (or `--max-minutes`), checkpoint, and say how it ended."""
        start = self.started
        deadline = start + 60 * self.cfg.max_minutes if self.cfg.max_minutes else None
        best = [recorded_outcome(self.log).best_success]  # a resumed run's earlier evaluations count too
        mirror = TensorBoardMirror(self.run) if self.cfg.tensorboard else None  # catches up with earlier sessions

        def on_iteration(info: StepInfo) -> None:
            best[0] = max(best[0], _best_success(engine))
            if mirror is not None:
                mirror.poll()
            if progress is not None:
                progress(
                    RunStatus(info.env_steps, self.cfg.budget, info.round, best[0],
                              bool(self.proposer and self.proposer.in_flight), time.monotonic() - start,
                              _ranked_success(engine))
                )

        said = [False]

        def stop() -> bool:
            stopping = self.stop() or (deadline is not None and time.monotonic() > deadline)
            if stopping and not self.stop() and not said[0] and engine.update_in_flight and self.notify is not None:
                said[0] = True  # the time limit waits for the round; a signal gives it up (stopping.py)
                self.notify("waiting for the reward round in flight to finish and install its candidates; "
                            "a stop signal gives it up instead (a resume reruns that round from the trace)")
            return stopping

        earlier = self.begin(engine.env_steps, engine.round)  # a resumed run reports its whole wall time
        steps = engine.run(progress=on_iteration, should_stop=stop)
        if engine.abandoned is not None and self.notify is not None:
            self.notify(ROUND_ABANDONED)
        engine.save_checkpoint()  # none after an abandoned round: the resume redoes it from the one before
        engine.save_policy(FINAL_POLICY, every_slot=True)
        finished = engine.done and engine.abandoned is None  # an abandoned last round is still to do
        session = time.monotonic() - start
        wall = earlier + session
        best[0] = max(best[0], _best_success(engine))
        usage = self.llm.usage if self.llm is not None else {}
        health = llm_health(self.log) if self.cfg.setting != "baseline" else None
        extra: dict[str, object] = {"stopped_by": self.stop.name} if self.stop() else {}
        if engine.abandoned is not None:
            extra["abandoned_round"] = engine.abandoned
        if health is not None and health.only_fallbacks:
            extra["only_fallbacks"] = health.sentence()
        waited, llm_s = engine.llm_wait["waited_s"], engine.llm_wait["llm_s"]
        timing = engine.timing
        self.log.event("run_end", env_steps=steps, finished=finished, wall_s=wall, session_wall_s=session,
                       best_success=best[0], llm=usage, llm_wait_s=waited, llm_s=llm_s, **timing,
                       initial_llm_s=self.initial_llm_s, llm_wait_share=waited / session if session > 0 else 0.0,
                       **extra)
        if mirror is not None:
            mirror.close()
        return RunOutcome(self.run, steps, finished, best[0], wall, _ranked_success(engine), self.stop.name or None,
                          self.stop.exit_code if self.stop() else 0, health, llm_wait_s=waited, llm_s=llm_s,
                          initial_llm_s=self.initial_llm_s, session_wall_s=session, abandoned_round=engine.abandoned)

    def abandoned_round_0(self) -> RunOutcome:
        """A stop gave round 0 up (`stopping.py`): the run ends before any engine exists."""
        return end_in_round_0(self.log, self.run, self.stop, self.begin(0, 0), time.monotonic() - self.started,
                              self.notify)

    def close(self) -> None:
        if self._trace is not None:
            self._trace.conn.close()
        if self._cases is not None:
            self._cases.close()


def _best_success(engine: LaResEngine) -> float:
    """Success rate of the best policy at the newest evaluation (0 before the first)."""
    last = engine.last_metrics or {}
    value = last.get("success_max")
    return float(value) if value is not None else 0.0


def _ranked_success(engine: LaResEngine) -> float | None:
    """Success rate of the slot the run ranks first (its best slot) at the newest evaluation."""
    last = engine.last_metrics or {}
    value = last.get("success_best_slot")
    return float(value) if value is not None else None


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
    task, fitness rule, device, persona, `--rewards` file and the LLM."""
    task = get_task(cfg.task)  # the option ranges were checked when `cfg` was made (SearchConfig.__post_init__)
    check_device(cfg)
    cfg = resolved_for_task(cfg, task.has_human_reward)  # init and success-then-return need the task's own reward
    if cfg.setting == "baseline":
        found_rewards(cfg, task)  # a found reward passes the one validator
        return
    from lares_agent.search.personas import resolve_persona

    resolve_persona(cfg.persona)
    for name in cfg.personas:
        resolve_persona(name)
    if uses_retrieval(cfg):
        check_case_store()
    if cfg.rewards_file:
        load_rewards_file(Path(cfg.rewards_file), task)
    check_llm(cfg)


def _stopping(notify: NotifyFn | None) -> Callable[[int], None]:
    def say(signum: int) -> None:
        if notify is not None:
            notify("stopping after the current step (a checkpoint is written); send the signal again to stop at once")
    return say


def start_run(cfg: SearchConfig, runs_base: Path, run_id: str | None = None,
              progress: ProgressFn | None = None, notify: NotifyFn | None = None) -> RunOutcome:
    """A new run: folder, config, initial population, training to the budget (or a signal, `signals.py`)."""
    check_start(cfg)  # fail on bad input before creating anything
    task = get_task(cfg.task)
    cfg = resolved_for_task(cfg, task.has_human_reward)  # config.json names what runs, not "auto"
    run = RunLayout.create(runs_base, task.name, run_id)  # not a module:function reference
    with hold_run(run.root):  # one writer per run folder (runs/lock.py)
        return _start_in(cfg, run, progress, notify)


def _start_in(cfg: SearchConfig, run: RunLayout, progress: ProgressFn | None, notify: NotifyFn | None) -> RunOutcome:
    try:
        cfg.save(run.config)
    except OSError as exc:
        if not any(run.root.iterdir()):
            run.root.rmdir()  # nothing half-made stays behind
        raise run_file_error("write", run.config, exc) from None
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
    return RunOutcome(run, done.env_steps, True, done.best_success, done.wall_s, llm=llm_health(RunLog(run)),
                      already_finished=True)


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
    if cfg.setting != "baseline":
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
            try:
                return search.drive(engine, progress)
            finally:
                engine.close()
        finally:
            search.close()
