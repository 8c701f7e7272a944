"""The engine's reward-update hook: the agent graph proposes, the rewards layer compiles, the run logs it all.

One `GraphProposer` per run. `initial(n)` fills the first population (round 0: no policy has acted yet, so
the graph goes straight to `propose`); `__call__(ctx)` is what `LaResEngine` calls at each reward update.
Each round is one LangGraph thread (`round-<n>`) in `trace.sqlite`, so a run killed mid-round resumes
inside that round without asking the LLM again for what it already accepted.

`__call__` may run on the engine's proposal worker thread while the learners train (`engine/loop/proposals.py`):
it reads only its `UpdateContext` (copies taken at the round's start) and writes only its own files and stores
(candidates, trace, cases: whole-line appends and SQLite connections opened for use from any thread); the
engine's thread writes events meanwhile, each a single whole-line append.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from lares_agent.engine import RewardFunction, UpdateContext, distinct_fraction
from lares_agent.graphs.build import RoundGraph
from lares_agent.graphs.context import GraphTask, RunContext
from lares_agent.graphs.round import RoundResult, run_round
from lares_agent.graphs.state import HUMAN_ELITE, CandidateRecord, EliteInfo, RoundInput
from lares_agent.memory.cases import Case
from lares_agent.rewards import CompiledReward, compile_record, record_key
from lares_agent.rewards.tuning import Measured
from lares_agent.runs import CandidateRow, RunLog, Verdict
from lares_agent.runs.feedback import pending_notes
from lares_agent.search.potentials import Shaper
from lares_agent.tools.trajectory import Rollout

# Below this share of distinct reward structures among the elites, the proposer is told to explore.
EXPLORE_BELOW = 0.5


def fallback_reward(task: GraphTask, rid: str) -> CompiledReward:
    """The reward a slot gets when the LLM delivers no valid candidate at all: approach (where the task names
    one), progress, and a success bonus; compiled like every accepted record (`compile_record`), so it meets the
    validator's progress and approach checks by construction.

    Never silent: every use is logged as a `fallback` event, and its id says so.
    """
    names = {f.name for f in task.features}
    components = {"approach": f"-{task.approach_feature}"} if task.approach_feature in names else {}
    components["progress"] = f"-{task.progress_feature}"
    if "success" in names:
        components["success_bonus"] = "5*success"
    record = {"id": rid, "components": components, "rationale": "fallback: no valid LLM candidate"}
    return compile_record(record, task)


def measured_rewards(rows: Sequence[CandidateRow], human: Mapping[str, str] | None) -> list[Measured]:
    """(components, fitness) of every reward update's measurement in candidates.jsonl, oldest first: what the
    constant tuner learns from (`rewards/tuning.py`), rebuilt on resume."""
    components = {r.id: dict(r.components) for r in rows if r.verdict == "accepted" and r.components}
    if human is not None:
        components[HUMAN_ELITE] = dict(human)
    return [(components[r.id], r.evaluated.fitness) for r in rows if r.verdict == "evaluated" and r.id in components
            and r.evaluated is not None and math.isfinite(r.evaluated.fitness)]


class GraphProposer:
    """Connects `LaResEngine`'s hook to the round graph; logs candidates and feeds the case store."""

    def __init__(self, graph: RoundGraph, context: RunContext, log: RunLog, task_name: str,
                 shaper: Shaper | None = None) -> None:
        self.graph, self.context, self.log, self.task_name = graph, context, log, task_name
        self.shaper = shaper  # `--shaping potential`: each accepted reward is a potential shaping the base
        self.in_flight = False
        self.fallbacks = 0
        # A resumed run replays rounds the trace already holds (their stored results come back without new LLM
        # calls); rows logged before the kill are not written again, so candidates.jsonl lists each once.
        rows = log.candidates.read()
        self._logged = {r.key for r in rows}
        self._measured = measured_rewards(rows, context.human_reward)

    # ------------------------------------------------------------------ engine hook
    def initial(
        self, n: int, sample: Mapping[str, np.ndarray], given: Sequence[CompiledReward] = ()
    ) -> list[RewardFunction]:
        """Round 0: `n` candidates, the `given` ones (from --rewards) first, the rest from the graph."""
        rewards: list[RewardFunction] = []
        for slot, reward in enumerate(given[:n]):
            rewards.append(self._shaped(reward, sample, 0, slot))
            self._append(
                CandidateRow(id=reward.id, round=0, slot=slot, verdict="accepted", reason="given (--rewards)",
                             components=dict(reward.expression), complexity=reward.complexity,
                             rationale=reward.parsed.rationale),
            )
        need = n - len(rewards)
        if need > 0:
            # init: round 0 refines the task's own reward (its elite carries its expression; numeric children
            # perturb its constants); from scratch there is nothing to refine
            human = self.context.human_reward
            elites = [EliteInfo(id=HUMAN_ELITE, components=dict(human), stats={})] if human is not None else []
            round_input = RoundInput(round=0, n_wanted=need, elites=elites, rollout_ids=[])
            result = self._round(round_input, self.context.for_round(sample, measured=self._measured))
            rewards += self._accepted(result, slots=list(range(len(rewards), n)), sample=sample)
        while len(rewards) < n:
            rewards.append(self._shaped(self._fallback(round_=0, slot=len(rewards)), sample, 0, len(rewards)))
        return rewards

    def __call__(self, ctx: UpdateContext) -> list[RewardFunction]:
        self._remember_fitness(ctx)
        if not ctx.refill:
            return []
        rollouts = self._rollouts(ctx)
        elite_slots = [s for s in ctx.elites if s < len(ctx.rewards)]
        elites = [self._elite(ctx, s) for s in elite_slots]
        keys = [ctx.rewards[s].key for s in elite_slots]
        # The ES engine measures diversity itself (UpdateContext.explore); otherwise judge the elites' identities.
        explore = ctx.explore
        if explore is None:
            explore = len(keys) > 1 and distinct_fraction(keys) < EXPLORE_BELOW
        round_input = RoundInput(round=ctx.round, n_wanted=len(ctx.refill), elites=elites,
                                 rollout_ids=list(rollouts), explore=bool(explore),
                                 rejections=self._recent_rejections(), tried=self._tried())
        result = self._round(round_input, self.context.for_round(ctx.feature_sample, rollouts, self._measured,
                                                                 ctx.episodes))
        return self._accepted(result, slots=list(ctx.refill), parent=ctx.rewards[ctx.best].id,
                              sample=ctx.feature_sample)

    # ------------------------------------------------------------------ helpers
    def _round(self, round_input: RoundInput, context: RunContext) -> RoundResult:
        notes = self._notes(round_input["round"])
        if notes:
            round_input = RoundInput(**round_input, feedback=notes)
        self.in_flight = True
        try:
            result = run_round(self.graph, round_input, f"round-{round_input['round']}", context)
        finally:
            self.in_flight = False
        self._took_notes(result)
        for rec in result.rejected:
            self._log_candidate(rec, result.round, verdict="rejected", slot=None)
        return result

    def _accepted(self, result: RoundResult, slots: list[int], parent: str | None = None,
                  sample: Mapping[str, np.ndarray] | None = None) -> list[RewardFunction]:
        """The round's accepted rewards (`_compiled`), logged; under `--shaping potential` each shapes the base
        (`_shaped`)."""
        ctx = self.context
        out: list[RewardFunction] = []
        for rec, slot in zip(result.accepted, slots, strict=False):
            reward = self._compiled(rec, result)
            self._log_candidate(rec, result.round, verdict="accepted", slot=slot, parent=parent)
            if ctx.cases is not None:
                ctx.cases.add(
                    Case(
                        task=self.task_name,
                        description=ctx.task.description,
                        components=dict(rec.get("components") or {}),
                        complexity=float(reward.complexity),
                        run_id=ctx.run_id,
                        candidate_id=rec["id"],
                        rationale=str(rec.get("rationale") or ""),
                        persona=ctx.persona.name,
                        round=result.round,
                    )
                )
            out.append(self._shaped(reward, sample or {}, result.round, slot))
        return out

    def _compiled(self, rec: CandidateRecord, result: RoundResult) -> CompiledReward:
        """An accepted record's function: the one validate compiled (`RoundResult.compiled`) under the record's
        rationale, as `compile_record` would give it; compiled from the record where the round has none (its result
        came from the trace after a resume)."""
        rationale = str(rec.get("rationale") or "")
        reward = result.compiled.get(str(rec.get("id")))
        if reward is None:
            return compile_record(rec, self.context.task, self.context.limits.checks.limits)
        return reward.with_rationale(rationale)

    def _shaped(self, reward: RewardFunction, sample: Mapping[str, np.ndarray], round_: int,
                slot: int) -> RewardFunction:
        """The reward a slot trains on: ``reward`` itself, or under `--shaping potential` the base shaped by it as a
        potential standardised on ``sample``, with a `potential` event that says so (the report, trace and export
        read it)."""
        if self.shaper is None:
            return reward
        shaped = self.shaper.shape(reward, sample)
        logged = {(e.get("reward_id"), e.round, e.get("slot")) for e in self.log.events.read()
                  if e.event == "potential"}
        if (shaped.id, round_, slot) not in logged:  # a replayed round (resume) logs none again
            self.log.event("potential", round=round_, slot=slot, **self.shaper.describe(shaped))
        return shaped

    def _notes(self, round_: int) -> list[dict[str, str]]:
        """The user's notes this round takes, read from the run folder now: a note added while the run is live
        reaches the next round (runs/feedback.py)."""
        pending = pending_notes(self.log.feedback.read(), self.log.events.read(), round_)
        return [{"id": n.id, "text": n.text} for n in pending]

    def _took_notes(self, result: RoundResult) -> None:
        """A `feedback` event for each note the round's critique stated, once (a replayed round logs none again)."""
        logged = {(str(e.get("note")), e.round) for e in self.log.events.read() if e.event == "feedback"}
        for note in result.feedback:
            if (note.get("id"), result.round) not in logged:
                self.log.event("feedback", round=result.round, note=note.get("id"), text=note.get("text"))

    def _fallback(self, round_: int, slot: int) -> RewardFunction:
        self.fallbacks += 1
        rid = f"fallback-r{round_}-s{slot}"
        self.log.event("fallback", round=round_, slot=slot, reward_id=rid, reason="the LLM gave no valid candidate")
        reward = fallback_reward(self.context.task, rid)
        self._append(
            CandidateRow(id=rid, round=round_, slot=slot, components=reward.parsed.canonical, verdict="accepted",
                         reason="fallback", complexity=reward.complexity, rationale=reward.parsed.rationale),
        )
        return reward

    def _append(self, row: CandidateRow) -> None:
        """Append a candidates.jsonl row unless the same row (id, round, verdict, slot) is already there."""
        if row.key in self._logged:
            return
        self._logged.add(row.key)
        self.log.candidates.append(row)

    def _log_candidate(
        self, rec: Mapping[str, Any], round_: int, verdict: Verdict, slot: int | None, parent: str | None = None
    ) -> None:
        self._append(
            CandidateRow(
                id=str(rec.get("id")),
                round=round_,
                slot=slot,
                components=rec.get("components") or {},
                rationale=rec.get("rationale") or "",
                verdict=verdict,
                reason=rec.get("reason") or "",
                complexity=rec.get("complexity"),
                parent_id=rec.get("parent_id") or parent,
                critique_id=rec.get("critique_id"),
                attempt=rec.get("attempt"),
                origin=rec.get("origin"),
                proxy=rec.get("proxy"),
                verifier_tau=rec.get("verifier_tau"),
                verifier_progress=rec.get("verifier_progress"),
                verifier_flooding=rec.get("verifier_flooding"),
            ),
        )

    def _remember_fitness(self, ctx: UpdateContext) -> None:
        """Every slot's fitness goes to the case store and candidates.jsonl (the report's lineage reads it)."""
        for ev in ctx.slots:
            reward = ctx.rewards[ev.slot] if ev.slot < len(ctx.rewards) else None
            if reward is None:
                continue
            # a quarantined slot's fitness (-inf) and a missing success are logged as 0, what the tuner learns
            measured = replace(ev, fitness=_finite(ev.fitness), success=_finite(ev.success))
            self._append(CandidateRow(id=reward.id, round=ctx.round, slot=ev.slot, verdict="evaluated",
                                      complexity=ev.complexity, evaluated=measured))
            components = self._components(reward)
            fitness = _finite(ev.fitness)
            if components and fitness is not None:
                self._measured.append((components, fitness))
            if self.context.cases is not None:
                self.context.cases.update_fitness(
                    self.context.run_id, reward.id, _finite(ev.fitness), _finite(ev.success)
                )

    @staticmethod
    def _components(reward: RewardFunction) -> dict[str, str]:
        """A reward's expression as components (the human-reward learner's is the task's own in the init setting,
        `HumanReward.expression`), else none."""
        return dict(reward.expression) if reward.expression is not None else {}

    def _elite(self, ctx: UpdateContext, slot: int) -> EliteInfo:
        reward = ctx.rewards[slot]
        ev = ctx.slot(slot)
        # the human-reward learner is an elite too: in the init setting it carries the task's expression, which is
        # refined again; a reward without an expression is shown by its id
        expression = reward.expression
        info = EliteInfo(
            id=reward.id,
            components=dict(expression) if expression is not None else {"reward": reward.id},
            fitness=_finite(ev.fitness),
            success=_finite(ev.success),
            complexity=float(reward.complexity),
            stats={name: dict(st) for name, st in ev.components.items()},
            graded_by=ev.graded_by or "success",  # the engine grades every slot it ranks
        )
        # The task return goes to the LLM in both settings, as the reference's feedback gave it ("human designed
        # expert reward" score) in both: a score per episode, never the human reward's expression, which the
        # scratch setting keeps from the LLM.
        if math.isfinite(ev.task_return):
            info["task_return"] = float(ev.task_return)
        return info

    def _rollouts(self, ctx: UpdateContext) -> dict[str, Rollout]:
        out: dict[str, Rollout] = {}
        for slot, episodes in ctx.rollouts.items():
            reward = ctx.rewards[slot]
            for i, feats in enumerate(episodes):
                try:
                    comps = reward.components(feats)
                except Exception:  # a broken reward must not stop the round; the encoder goes without
                    comps = {}
                rid = f"r{ctx.round}-s{slot}-e{i}"
                out[rid] = Rollout(features=feats, components=comps, policy_id=f"slot-{slot}", reward_id=reward.id)
        return out

    def _tried(self) -> list[str]:
        """The identity of every reward the run has accepted so far (from candidates.jsonl, so a resume agrees)."""
        limits = self.context.limits.checks.limits
        keys = {record_key({"components": r.components or {}}, self.context.task, limits)
                for r in self.log.candidates.read() if r.verdict == "accepted"}
        return sorted(k for k in keys if k)

    def _recent_rejections(self, k: int = 6) -> list[str]:
        reasons = [r.reason or "" for r in self.log.candidates.read() if r.verdict == "rejected"]
        return [r for r in reasons if r][-k:]


def _finite(x: float) -> float:
    return float(x) if x is not None and math.isfinite(float(x)) else 0.0
