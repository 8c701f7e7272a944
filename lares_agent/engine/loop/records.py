"""The loop's counters, the engine state and policy state it saves, and its part of a metrics row.

What a saved state holds, its version and the checks that read it back are ``state/schema.py``; the run log that
writes events, metrics rows and checkpoints is ``state/log.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lares_agent.engine.contracts import MemberEvaluation, RewardFunction
from lares_agent.engine.protocols import Population
from lares_agent.engine.setup.config import EngineConfig
from lares_agent.engine.state.schema import STATE_VERSION

__all__ = ["Counters", "engine_state", "evaluation_row", "policy_state"]


@dataclass
class Counters:
    """What the loop counts; the reward update moves ``round``, ``best_slot`` and ``last_update_steps``
    (``next_*`` None: that periodic event is off)."""

    env_steps: int = 0
    """Counted env steps of training episodes (the budget)."""
    eval_episode_counter: int = 0
    """Evaluation episodes played so far (their reset seeds come from this counter)."""
    round: int = 0
    """Reward updates done."""
    last_update_steps: int = 0
    best_slot: int = 0
    next_eval: int | None = None
    next_checkpoint: int | None = None

    def mark_update(self, round_: int, best: int, started_at: int) -> None:
        """Record a finished reward update that started at env step ``started_at``."""
        self.round, self.best_slot, self.last_update_steps = round_, best, started_at


def engine_state(task: str, config: EngineConfig, counters: Counters, rng: np.random.Generator,
                 rewards: Sequence[RewardFunction], population: Population,
                 handover: Mapping[str, Any]) -> dict[str, Any]:
    """The full engine state as nested dicts of arrays, tensors and scalars (``STATE_VERSION``; ``check_state`` and
    ``rewards_from_state`` of ``state/schema.py`` read it back). ``handover``: the hand-over's own state
    (``loop/handover.py``)."""
    return {
        "version": STATE_VERSION,
        "learner": population.kind,
        "task": task,
        "config": config.to_json(),
        "counters": dataclasses.asdict(counters),
        "rng": rng.bit_generator.state,
        "rewards": [fn.to_json() for fn in rewards],
        "leaders": [[i] for i in population.leaders],
        "population": population.state_dict(),
        "handover": handover,
    }


def policy_state(task: str, config: EngineConfig, counters: Counters, population: Population) -> dict[str, Any]:
    """What policy files are cut from (``policy_artefact.artefact_from_state``): the engine state's fields they
    read, with the population's policies only."""
    return {"learner": population.kind, "task": task, "config": config.to_json(),
            "counters": dataclasses.asdict(counters), "population": population.policy_state()}


def evaluation_row(
    kind: str,
    counters: Counters,
    slot_evals: Sequence[MemberEvaluation],
    reward_ids: Sequence[str],
    wall_time: float,
    extra: MemberEvaluation | None = None,
    slot_fields: Callable[[int], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The loop's part of a metrics row: every slot's evaluation (``slot_fields`` adds the population's own
    per-slot fields) and the success summaries; the population adds its own fields to the returned dict."""
    succ = [e.success_rate for e in slot_evals]
    record: dict[str, Any] = {
        "kind": kind,
        "env_steps": counters.env_steps,
        "round": counters.round,
        "slots": [{**e.record(reward_ids[e.member]).to_json("metrics"),
                   **(slot_fields(e.member) if slot_fields is not None else {})} for e in slot_evals],
        # §12 item 16: report the max (the reference's number) AND the mean and the selected policy.
        "success_max": max(succ) if succ else None,
        "success_mean": float(np.mean(succ)) if succ else None,
        # the ranked-first policy: a slot's, or the init setting's human-reward learner's (member K)
        "success_best_slot": next((e.success_rate for e in [*slot_evals, *([extra] if extra else [])]
                                   if e.member == counters.best_slot), None),
        "best_slot": counters.best_slot,
        "wall_time": wall_time,
    }
    if extra is not None:
        # the init setting's extra learner: its record without a slot (it is ranked with the slots, not one)
        summary = extra.record("").to_json("metrics")
        record["extra"] = {k: v for k, v in summary.items() if k not in ("slot", "reward_id")}
    return record
