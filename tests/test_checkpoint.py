"""Atomic checkpoints: exact round trip without pickle, LATEST pointer, pruning, engine resume determinism."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from lares_agent.engine import make_engine, restore_engine
from lares_agent.engine.state.checkpoint import (
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    newest_loadable,
    save_checkpoint,
)


def _state() -> dict:
    rng = np.random.default_rng(5)
    gen = torch.Generator().manual_seed(3)
    opt_state = {0: {"step": torch.tensor(4.0), "exp_avg": torch.randn(3, generator=gen)}, 7: {"x": 1}}
    return {
        "arrays": {"obs": rng.standard_normal((10, 4)).astype(np.float32), "flags": rng.random(10) < 0.5},
        "scalar": np.float32(2.5),
        "tensors": [torch.randn(2, 3, generator=gen), torch.arange(5)],
        "opt": {"state": opt_state, "param_groups": [{"betas": (0.9, 0.999), "params": [0, 1]}]},
        "rng": rng.bit_generator.state,
        "gen": gen.get_state(),
        "nested": {"none": None, "nan": float("nan"), "text": "a", "__tuple__": "collides with a marker"},
    }


def test_round_trip_is_exact(tmp_path: Path) -> None:
    state = _state()
    save_checkpoint(tmp_path, state, "round-0001")
    back = load_checkpoint(tmp_path)
    assert np.array_equal(back["arrays"]["obs"], state["arrays"]["obs"])
    assert back["arrays"]["flags"].dtype == bool
    assert back["scalar"] == state["scalar"] and isinstance(back["scalar"], np.float32)
    assert torch.equal(back["tensors"][0], state["tensors"][0])
    assert set(back["opt"]["state"]) == {0, 7}  # int keys survive (optimiser states use them)
    assert back["opt"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert back["nested"]["__tuple__"] == "collides with a marker"
    assert np.isnan(back["nested"]["nan"]) and back["nested"]["none"] is None
    # RNG states restore to the same stream.
    r1 = np.random.default_rng()
    r1.bit_generator.state = back["rng"]
    r2 = np.random.default_rng()
    r2.bit_generator.state = state["rng"]
    assert np.array_equal(r1.random(5), r2.random(5))
    g = torch.Generator()
    g.set_state(back["gen"])
    g2 = torch.Generator()
    g2.set_state(state["gen"])
    assert torch.equal(torch.rand(4, generator=g), torch.rand(4, generator=g2))


def test_latest_pointer_and_pruning(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, {"v": 1}, "round-0001")
    save_checkpoint(tmp_path, {"v": 2}, "step-000000100", prune_prefix="step-")
    save_checkpoint(tmp_path, {"v": 3}, "step-000000200", prune_prefix="step-")
    names = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert names == ["round-0001", "step-000000200"]
    assert latest_checkpoint(tmp_path) == tmp_path / "step-000000200"
    assert load_checkpoint(tmp_path)["v"] == 3
    assert load_checkpoint(tmp_path / "round-0001")["v"] == 1
    # Re-saving an existing name replaces it.
    save_checkpoint(tmp_path, {"v": 4}, "round-0001")
    assert load_checkpoint(tmp_path)["v"] == 4
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir() if p.is_dir())


def test_failed_write_leaves_previous_checkpoint(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, {"v": 1}, "round-0001")
    with pytest.raises(CheckpointError):
        save_checkpoint(tmp_path, {"bad": object()}, "round-0002")
    assert load_checkpoint(tmp_path)["v"] == 1
    assert not (tmp_path / "round-0002").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []


def test_an_unreadable_state_json_in_the_newest_checkpoint_is_set_aside(tmp_path: Path) -> None:
    """Its progress cannot be read, so it must be tried (and fail) first, not sorted behind an older checkpoint
    and left for a later prune."""
    save_checkpoint(tmp_path, {"counters": {"env_steps": 100, "round": 1}}, "round-0001")
    save_checkpoint(tmp_path, {"counters": {"env_steps": 200, "round": 2}}, "round-0002")
    (tmp_path / "round-0002" / "state.json").write_text('{"counters": {"env_st', encoding="utf-8")
    chosen, skipped = newest_loadable(tmp_path)
    assert chosen == tmp_path / "round-0001" and latest_checkpoint(tmp_path) == chosen
    assert [(p.name, "state.json is damaged" in why) for p, why in skipped] == [("round-0002", True)]
    assert (tmp_path / "damaged-round-0002").is_dir() and not (tmp_path / "round-0002").exists()


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "missing")
    with pytest.raises(CheckpointError):
        save_checkpoint(tmp_path, {}, "../escape")
    with pytest.raises(CheckpointError):
        save_checkpoint(tmp_path, {"a": np.array([object()])}, "x")
    save_checkpoint(tmp_path, {"v": 1}, "c1")
    meta = tmp_path / "c1" / "meta.json"
    meta.write_text(json.dumps({"format": 999}))
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "c1")
    assert latest_checkpoint(tmp_path / "nothing") is None


def assert_same_state(a: object, b: object, where: str = "state") -> None:
    """Two nested states (dicts, lists, tensors, arrays, scalars) are bit-identical."""
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where  # type: ignore[attr-defined]
        for key in a:
            assert_same_state(a[key], b[key], f"{where}.{key}")  # type: ignore[index]
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where  # type: ignore[arg-type]
        for i, (x, y) in enumerate(zip(a, b, strict=True)):  # type: ignore[call-overload]
            assert_same_state(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where  # type: ignore[arg-type]
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), where  # type: ignore[arg-type]
    else:
        assert a == b, where


@pytest.mark.parametrize("learner", ["sac", "crossq"])
def test_engine_resume_reproduces_the_same_next_steps(tmp_path: Path, learner: str) -> None:
    from test_lares_engine import Proposer, load_reward, scratch_rewards, tiny_config, tiny_task

    cfg = tiny_config(total_steps=400, checkpoint_every=100, reward_period=120, learner=learner)
    a = make_engine(tiny_task(), cfg, scratch_rewards(), Proposer(), run_dir=tmp_path / "a")
    a.run(until_steps=150)  # one reward update (round-0001) and periodic checkpoints on the way
    saved = a.save_checkpoint()
    assert saved is not None and a.round == 1
    kept = shutil.copytree(saved, tmp_path / "kept")  # later periodic checkpoints prune this one
    steps_at_save, rows_at_save = a.env_steps, len(a.population.buffer)
    a.run(until_steps=300)  # crosses the second reward update
    assert a.round == 2

    b = restore_engine(kept, tiny_task(), load_reward, Proposer(), tmp_path / "b")
    assert b.env_steps == steps_at_save and len(b.population.buffer) == rows_at_save and b.round == 1
    b.run(until_steps=300)
    assert b.env_steps == a.env_steps and b.round == a.round
    assert [fn.id for fn in b.rewards] == [fn.id for fn in a.rewards]
    n = len(a.population.buffer)
    assert len(b.population.buffer) == n
    for name in ("obs", "action", "next_obs", "raw_reward", "features"):
        assert np.array_equal(getattr(a.population.buffer, name)[:n], getattr(b.population.buffer, name)[:n]), name
    # Every learner tensor: parameters, running statistics, optimiser states, anchors, generators, obs statistics.
    assert_same_state(a.population.learners.state_dict(), b.population.learners.state_dict(), "population")
    assert np.array_equal(a.population.ts.state_dict()["ring"], b.population.ts.state_dict()["ring"])
    assert a.rng.random() == b.rng.random()
    events = [json.loads(line)["event"] for line in (tmp_path / "b" / "events.jsonl").read_text().splitlines()]
    assert events[0] == "resumed"


def test_restore_needs_load_reward_and_matching_task(tmp_path: Path) -> None:
    from test_lares_engine import Proposer, load_reward, scratch_rewards, tiny_config, tiny_task

    from lares_agent.engine import EngineError

    a = make_engine(tiny_task(), tiny_config(total_steps=30), scratch_rewards(), Proposer(), run_dir=tmp_path)
    a.run()
    a.save_checkpoint()
    with pytest.raises(EngineError):
        restore_engine(tmp_path / "checkpoints", tiny_task(), None)
    other = tiny_task(horizon=7)
    object.__setattr__(other, "name", "other-task")
    with pytest.raises(EngineError):
        restore_engine(tmp_path / "checkpoints", other, load_reward)


def test_checkpoint_of_an_older_engine_state_is_refused_in_one_line(tmp_path: Path) -> None:
    from test_lares_engine import Proposer, load_reward, scratch_rewards, tiny_config, tiny_task

    from lares_agent.engine import EngineError
    from lares_agent.engine.state.schema import STATE_VERSION, check_state

    a = make_engine(tiny_task(), tiny_config(total_steps=30), scratch_rewards(), Proposer(), run_dir=tmp_path)
    a.run()
    state = a.state_dict()
    a.close()
    save_checkpoint(tmp_path / "old", {**state, "version": STATE_VERSION - 1}, "step-000000001")
    with pytest.raises(EngineError) as err:
        restore_engine(tmp_path / "old", tiny_task(), load_reward)
    message = str(err.value)
    assert "\n" not in message
    assert f"version {STATE_VERSION - 1}" in message and f"version {STATE_VERSION}" in message
    with pytest.raises(EngineError, match="'sac' engine state, not 'es'"):
        check_state(state, "es", "point-mass")


def test_resuming_with_the_other_learner_kind_is_refused_in_one_line(tmp_path: Path) -> None:
    from test_lares_engine import Proposer, load_reward, scratch_rewards, tiny_config, tiny_task

    from lares_agent.engine import EngineError

    a = make_engine(tiny_task(), tiny_config(total_steps=30, learner="crossq"), scratch_rewards(), Proposer(),
                    run_dir=tmp_path)
    a.run()
    a.save_checkpoint()
    a.close()
    with pytest.raises(EngineError) as err:
        restore_engine(tmp_path / "checkpoints", tiny_task(), load_reward, learner="sac")
    assert "\n" not in str(err.value) and "'crossq' engine state, not 'sac'" in str(err.value)
    b = restore_engine(tmp_path / "checkpoints", tiny_task(), load_reward, learner="crossq")
    assert b.config.learner == "crossq" and b.env_steps == a.env_steps
    b.close()


def test_engine_resume_is_exact_on_reacher(tmp_path: Path) -> None:
    from test_lares_engine import FeatureReward, Proposer, load_reward, tiny_config

    from lares_agent.engine.tasks import get_task

    task = get_task("Reacher-v5")
    p = task.progress_feature
    cfg = tiny_config(population=2, total_steps=200, warmup_steps=40, reward_period=80, eval_every=60,
                      eval_episodes=1, update_eval_episodes=1, horizon=20)

    def hook() -> Proposer:
        return Proposer(lambda ctx, slot: FeatureReward(p, 10.0, -3.0, id=f"r{ctx.round}s{slot}"))

    a = make_engine(task, cfg, [FeatureReward(p), FeatureReward("action_norm", 0.5)], hook(), tmp_path / "a")
    a.run(until_steps=60)
    kept = shutil.copytree(a.save_checkpoint(), tmp_path / "kept")
    a.run()
    b = restore_engine(kept, task, load_reward, hook(), tmp_path / "b")
    b.run()
    n = len(a.population.buffer)
    assert a.round == b.round == 2 and len(b.population.buffer) == n
    for name in ("obs", "action", "raw_reward", "features"):
        assert np.array_equal(getattr(a.population.buffer, name)[:n], getattr(b.population.buffer, name)[:n]), name
    assert all(torch.equal(x, y) for x, y in zip(a.population.learners.actor, b.population.learners.actor, strict=True))


def test_metaworld_reset_depends_only_on_the_episode_seed() -> None:
    # MetaWorld v3 ignores reset(seed=...); seeded_reset must still make fresh envs replay an episode.
    from lares_agent.engine.rollouts.episodes import seeded_reset
    from lares_agent.engine.tasks import get_task

    task = get_task("reach-v3")
    used, fresh = task.make_env(3), task.make_env(3)
    for s in (11, 12):
        seeded_reset(used, s)
        used.step(used.action_space.sample())
    a, _ = seeded_reset(used, 99)
    b, _ = seeded_reset(fresh, 99)
    c, _ = seeded_reset(fresh, 100)
    assert np.array_equal(a, b)
    assert not np.array_equal(b, c)
