"""Policy files: `torch.load(weights_only=True)` reads them, and `PolicyArtefact` acts exactly as
the learner's deterministic `act` for SAC, CrossQ (eval mode, running statistics) and ES."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import FeatureReward, flat_config, point_task, three_rewards

from lares_agent.engine import (
    CrossQConfig,
    EngineError,
    ESConfig,
    PolicyArtefact,
    SACConfig,
    artefact_from_state,
    make_engine,
    save_artefact,
)
from lares_agent.engine.learners.actor_critic import ActorCriticPopulation
from lares_agent.runs import FINAL_POLICY, RunLayout

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OBS, ACT, K = 5, 2, 3
LOW, HIGH = np.array([-2.0, 0.0]), np.array([2.0, 1.0])


def _state(learner: str, population: Any, config: Any) -> dict[str, Any]:
    return {"learner": learner, "task": "toy", "config": {"learners": {learner: dataclasses.asdict(config)}},
            "counters": {"env_steps": 123, "round": 4}, "population": {"learners": population.state_dict()}}


def _roundtrip(artefact: dict[str, Any], tmp_path: Path) -> PolicyArtefact:
    path = save_artefact(artefact, tmp_path / "p.pt")
    data = torch.load(path, weights_only=True)  # torch alone, no pickled lares objects
    for key, value in data.items():
        assert isinstance(value, torch.Tensor | str | int | float | list), (key, type(value))
    return PolicyArtefact.load(path)


def _shake(params: list[torch.Tensor], seed: int) -> None:
    """Random non-trivial weights (the initial ones have a zero-ish head)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in params:
            p.add_(0.5 * torch.randn(p.shape, generator=gen))


def test_sac_policy_file_acts_like_the_population(tmp_path: Path) -> None:
    cfg = SACConfig(hidden=(16, 16), obs_norm=True)
    pop = ActorCriticPopulation(K, OBS, ACT, cfg, seed=3, tune_malloc=False)
    rng = np.random.default_rng(0)
    pop.observe(rng.normal(2.0, 3.0, (200, OBS)))
    _shake(pop.actor, 1)
    policy = _roundtrip(artefact_from_state(_state("sac", pop, cfg), 1, LOW, HIGH, "r-7"), tmp_path)
    obs = rng.normal(2.0, 3.0, (64, OBS)).astype(np.float32)
    want = pop.act(obs, np.full(64, 1), True, torch.Generator())
    assert np.allclose(policy.act(obs), want, atol=1e-5)
    other = pop.act(obs, np.full(64, 0), True, torch.Generator())
    assert not np.allclose(policy.act(obs), other, atol=1e-3)  # it is slot 1's slice, not another's
    assert policy.data["reward_id"] == "r-7" and policy.data["env_steps"] == 123 and policy.data["round"] == 4
    assert policy.learner == "sac" and policy.data["actor.2.weight"].shape == (16, ACT)  # the mean half only
    env = policy.env_action(obs)
    assert np.all(env >= LOW - 1e-9) and np.all(env <= HIGH + 1e-9)
    assert np.allclose(env, LOW + (want + 1) * 0.5 * (HIGH - LOW), atol=1e-5)


def test_crossq_policy_file_uses_the_running_statistics(tmp_path: Path) -> None:
    cfg = CrossQConfig(actor_hidden=(16, 16), critic_hidden=(16, 16), obs_norm=True)
    pop = ActorCriticPopulation(K, OBS, ACT, cfg, seed=5, tune_malloc=False)
    rng = np.random.default_rng(1)
    pop.observe(rng.normal(size=(100, OBS)))
    _shake(pop.actor, 2)
    gen = torch.Generator().manual_seed(9)
    with torch.no_grad():  # running statistics far from (0, 1): a train-mode forward would ignore them
        for i, t in enumerate(pop._actor.running):
            t.copy_(torch.rand(t.shape, generator=gen) * 2 + (0.5 if i % 2 else -1.0))
    policy = _roundtrip(artefact_from_state(_state("crossq", pop, cfg), 2, LOW, HIGH, "r-2"), tmp_path)
    obs = rng.normal(size=(64, OBS)).astype(np.float32)
    want = pop.act(obs, np.full(64, 2), True, torch.Generator())
    assert np.allclose(policy.act(obs), want, atol=1e-5)
    assert "actor.0.renorm.mean" in policy.data and policy.learner == "crossq"


