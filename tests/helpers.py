"""Small fixtures shared by the engine tests: a point-mass env and task, a one-feature reward, random batches.

They live in one module so the SAC, ES, Ray and fault tests train on the same toy problem. The env's own
reward and `info` are never read by the engines (features come from the raw state), so every test can use
this one env; the tiny task is duck-typed on purpose (the ES engine must not need a real `TaskSpec`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np


# ---------------------------------------------------------------------------------------------- tiny task
class PointMass(gymnasium.Env):
    """2-D point moved by 0.1 * action toward a random goal; success within 0.1 of the goal."""

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(-2.0, 2.0, (4,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.pos = np.zeros(2)
        self.goal = np.zeros(2)

    def _obs(self) -> np.ndarray:
        return np.concatenate([self.pos, self.goal]).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-0.5, 0.5, 2)
        self.goal = self.np_random.uniform(-0.5, 0.5, 2)
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.pos = np.clip(self.pos + 0.1 * np.asarray(action, np.float64), -1.0, 1.0)
        dist = float(np.linalg.norm(self.pos - self.goal))
        return self._obs(), -dist, False, False, {"success": float(dist < 0.1)}


def point_features(raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    """Features of a batch of raw states (pos, goal, ...) and actions; the human reward is -distance."""
    dist = np.linalg.norm(raw[:, :2] - raw[:, 2:4], axis=1)
    return {"dist": dist, "action_norm": np.linalg.norm(action, axis=1),
            "success": (dist < 0.1).astype(np.float64), "human_reward": -dist}


@dataclass(frozen=True)
class FeatureDef:
    name: str
    meaning: str = ""
    unit: str = "1"


class _Features(tuple):
    """The declared features that can also be called to compute them (as ``TaskSpec.features``)."""

    def __call__(self, raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
        return point_features(raw, action)


class TinyTask:
    """Duck-typed TaskSpec around PointMass for fast loop tests."""

    name = "point-mass"
    family = "custom"
    description = "move the point to the goal"
    progress_feature = "dist"
    has_human_reward = True
    features = _Features((FeatureDef("dist"), FeatureDef("action_norm")))

    def __init__(self, horizon: int = 12) -> None:
        self.horizon = horizon

    def make_env(self, seed: int) -> gymnasium.Env:
        return PointMass()

    def raw_state(self, env: gymnasium.Env, obs: np.ndarray, info: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(obs, np.float64)


# ---------------------------------------------------------------------------------------------- rewards
class FeatureReward:
    """reward = -scale * feature, serialisable for checkpoints."""

    def __init__(self, feature: str, scale: float = 1.0, id: str | None = None) -> None:
        self.feature, self.scale = feature, scale
        self.id = id or f"neg-{feature}-{scale:g}"
        self.key = f"-{scale:g}*{feature}"  # the reward's identity (rewards.reward_key in a real run)
        self.complexity = 1.0

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        return -self.scale * np.asarray(features[self.feature], np.float64)

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"main": self(features)}

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "feature": self.feature, "scale": self.scale,
                "components": {"main": f"-{self.scale:g}*{self.feature}"}}


def load_reward(d: Mapping[str, Any]) -> FeatureReward:
    return FeatureReward(d["feature"], d["scale"], d["id"])


def three_rewards() -> list[FeatureReward]:
    """A population of three distinct rewards over the tiny task's features."""
    return [FeatureReward("dist"), FeatureReward("action_norm"), FeatureReward("dist", 2.0)]


def final_state(engine: Any) -> dict[str, Any]:
    """Run ``engine`` to its budget and return its state; the engine is closed either way."""
    try:
        engine.run()
        return engine.state_dict()
    finally:
        engine.close()


# ---------------------------------------------------------------------------------------------- batches
def random_transitions(rng: np.random.Generator, lead: tuple[int, ...], obs_dim: int,
                       act_dim: int) -> dict[str, np.ndarray]:
    """obs, action, reward, next_obs of shape ``lead + (...)`` as float32, drawn in that order from ``rng``."""
    return {
        "obs": rng.normal(size=(*lead, obs_dim)).astype(np.float32),
        "action": rng.uniform(-1, 1, (*lead, act_dim)).astype(np.float32),
        "reward": rng.normal(size=lead).astype(np.float32),
        "next_obs": rng.normal(size=(*lead, obs_dim)).astype(np.float32),
    }
