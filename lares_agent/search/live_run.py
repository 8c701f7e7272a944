"""One run's live objects (`Search`): task, engine, graph and LLM, built by `runner.start_run` /
`runner.resume_run`, and the drive of the engine to its budget with the run's records around it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lares_agent.engine import (
    HumanReward,
    LaResEngine,
    RewardFunction,
    StepInfo,
    TaskSpec,
    UpdateContext,
    get_task,
    make_engine,
    random_feature_sample,
    restore_engine,
)
from lares_agent.errors import LaresError
from lares_agent.runs import FINAL_POLICY, RunLayout, RunLog, llm_health, recorded_outcome, spent_wall_s
from lares_agent.runs.provenance import source_revision
from lares_agent.runs.tensorboard import TensorBoardMirror
from lares_agent.search.config import SearchConfig, engine_config, llm_config
from lares_agent.search.cores import initial_llm_threads
from lares_agent.search.found_reward import found_rewards
from lares_agent.search.given_rewards import load_rewards_file, success_reward
from lares_agent.search.options import LLM_FREE_ABLATIONS
from lares_agent.search.outcome import NotifyFn, ProgressFn, RunOutcome, RunStatus
from lares_agent.search.potentials import load_potential, shaper_for
from lares_agent.search.resume_checks import ResumePlan
from lares_agent.search.signals import StopRequest
from lares_agent.search.stopping import ROUND_0_BESIDE_ABANDONED, ROUND_ABANDONED, end_in_round_0

if TYPE_CHECKING:  # imported at run time only where used, so that `lares baseline` never loads the LLM stack
    from langgraph.checkpoint.sqlite import SqliteSaver

    from lares_agent.graphs.context import SlotEdits
    from lares_agent.llm import LLMClient
    from lares_agent.llm.breaker import BreakerTrip
    from lares_agent.memory.cases import CaseStore
    from lares_agent.search.proposer import GraphProposer

__all__ = ["Search", "asks_llm", "reflects", "round_zero_in_background", "slot_edits", "uses_retrieval"]


def uses_retrieval(cfg: SearchConfig) -> bool:
    """Whether the proposer gets past cases (off with `retrieval=False` or the `no-retrieval` ablation)."""
    return cfg.retrieval and "no-retrieval" not in cfg.ablations


def reflects(cfg: SearchConfig) -> bool:
    """Whether the round graph runs analyse/critique before propose (off with the `no-reflection` ablation)."""
    return "no-reflection" not in cfg.ablations


def asks_llm(cfg: SearchConfig) -> bool:
    """Whether the LLM writes rewards: not for a learner alone (`setting="baseline"`), nor with the `no-llm`
    ablation (numeric children of the elites only, the baseline that tells the LLM's part of a refinement from
    tuning the expert's constants), the `random-edit` one (structural edits made at random, which tells it from
    structural search) or the `critique-edit` one (the critique's computed edits). Where it does not, no LLM
    backend is built or checked and no run is judged by its health."""
    return cfg.setting != "baseline" and not any(a in LLM_FREE_ABLATIONS for a in cfg.ablations)


def slot_edits(cfg: SearchConfig) -> SlotEdits:
    """What takes the LLM's place beside the numeric children: random structural edits of the elites (the
    `random-edit` control, rewards/edits.py), so that a sweep can tell the LLM's structures from structural search
    alone, or the critique's computed edits (the `critique-edit` control), which tells them from the critique's
    arithmetic; "none" otherwise."""
    if cfg.setting == "baseline":
        return "none"
    return "random" if "random-edit" in cfg.ablations else "critique" if "critique-edit" in cfg.ablations else "none"


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
        from lares_agent.llm import make_client, offline_client
        from lares_agent.memory.cases import CaseStore
        from lares_agent.search.personas import resolve_persona
        from lares_agent.search.proposer import GraphProposer

        cfg = self.cfg
        llm_cfg = llm_config(cfg)
        replay = Path(cfg.replay_from) if cfg.replay_from else None  # check_llm already refused a missing one
        # a control without the LLM needs no backend: its client refuses any call, and none is made
        self.llm = llm = (make_client(llm_cfg, self.run.root, replay_from=replay) if asks_llm(cfg)
                          else offline_client(llm_cfg))
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
            limits=GraphLimits(reflect=reflects(cfg) and (asks_llm(cfg) or slot_edits(cfg) == "critique"),
                               llm_proposals=asks_llm(cfg),
                               analysis=cfg.analysis, oversample=cfg.candidates_per_slot,
                               numeric_children=cfg.numeric_children, seed=cfg.seed, task_examples=cfg.task_examples,
                               designer_features=cfg.designer_features, shaping=cfg.shaping,
                               screen=cfg.screen, edits=slot_edits(cfg)),
            critics=tuple(resolve_persona(p) for p in cfg.personas),
            human_reward=self._human_expression(),
        )
        self._trace = open_trace(self.run.root)
        self.proposer = GraphProposer(build_graph(self._trace), context, self.log, self.task.name,
                                      shaper=shaper_for(cfg, self.task, _human_complexity(self.task)))

    def _human_expression(self) -> dict[str, str] | None:
        """The task's own reward expression where the LLM sees it: the init setting refines it (the graph's context
        and the human reward carry it); from scratch the LLM never sees it (None)."""
        components = self.task.human_components
        return dict(components) if self.cfg.setting == "init" and components else None

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
        background: tuple[Callable[[UpdateContext], list[RewardFunction]], Sequence[int]] | None = None
        if self.cfg.setting != "baseline":
            n = ecfg.num_slots
            potential = self.cfg.shaping == "potential"  # given rewards are potentials then: of the state alone
            given = (load_rewards_file(Path(self.cfg.rewards_file), self.task, state_only=potential)
                     if self.cfg.rewards_file else [])
            task, cfg = self.task, self.cfg

            def sample() -> Mapping[str, Any]:  # round 0's states: random episodes, drawn where round 0 runs
                return random_feature_sample(task, max(cfg.warmup_steps, 500), cfg.seed, cfg.horizon)

            self.begin(0, 0)  # a new engine starts at step 0, round 0
            began = time.monotonic()
            if self.proposer is None:
                raise LaresError("a reward search needs its proposer (the graph was not built)")
            proposer, given = self.proposer, given[:n]
            if round_zero_in_background(self.cfg) and len(given) < n:
                # The task's own reward is known from the start: every free slot trains on it from step 0 while
                # the LLM writes round 0, whose rewards then arrive as an update (LaResEngine.start_round_zero).
                human = HumanReward(_human_complexity(self.task), self._human_expression())
                initial = [*given, *[human] * (n - len(given))]

                def round_zero(_: UpdateContext) -> list[RewardFunction]:
                    return proposer.initial(n, sample(), given)[len(given):]

                background = (round_zero, range(len(given), n))
            else:
                burst = (self.llm.threads_while(initial_llm_threads(self.cfg)) if self.llm is not None
                         else contextlib.nullcontext())
                with burst:  # the learners wait for round 0: the local model gets every core
                    initial = proposer.initial(n, sample(), given)
                self.initial_llm_s = time.monotonic() - began
        elif self.cfg.reward_components:  # a found reward trained alone (search/found_reward.py)
            initial = found_rewards(self.cfg, self.task)
        elif self.cfg.baseline_reward == "success":
            initial = [success_reward(self.task)]
        engine = make_engine(self.task, ecfg, initial, self.proposer, self.run.root,
                             human_complexity=_human_complexity(self.task), human_expression=self._human_expression())
        if background is not None:
            engine.start_round_zero(*background)
        return engine

    def restored_engine(self, checkpoint: Path) -> LaResEngine:
        from lares_agent.rewards import allowed_features, load_reward

        names = allowed_features(self.task)

        def load(data: Mapping[str, Any]) -> RewardFunction:
            return load_potential(data, names) if data.get("kind") == "potential" else load_reward(data, names)

        # config.json names the learner; a checkpoint of another kind is refused in one line
        return restore_engine(checkpoint, self.task, load, self.proposer, self.run.root, learner=self.cfg.learner,
                              device=self.cfg.device, human_expression=self._human_expression())

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
            self.notify(ROUND_0_BESIDE_ABANDONED if engine.abandoned == 0 else ROUND_ABANDONED)
        engine.save_checkpoint()  # none after an abandoned round: the resume redoes it from the one before
        # The top learners replayed on fresh episodes choose the policy handed over (engine/loop/handover.py), after
        # a stop too (a second signal stops at once); a resume cuts its event and hands over again at its own end.
        handover = engine.hand_over(FINAL_POLICY)
        engine.save_policy(FINAL_POLICY, every_slot=True, handover=handover)
        finished = engine.done and engine.abandoned is None  # an abandoned last round is still to do
        session = time.monotonic() - start
        wall = earlier + session
        best[0] = max(best[0], _best_success(engine))
        usage = self.llm.usage if self.llm is not None else {}
        health = llm_health(self.log) if asks_llm(self.cfg) else None
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
                          initial_llm_s=self.initial_llm_s, session_wall_s=session, abandoned_round=engine.abandoned,
                          handover=handover)

    def abandoned_round_0(self) -> RunOutcome:
        """A stop gave round 0 up (`stopping.py`): the run ends before any engine exists."""
        return end_in_round_0(self.log, self.run, self.stop, self.begin(0, 0), time.monotonic() - self.started,
                              self.notify)

    def close(self) -> None:
        if self._trace is not None:
            self._trace.conn.close()
        if self._cases is not None:
            self._cases.close()


def round_zero_in_background(cfg: SearchConfig) -> bool:
    """Whether the learners start at step 0 while the LLM writes round 0: in the init setting, where the task's own
    reward gives them something to train on, when rounds run beside learning (not `--sync-llm`, not ES). From
    scratch there is no reward but the LLM's to train on, so the learners wait for round 0 there."""
    return cfg.setting == "init" and cfg.learner != "es" and not cfg.sync_llm


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


def _human_complexity(task: TaskSpec) -> float:
    """The complexity of the task's own reward expression, which its learner carries into the ranking as every
    slot carries its reward's (engine/setup/fitness.py); 0 where the task has no expression written."""
    from lares_agent.rewards import human_reference

    reference = human_reference(task)
    return reference[1] if reference is not None else 0.0