def test_es_engine_writes_a_policy_at_each_reward_update_and_at_the_end(tmp_path: Path) -> None:
    task = point_task(horizon=12)
    cfg = flat_config(es=True, population=3, elites=1, total_steps=8 * 12 * 3 * 4, reward_period=2 * 8 * 12 * 3,
                      eval_every=0, eval_episodes=1, update_eval_episodes=2, rollouts_kept=1,
                      hidden=(6,), es_config=ESConfig(population_size=8, sigma=0.1, learning_rate=0.05))

    def propose(ctx: Any) -> list[FeatureReward]:
        return [FeatureReward("dist", 3.0 + ctx.round + i) for i in range(len(ctx.refill))]

    engine = make_engine(task, cfg, three_rewards(), propose, tmp_path)
    try:
        engine.run()
        layout = RunLayout(tmp_path)
        rounds = sorted(p.name for p in layout.policies.iterdir())
        assert rounds and rounds[0] == layout.policy("round-0001").name
        engine.save_policy(FINAL_POLICY)
        policy = PolicyArtefact.load(layout.policy(FINAL_POLICY))
        best = engine.best_slot
        obs = np.random.default_rng(2).normal(size=(32, 4))
        want = engine.population.backend.learners[best].act_deterministic(obs)  # type: ignore[attr-defined]
        assert np.allclose(policy.act(obs), want, atol=1e-9)
        assert policy.reward_id == engine.rewards[best].id and policy.data["slot"] == best
        assert policy.data["env_steps"] == engine.env_steps and policy.learner == "es"
    finally:
        engine.close()


@pytest.mark.parametrize("learner", ["sac", "crossq"])
def test_gradient_engine_policy_files_and_restore(learner: str, tmp_path: Path) -> None:
    cfg = flat_config(population=3, elites=1, total_steps=200, warmup_steps=60, reward_period=100,
                       eval_every=0, eval_episodes=1, update_eval_episodes=1, ts_window=10, buffer_capacity=2000,
                       seed=1, learner=learner, feature_sample=50,  # type: ignore[arg-type]
                       sac=SACConfig(hidden=(16, 16), batch_size=16, utd_ratio=0.25, obs_norm=True),
                       crossq=CrossQConfig(actor_hidden=(16, 16), critic_hidden=(16, 16), batch_size=16,
                                           utd_ratio=0.25, renorm_warmup_steps=5, obs_norm=True))

    def propose(ctx: Any) -> list[FeatureReward]:
        return [FeatureReward("dist", 2.0 + ctx.round, id=f"r{ctx.round}s{s}") for s in ctx.refill]

    engine = make_engine(point_task(), cfg, three_rewards(), propose, run_dir=tmp_path)
    try:
        engine.run()
        layout = RunLayout(tmp_path)
        assert layout.policy("round-0001").is_file()
        engine.save_policy(FINAL_POLICY)
        policy = PolicyArtefact.load(layout.policy(FINAL_POLICY))
        best = engine.best_slot
        obs = np.random.default_rng(3).normal(size=(32, 4)).astype(np.float32)
        want = engine.population.learners.act(obs, np.full(32, best), True, torch.Generator())
        assert np.allclose(policy.act(obs), want, atol=1e-5)
        assert policy.reward_id == engine.rewards[best].id and policy.task == "point-mass"
        engine.save_policy(FINAL_POLICY, every_slot=True)
        for slot in range(3):  # every slot's own file, each its member's slice
            mine = PolicyArtefact.load(layout.slot_policy(slot))
            want = engine.population.learners.act(obs, np.full(32, slot), True, torch.Generator())
            assert np.allclose(mine.act(obs), want, atol=1e-5) and mine.reward_id == engine.rewards[slot].id
        state = engine.state_dict()
    finally:
        engine.close()
    with pytest.raises(EngineError, match="slot 7 does not exist"):
        artefact_from_state(state, 7, LOW, HIGH, "x")


def test_a_file_that_is_not_a_policy_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.pt"
    torch.save({"a": torch.zeros(1)}, path)
    with pytest.raises(EngineError, match="not a lares policy file"):
        PolicyArtefact.load(path)
    with pytest.raises(EngineError, match="does not exist"):
        PolicyArtefact.load(tmp_path / "missing.pt")
