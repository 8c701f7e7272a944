"""What a task is for the reward search: an env factory, named scalar reward features and a success test.

A reward candidate may only read the features a task declares (docs/DESIGN.md §3), so each feature carries a one-line
meaning and a unit that go into the LLM prompt. Features are computed in one vectorised call from a float64
"raw state" captured right after every env step, so relabelling a whole replay buffer never touches the
simulator again (docs/lares-reference.md §12 items 19 and 24: no per-step info dicts, no Python reward loops).
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

from lares_agent.errors import LaresError

__all__ = [
    "FAMILIES",
    "HUMAN_REWARD",
    "SUCCESS",
    "Feature",
    "FeatureView",
    "TaskError",
    "TaskShapeError",
    "TaskSpec",
    "TaskSpecError",
]

SUCCESS = "success"
"""Feature every task returns: 1.0 where the task's own success test holds, else 0.0."""
HUMAN_REWARD = "human_reward"
"""Feature every task returns: the env's own reward, NaN where the task has none (never shown to the LLM)."""
FAMILIES = ("metaworld", "gymnasium", "custom")

EnvFactory = Callable[[int], gymnasium.Env]
RawStateFn = Callable[[gymnasium.Env, Any, Mapping[str, Any]], np.ndarray]
FeatureFn = Callable[[np.ndarray, np.ndarray], Mapping[str, np.ndarray]]


class TaskError(LaresError):
    """Base class of task-registry errors (a user-facing, one-line message)."""


class TaskSpecError(TaskError, ValueError):
    """A task definition is inconsistent (bad feature names, unknown progress feature, wrong shapes from its
    functions)."""


class TaskShapeError(TaskError, ValueError):
    """Arrays handed to a task have the wrong shape."""


@dataclass(frozen=True)
class Feature:
    """One named scalar reward feature.

    `name` is what reward expressions use, `meaning` one line for the LLM, `unit` e.g. "m", "m/s", "rad", "1", "bool".
    `designer` marks a feature that exists to write the task's own reward (a start distance used as a tolerance
    margin, a weighted hand error, the finger pads' gaps): a search from scratch does not offer it to the LLM, so
    every task's scratch setting holds the same generic features (docs/scratch-features.md lists them per task).
    """

    name: str
    meaning: str
    unit: str
    designer: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise TaskSpecError(f"feature name {self.name!r} is not a plain identifier")
        if not self.meaning.strip() or "\n" in self.meaning:
            raise TaskSpecError(f"feature {self.name!r} needs a one-line meaning")
        if not self.unit.strip():
            raise TaskSpecError(f"feature {self.name!r} needs a unit (use '1' for dimensionless)")


