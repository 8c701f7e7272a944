"""Ray backend: a short population run on local Ray gives the local backend's result; missing Ray is a clear error.

One local Ray instance (2 CPUs, no dashboard) serves the whole module. The tiny task and rewards come from
the tests' ``helpers`` module; Ray's cloudpickle ships them to the actors by value.
"""

from __future__ import annotations

import builtins
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helpers
import numpy as np
import pytest
from helpers import FeatureReward, final_state, flat_config, load_reward, point_task, three_rewards

from lares_agent.engine import EngineConfig, LaResEngine, make_engine, restore_engine
from lares_agent.engine.es import strategy as es
from lares_agent.runs.jsonl import read_jsonl

HORIZON = 10


def propose(ctx: Any) -> list[FeatureReward]:
    return [FeatureReward("dist", 2.0 + ctx.round + i) for i in range(len(ctx.refill))]


GEN = 8 * HORIZON * 3
"""Env steps of one generation of the three learners."""


def _config(backend: str) -> EngineConfig:
    return flat_config(
        es=True, population=3, elites=1, total_steps=GEN * 4, reward_period=2 * GEN, eval_every=2 * GEN,
        eval_episodes=2, update_eval_episodes=2, rollouts_kept=1, backend=backend,
        es_config=es.ESConfig(population_size=8, sigma=0.1, learning_rate=0.05, total_generations=10),
    )


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason="Ray is not installed (extra lares-agent[ray])")
    from lares_agent.engine.es.ray_backend import ensure_ray

    for module in (sys.modules[__name__], helpers):  # test classes travel by value
        ray.cloudpickle.register_pickle_by_value(module)
    started = ensure_ray(num_cpus=2)
    yield ray
    if started:
        ray.shutdown()


def _run(backend: str, run_dir: Path) -> tuple[LaResEngine, dict[str, Any]]:
    engine = make_engine(point_task(horizon=HORIZON), _config(backend), three_rewards(), propose, run_dir)
    return engine, final_state(engine)


@pytest.mark.slow  # starts a local Ray cluster
def test_ray_run_matches_local_run(ray_local: Any, tmp_path: Path) -> None:
    local, local_state = _run("local", tmp_path / "local")
    remote, remote_state = _run("ray", tmp_path / "ray")
    assert remote.round == local.round >= 1 and remote.env_steps == local.env_steps
    assert [fn.id for fn in remote.rewards] == [fn.id for fn in local.rewards]
    for a, b in zip(local_state["population"]["learners"], remote_state["population"]["learners"], strict=True):
        assert np.allclose(a["es"]["mean"], b["es"]["mean"])
    rows_l = list(read_jsonl(tmp_path / "local" / "metrics.jsonl"))
    rows_r = list(read_jsonl(tmp_path / "ray" / "metrics.jsonl"))
    assert len(rows_l) == len(rows_r)
    for rl, rr in zip(rows_l, rows_r, strict=True):
        assert [s["reward_id"] for s in rl["slots"]] == [s["reward_id"] for s in rr["slots"]]
        for sl, sr in zip(rl["slots"], rr["slots"], strict=True):
            assert math.isclose(sl["own_return"], sr["own_return"], rel_tol=1e-9, abs_tol=1e-9)
            assert sl["success"] == sr["success"]


@pytest.mark.slow  # starts a local Ray cluster
def test_local_checkpoint_resumes_on_ray(ray_local: Any, tmp_path: Path) -> None:
    _, local_state = _run("local", tmp_path / "a")
    engine = restore_engine(tmp_path / "a" / "checkpoints" / "round-0001", point_task(horizon=HORIZON), load_reward,
                            propose, tmp_path / "b", backend="ray")
    assert engine.config.to_json()["learners"]["backend"] == "ray" and engine.round == 1
    state = final_state(engine)
    assert state["counters"] == local_state["counters"]
    for a, b in zip(local_state["population"]["learners"], state["population"]["learners"], strict=True):
        assert np.allclose(a["es"]["mean"], b["es"]["mean"])


def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from lares_agent.engine.es.ray_backend import RayUnavailableError, import_ray

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(RayUnavailableError, match=r"lares-agent\[ray\]"):
        import_ray()
