"""OpenAI-ES core (init/ask/tell, centred ranks, cosine schedule), flat policies, vector rollouts, ES engine.

Loop tests use a tiny point-mass task (no MuJoCo); one test trains a linear policy on the registered
``Reacher-v5`` task and asserts improvement over the initial return.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import FeatureReward, final_state, flat_config, load_reward, point_task, three_rewards

from lares_agent.engine import EngineConfig, EngineError, UpdateContext, make_engine, restore_engine
from lares_agent.engine.contracts import HumanReward
from lares_agent.engine.es import strategy as es
from lares_agent.engine.es.learner import ESLearner, LearnerSettings, generation_seeds
from lares_agent.engine.es.policies import PolicyBatch, PolicySpec, RunningNorm, act, init_params, num_params
from lares_agent.engine.es.workers import RolloutWorkers
from lares_agent.engine.rollouts.vector import concat_rollouts, make_vector_env, rollout
from lares_agent.engine.setup.config import ESPopulationConfig
from lares_agent.engine.setup.selection import SelectionConfig
from lares_agent.engine.tasks import get_task
from lares_agent.errors import ConfigError
from lares_agent.runs.jsonl import read_jsonl

TASK = point_task(horizon=12)  # the tiny task with short episodes (a frozen spec, safe to share)


# ---------------------------------------------------------------------------------------------- ES core
def test_centered_ranks_range_ties_and_scale_invariance() -> None:
    f = np.array([3.0, -1.0, 10.0, 3.0])
    r = es.centered_ranks(f)
    assert r.min() == -0.5 and r.max() == 0.5
    assert r[0] == r[3]  # ties share their mean rank
    assert np.allclose(es.centered_ranks(1000.0 * f - 7.0), r)  # monotone transforms do not change the step
    assert np.isclose(r.sum(), 0.0)


def test_cosine_schedule_values() -> None:
    assert es.cosine_lr(0, 100, 0.1, 0.01) == pytest.approx(0.1)
    assert es.cosine_lr(50, 100, 0.1, 0.01) == pytest.approx(0.055)
    assert es.cosine_lr(25, 100, 0.1, 0.0) == pytest.approx(0.05 * (1 + math.cos(math.pi / 4)))
    assert es.cosine_lr(100, 100, 0.1, 0.01) == pytest.approx(0.01)
    assert es.cosine_lr(500, 100, 0.1, 0.01) == pytest.approx(0.01)
    lrs = [es.cosine_lr(g, 40, 0.1, 0.01) for g in range(41)]
    assert all(a >= b for a, b in itertools.pairwise(lrs))


def test_ask_is_antithetic_and_deterministic_given_rng() -> None:
    cfg = es.ESConfig(population_size=8, sigma=0.3)
    state = es.init(cfg, np.arange(5.0))
    pop, _ = es.ask(cfg, state, np.random.default_rng(1))
    assert pop.shape == (8, 5)
    assert np.allclose(pop[:4] + pop[4:], 2 * state.mean)
    pop2, _ = es.ask(cfg, state, np.random.default_rng(1))
    assert np.array_equal(pop, pop2)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_es_converges_on_quadratic(optimizer: str) -> None:
    target = np.linspace(-1.0, 1.0, 10)
    lr = 0.05 if optimizer == "adam" else 0.5
    cfg = es.ESConfig(population_size=32, sigma=0.1, learning_rate=lr, final_learning_rate=lr / 10,
                      total_generations=300, optimizer=optimizer, weight_decay=0.0)
    state = es.init(cfg, np.zeros(10))
    rng = np.random.default_rng(0)
    start = np.linalg.norm(state.mean - target)
    for _ in range(300):
        pop, state = es.ask(cfg, state, rng)
        state, metrics = es.tell(cfg, state, pop, -((pop - target) ** 2).sum(axis=1))
    assert state.generation == 300
    assert np.linalg.norm(state.mean - target) < 0.1 * start
    assert metrics["lr"] == pytest.approx(es.cosine_lr(299, 300, lr, lr / 10))


def test_weight_decay_pulls_toward_zero_without_signal() -> None:
    cfg = es.ESConfig(population_size=4, weight_decay=0.5, optimizer="sgd", momentum=0.0, learning_rate=0.1,
                      final_learning_rate=0.1)
    state = es.init(cfg, np.full(3, 2.0))
    pop, state = es.ask(cfg, state, np.random.default_rng(0))
    state, _ = es.tell(cfg, state, pop, np.zeros(4))  # flat fitness: only the decay acts
    assert np.allclose(state.mean, 2.0 - 0.1 * 0.5 * 2.0)


def test_tell_handles_nonfinite_and_rejects_bad_shapes() -> None:
    cfg = es.ESConfig(population_size=4)
    state = es.init(cfg, np.zeros(3))
    pop, state = es.ask(cfg, state, np.random.default_rng(0))
    new, metrics = es.tell(cfg, state, pop, np.array([1.0, np.nan, 2.0, -np.inf]))
    assert np.all(np.isfinite(new.mean)) and metrics["nonfinite"] == 2.0
    assert new.best_fitness == 2.0 and np.array_equal(new.best_params, pop[2])
    with pytest.raises(es.ESConfigError):
        es.tell(cfg, state, pop[:3], np.zeros(3))
    with pytest.raises(es.ESConfigError, match="even"):
        es.ESConfig(population_size=5)


def test_state_dict_round_trip() -> None:
    cfg = es.ESConfig(population_size=4)
    state = es.init(cfg, np.ones(3))
    pop, state = es.ask(cfg, state, np.random.default_rng(0))
    state, _ = es.tell(cfg, state, pop, np.arange(4.0))
    back = es.ESState.from_state_dict(state.state_dict())
    for name in ("mean", "m", "v", "best_params"):
        assert np.array_equal(getattr(back, name), getattr(state, name))
    assert (back.generation, back.best_fitness) == (state.generation, state.best_fitness)


# ---------------------------------------------------------------------------------------------- policies
def test_linear_policy_matches_manual_formula_and_batches() -> None:
    spec = PolicySpec(obs_dim=3, act_dim=2)
    assert num_params(spec) == 3 * 2 + 2
    rng = np.random.default_rng(0)
    params = rng.standard_normal((4, num_params(spec)))
    obs = rng.standard_normal((4, 5, 3))
    out = act(spec, params, obs)
    assert out.shape == (4, 5, 2)
    w, b = params[1, :6].reshape(2, 3), params[1, 6:]
    assert np.allclose(out[1, 2], np.tanh(w @ obs[1, 2] + b))
    assert np.all(init_params(spec, rng) == 0.0)  # zero output layer: the first policy is calm


def test_mlp_policy_shapes_and_output_bounds() -> None:
    spec = PolicySpec(obs_dim=4, act_dim=2, hidden=(8,))
    rng = np.random.default_rng(0)
    p0 = init_params(spec, rng)
    assert p0.shape == (num_params(spec),) and np.any(p0 != 0.0)
    out = act(spec, 10.0 * rng.standard_normal((3, num_params(spec))), rng.standard_normal((3, 2, 4)))
    assert out.shape == (3, 2, 2) and np.all(np.abs(out) <= 1.0)
    with pytest.raises(ValueError):
        act(spec, np.zeros((3, 5)), np.zeros((3, 1, 4)))


def test_running_norm_matches_batch_statistics() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(2.0, 3.0, (50, 2)), rng.normal(-1.0, 0.5, (70, 2))
    norm = RunningNorm.create(2).update(a).update(b)
    both = np.concatenate([a, b])
    assert np.allclose(norm.mean, both.mean(axis=0), atol=1e-4)
    assert np.allclose(norm.var, both.var(axis=0), rtol=1e-3)
    z = norm.apply(both)
    assert np.allclose(z.mean(axis=0), 0.0, atol=1e-3) and np.abs(z).max() <= norm.clip


# ---------------------------------------------------------------------------------------------- rollouts
def test_vector_rollout_records_features_and_returns() -> None:
    task = TASK
    venv = make_vector_env(task, 3, seed=0)
    try:
        ro = rollout(venv, task, lambda obs: np.zeros((obs.shape[0], 2)), horizon=7, seeds=[5, 5, 6])
    finally:
        venv.close()
    assert ro.raw.shape == (7, 3, 4) and ro.action.shape == (7, 3, 2) and ro.alive.all()
    assert ro.steps == 21
    assert np.allclose(ro.raw[:, 0], ro.raw[:, 1])  # same reset seed, same (zero) actions
    dist = np.linalg.norm(ro.raw[..., :2] - ro.raw[..., 2:], axis=-1)
    assert np.allclose(ro.features["dist"], dist)
    assert np.allclose(ro.returns(FeatureReward("dist")), -dist.sum(axis=0))
    assert np.allclose(ro.task_return(), -dist.sum(axis=0))


def test_rollout_workers_and_async_env_match_in_process_rollout() -> None:
    task = TASK
    spec = PolicySpec(obs_dim=4, act_dim=2)
    policy = PolicyBatch(spec, np.random.default_rng(0).normal(size=(5, num_params(spec))))
    seeds = [3, 4, 5, 6, 7]
    venv = make_vector_env(task, 5, seed=0)
    workers = RolloutWorkers(task, 5, num_workers=2, seed=0)
    async_env = make_vector_env(task, 5, seed=0, asynchronous=True)
    try:
        ref = rollout(venv, task, policy, 6, seeds)
        par = workers.rollout(policy, 6, seeds)
        asy = rollout(async_env, task, policy, 6, seeds)
    finally:
        venv.close()
        workers.close()
        async_env.close()
    assert workers.blocks == [(0, 2), (2, 5)]
    for other in (par, asy):
        assert np.array_equal(other.raw, ref.raw) and np.array_equal(other.action, ref.action)
        assert np.array_equal(other.alive, ref.alive)
        assert np.allclose(other.returns(FeatureReward("dist")), ref.returns(FeatureReward("dist")))


def test_concat_rollouts_pads_shorter_blocks() -> None:
    task = TASK
    venv = make_vector_env(task, 2, seed=0)
    try:
        long = rollout(venv, task, lambda o: np.zeros((2, 2)), 5, [1, 2])
        short = rollout(venv, task, lambda o: np.zeros((2, 2)), 3, [1, 2])
    finally:
        venv.close()
    joined = concat_rollouts([long, short])
    assert joined.alive.shape == (5, 4) and joined.steps == 10 + 6
    assert not joined.alive[3:, 2:].any()
    assert np.allclose(joined.returns(FeatureReward("dist"))[2:], short.returns(FeatureReward("dist")))


def test_generation_seeds_pair_antithetic_twins() -> None:
    s = generation_seeds(0, slot=1, generation=3, pairs=4, episodes=2).reshape(8, 2)
    assert np.array_equal(s[:4], s[4:]) and len(np.unique(s[:4])) == 8
    assert not np.array_equal(s, generation_seeds(0, 1, 4, 4, 2).reshape(8, 2))


def test_es_learner_improves_point_mass() -> None:
    cfg = es.ESConfig(population_size=16, sigma=0.1, learning_rate=0.05, total_generations=25)
    learner = ESLearner(TASK, 0, FeatureReward("dist"), LearnerSettings(es=cfg), run_seed=0)
    seeds = list(range(100, 108))
    try:
        before = learner.evaluate(8, seeds).own_return
        for _ in range(25):
            learner.generation()
        after = learner.evaluate(8, seeds).own_return
    finally:
        learner.close()
    assert after > before + 0.3 * abs(before)


# ---------------------------------------------------------------------------------------------- engine
GEN = 8 * 12 * 3
"""Env steps of one generation of three learners (8 perturbations, 12 steps, no early end)."""


def _config(**kw: Any) -> EngineConfig:
    base: dict[str, Any] = dict(
        population=3, elites=1, total_steps=GEN * 6, reward_period=3 * GEN,
        eval_every=2 * GEN, eval_episodes=2, update_eval_episodes=3, rollouts_kept=1,
        es_config=es.ESConfig(population_size=8, sigma=0.1, learning_rate=0.05, total_generations=20),
    )
    base.update(kw)
    return flat_config(es=True, **base)


def test_engine_runs_updates_and_logs_like_sac(tmp_path: Path) -> None:
    seen: list[UpdateContext] = []

    def propose(ctx: UpdateContext) -> list[FeatureReward]:
        seen.append(ctx)
        return [FeatureReward("dist", 3.0 + ctx.round + i) for i in range(len(ctx.refill))]

    engine = make_engine(TASK, _config(), three_rewards(), propose, tmp_path)
    try:
        engine.run()
        state = engine.state_dict()
    finally:
        engine.close()
    assert engine.env_steps >= engine.config.total_steps and engine.population.generation == 6
    assert len(seen) == 1 and seen[0].round == 1  # due after generation 3, run ends at 6
    ctx = seen[0]
    assert set(ctx.elites) | set(ctx.refill) == {0, 1, 2} and len(ctx.elites) == 1
    assert ctx.diversity is not None and ctx.explore == ctx.diversity.explore
    assert set(ctx.feature_sample) == {"dist", "action_norm", "success"}  # no human reward in scratch
    assert ctx.rollouts and all(len(v) == 1 for v in ctx.rollouts.values())
    rows = list(read_jsonl(tmp_path / "metrics.jsonl"))
    assert rows and {"env_steps", "round", "slots"} <= set(rows[-1])
    assert set(rows[-1]["slots"][0]) >= {"slot", "reward_id", "success", "task_return", "own_return"}
    events = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "reward_update"]
    assert len(events) == 1 and "diversity" in events[0]
    replaced = {int(k) for k in events[0]["replaced"]}
    assert replaced == set(ctx.refill)
    # replaced slots restarted from the best slot's policy, then trained 3 generations on their own reward
    for s in replaced:
        assert engine.rewards[s].id.startswith("neg-dist-")
    assert state["population"]["learners"][ctx.best]["es"]["generation"] == 6
    assert all(state["population"]["learners"][s]["es"]["generation"] == 6 for s in replaced)


def test_replaced_slot_inherits_best_parameters() -> None:
    engine = make_engine(TASK, _config(reward_period=2 * GEN, max_rounds=1, inherit="always"), three_rewards(),
                      lambda ctx: [FeatureReward("dist", 5.0)] * len(ctx.refill))
    try:
        for _ in range(2):
            engine.step()
        ctx = engine.reward_update()
        learners = engine.population.backend.learners
        for s in ctx.refill:
            assert np.array_equal(learners[s].state.mean, learners[ctx.best].state.mean)
            assert learners[s].reward.id == "neg-dist-5"
    finally:
        engine.close()


def test_rollout_workers_give_the_in_process_result() -> None:
    means = []
    for workers in (0, 2):
        engine = make_engine(TASK, _config(rollout_workers=workers, reward_period=0), three_rewards())
        try:
            for _ in range(2):
                engine.step()
            means.append([lr.state.mean.copy() for lr in engine.population.backend.learners])
        finally:
            engine.close()
    assert all(np.array_equal(a, b) for a, b in zip(*means, strict=True))
    assert any(np.any(m != 0.0) for m in means[0])  # the learners did move


def test_tournament_selection_and_the_engine_installs_what_propose_returns() -> None:
    class Constant(FeatureReward):
        def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
            return np.ones(len(features[self.feature]))

    cfg = _config(selection=SelectionConfig(method="tournament", tournament_size=2), elites=2)
    engine = make_engine(TASK, cfg, three_rewards(), lambda ctx: [Constant("dist", id="const")])
    try:
        engine.step()
        ctx = engine.reward_update()
    finally:
        engine.close()
    assert ctx.best in ctx.elites and len(ctx.elites) == 2  # keep_best: the best always survives
    # Proposals are validated by the propose hook (the search layer's validator in rewards/ refuses a constant
    # reward); the ES engine keeps no validator of its own, so what the hook returns is installed.
    (refilled,) = ctx.refill
    assert engine.rewards[refilled].id == "const"
    assert engine.population.backend.learners[refilled].reward.id == "const"
    assert any(e["event"] == "candidate_accepted" and e["slot"] == refilled for e in engine.events)
    assert not any(e["event"] == "candidate_rejected" for e in engine.events)


def test_nan_reward_without_candidate_shares_the_best_reward() -> None:
    """The NaN-reward sharing of the reward update is common to both engines (once SAC only)."""

    class NaNReward(FeatureReward):
        def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
            return np.full(len(features[self.feature]), np.nan)

    rewards = [*three_rewards()[:2], NaNReward("dist", id="nan")]
    engine = make_engine(TASK, _config(reward_period=1 * GEN), rewards, lambda ctx: [])
    try:
        engine.step()
        ctx = engine.reward_update()
    finally:
        engine.close()
    assert ctx.slots[2].quarantined and ctx.ranking[-1] == 2 and 2 in ctx.refill
    shared = [e for e in engine.events if e["event"] == "reward_shared"]
    assert [e["slot"] for e in shared] == [2]
    assert engine.rewards[2] is engine.rewards[ctx.best] and engine.population.backend.learners[2].reward.id != "nan"
    update = next(e for e in engine.events if e["event"] == "reward_update")
    assert 2 in update["inherited"]


def test_init_setting_ranks_an_extra_human_learner_that_is_never_replaced() -> None:
    """One meaning of ``init`` for every learner: K slots refine the human reward, and an extra learner trains on
    the human reward throughout, ranked with the slots (the reference's with_init), never replaced."""
    engine = make_engine(TASK, _config(setting="init", reward_period=1 * GEN, max_rounds=1), three_rewards(),
                         lambda ctx: [FeatureReward("dist", 7.0, id=f"new{s}") for s in ctx.refill])
    try:
        assert engine.population.num_learners == 4 and len(engine.rewards) == 4
        assert isinstance(engine.rewards[3], HumanReward) and not isinstance(engine.rewards[0], HumanReward)
        steps = engine.step().steps
        ctx = engine.reward_update()
        engine.step()
    finally:
        engine.close()
    assert steps == 4 * 8 * 12  # the extra learner trains (and counts) like every slot
    assert len(ctx.slots) == len(ctx.rewards) == 4 and set(ctx.ranking) == {0, 1, 2, 3} and 3 not in ctx.refill
    assert isinstance(engine.rewards[3], HumanReward)  # never replaced
    for s in ctx.refill:
        assert engine.rewards[s].id == f"new{s}"
    assert engine.last_metrics is not None
    assert engine.last_metrics["extra"] is not None and len(engine.last_metrics["slots"]) == 3


def test_init_human_learner_ranked_first_is_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    # When the human-reward learner ranks first (forced here: the ranking rule is tests/test_ranking_rule.py's), the
    # refilled slots restart from its policy (the reference's rule: nothing succeeds in so short a run).
    monkeypatch.setattr("lares_agent.engine.setup.fitness.rank_slots",
                        lambda slots, use_task_return: [3, *(s.slot for s in slots if s.slot != 3)])
    engine = make_engine(TASK, _config(setting="init", elites=1, reward_period=1 * GEN, inherit="always"),
                         three_rewards(), lambda ctx: [FeatureReward("dist", 9.0, id="fresh")] * len(ctx.refill))
    try:
        engine.step()
        ctx = engine.reward_update()
        learners = engine.population.backend.learners
        assert ctx.best == 3 and ctx.refill == (0, 1, 2)
        assert all(np.array_equal(learners[s].state.mean, learners[3].state.mean) for s in ctx.refill)
    finally:
        engine.close()
    assert engine.rewards[0].id == "fresh" and isinstance(engine.rewards[3], HumanReward)


def test_checkpoint_restore_continues_identically(tmp_path: Path) -> None:
    def propose(ctx: UpdateContext) -> list[FeatureReward]:
        return [FeatureReward("dist", 4.0)] * len(ctx.refill)

    final_a = final_state(make_engine(TASK, _config(), three_rewards(), propose, tmp_path / "a"))
    b = restore_engine(tmp_path / "a" / "checkpoints" / "round-0001", TASK, load_reward, propose,
                         tmp_path / "b")
    assert b.population.generation == 3 and b.round == 1
    final_b = final_state(b)
    assert final_b["counters"] == final_a["counters"]
    for la, lb in zip(final_a["population"]["learners"], final_b["population"]["learners"], strict=True):
        assert np.array_equal(la["es"]["mean"], lb["es"]["mean"])


def test_config_validation() -> None:
    cfg = _config(hidden=(8,), selection=SelectionConfig(method="tournament"))
    assert cfg.learner == "es" and EngineConfig.from_json(cfg.to_json()) == cfg  # tuples rebuilt from lists
    with pytest.raises(ConfigError, match="elites"):
        _config(population=2, elites=3)
    with pytest.raises(ConfigError, match="backend"):
        ESPopulationConfig(backend="spark")
    with pytest.raises(EngineError, match="initial rewards"):
        make_engine(TASK, _config(), three_rewards()[:2])


def test_baseline_setting_trains_on_human_reward() -> None:
    engine = make_engine(TASK, _config(setting="baseline", population=1))
    try:
        engine.run(until_steps=8 * 12 * 2)
    finally:
        engine.close()
    assert isinstance(engine.rewards[0], HumanReward) and engine.round == 0


# ---------------------------------------------------------------------------------------------- Reacher
@pytest.mark.slow  # trains on MuJoCo Reacher
def test_es_improves_linear_policy_on_reacher() -> None:
    task = get_task("Reacher-v5")
    cfg = es.ESConfig(population_size=16, sigma=0.05, learning_rate=0.03, final_learning_rate=0.003,
                      total_generations=20)
    settings = LearnerSettings(es=cfg, horizon=50, episodes_per_member=2)
    learner = ESLearner(task, 0, HumanReward(), settings, run_seed=0)
    seeds: Sequence[int] = list(range(10))
    try:
        before = learner.evaluate(10, seeds).task_return
        steps = sum(learner.generation()["steps"] for _ in range(20))
        after = learner.evaluate(10, seeds).task_return
    finally:
        learner.close()
    assert steps == 20 * 16 * 2 * 50
    assert after > before  # same 10 evaluation episodes before and after training
