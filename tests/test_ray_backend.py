"""Ray backend: a short population run on local Ray gives the local backend's result; missing Ray is a clear error.

One local Ray instance (2 CPUs, no dashboard) serves the whole module. The tiny task and rewards are defined
here; Ray's cloudpickle ships them to the actors by value.
"""

from __future__ import annotations

import builtins
import math
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from lares_agent.engine import es
from lares_agent.engine.es_config import ESSearchConfig
from lares_agent.engine.es_search import ESEngine
from lares_agent.engine.metrics import read_jsonl


class PointMass(gymnasium.Env):
    """2-D point moved by 0.1 * action toward a random goal."""

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
        return self._obs(), 0.0, False, False, {}


class _Feature:
    def __init__(self, name: str) -> None:
        self.name, self.meaning, self.unit = name, name, "1"


class _Features(tuple):
    def __call__(self, raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
        dist = np.linalg.norm(raw[:, :2] - raw[:, 2:4], axis=1)
        return {"dist": dist, "action_norm": np.linalg.norm(action, axis=1),
                "success": (dist < 0.1).astype(np.float64), "human_reward": -dist}


class TinyTask:
    name = "point-mass"
    family = "custom"
    description = "move the point to the goal"
    horizon = 10
    progress_feature = "dist"
    has_human_reward = True
    features = _Features((_Feature("dist"), _Feature("action_norm")))

    def make_env(self, seed: int) -> gymnasium.Env:
        return PointMass()

    def raw_state(self, env: gymnasium.Env, obs: np.ndarray, info: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(obs, np.float64)


class FeatureReward:
    def __init__(self, feature: str, scale: float = 1.0, id: str | None = None) -> None:
        self.feature, self.scale = feature, scale
        self.id = id or f"neg-{feature}-{scale:g}"
        self.complexity = 1.0

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        return -self.scale * np.asarray(features[self.feature], np.float64)

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"main": self(features)}

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "feature": self.feature, "scale": self.scale}


def load_reward(d: Mapping[str, Any]) -> FeatureReward:
    return FeatureReward(d["feature"], d["scale"], d["id"])


def propose(ctx: Any) -> list[FeatureReward]:
    return [FeatureReward("dist", 2.0 + ctx.round + i) for i in range(len(ctx.refill))]


def _config(backend: str) -> ESSearchConfig:
    return ESSearchConfig(
        population_size=3, elites=1, total_steps=8 * 10 * 3 * 4, reward_every_generations=2,
        eval_every_generations=2, eval_episodes=2, update_eval_episodes=2, rollouts_kept=1, backend=backend,
        es=es.ESConfig(population_size=8, sigma=0.1, learning_rate=0.05, total_generations=10),
    )


def _rewards() -> list[FeatureReward]:
    return [FeatureReward("dist"), FeatureReward("action_norm"), FeatureReward("dist", 2.0)]


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason="Ray is not installed (extra lares-agent[ray])")
    from lares_agent.engine.ray_backend import ensure_ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # test classes travel by value
    started = ensure_ray(num_cpus=2)
    yield ray
    if started:
        ray.shutdown()


def _run(backend: str, run_dir: Path) -> tuple[ESEngine, dict[str, Any]]:
    engine = ESEngine(TinyTask(), _config(backend), _rewards(), propose, run_dir)
    try:
        engine.run()
        return engine, engine.state_dict()
    finally:
        engine.close()


def test_ray_run_matches_local_run(ray_local: Any, tmp_path: Path) -> None:
    local, local_state = _run("local", tmp_path / "local")
    remote, remote_state = _run("ray", tmp_path / "ray")
    assert remote.round == local.round >= 1 and remote.env_steps == local.env_steps
    assert [fn.id for fn in remote.rewards] == [fn.id for fn in local.rewards]
    for a, b in zip(local_state["learners"], remote_state["learners"], strict=True):
        assert np.allclose(a["es"]["mean"], b["es"]["mean"])
    rows_l = list(read_jsonl(tmp_path / "local" / "metrics.jsonl"))
    rows_r = list(read_jsonl(tmp_path / "ray" / "metrics.jsonl"))
    assert len(rows_l) == len(rows_r)
    for rl, rr in zip(rows_l, rows_r, strict=True):
        assert [s["reward_id"] for s in rl["slots"]] == [s["reward_id"] for s in rr["slots"]]
        for sl, sr in zip(rl["slots"], rr["slots"], strict=True):
            assert math.isclose(sl["own_return"], sr["own_return"], rel_tol=1e-9, abs_tol=1e-9)
            assert sl["success"] == sr["success"]


def test_local_checkpoint_resumes_on_ray(ray_local: Any, tmp_path: Path) -> None:
    _, local_state = _run("local", tmp_path / "a")
    engine = ESEngine.restore(tmp_path / "a" / "checkpoints" / "round-0001", TinyTask(), load_reward, propose,
                              tmp_path / "b", backend="ray")
    try:
        assert engine.config.backend == "ray" and engine.round == 1
        engine.run()
        state = engine.state_dict()
    finally:
        engine.close()
    assert state["counters"] == local_state["counters"]
    for a, b in zip(local_state["learners"], state["learners"], strict=True):
        assert np.allclose(a["es"]["mean"], b["es"]["mean"])


def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from lares_agent.engine.ray_backend import RayUnavailableError, import_ray

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(RayUnavailableError, match=r"lares-agent\[ray\]"):
        import_ray()
