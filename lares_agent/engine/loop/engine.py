"""The LaRes loop, written once for whatever learns (docs/lares-reference.md §1-8, with §12's fixes).

One step: a due reward update, then the population acts and learns (``Population.step``: Thompson sampling,
play, store, learn for the replay population; one generation for ES), then an evaluation and a checkpoint on
their cadences. Every ``reward_period`` env steps a reward update evaluates every learner, ranks the slots by
fitness (the graded value, ``setup/fitness.py``; then the setting's tie-break, then the complexity penalty),
keeps the elites (``loop/selection.py``), asks the ``propose`` hook for the other slots (the LLM graph, wired in
by the search layer), installs each accepted candidate (the replay population relabels its buffer column and
scales it to the best elite; ES swaps the policy's reward), shares the best slot's reward with a slot whose
reward went NaN/inf and got no candidate, lets broken slots' learners (and new ones, while the best has
succeeded: ``loop/inheritance.py``) inherit the best learner, logs the update and checkpoints. The hook runs
blocking or on a worker thread (``loop/proposals.py``). A hook that raises
``Cancelled`` (the run was asked to stop while it ran) abandons its round: nothing is installed and no checkpoint
is written after it, so the newest checkpoint is from before the round and a resume redoes it. The engine never
imports LLM or graph code, and sees the learners only through ``protocols.Population``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.engine.contracts import MemberEvaluation, ProposeFn, RewardFunction, UpdateContext
from lares_agent.engine.errors import EngineError
from lares_agent.engine.loop.cadence import install_now, update_due, update_follows
from lares_agent.engine.loop.handover import HandOver
from lares_agent.engine.loop.proposals import PendingUpdate, ProposalRunner
from lares_agent.engine.loop.records import Counters, engine_state, evaluation_row, policy_state
from lares_agent.engine.loop.selection import choose_elites
from lares_agent.engine.loop.update import (
    inherit_source,
    inheriting,
    install_proposals,
    round_zero_context,
    round_zero_record,
    share_best_reward,
    update_context,
    update_record,
)
from lares_agent.engine.policies.policy_artefact import write_policies
from lares_agent.engine.protocols import Population, StepInfo
from lares_agent.engine.rollouts.episodes import EVAL_STREAM, episode_seed
from lares_agent.engine.setup.config import EngineConfig
from lares_agent.engine.setup.fitness import Ranking, grading, rank, slot_view
from lares_agent.engine.setup.slots import learner_count
from lares_agent.engine.state.log import EngineLog
from lares_agent.engine.state.schema import load_counters
from lares_agent.engine.tasks import TaskSpec
from lares_agent.errors import Cancelled
from lares_agent.runs import RunLayout
from lares_agent.runs.handover import HandoverRecord

__all__ = ["LaResEngine"]


class LaResEngine:
    """The LaRes loop over one task and one population. Build it with ``populations.make_engine`` (or
    ``restore_engine``); drive it with :meth:`run` or :meth:`step`.

    ``rewards``: every learner's reward, the K slots then the ``init`` setting's extra learner (the engine owns
    this list; the reward update replaces slots in it). ``rng`` draws the loop's random choices (elite selection);
    the replay population draws from the same generator, so one checkpointed state covers both.
    """

    def __init__(
        self,
        task: TaskSpec,
        config: EngineConfig,
        population: Population,
        rewards: Sequence[RewardFunction],
        *,
        rng: np.random.Generator,
        log: EngineLog,
        propose: ProposeFn | None = None,
    ) -> None:
        expected = learner_count(config.setting, config.num_slots)
        if len(rewards) != expected:
            raise EngineError(f"setting {config.setting!r} with {config.num_slots} slots needs {expected} rewards, "
                              f"got {len(rewards)}")
        self.task, self.config, self.population, self.propose = task, config, population, propose
        self.rewards: list[RewardFunction] = list(rewards)
        self.num_slots = config.num_slots
        # The init setting's human-reward learner is ranked with the slots (its policy may be handed over and
        # inherited, as the reference's with_init), but its reward is never replaced.
        self.num_ranked = len(self.rewards)
        self.rng, self.log = rng, log
        # The handed-over policy (docs/lares-reference.md §12 item 16) until the first ranking: in the init setting
        # the learner on the task's own reward (§3 keeps it), the expert's prior, not slot 0's untried LLM reward.
        first = config.num_slots if config.setting == "init" else 0
        self.counters = Counters(best_slot=first, next_eval=config.eval_every or None,
                                 next_checkpoint=config.checkpoint_every or None)
        # "auto" resolved against the task once (a ConfigError for success-then-return without a human reward); every
        # ranking of the run grades by it (``setup/fitness.py`` ``rank``)
        self.grading = grading(config.setting, config.fitness, task.has_human_reward)
        self.use_task_return = self.grading[0]
        self.proposals = ProposalRunner()
        self.handover = HandOver(task, config, self.use_task_return)
        self.last_metrics: dict[str, Any] | None = None
        self.abandoned: int | None = None
        """The round given up because the run was asked to stop (None: none); no checkpoint is written after it."""
        # round -> the env step an earlier session installed its background proposal at: a resume replays those
        # rounds from the trace at once, and installing them at once would leave the first session's path
        self.install_steps: dict[int, int] = {}
        self._start = time.monotonic()

    # ------------------------------------------------------------------ views
    @property
    def env_steps(self) -> int:
        return self.counters.env_steps

    @property
    def round(self) -> int:
        return self.counters.round

    @property
    def best_slot(self) -> int:
        return self.counters.best_slot

    @property
    def done(self) -> bool:
        """True once the counted env-step budget is spent."""
        return self.counters.env_steps >= self.config.total_steps

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every event logged so far (also in ``events.jsonl`` with a run directory)."""
        return self.log.events

    @property
    def run_dir(self) -> Path | None:
        return self.log.run_dir

    @property
    def update_in_flight(self) -> bool:
        """Whether a reward proposal is running in the background."""
        return self.proposals.pending is not None

    @property
    def llm_wait(self) -> dict[str, float]:
        """Seconds the learners waited for ``propose`` (``waited_s``) and that it ran (``llm_s``), this session."""
        return {"waited_s": self.proposals.waited_s, "llm_s": self.proposals.llm_s}

    @property
    def timing(self) -> dict[str, float]:
        """The population's wall seconds by activity this session, the hand-over's replays' (``handover_s``,
        when on) and writing checkpoints and policy files (``records_s``); ``run_end`` records them."""
        return {**self.population.timing, **({"handover_s": self.handover.seconds} if self.handover.episodes else {}),
                "records_s": self.log.records_s}

    # ------------------------------------------------------------------ driving
    def run(
        self,
        until_steps: int | None = None,
        progress: Callable[[StepInfo], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> int:
        """Step until ``until_steps`` (default: the budget) or ``should_stop()``; returns env steps. A round whose
        hook raised ``Cancelled`` ends the run here, abandoned (:attr:`abandoned`)."""
        limit = self.config.total_steps if until_steps is None else min(until_steps, self.config.total_steps)
        try:
            while self.counters.env_steps < limit:
                if should_stop is not None and should_stop():
                    break
                info = self.step()
                if progress is not None:
                    progress(info)
            # A proposal still running is waited for and installed: its candidates are already logged as accepted,
            # and the checkpoints the caller writes next must hold them. A stop cancels the LLM's calls, so the
            # hook soon returns or raises ``Cancelled``; the round is then abandoned (the resume reruns it from
            # the trace, from the checkpoint before it started, as after a kill).
            self.finish_update()
        except Cancelled:
            pass  # logged by ``_abandon``
        return self.counters.env_steps

    def step(self) -> StepInfo:
        """A due reward update, then one step of the population, then evaluation and checkpoint on cadence."""
        c, cfg = self.counters, self.config
        self.population.prepare(self.rewards)
        self._run_due_update()
        info = self.population.step(c.env_steps)
        c.env_steps += info.steps
        if c.next_eval is not None and c.env_steps >= c.next_eval:
            while c.next_eval <= c.env_steps:
                c.next_eval += cfg.eval_every
            if cfg.eval_at_updates or not self._update_follows():
                self._log_evaluation("eval", self.evaluate(cfg.eval_episodes))
        # No periodic checkpoint while a proposal is in flight: it would hold a state from which the resume could
        # not rerun the round that started before it (the next step after the install writes it).
        if c.next_checkpoint is not None and c.env_steps >= c.next_checkpoint and not self.update_in_flight:
            while c.next_checkpoint <= c.env_steps:
                c.next_checkpoint += cfg.checkpoint_every
            self.save_checkpoint()
        return dataclasses.replace(info, env_steps=c.env_steps, round=c.round)

    # ------------------------------------------------------------------ when a reward update runs
    def _update_follows(self) -> bool:
        """Whether the next step starts with a reward update's evaluation at this env step (``loop/cadence.py``)."""
        return update_follows(self.config, self.counters, self.proposals.pending)

    def _run_due_update(self) -> None:
        """Install a background proposal that returned, or is overdue (the next update is due: it is waited for,
        so rounds keep their cadence and never overlap); start a due update, in the background when configured."""
        pending, c = self.proposals.pending, self.counters
        if pending is not None:
            if not install_now(self.config, c.env_steps, pending, self.proposals.ready,
                               self.install_steps.get(pending.ctx.round)):
                return
            self.finish_update()
        if not update_due(self.config, c.env_steps, c.round, c.last_update_steps):
            return
        if self.config.propose_in_background and self.propose is not None:
            self.proposals.submit(self.propose, self._start_update(background=True))
        else:
            self.reward_update()

    def reward_update(self) -> UpdateContext:
        """A whole reward update with the learners waiting for ``propose`` (a proposal in flight is installed
        first)."""
        self.finish_update()
        pending = self._start_update()
        try:
            proposals, llm_s = self.proposals.blocking(self.propose, pending.ctx)
        except Cancelled:
            self._abandon(pending)
            raise
        return self._finish_update(pending, proposals, {"llm_s": llm_s, "waited_s": llm_s})

    def finish_update(self) -> UpdateContext | None:
        """Install the proposal in flight (waiting for it if needed); None when there is none. Raises
        ``Cancelled`` after abandoning its round when the hook did."""
        pending = self.proposals.pending
        if pending is None:
            return None
        try:
            pending, proposals, timing = self.proposals.collect()
        except Cancelled:
            self._abandon(pending)
            raise
        if pending.ctx.round == 0:
            self._install_round_zero(pending, proposals, timing)
            return pending.ctx
        return self._finish_update(pending, proposals, timing)

    def start_round_zero(self, propose: ProposeFn, refill: Sequence[int]) -> None:
        """Write round 0 in the background while the learners train from step 0 on the rewards they were built
        with (in the init setting the task's own reward: it is known from the start, and no learner need wait for
        the LLM). The hook's rewards arrive as an update without an evaluation (nothing has been learnt to rank
        yet): each is installed in its ``refill`` slot, relabelled and scaled to the ranked-first learner's column
        (the task's own reward), and the learners keep the weights they trained on it. A checkpoint is written
        only after the install, so a resume before it redoes round 0 from the trace."""
        if self.counters.round != 0 or self.counters.env_steps != 0:
            raise EngineError("round 0 starts with the run, at step 0")
        ctx = round_zero_context(self.config.setting, self.rewards[: self.num_ranked], refill)
        self.log.event({"event": "reward_update_started", "round": 0, "env_steps": 0, "best": self.best_slot,
                        "refill": list(ctx.refill), "background": True})
        self.proposals.submit(propose, PendingUpdate(ctx, (), self.best_slot))

    def _install_round_zero(self, pending: PendingUpdate, proposals: Sequence[RewardFunction],
                            timing: Mapping[str, float]) -> None:
        ctx, steps = pending.ctx, {"proposed_at": 0, "installed_at": self.counters.env_steps}
        if len(proposals) > len(ctx.refill):
            raise EngineError(f"round 0 returned {len(proposals)} rewards for {len(ctx.refill)} slots")
        replaced = install_proposals(self.population, self.rewards, self.log.event, 0, ctx.refill, proposals,
                                     pending.best, steps)
        # Round 1 is due a period after round 0's rewards arrived, not after step 0: a round 0 that took longer
        # than a period would otherwise be ranked and replaced before its learners trained on it.
        self.counters.last_update_steps = steps["installed_at"]
        self.log.event(round_zero_record(replaced, steps["installed_at"], timing))
        self.save_checkpoint("round-0000")

    def _abandon(self, pending: PendingUpdate) -> None:
        """Give up a round whose hook was cancelled: nothing installed, and from now on no checkpoint, because
        every later state holds the round's evaluation but not its result, a state the resume could not redo the
        round from as it started; the newest checkpoint stays the one before the round."""
        self.abandoned = pending.ctx.round
        self.log.event({"event": "reward_update_abandoned", "round": pending.ctx.round,
                        "env_steps": self.counters.env_steps, "proposed_at": pending.ctx.env_steps,
                        "reason": "the run was asked to stop while the round's proposal ran"})

    # ------------------------------------------------------------------ the reward update's two halves
    def _start_update(self, background: bool = False) -> PendingUpdate:
        """Evaluate every learner, rank the slots, choose the elites and build the proposer's ``UpdateContext``
        (copies only: the buffer keeps growing while a background proposal runs). The update's evaluation is
        logged here, at the step it measured; nothing is installed yet."""
        cfg, n, pop = self.config, self.num_ranked, self.population
        # every episode is kept, for the verifier (``UpdateContext.episodes``); the proposer is shown its
        # ``rollouts_kept`` and the diversity measure at least one rollout per slot (``loop/update.py``)
        ranked = self.rank(cfg.update_eval_episodes, keep_rollouts=cfg.update_eval_episodes)
        evals, slots, ranking = list(ranked.evals), ranked.slots, list(ranked.order)
        best = ranking[0]
        if slots[best].quarantined:
            raise EngineError("every slot is quarantined (its policy or reward is non-finite); "
                              "no learner can be inherited from")
        elites = tuple(choose_elites(ranking, slots, cfg.elites, cfg.selection, self.rng))
        ctx = update_context(cfg, self.counters.round + 1, self.counters.env_steps, slots, ranking, elites,
                             self.rewards[:n], evals, pop)
        self.log.event({"event": "reward_update_started", "round": ctx.round, "env_steps": ctx.env_steps,
                        "best": best, "refill": list(ctx.refill), "background": background})
        # The new ranking's best is the ranked-first slot from now on (the evaluation row and the progress say so).
        self.counters.best_slot = best
        self.handover.ranking = list(ranking)
        self._log_evaluation("update", evals)
        return PendingUpdate(ctx, tuple(evals), best)

    def _finish_update(self, pending: PendingUpdate, proposals: Sequence[RewardFunction],
                       timing: Mapping[str, float]) -> UpdateContext:
        """Install each proposal (at the current step, maybe later than the start), share the best reward with a
        broken slot, let new and broken slots inherit the best learner, log, checkpoint. ``timing`` (seconds:
        ``llm_s``, ``waited_s``) goes into the ``reward_update`` event."""
        ctx, pop = pending.ctx, self.population
        if len(proposals) > len(ctx.refill):
            raise EngineError(f"propose returned {len(proposals)} rewards for {len(ctx.refill)} slots")
        best = inherit_source(pop, ctx, pending.best)  # another kept slot where the best diverged meanwhile
        steps = {"proposed_at": ctx.env_steps, "installed_at": self.counters.env_steps}
        replaced = install_proposals(pop, self.rewards, self.log.event, ctx.round, ctx.refill, proposals, best, steps)
        share_best_reward(pop, self.rewards, self.log.event, ctx.round, ctx.refill, pending.evals, best, replaced)
        inherit, inherited = inheriting(self.config.inherit, ctx, best, replaced, self.num_slots)
        pop.inherit(inherit, best)
        # The next period counts from the step the update started at (the same cadence with and without a
        # background proposal).
        self.counters.mark_update(ctx.round, best, ctx.env_steps)
        self.log.event(update_record(ctx, best, replaced, inherited, steps["installed_at"], pop.event_fields(),
                                     self.config.selection.method, timing))
        name = f"round-{ctx.round:04d}"
        # before the checkpoint, which then holds its event
        handover = self.hand_over(name) if self.config.handover_rounds else None
        if self.save_checkpoint(name) is not None:
            self.save_policy(name, handover=handover)
        return ctx

    # ------------------------------------------------------------------ evaluation
    def evaluate_learners(self, episodes: int, keep_rollouts: int = 0) -> list[MemberEvaluation]:
        """Every learner's deterministic episodes on common reset seeds (not counted in the budget)."""
        c = self.counters
        seeds = [episode_seed(self.config.seed, EVAL_STREAM, c.eval_episode_counter + e) for e in range(episodes)]
        c.eval_episode_counter += episodes
        return self.population.evaluate(self.rewards, seeds, c.env_steps, keep_rollouts=keep_rollouts)

    def evaluate(self, episodes: int, keep_rollouts: int = 0) -> list[MemberEvaluation]:
        """Every slot's evaluation (``fitness.slot_view``, led by the last update's leaders), then the extra's."""
        pop = self.population
        evals = self.evaluate_learners(episodes, keep_rollouts)
        return slot_view(pop.groups, evals, pop.ranked[: self.num_slots], pop.learner_quarantined)

    def rank(self, episodes: int, keep_rollouts: int = 0) -> Ranking:
        """A reward update's evaluation graded and ranked once (``fitness.rank``); the slots' new leaders lead."""
        pop = self.population
        ranked = rank(self.evaluate_learners(episodes, keep_rollouts), pop.groups, self.rewards[: self.num_ranked],
                      self.config.complexity_lambda, self.grading, pop.learner_quarantined)
        pop.lead(ranked.leaders)
        return ranked

    def _log_evaluation(self, kind: str, evals: Sequence[MemberEvaluation]) -> None:
        """One metrics row: every slot's evaluation, the extra learner's, and the population's own fields."""
        k = self.num_slots
        extra = evals[k] if len(evals) > k else None
        record = evaluation_row(kind, self.counters, evals[:k], [fn.id for fn in self.rewards],
                                time.monotonic() - self._start, extra, self.population.slot_fields)
        record.update(self.population.metrics_fields())
        self.log.metrics(record)
        self.last_metrics = record

    # ------------------------------------------------------------------ checkpoints and policies
    def state_dict(self) -> dict[str, Any]:
        """The full engine state as nested dicts of arrays, tensors and scalars (``STATE_VERSION`` of
        ``state/schema.py``)."""
        return engine_state(self.task.name, self.config, self.counters, self.rng, self.rewards, self.population,
                            self.handover.state_dict())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore counters, generator and population; ``self.rewards`` must already be the saved ones."""
        self.counters = load_counters(Counters, state["counters"])
        self.rng.bit_generator.state = state["rng"]
        self.population.load_state_dict(state["population"], self.rewards)
        self.handover.load_state_dict(state.get("handover"))

    def save_checkpoint(self, name: str | None = None) -> Path | None:
        """Atomically checkpoint under ``run_dir/checkpoints`` (``EngineLog.checkpoint``: a no-op without a run
        directory). Default name ``step-<env_steps>`` (only the newest periodic one is kept); reward updates use
        ``round-<n>``, kept. None, writing nothing, once a round was abandoned (:meth:`_abandon`)."""
        if self.abandoned is not None:
            return None
        return self.log.checkpoint(self.state_dict, name, self.counters.env_steps, self.counters.round)

    def hand_over(self, name: str) -> HandoverRecord | None:
        """Replay the top learners on fresh episodes and log which one ``policies/<name>.pt`` hands over
        (``loop/handover.py``); None, replaying nothing, with ``handover_episodes`` 0, fewer than two learners to
        choose from, or no run directory."""
        if self.run_dir is None:
            return None
        state = policy_state(self.task.name, self.config, self.counters, self.population)
        record = self.handover.decide(name, state, self.population, self.rewards[: self.num_ranked], self.best_slot)
        if record is not None:
            self.log.event(record.to_event())
        return record

    def save_policy(self, name: str, every_slot: bool = False, handover: HandoverRecord | None = None) -> Path | None:
        """The policy handed over as ``policies/<name>.pt`` (engine/policies/policy_artefact.py; no-op without a run
        directory): ``handover``'s choice (:meth:`hand_over`, whose numbers the file carries), else the ranked-first
        slot's. ``every_slot``: also each slot's own file (the end of a run)."""
        if self.run_dir is None:
            return None
        low, high = self.population.action_box()
        ids = [fn.id for fn in self.rewards[: self.num_ranked]]
        chosen = handover.chosen if handover is not None else self.best_slot
        with self.log.timed():
            state = policy_state(self.task.name, self.config, self.counters, self.population)
            return write_policies(RunLayout(self.run_dir), name, state, chosen, low, high, ids,
                                  every_slot, members=self.population.leaders,
                                  extra=handover.policy_fields() if handover is not None else None)

    def close(self) -> None:
        """Let the proposal worker go, close the population's environments and the log."""
        self.proposals.close()
        self.handover.close()
        self.population.close()
        self.log.close()
