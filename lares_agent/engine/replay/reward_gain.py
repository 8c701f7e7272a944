"""What a reward pays for solving its task: the mean gain from the buffer's states to the goal, and the scale that
makes a written reward's gain a chosen size.

Why: the learner's entropy bonus (alpha * |A| per step at the start) competes with what the reward pays along
the task. The small model's rewards often pay a fraction of what the tasks' own MetaWorld rewards pay for the
goal, and such a reward learns late or never where the same reward scaled up learns as fast as the task's own
(docs/RESULTS.md, "A reward's scale"). LaRes matches a new reward to the best survivor's column
(docs/lares-reference.md §6), which leaves the first rewards as written; this gives them a scale to start from.

The goal is where the task's progress and approach distances are 0 and its success test holds: the object in
place with the hand at it, as at the end of a solved episode (the tasks' own rewards pay for progress only with
the hand at the object). Every other feature keeps the value the state had, so the gain leaves out what a reward
pays for effort or speed. A factor fixes a reward's size, not its shape: one that pays mostly for reaching the
object stays so (docs/RESULTS.md, the same section).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lares_agent.engine.contracts import NEXT_PREFIX, HumanReward, RewardFunction
from lares_agent.engine.tasks import SUCCESS, TaskSpec

__all__ = ["GAIN_SCALE_BOUNDS", "gain_scale", "goal_features", "goal_gain", "start_scale"]

GAIN_SCALE_BOUNDS = (0.01, 100.0)
"""The factor is kept within these, so a reward that pays almost nothing for the goal is not blown up to noise."""


def goal_features(features: Mapping[str, np.ndarray], task: TaskSpec) -> dict[str, np.ndarray]:
    """``features`` with the task's progress and approach distances at 0 (now and at the next step, where the rows
    carry it) and its success indicator at 1."""
    goal = dict(features)
    for name in (task.progress_feature, task.approach_feature):
        for key in (name, NEXT_PREFIX + name) if name else ():
            if key in goal:
                goal[key] = np.zeros_like(np.asarray(goal[key], np.float64))
    if SUCCESS in goal:
        goal[SUCCESS] = np.ones_like(np.asarray(goal[SUCCESS], np.float64))
    return goal


def goal_gain(fn: RewardFunction, features: Mapping[str, np.ndarray], task: TaskSpec) -> float:
    """Mean over the rows of fn(at the goal) - fn(as stored); NaN where either is never finite."""
    with np.errstate(all="ignore"):
        here = np.asarray(fn(features), np.float64)
        there = np.asarray(fn(goal_features(features, task)), np.float64)
    gain = np.broadcast_to(there, np.broadcast(here, there).shape) - here
    finite = gain[np.isfinite(gain)]
    return float(finite.mean()) if finite.size else float("nan")


def gain_scale(gain: float, target: float) -> float:
    """The factor that makes ``gain`` ``target``, within `GAIN_SCALE_BOUNDS`; 1 (as written) where the reward pays
    nothing or less at the goal: no factor turns that into pay for the task."""
    if not (np.isfinite(gain) and gain > 0):
        return 1.0
    low, high = GAIN_SCALE_BOUNDS
    return float(min(max(target / gain, low), high))


def start_scale(fn: RewardFunction, features: Mapping[str, np.ndarray], task: TaskSpec,
                target: float | None) -> tuple[float, dict[str, Any] | None]:
    """A starting reward's factor (`ReplayConfig.reward_gain`) and the record of it the warm-up event keeps; (1,
    None) for the task's own reward, which is taken as the environment gives it, and where no target is set."""
    if target is None or isinstance(fn, HumanReward):
        return 1.0, None
    gain = goal_gain(fn, features, task)
    scale = gain_scale(gain, target)
    return scale, {"reward_id": fn.id, "gain": gain if np.isfinite(gain) else None, "target": target, "scale": scale}
