"""The ``handover`` event: which learners a run replayed on fresh episodes before it wrote a policy, how each
did there, and which one it handed over (the engine decides, ``engine/loop/handover.py``; the last screen,
``lares eval`` and the report read it back through :class:`HandoverRecord`).

The same few numbers travel inside the policy file it chose (``policy_fields``), so a policy file says how it was
chosen without its run folder.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lares_agent.runs.coerce import as_float, as_float_list, as_int, as_int_list, as_str
from lares_agent.runs.events import Event

__all__ = ["HUMAN_ID", "HandoverCandidate", "HandoverRecord", "latest_handover", "ordinal"]

HUMAN_ID = "human"
"""The reward id of the task's own reward (``engine.contracts.HumanReward.id``)."""


def ordinal(rank: int) -> str:
    """0 -> "first", 1 -> "2nd", 2 -> "3rd", 3 -> "4th": a place in the fitness ranking."""
    if rank == 0:
        return "first"
    n = rank + 1
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class HandoverCandidate:
    """One learner replayed for the hand-over: its slot, reward, place in the fitness ranking and what it did on
    the fresh episodes (means over them; NaN where the task has no return or progress)."""

    slot: int
    reward_id: str
    rank: int | None
    """Its place in the reward update's fitness ranking (0: ranked first; None: the run had not ranked yet)."""
    success: float
    task_return: float = math.nan
    final_progress: float = math.nan

    @property
    def name(self) -> str:
        """"slot 1" or, for the init setting's learner on the task's own reward, "task's own reward"."""
        return "task's own reward" if self.reward_id == HUMAN_ID else f"slot {self.slot}"

    def to_json(self) -> dict[str, Any]:
        return {"slot": self.slot, "reward_id": self.reward_id, "rank": self.rank, "success": self.success,
                "task_return": self.task_return, "final_progress": self.final_progress}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> HandoverCandidate | None:
        slot = as_int(row.get("slot"))
        if slot is None:
            return None
        return cls(slot, as_str(row.get("reward_id"), "?"), as_int(row.get("rank")), as_float(row.get("success")),
                   as_float(row.get("task_return")), as_float(row.get("final_progress")))


@dataclass(frozen=True)
class HandoverRecord:
    """One hand-over: the policy file it wrote (``final`` or ``round-0003``), the candidates in fitness order,
    the slot handed over and the slot the reward update ranked first."""

    policy: str
    episodes: int
    candidates: tuple[HandoverCandidate, ...]
    chosen: int
    ranked_first: int
    round: int = 0
    env_steps: int = 0
    seconds: float = math.nan
    """Wall seconds the replay took."""

    @property
    def winner(self) -> HandoverCandidate | None:
        return next((c for c in self.candidates if c.slot == self.chosen), None)

    @property
    def changed(self) -> bool:
        """Whether the fresh episodes handed over another learner than the one ranked first by fitness."""
        return self.chosen != self.ranked_first

    def sentence(self) -> str:
        """One line: each candidate's success on the fresh episodes and which won, e.g. "on 20 fresh episodes:
        slot 1 70% (handed over; ranked 2nd by fitness), slot 0 55% (ranked first), task's own reward 60%"."""
        parts = []
        for c in self.candidates:
            notes = (["handed over"] if c.slot == self.chosen else []) + (
                [f"ranked {ordinal(c.rank)}" + (" by fitness" if c.slot == self.chosen else "")]
                if c.rank is not None and (c.rank == 0 or c.slot == self.chosen) else [])
            share = f"{c.success:.0%}" if math.isfinite(c.success) else "--"
            parts.append(f"{c.name} {share}" + (f" ({'; '.join(notes)})" if notes else ""))
        return f"on {self.episodes} fresh episodes: " + ", ".join(parts)

    def to_event(self) -> dict[str, Any]:
        """The ``events.jsonl`` line."""
        return {"event": "handover", "round": self.round, "env_steps": self.env_steps, "policy": self.policy,
                "episodes": self.episodes, "candidates": [c.to_json() for c in self.candidates],
                "chosen": self.chosen, "ranked_first": self.ranked_first, "seconds": self.seconds}

    @classmethod
    def from_event(cls, event: Event) -> HandoverRecord | None:
        """The typed view of a ``handover`` line (None for another kind, or one without its chosen slot)."""
        chosen = as_int(event.get("chosen"))
        if event.event != "handover" or chosen is None:
            return None
        rows = event.get("candidates")
        found = [HandoverCandidate.from_json(r) for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) \
            else []
        return cls(as_str(event.get("policy"), "?"), as_int(event.get("episodes")) or 0,
                   tuple(c for c in found if c is not None), chosen, as_int(event.get("ranked_first")) or 0,
                   event.round or 0, event.env_steps or 0, as_float(event.get("seconds")))

    def policy_fields(self) -> dict[str, Any]:
        """What the chosen policy file carries of its hand-over (flat, in the format of
        ``engine/policies/policy_artefact.py``)."""
        return {"handover_episodes": self.episodes, "handover_slots": [c.slot for c in self.candidates],
                "handover_reward_ids": [c.reward_id for c in self.candidates],
                "handover_ranks": [-1 if c.rank is None else c.rank for c in self.candidates],
                "handover_success": [c.success for c in self.candidates], "handover_ranked_first": self.ranked_first}

    @classmethod
    def from_policy(cls, data: Mapping[str, Any]) -> HandoverRecord | None:
        """The hand-over a policy file carries (None: the file was written without one)."""
        if "handover_slots" not in data:
            return None
        slots, ranks = as_int_list(data.get("handover_slots")), as_int_list(data.get("handover_ranks"))
        success, ids = as_float_list(data.get("handover_success")), _strings(data.get("handover_reward_ids"))
        candidates = tuple(HandoverCandidate(s, ids[i] if i < len(ids) else "?",
                                             ranks[i] if i < len(ranks) and ranks[i] >= 0 else None,
                                             success[i] if i < len(success) else math.nan)
                           for i, s in enumerate(slots))
        return cls("policy", as_int(data.get("handover_episodes")) or 0, candidates,
                   as_int(data.get("slot")) or 0, as_int(data.get("handover_ranked_first")) or 0,
                   as_int(data.get("round")) or 0, as_int(data.get("env_steps")) or 0)


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, Sequence) and not isinstance(value, str) else []


def latest_handover(events: Iterable[Event]) -> HandoverRecord | None:
    """The newest ``handover`` line of a run's events (None: the run handed nothing over on fresh episodes)."""
    found = None
    for event in events:
        record = HandoverRecord.from_event(event) if event.event == "handover" else None
        if record is not None:
            found = record
    return found
