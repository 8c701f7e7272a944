"""Which reward a run hands the user: the one `lares export` writes by default.

The run's selected reward is the reward of the learner whose policy it hands over: the newest `handover` event's
choice, where the run replayed its top learners on fresh episodes (`runs/handover.py`); else the learner it ranks
first at the end: the final metrics line's `best_slot` (docs/lares-reference.md §12 item 16: the selected policy,
not the optimistic max), else the last reward update's best slot (a baseline's one reward), else the candidate of
highest fitness, else the newest accepted candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from lares_agent.runs import RunLayout, RunLog
from lares_agent.runs.handover import latest_handover, ordinal
from lares_agent.runs.reader import HUMAN_REWARD_ID, RunData, read_run

__all__ = ["HUMAN_REWARD_ID", "SelectedReward", "selected_reward"]


@dataclass(frozen=True)
class SelectedReward:
    """A reward id and one line saying why it is the one."""

    reward_id: str
    why: str


def selected_reward(path: Path, data: RunData | None = None) -> SelectedReward | None:
    """The run's selected reward (None when the run holds no reward yet)."""
    data = data if data is not None else read_run(path)
    handover = latest_handover(data.events)
    winner = handover.winner if handover is not None else None
    if handover is not None and winner is not None:
        how = (f"handed over on {handover.episodes} fresh episodes at {handover.env_steps:,} env steps"
               + (f", ranked {ordinal(winner.rank)} by fitness" if winner.rank is not None else ""))
        if winner.reward_id == HUMAN_REWARD_ID:
            return SelectedReward(HUMAN_REWARD_ID, f"the task's own reward: its learner {how}")
        return SelectedReward(winner.reward_id, f"slot {winner.slot}'s reward, its learner {how}")
    for row in reversed(RunLog(RunLayout(Path(path))).metrics.read()):
        if row.best_slot is None:
            continue
        if row.best_slot == len(row.slots) and row.extra is not None:  # the init setting's human-reward learner
            return SelectedReward(HUMAN_REWARD_ID, "the task's own reward: its learner ranked first at the last "
                                           f"evaluation ({row.env_steps:,} env steps)")
        for slot in row.slots:
            if slot.slot == row.best_slot and slot.reward_id:
                return SelectedReward(slot.reward_id, f"slot {slot.slot}'s reward, ranked first at the last "
                                                      f"evaluation ({row.env_steps:,} env steps)")
    config = data.config
    if config.get("setting") == "baseline":  # one learner on one reward, before its first evaluation
        given = config.get("reward_id") if config.get("reward_components") else None
        own = "success" if config.get("baseline_reward") == "success" else HUMAN_REWARD_ID
        return SelectedReward(str(given or own), "the baseline's one reward (no evaluation yet)")
    for update in reversed(data.updates):
        if update.best_slot is not None and update.best_slot in update.judged:
            return SelectedReward(update.judged[update.best_slot],
                                  f"the best slot's reward at the round-{update.round} reward update")
    fit = [c for c in data.by_id.values() if c.fitness is not None and math.isfinite(c.fitness) and c.components]
    if fit:
        best = max(fit, key=lambda c: c.fitness or 0.0)
        return SelectedReward(best.id, f"the candidate of highest fitness ({best.fitness:.3g})")
    accepted = [c for c in data.candidates if c.accepted and c.components]
    if accepted:
        return SelectedReward(accepted[-1].id, "the newest accepted candidate (no evaluation yet)")
    return None
