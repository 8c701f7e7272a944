"""The reward population and THE reward update, shared by the SAC and ES engines (docs/lares-reference.md §3, §5-7).

Every reward period: evaluate every learner, rank the slots by fitness (graded value minus lambda x complexity,
``loop/fitness.py``; then the setting's tie-break, then lower complexity), choose the elites
(``loop/selection.py``), ask the ``propose`` hook for the other slots, install each accepted candidate (the
SAC/CrossQ engine relabels its buffer column and scales it to the best elite; the ES engine swaps the learner's
reward), share the best slot's reward with a slot whose reward went NaN/inf and got no candidate, let every new or
broken slot's learner inherit the best learner, log the update and checkpoint. The engines differ only in the
``LearnerHooks`` they pass.

Settings (one meaning for both learners, the reference's ``with_init``): ``scratch``, every slot's reward is
proposed; ``init``, the human reward seeds slot 0 (replaceable like any slot) and an extra learner trains on
the human reward throughout, never ranked, never replaced; ``baseline``, one slot on the human reward and no
reward updates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from lares_agent.engine.contracts import (
    Diversity,
    HumanReward,
    MemberEvaluation,
    RewardFunction,
    SlotEvaluation,
    UpdateContext,
)
from lares_agent.engine.errors import EngineError, RewardColumnError
from lares_agent.engine.loop.fitness import rank_slots, slot_evaluations
from lares_agent.engine.loop.state import Counters

__all__ = ["LearnerHooks", "PendingUpdate", "RewardSlots", "SlotRules", "SlotSettings", "initial_slot_rewards",
           "learner_count"]


def initial_slot_rewards(
    setting: str, num_slots: int, given: Sequence[RewardFunction], has_human_reward: bool, task_name: str
) -> list[RewardFunction]:
    """The reward of every learner at the start of a run: K slots, then the ``init`` setting's extra learner.

    scratch: the K given candidates; init: the human reward in slot 0, then K - 1 given ones, then the human
    reward again for the extra learner; baseline: the human reward alone, or the one reward given (the sparse
    baseline's success indicator, search/config.py `baseline_reward`). Raises EngineError with a one-line reason
    when the count or the task does not fit the setting.
    """
    rewards = list(given)
    if setting in ("init", "baseline") and not has_human_reward:
        raise EngineError(f"setting {setting!r} needs a human reward, task {task_name} has none")
    if setting == "scratch":
        if len(rewards) != num_slots:
            raise EngineError(f"setting 'scratch' needs {num_slots} initial rewards, got {len(rewards)}")
        return rewards
    if setting == "init":
        if len(rewards) != num_slots - 1:
            raise EngineError(
                f"setting 'init' needs {num_slots - 1} initial rewards (slot 0 is human), got {len(rewards)}"
            )
        return [HumanReward(), *rewards, HumanReward()]
    if len(rewards) > 1:
        raise EngineError(f"setting 'baseline' trains one learner on one reward, got {len(rewards)} initial rewards")
    return rewards or [HumanReward()]  # one given reward replaces the human one (the sparse success baseline)


def learner_count(setting: str, num_slots: int) -> int:
    """Learners of a run: one per slot, plus the extra human-reward learner of the ``init`` setting."""
    return num_slots + (1 if setting == "init" else 0)


class SlotSettings(Protocol):
    """What ``SlotRules.of`` reads from an engine config (``EngineConfig`` and ``ESSearchConfig`` both have it)."""

    @property
    def setting(self) -> str: ...
    @property
    def num_slots(self) -> int: ...
    @property
    def complexity_lambda(self) -> float: ...
    @property
    def rollout_slots(self) -> int: ...
    @property
    def rollouts_kept(self) -> int: ...
    @property
    def max_rounds(self) -> int | None: ...


@dataclass(frozen=True)
class SlotRules:
    """The parts of an engine config the reward update reads (both configs have them under these names)."""

    setting: str
    num_slots: int
    complexity_lambda: float
    use_task_return: bool
    """Break fitness ties by the task return (the setting may use the human reward and the task has one)."""
    rollout_slots: int
    rollouts_kept: int
    max_rounds: int | None

    @classmethod
    def of(cls, config: SlotSettings, has_human_reward: bool) -> SlotRules:
        """The rules of an engine config over a task with or without a human reward."""
        return cls(setting=config.setting, num_slots=config.num_slots, complexity_lambda=config.complexity_lambda,
                   use_task_return=config.setting != "scratch" and has_human_reward,
                   rollout_slots=config.rollout_slots, rollouts_kept=config.rollouts_kept,
                   max_rounds=config.max_rounds)


def _no_diversity(evals: Sequence[MemberEvaluation]) -> Diversity | None:
    return None


def _no_fields() -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class LearnerHooks:
    """The learner side of a reward update: everything the SAC and ES engines do differently."""

    evaluate: Callable[[], Sequence[MemberEvaluation]]
    """Deterministic evaluation of every learner, slots first (their rollouts kept for the proposer)."""
    quarantined: Callable[[int], bool]
    """Whether a slot's learner is out (its policy or reward went non-finite)."""
    choose_elites: Callable[[Sequence[int], Sequence[SlotEvaluation]], Sequence[int]]
    """The elites, given the ranking (best first) and every slot's evaluation (in slot order)."""
    feature_sample: Callable[[], Mapping[str, np.ndarray]]
    """Stored or recent steps on which the proposer checks new candidates numerically."""
    install: Callable[[int, RewardFunction, int], Mapping[str, float]]
    """Make (slot, reward) train from now on, given the best slot; returns extra fields of the
    ``candidate_accepted`` event. Raises RewardColumnError to refuse the candidate (the slot is kept)."""
    reward_nonfinite: Callable[[int, MemberEvaluation], bool]
    """Whether a slot's current reward went NaN/inf on new steps."""
    inherit: Callable[[Sequence[int], int], None]
    """Let the learners of ``slots`` restart from the best slot's learner (called every update, maybe empty)."""
    log_evaluation: Callable[[Sequence[MemberEvaluation]], None]
    """Write the update's evaluation as a metrics row."""
    checkpoint: Callable[[str], object]
    """Save the engine under the given checkpoint name."""
    diversity: Callable[[Sequence[MemberEvaluation]], Diversity | None] = field(default=_no_diversity)
    """The population's diversity (None: not measured, the proposer judges)."""
    event_fields: Callable[[], dict[str, Any]] = field(default=_no_fields)
    """Extra fields of the ``reward_update`` event."""


@dataclass(frozen=True)
class PendingUpdate:
    """A started reward update: its context (what the proposer sees), the evaluations it ranked and the best
    slot, which stays the one new slots inherit from when the proposals are installed later."""

    ctx: UpdateContext
    evals: tuple[MemberEvaluation, ...]
    best: int


class RewardSlots:
    """The reward of every learner, the round and the best slot (in the shared counters), and the update.

    ``rewards`` has one entry per learner: the K slots, then the ``init`` setting's extra learner (never
    replaced). ``event`` receives every event the update logs.
    """

    def __init__(
        self,
        rewards: list[RewardFunction],
        rules: SlotRules,
        counters: Counters,
        event: Callable[[dict[str, Any]], None],
    ) -> None:
        expected = learner_count(rules.setting, rules.num_slots)
        if len(rewards) != expected:
            raise EngineError(f"setting {rules.setting!r} with {rules.num_slots} slots needs {expected} rewards, "
                              f"got {len(rewards)}")
        self.rewards = rewards
        self.rules = rules
        self.counters = counters
        self._event = event

    @property
    def num_slots(self) -> int:
        """K replaceable slots."""
        return self.rules.num_slots

    @property
    def extra(self) -> int | None:
        """Index of the ``init`` setting's extra human-reward learner (None in the other settings)."""
        return self.num_slots if len(self.rewards) > self.num_slots else None

    @property
    def round(self) -> int:
        return self.counters.round

    @property
    def best(self) -> int:
        return self.counters.best_slot

    def may_update(self) -> bool:
        """False in the baseline and once ``max_rounds`` updates are done (the engine adds its period)."""
        if self.rules.setting == "baseline":
            return False
        return self.rules.max_rounds is None or self.counters.round < self.rules.max_rounds

    def start(self, hooks: LearnerHooks, background: bool = False) -> PendingUpdate:
        """The first half of an update: evaluate every learner, rank the slots, choose the elites and build the
        proposer's ``UpdateContext`` (copies only: the buffer keeps growing while a background proposal runs).

        The update's evaluation is logged here, at the step it measured; nothing is installed yet.
        """
        rules, k = self.rules, self.num_slots
        evals = list(hooks.evaluate())
        slots = slot_evaluations(evals[:k], self.rewards[:k], rules.complexity_lambda, rules.use_task_return,
                                 [hooks.quarantined(i) for i in range(k)])
        ranking = rank_slots(slots)
        best = ranking[0]
        if slots[best].quarantined:
            raise EngineError("every slot is quarantined (its policy or reward is non-finite); "
                              "no learner can be inherited from")
        elites = tuple(int(i) for i in hooks.choose_elites(ranking, slots))
        refill = tuple(sorted(set(range(k)) - set(elites)))
        diversity = hooks.diversity(evals[:k])
        ctx = UpdateContext(
            round=self.counters.round + 1,
            env_steps=self.counters.env_steps,
            setting=rules.setting,
            slots=tuple(slots),
            ranking=tuple(ranking),
            elites=elites,
            refill=refill,
            rewards=tuple(self.rewards[:k]),
            rollouts={s: evals[s].rollouts[: rules.rollouts_kept] for s in ranking[: rules.rollout_slots]},
            feature_sample={name: np.array(v, copy=True) for name, v in hooks.feature_sample().items()},
            diversity=diversity,
            explore=diversity.explore if diversity is not None else None,
        )
        self._event({"event": "reward_update_started", "round": ctx.round, "env_steps": ctx.env_steps,
                     "best": best, "refill": list(refill), "background": background})
        # The new ranking's best is the ranked-first slot from now on (the evaluation row and the progress say so).
        self.counters.best_slot = best
        hooks.log_evaluation(evals)
        return PendingUpdate(ctx, tuple(evals), best)

    def finish(
        self,
        hooks: LearnerHooks,
        pending: PendingUpdate,
        proposals: Sequence[RewardFunction],
        timing: Mapping[str, float] | None = None,
    ) -> UpdateContext:
        """The second half: install each proposal (at the current step, maybe later than the start), share the
        best reward with a broken slot, let new and broken slots inherit the best learner, log, checkpoint.

        ``timing`` (seconds, e.g. ``llm_s`` and ``waited_s``) goes into the ``reward_update`` event.
        """
        ctx, evals = pending.ctx, pending.evals
        slots, refill = ctx.slots, ctx.refill
        proposals = list(proposals)
        if len(proposals) > len(refill):
            raise EngineError(f"propose returned {len(proposals)} rewards for {len(refill)} slots")
        best = pending.best
        if hooks.quarantined(best):
            # Background only: the best learner diverged while the proposal ran; inherit from the next one kept.
            best = next((s for s in ctx.ranking if s not in refill and not hooks.quarantined(s)), -1)
            if best < 0:
                raise EngineError("every kept slot was quarantined while the reward proposal ran; "
                                  "no learner can be inherited from")
        installed_at = self.counters.env_steps
        steps = {"proposed_at": ctx.env_steps, "installed_at": installed_at}
        replaced: dict[int, str] = {}
        for slot, fn in zip(refill, proposals, strict=False):
            try:
                extra = hooks.install(slot, fn, best)
            except RewardColumnError as exc:
                self._event({"event": "candidate_rejected", "round": ctx.round, "slot": slot,
                             "reward_id": fn.id, "reason": exc.reason, **steps})
                continue
            self.rewards[slot] = fn
            replaced[slot] = fn.id
            self._event({"event": "candidate_accepted", "round": ctx.round, "slot": slot, "reward_id": fn.id,
                         **steps, **extra})
        for slot in refill:
            # A reward that went NaN/inf on new steps must not survive an update that brought no candidate for
            # its slot (it would break the reset learner again at once): the slot shares the best slot's reward
            # until a later update refills it.
            if slot not in replaced and hooks.reward_nonfinite(slot, evals[slot]):
                shared = self.rewards[best]
                hooks.install(slot, shared, best)
                self.rewards[slot] = shared
                replaced[slot] = shared.id
                self._event({"event": "reward_shared", "round": ctx.round, "slot": slot, "reward_id": shared.id,
                             "reason": "its reward was NaN/inf on new steps and no valid candidate arrived"})
        # A quarantined learner restarts from the best even when its reward is kept (its weights are broken).
        inherit = sorted(set(replaced) | {s.slot for s in slots if s.quarantined and s.slot != best})
        hooks.inherit(inherit, best)
        # The next period counts from the step the update started at (the same cadence with and without a
        # background proposal).
        self.counters.mark_update(ctx.round, best, ctx.env_steps)
        record: dict[str, Any] = {
            "event": "reward_update", "round": ctx.round, "env_steps": installed_at,
            "proposed_at": ctx.env_steps,
            **hooks.event_fields(),
            "fitness": {str(s.slot): s.fitness for s in slots}, "ranking": list(ctx.ranking),
            "elites": list(ctx.elites), "best": best, "replaced": {str(s): rid for s, rid in replaced.items()},
            "inherited": inherit, "slots": [s.to_json() for s in slots],
            **{name: float(value) for name, value in (timing or {}).items()},
        }
        if ctx.diversity is not None:
            record["diversity"] = ctx.diversity.to_json()
        self._event(record)
        hooks.checkpoint(f"round-{ctx.round:04d}")
        return ctx