class FeatureView(tuple[Feature, ...]):
    """The declared features of a task (a tuple of `Feature`) that can also be called to compute them.

    docs/ARCHITECTURE.md names both `spec.features` (the tuple) and `spec.features(raw, action)` (the computation);
    a dataclass cannot hold a field and a method under one name, so the property returns this view.
    """

    _spec: TaskSpec

    def __new__(cls, spec: TaskSpec) -> FeatureView:
        view = super().__new__(cls, spec.feature_defs)
        view._spec = spec
        return view

    def __call__(self, raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
        return self._spec.compute_features(raw, action)

    def __reduce__(self) -> tuple[type, tuple[tuple[Feature, ...]]]:
        return (tuple, (tuple(self),))  # pickles as the plain tuple: the spec is not dragged along


@dataclass(frozen=True)
class TaskSpec:
    """A task: env factory, horizon, named features, the success test and the human reward where one exists.

    The callables are module-level functions (or `functools.partial` of them over frozen dataclasses) so a spec
    pickles into vector-env workers and Ray actors.
    """

    name: str
    family: str
    description: str
    horizon: int
    feature_defs: tuple[Feature, ...]
    progress_feature: str
    has_human_reward: bool
    success_test: str
    obs_dim: int
    act_dim: int
    state_dim: int
    dt: float
    env_fn: EnvFactory = field(repr=False, compare=False)
    raw_state_fn: RawStateFn = field(repr=False, compare=False)
    feature_fn: FeatureFn = field(repr=False, compare=False)
    # The distance the robot must close before `progress_feature` can move at all (hand to object). Without a
    # term on it a reward gives no signal until the object happens to be touched (docs/results-archive.md).
    approach_feature: str | None = None
    # The env's own reward written in the reward language: (component name, expression) pairs whose sum equals the
    # `human_reward` feature, so the "with init" setting can show the LLM the designer's reward to refine. None
    # where it is not written (the expression is text here: the engine never parses rewards).
    human_components: tuple[tuple[str, str], ...] | None = None
    # Features of the scene that are not part of the task (reach-v3's puck): declared, so rewards that name them
    # still compile, but not listed in the LLM's prompt, and a term that reads nothing else is rejected.
    offstage_features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() for c in self.name):
            raise TaskSpecError(f"task name {self.name!r} must be non-empty and contain no spaces")
        if self.family not in FAMILIES:
            raise TaskSpecError(f"task {self.name}: family {self.family!r} is not one of {', '.join(FAMILIES)}")
        if self.horizon < 1 or min(self.obs_dim, self.act_dim, self.state_dim) < 1 or not self.dt > 0:
            raise TaskSpecError(f"task {self.name}: horizon, obs/act/state dims and dt must be positive")
        names = [f.name for f in self.feature_defs]
        if not all(isinstance(f, Feature) for f in self.feature_defs) or not names:
            raise TaskSpecError(f"task {self.name}: feature_defs must be a non-empty tuple of Feature")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise TaskSpecError(f"task {self.name}: duplicate feature names {duplicates}")
        if HUMAN_REWARD in names:
            raise TaskSpecError(f"task {self.name}: {HUMAN_REWARD!r} is reserved (it is never offered to the LLM)")
        if self.progress_feature not in names:
            raise TaskSpecError(f"task {self.name}: progress feature {self.progress_feature!r} is not declared")
        if self.approach_feature is not None and self.approach_feature not in names:
            raise TaskSpecError(f"task {self.name}: approach feature {self.approach_feature!r} is not declared")
        offstage = set(self.offstage_features)
        if not offstage <= set(names) or offstage & {self.progress_feature, self.approach_feature}:
            raise TaskSpecError(f"task {self.name}: offstage features must be declared and neither the progress "
                                "nor the approach feature")
        if set(self.designer_features) & {self.progress_feature, self.approach_feature}:
            # a scratch reward must use both, so neither may be hidden from it
            raise TaskSpecError(f"task {self.name}: the progress and approach features cannot be the designer's")
        for label in ("env_fn", "raw_state_fn", "feature_fn"):
            if not callable(getattr(self, label)):
                raise TaskSpecError(f"task {self.name}: {label} is not callable")
        self._check_human_components()

    def _check_human_components(self) -> None:
        if self.human_components is None:
            return
        pairs = self.human_components
        if not isinstance(pairs, tuple) or not pairs or not all(
            isinstance(p, tuple) and len(p) == 2 and all(isinstance(v, str) for v in p) for p in pairs
        ):
            raise TaskSpecError(f"task {self.name}: human_components must be a non-empty tuple of (name, expression)")
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names) or not all(n.isidentifier() and not keyword.iskeyword(n) for n in names):
            raise TaskSpecError(f"task {self.name}: human_components names must be distinct identifiers")
        if not self.has_human_reward or any(not text.strip() for _, text in pairs):
            raise TaskSpecError(f"task {self.name}: human_components needs a human reward and non-empty expressions")

    # --- names -------------------------------------------------------------------------------------------
    @property
    def features(self) -> FeatureView:
        """The declared features (iterate for `Feature`s, or call with (raw, action) to compute them)."""
        return FeatureView(self)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """Names a reward expression may use (the declared features, in order)."""
        return tuple(f.name for f in self.feature_defs)

    @property
    def designer_features(self) -> tuple[str, ...]:
        """The features made to write the task's own reward (`Feature.designer`): not offered from scratch."""
        return tuple(f.name for f in self.feature_defs if f.designer)

    @property
    def output_names(self) -> tuple[str, ...]:
        """Every key `compute_features` returns: the declared features, then `success` and `human_reward`."""
        return tuple(dict.fromkeys([*self.feature_names, SUCCESS, HUMAN_REWARD]))

    def feature(self, name: str) -> Feature:
        """The declared feature called `name` (TaskSpecError if it is not declared)."""
        for f in self.feature_defs:
            if f.name == name:
                return f
        raise TaskSpecError(f"task {self.name} has no feature {name!r}")

    # --- env side ----------------------------------------------------------------------------------------
    def make_env(self, seed: int) -> gymnasium.Env:
        """A fresh env (flat float observations, Box actions), seeded; its first `reset()` uses `seed`."""
        return self.env_fn(int(seed))

    def raw_state(self, env: gymnasium.Env, obs: Any, info: Mapping[str, Any]) -> np.ndarray:
        """float64 [state_dim]: everything the features need, captured right after a reset or step.

        `env` is the env `make_env` returned (or a wrapper around it).
        """
        raw = np.asarray(self.raw_state_fn(env, obs, info), dtype=np.float64).reshape(-1)
        if raw.shape != (self.state_dim,):
            raise TaskSpecError(f"task {self.name}: raw_state gave shape {raw.shape}, expected ({self.state_dim},)")
        return raw

    # --- features ----------------------------------------------------------------------------------------
    def compute_features(self, raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
        """All features of N stored steps at once: {name: float64 [N]} for every name in `output_names`.

        Pure numpy on stored state (no simulator). `action` is the env action that led to each raw state.
        """
        raw = np.asarray(raw, dtype=np.float64)
        action = np.asarray(action, dtype=np.float64)
        if raw.ndim != 2 or raw.shape[1] != self.state_dim:
            raise TaskShapeError(f"task {self.name}: raw must be [N, {self.state_dim}], got {list(raw.shape)}")
        if action.ndim != 2 or action.shape != (raw.shape[0], self.act_dim):
            raise TaskShapeError(
                f"task {self.name}: action must be [{raw.shape[0]}, {self.act_dim}], got {list(action.shape)}"
            )
        out = dict(self.feature_fn(raw, action))
        if HUMAN_REWARD not in out and not self.has_human_reward:
            out[HUMAN_REWARD] = np.full(raw.shape[0], np.nan)
        result: dict[str, np.ndarray] = {}
        for name in self.output_names:
            if name not in out:
                raise TaskSpecError(f"task {self.name}: feature function did not return {name!r}")
            value = np.asarray(out[name], dtype=np.float64)
            if value.shape != (raw.shape[0],):
                raise TaskSpecError(
                    f"task {self.name}: feature {name!r} has shape {list(value.shape)}, expected [{raw.shape[0]}]"
                )
            result[name] = value
        return result

    # --- listing -----------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no callables), as `lares tasks --json` prints it."""
        return {
            "name": self.name,
            "family": self.family,
            "description": self.description,
            "horizon": self.horizon,
            "progress_feature": self.progress_feature,
            "approach_feature": self.approach_feature,
            "success_test": self.success_test,
            "has_human_reward": self.has_human_reward,
            "human_components": dict(self.human_components) if self.human_components is not None else None,
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "state_dim": self.state_dim,
            "dt": self.dt,
            "features": [{"name": f.name, "meaning": f.meaning, "unit": f.unit, "designer": f.designer}
                         for f in self.feature_defs],
        }


def row_norm(x: np.ndarray) -> np.ndarray:
    """Euclidean norm of each row of [N, D] (vectorised; used by every family's feature function)."""
    return np.asarray(np.sqrt(np.einsum("ij,ij->i", x, x)))


def info_float(info: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    """`info[key]` as float, `default` where the key is absent (reset infos carry no reward terms)."""
    value = info.get(key, default)
    return float(np.asarray(value, dtype=np.float64).reshape(-1)[0]) if value is not None else default


def check_unique(specs: Iterable[TaskSpec]) -> None:
    """Raise TaskSpecError if two specs share a name (a catalogue typo would otherwise shadow a task)."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise TaskSpecError(f"task {spec.name} is defined twice")
        seen.add(spec.name)
