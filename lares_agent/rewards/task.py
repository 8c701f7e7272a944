"""What the reward layer needs to know about a task: its features and the distances a reward must close.

A structural protocol, so the engine's `TaskSpec` satisfies it without this layer importing the engine's task
machinery, and a test task is a four-field dataclass rather than a duck-typed stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["HUMAN_REWARD_FEATURE", "RewardTask", "TaskFeature", "allowed_features"]

# The feature under which a task exposes its own reward (engine/contracts.py names it the same): a candidate
# never reads it, or the LLM would copy the human reward it must not see in the from-scratch setting.
HUMAN_REWARD_FEATURE = "human_reward"


class TaskFeature(Protocol):
    """One declared reward feature: the name expressions use and its unit (which sets a synthetic range)."""

    @property
    def name(self) -> str: ...

    @property
    def unit(self) -> str: ...


class RewardTask(Protocol):
    """The task as the validator sees it.

    `progress_feature` is lower-is-better (the distance left to the goal); `approach_feature`, where the task
    names one, is the distance the robot must close before progress can move at all (docs/results-archive.md).
    """

    @property
    def name(self) -> str: ...

    @property
    def features(self) -> Sequence[TaskFeature]: ...

    @property
    def progress_feature(self) -> str: ...

    @property
    def approach_feature(self) -> str | None: ...


def allowed_features(task: RewardTask) -> tuple[str, ...]:
    """Names a reward expression may use: the task's declared features except its own reward."""
    names = tuple(f.name for f in task.features if f.name != HUMAN_REWARD_FEATURE)
    if not names:
        raise ValueError(f"task {task.name} declares no reward features")
    return names
