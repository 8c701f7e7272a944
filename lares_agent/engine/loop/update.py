"""The bookkeeping of a reward update (``LaResEngine._start_update`` / ``_finish_update``, ``loop/engine.py``).

Each step is a function of what the engine hands it: the population, the engine's reward list (changed in place,
as the install changes the population), the function that logs an event. The engine keeps the order of the steps,
which fixes the order of the events; none of these functions holds the engine or calls back into it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from lares_agent.engine.contracts import MemberEvaluation, RewardFunction, UpdateContext
from lares_agent.engine.errors import EngineError, RewardColumnError
from lares_agent.engine.loop.inheritance import inheritance
from lares_agent.engine.protocols import Population
from lares_agent.engine.setup.config import EngineConfig
from lares_agent.runs.slots import SlotRecord

__all__ = ["inherit_source", "inheriting", "install_proposals", "round_zero_context", "round_zero_record",
           "share_best_reward", "update_context", "update_record"]

LogEvent = Callable[[dict[str, Any]], None]


def update_context(config: EngineConfig, round_: int, env_steps: int, slots: Sequence[SlotRecord],
                   ranking: Sequence[int], elites: tuple[int, ...], rewards: Sequence[RewardFunction],
                   evals: Sequence[MemberEvaluation], population: Population) -> UpdateContext:
    """The proposer's view of an update, copies only (the buffer keeps growing while a background proposal runs):
    the ranked slots, the elites and the slots to refill (the others), every ranked learner's reward (``rewards``),
    the top slots' rollouts, a sample of the buffer's features and the diversity measure, and every episode of the
    evaluation for the verifier. ``evals`` keep all their episodes; the diversity measure sees as many of each as
    before (``rollouts_kept``, at least one), so it does not change with what the verifier is given."""
    k = config.num_slots
    refill = tuple(sorted(set(range(k)) - set(elites)))
    seen = max(config.rollouts_kept, 1)
    diversity = population.diversity([replace(ev, rollouts=ev.rollouts[:seen]) for ev in evals[:k]], rewards[:k])
    return UpdateContext(
        round=round_,
        env_steps=env_steps,
        setting=config.setting,
        slots=tuple(slots),
        ranking=tuple(ranking),
        elites=elites,
        refill=refill,
        rewards=tuple(rewards),
        rollouts={s: evals[s].rollouts[: config.rollouts_kept] for s in ranking[: config.rollout_slots]},
        feature_sample={name: np.array(v, copy=True)
                        for name, v in population.feature_sample(config.feature_sample).items()},
        diversity=diversity,
        explore=diversity.explore if diversity is not None else None,
        episodes=tuple(ep for s in ranking for ep in evals[s].rollouts),
    )


def round_zero_context(setting: str, rewards: Sequence[RewardFunction], refill: Sequence[int]) -> UpdateContext:
    """Round 0's view, at step 0: nothing is ranked or learnt yet; every ranked learner's reward and the slots to
    fill."""
    return UpdateContext(round=0, env_steps=0, setting=setting, slots=(), ranking=(), elites=(),
                         refill=tuple(sorted(refill)), rewards=tuple(rewards), rollouts={}, feature_sample={})


def round_zero_record(replaced: Mapping[int, str], installed_at: int, timing: Mapping[str, float]) -> dict[str, Any]:
    """The ``initial_rewards`` event: the slots round 0 filled, at the step its rewards were installed."""
    return {"event": "initial_rewards", "round": 0, "env_steps": installed_at,
            "replaced": {str(s): rid for s, rid in replaced.items()}, "inherited": [],
            **{k: float(v) for k, v in timing.items()}}


def install_proposals(population: Population, rewards: list[RewardFunction], event: LogEvent, round_: int,
                      refill: Sequence[int], proposals: Sequence[RewardFunction], best: int,
                      steps: Mapping[str, int]) -> dict[int, str]:
    """Install each proposal in its slot, relabelled and scaled to ``best``'s column; a column the buffer
    refuses leaves the slot its reward (a ``candidate_rejected`` event). Returns slot -> installed reward id."""
    replaced: dict[int, str] = {}
    for slot, fn in zip(refill, proposals, strict=False):
        try:
            extra = population.install(slot, fn, best)
        except RewardColumnError as exc:
            event({"event": "candidate_rejected", "round": round_, "slot": slot, "reward_id": fn.id,
                   "reason": exc.reason, **steps})
            continue
        rewards[slot] = fn
        replaced[slot] = fn.id
        event({"event": "candidate_accepted", "round": round_, "slot": slot, "reward_id": fn.id, **steps, **extra})
    return replaced


def inherit_source(population: Population, ctx: UpdateContext, best: int) -> int:
    """The slot whose learner new and broken slots inherit: the update's best, or, when that one diverged while a
    background proposal ran, the next slot kept by the ranking. Raises EngineError when every kept slot is out."""
    if not population.quarantined(best):
        return best
    best = next((s for s in ctx.ranking if s not in ctx.refill and not population.quarantined(s)), -1)
    if best < 0:
        raise EngineError("every kept slot was quarantined while the reward proposal ran; "
                          "no learner can be inherited from")
    return best


def share_best_reward(population: Population, rewards: list[RewardFunction], event: LogEvent, round_: int,
                      refill: Sequence[int], evals: Sequence[MemberEvaluation], best: int,
                      replaced: dict[int, str]) -> None:
    """A reward that went NaN/inf on new steps must not survive an update that brought no candidate for its slot
    (it would break the reset learner again at once): the slot shares the best slot's reward until a later update
    refills it (a ``reward_shared`` event; ``replaced`` gains the slot)."""
    for slot in refill:
        if slot not in replaced and population.reward_nonfinite(slot, evals[slot]):
            shared = rewards[best]
            population.install(slot, shared, best)
            rewards[slot] = shared
            replaced[slot] = shared.id
            event({"event": "reward_shared", "round": round_, "slot": slot, "reward_id": shared.id,
                   "reason": "its reward was NaN/inf on new steps and no valid candidate arrived"})


def inheriting(rule: str, ctx: UpdateContext, best: int, replaced: Collection[int],
               num_slots: int) -> tuple[list[int], dict[str, Any]]:
    """The slots whose learners restart from ``best``'s, and the ``reward_update`` event's fields on it
    (``loop/inheritance.py``): a quarantined slot's even when its reward is kept (its weights are broken), a
    replaced one's only when the best can give it something."""
    broken = {s.slot for s in ctx.slots[:num_slots] if s.quarantined and s.slot != best}
    return inheritance(rule, ctx.slot(best), replaced, broken)


def update_record(ctx: UpdateContext, best: int, replaced: Mapping[int, str], inherited: Mapping[str, Any],
                  installed_at: int, population_fields: Mapping[str, Any], selection: str,
                  timing: Mapping[str, float]) -> dict[str, Any]:
    """The ``reward_update`` event: the ranking, the elites, what was replaced and inherited (``inherited``:
    ``loop/inheritance.py``'s fields), the population's own fields, the selection method unless truncation,
    ``timing``'s seconds and the diversity measure where there is one."""
    method = {} if selection == "truncation" else {"selection": selection}
    record: dict[str, Any] = {
        "event": "reward_update", "round": ctx.round, "env_steps": installed_at,
        "proposed_at": ctx.env_steps, **population_fields, **method,
        "fitness": {str(s.slot): s.fitness for s in ctx.slots}, "ranking": list(ctx.ranking),
        "elites": list(ctx.elites), "best": best, "replaced": {str(s): rid for s, rid in replaced.items()},
        **inherited, "slots": [s.to_json("events") for s in ctx.slots],
        **{name: float(value) for name, value in timing.items()},
    }
    if ctx.diversity is not None:
        record["diversity"] = ctx.diversity.to_json()
    return record
