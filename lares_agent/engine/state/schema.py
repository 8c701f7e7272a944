"""The engine state inside a checkpoint: its version, and what reading one back checks and rebuilds.

A killed run resumes with nothing lost (docs/DESIGN.md §6). A saved state holds the learners, the buffer where
there is one, every reward as ``to_json()``, the generators and the counters as ``dataclasses.asdict``;
checkpoints are taken only at step boundaries and episode reset seeds derive from (run seed, episode counter), so
a restored engine with fresh environments plays exactly the steps the original would have played next. The loop
writes the state (``loop/records.py``, ``engine_state``); ``populations/__init__.py`` checks it and rebuilds its
rewards before it builds the engine, and the loop and the replay population read their counters back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from lares_agent.engine.contracts import HumanReward, LoadReward, RewardFunction
from lares_agent.engine.errors import EngineError

__all__ = ["STATE_VERSION", "check_state", "load_counters", "rewards_from_state"]

STATE_VERSION = 3
"""Version of the engine state inside a checkpoint. 3: the loop's counters, generator and rewards, and the
population's own state under ``population`` (``protocols.Population.state_dict``)."""

C = TypeVar("C")


def load_counters(cls: type[C], data: Mapping[str, Any]) -> C:
    """A counters dataclass from its ``asdict`` form; a missing or unknown field is an EngineError (the version says
    which fields to expect, so a mismatch is a corrupt checkpoint)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if set(data) != names:
        raise EngineError(f"checkpoint counters {sorted(data)} do not match {cls.__name__} fields {sorted(names)}")
    return cls(**dict(data))


def check_state(state: Mapping[str, Any], learner: str, task_name: str) -> None:
    """Refuse, with one line, a state of another version, learner kind or task."""
    version = state.get("version")
    if version != STATE_VERSION:
        raise EngineError(f"checkpoint engine state version {version} cannot be loaded: this engine reads version "
                          f"{STATE_VERSION} (start the run again)")
    if state.get("learner") != learner:
        raise EngineError(f"checkpoint is a {state.get('learner')!r} engine state, not {learner!r}")
    if state.get("task") != task_name:
        raise EngineError(f"checkpoint is for task {state.get('task')!r}, not {task_name!r}")


def rewards_from_state(state: Mapping[str, Any], load_reward: LoadReward | None,
                       human_expression: Mapping[str, str] | None = None) -> list[RewardFunction]:
    """Every learner's reward from a saved state: the human reward is rebuilt here (with its saved complexity and
    ``human_expression``, which the state does not keep), others by ``load_reward``."""
    out: list[RewardFunction] = []
    for data in state["rewards"]:
        if data.get("kind") == "human":
            complexity = data.get("complexity")
            out.append(HumanReward(float(complexity) if isinstance(complexity, (int, float)) else 0.0,
                                   human_expression))
        elif load_reward is None:
            raise EngineError(f"checkpoint holds reward {data.get('id')!r} but no load_reward was given")
        else:
            out.append(load_reward(data))
    return out
