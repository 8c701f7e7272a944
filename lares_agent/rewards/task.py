"""What the reward layer needs to know about a task: its features and the distances a reward must close.

A structural protocol, so the engine's `TaskSpec` satisfies it without this layer importing the engine's task
machinery, and a test task is a four-field dataclass rather than a duck-typed stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "ACTION_FEATURES",
    "HUMAN_EXPR_ID",
    "HUMAN_REWARD_FEATURE",
    "RewardTask",
    "TaskFeature",
    "action_features",
    "allowed_features",
    "designer_features",
    "human_components",
    "human_record",
    "offstage_features",
    "prompt_features",
]

# The feature under which a task exposes its own reward (engine/contracts.py names it the same): a candidate
# never reads it, or the LLM would copy the human reward it must not see in the from-scratch setting.
HUMAN_REWARD_FEATURE = "human_reward"

ACTION_FEATURES = ("action_norm", "gripper_command")
"""Features the built-in tasks compute from the step's action, not from the state it reached: a potential, a
function of the state (engine/replay/potential.py), never reads them."""

HUMAN_EXPR_ID = "human-expr"
"""The id of the task's own reward written as an expression (`human_record`), as records and exports name it."""


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


def offstage_features(task: object) -> frozenset[str]:
    """Features of the scene that are not part of the task (`TaskSpec.offstage_features`; none for a task without
    the field): a reward may name them, the prompt does not list them, and a term reading only them pays for
    nothing the task asks."""
    return frozenset(str(n) for n in getattr(task, "offstage_features", ()) or ())


def designer_features(task: object) -> frozenset[str]:
    """Features made to write the task's own reward (`TaskSpec.designer_features`; none for a task without the
    field): a reward may name them where the designer's features are offered (the init setting, or
    `--designer-features`), and from scratch the prompt does not list them and the validator rejects them."""
    return frozenset(str(n) for n in getattr(task, "designer_features", ()) or ())


def action_features(task: RewardTask) -> frozenset[str]:
    """The task's features read from the action (`ACTION_FEATURES`, those it has)."""
    return frozenset(ACTION_FEATURES) & set(allowed_features(task))


def prompt_features(task: RewardTask, designer: bool = True, state_only: bool = False) -> tuple[str, ...]:
    """The features the LLM is shown and its answers may name: the allowed ones less the offstage ones, less the
    designer's where `designer` is False (from scratch), and less the action's where `state_only` (a potential)."""
    hidden = offstage_features(task) | (frozenset() if designer else designer_features(task))
    hidden |= action_features(task) if state_only else frozenset()
    return tuple(n for n in allowed_features(task) if n not in hidden)


def human_components(task: object) -> tuple[tuple[str, str], ...] | None:
    """The task's own reward as (component, expression) pairs (`TaskSpec.human_components`, a tuple of pairs or a
    mapping), None where the task has none written. Read by attribute, so a task without the field (a test's
    four-field dataclass) simply has none."""
    value = getattr(task, "human_components", None)
    if value is None:
        return None
    pairs = tuple(value.items()) if isinstance(value, Mapping) else tuple(value)
    return tuple((str(name), str(text)) for name, text in pairs) or None


def human_record(task: object) -> dict[str, Any] | None:
    """The task's own reward as a candidate record (`{"id", "components", "rationale"}`, what `compile_record` and
    `validate` take), None where the task has none written."""
    components = human_components(task)
    if components is None:
        return None
    name = getattr(task, "name", "the task")
    return {"id": HUMAN_EXPR_ID, "components": dict(components),
            "rationale": f"the environment's own reward of {name}, written over its features"}
