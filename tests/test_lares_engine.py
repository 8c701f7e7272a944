"""The LaRes loop: TS interaction, reward updates (relabel, scaling, inheritance), settings, NaN guards.

Most tests use a tiny point-mass task (no MuJoCo, milliseconds per episode) so the loop logic is tested
quickly; the end-to-end tests at the bottom run the registered `reach-v3` and `Reacher-v5` tasks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import PointMass, flat_config, point_features

from lares_agent.engine import (
    GRADIENT_LEARNERS,
    CrossQConfig,
    EngineConfig,
    EngineError,
    Feature,
    HumanReward,
    MemberEvaluation,
    PolicyArtefact,
    ReplayConfig,
    SACConfig,
    TaskSpec,
    UpdateContext,
    make_engine,
)
from lares_agent.engine.setup.fitness import rank_slots, slot_evaluation
from lares_agent.errors import ConfigError
from lares_agent.runs.jsonl import read_jsonl

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------------- tiny task
def tiny_task(has_human_reward: bool = True, horizon: int = 15) -> TaskSpec:
    """A custom TaskSpec around PointMass: milliseconds per episode, so the loop logic is tested fast."""
    return TaskSpec(
        name="point-mass",
        family="custom",
        description="move the point to the goal",
        horizon=horizon,
        feature_defs=(Feature("dist", "distance from point to goal", "m"),
                      Feature("action_norm", "norm of the action", "1")),
        progress_feature="dist",
        has_human_reward=has_human_reward,
        success_test="dist < 0.1",
        obs_dim=4,
        act_dim=2,
        state_dim=4,
        dt=0.1,
        env_fn=lambda seed: PointMass(),
        raw_state_fn=lambda env, obs, info: np.asarray(obs, np.float64),
        feature_fn=point_features,
    )


# ---------------------------------------------------------------------------------------------- rewards
class FeatureReward:
    """reward = -scale * feature + offset (one component), serialisable for checkpoints."""

    expression = None  # nothing written to show the LLM (RewardFunction.expression)

    def __init__(self, feature: str, scale: float = 1.0, offset: float = 0.0, id: str | None = None,
                 complexity: float = 1.0) -> None:
        self.feature, self.scale, self.offset = feature, scale, offset
        self.id = id or f"neg-{feature}-{scale:g}-{offset:g}"
        self.key = f"-{scale:g}*{feature} + {offset:g}"  # the reward's identity (rewards.reward_key in a real run)
        self.complexity = complexity

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        return -self.scale * np.asarray(features[self.feature], np.float64) + self.offset

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"main": -self.scale * np.asarray(features[self.feature], np.float64),
                "offset": np.full(len(features[self.feature]), self.offset)}

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "feature": self.feature, "scale": self.scale, "offset": self.offset,
                "complexity": self.complexity}


class ConstantReward(FeatureReward):
    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.zeros(len(features[self.feature]))


class ArmedNanReward(FeatureReward):
    """-feature, but NaN where the feature exceeds 0.2 once armed (a reward that breaks on new states)."""

    armed = False

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        x = np.asarray(features[self.feature], np.float64)
        return np.where(self.armed & (x > 0.2), np.nan, -x)


def load_reward(d: Mapping[str, Any]) -> FeatureReward:
    return FeatureReward(d["feature"], d["scale"], d["offset"], d["id"], d["complexity"])


# Renormalisation starts after 5 train-mode forwards, so tiny runs cover its corrected statistics too.
TINY_CROSSQ = CrossQConfig(actor_hidden=(32, 32), critic_hidden=(32, 32), batch_size=32, utd_ratio=0.25,
                           renorm_warmup_steps=5, obs_norm=True)


def tiny_config(**overrides: Any) -> EngineConfig:
    """Tiny networks and budgets; ``learner="crossq"`` trains TINY_CROSSQ learners."""
    base: dict[str, Any] = dict(
        population=3, elites=1, total_steps=300, warmup_steps=60, reward_period=120, eval_every=150,
        eval_episodes=2, update_eval_episodes=2, ts_window=10, buffer_capacity=5000, seed=1,
        sac=SACConfig(hidden=(32, 32), batch_size=32, utd_ratio=0.25), crossq=TINY_CROSSQ, feature_sample=100,
    )
    base.update(overrides)
    return flat_config(**base)


def scratch_rewards() -> list[FeatureReward]:
    return [FeatureReward("dist", 1.0), FeatureReward("dist", 3.0, 1.0), FeatureReward("action_norm", 0.1)]


class Proposer:
    """A fixed-candidate hook (no LLM) that records the contexts it saw."""

    def __init__(self, make: Any = None) -> None:
        self.contexts: list[UpdateContext] = []
        self._make = make or (lambda ctx, slot: FeatureReward("dist", 2.0 + ctx.round, slot, id=f"r{ctx.round}s{slot}"))

    def __call__(self, ctx: UpdateContext) -> Sequence[Any]:
        self.contexts.append(ctx)
        return [self._make(ctx, slot) for slot in ctx.refill]


# ---------------------------------------------------------------------------------------------- tests
def test_the_update_hands_every_episode_to_the_verifier_and_shows_the_llm_as_before(tmp_path: Path) -> None:
    # UpdateContext.episodes: all the update evaluation's episodes of every ranked learner (rewards/verifier.py);
    # the proposer's rollouts stay `rollouts_kept` episodes of the top `rollout_slots` slots
    hook = Proposer()
    engine = make_engine(tiny_task(), tiny_config(update_eval_episodes=3, rollouts_kept=1, total_steps=150),
                         scratch_rewards(), hook, run_dir=tmp_path)
    engine.run()
    ctx = hook.contexts[0]
    assert len(ctx.episodes) == 3 * len(ctx.ranking) == 9
    assert all("human_reward" not in ep and len(ep["dist"]) == 15 for ep in ctx.episodes)
    assert set(ctx.rollouts) == set(ctx.ranking[:2]) and all(len(eps) == 1 for eps in ctx.rollouts.values())
    assert all(any(ep is r[0] for ep in ctx.episodes) for r in ctx.rollouts.values())


def test_scratch_run_updates_rewards_and_logs(tmp_path: Path) -> None:
    hook = Proposer()
    engine = make_engine(tiny_task(), tiny_config(), scratch_rewards(), hook, run_dir=tmp_path)
    infos = []
    engine.run(progress=infos.append)
    assert engine.env_steps >= 300 and engine.round == 2
    assert len(hook.contexts) == 2
    ctx = hook.contexts[0]
    assert len(ctx.elites) == 1 and len(ctx.refill) == 2 and set(ctx.elites).isdisjoint(ctx.refill)
    assert ctx.best == ctx.ranking[0] == ctx.elites[0]
    assert "human_reward" not in ctx.feature_sample and len(ctx.feature_sample["dist"]) == 100
    assert ctx.rollouts and all("human_reward" not in r for rs in ctx.rollouts.values() for r in rs)
    assert all(len(r["dist"]) == 15 for rs in ctx.rollouts.values() for r in rs)
    # Every acting set is distinct and TS never picks more than K learners.
    assert all(len(set(i.acted)) == len(i.acted) <= 3 for i in infos)
    ids = [fn.id for fn in engine.rewards]
    assert sum(i.startswith("r2s") for i in ids) == 2  # the second round refilled two slots
    events = list(read_jsonl(tmp_path / "events.jsonl"))
    updates = [e for e in events if e["event"] == "reward_update"]
    assert [u["round"] for u in updates] == [1, 2]
    assert set(updates[0]["replaced"]) == {str(s) for s in ctx.refill}
    metrics = list(read_jsonl(tmp_path / "metrics.jsonl"))
    assert {m["kind"] for m in metrics} == {"eval", "update"}
    m = metrics[-1]
    assert len(m["slots"]) == 3 and len(m["alpha"]) == 3 and "q_loss" in m["losses"]
    assert all(0.0 <= s["success"] <= 1.0 for s in m["slots"])
    assert (tmp_path / "checkpoints" / "round-0002" / "meta.json").is_file()


def test_update_relabels_rescales_and_inherits(tmp_path: Path) -> None:
    hook = Proposer(lambda ctx, slot: FeatureReward("dist", 50.0, 7.0, id=f"new{slot}"))
    cfg = tiny_config(total_steps=120, max_rounds=1, inherit="always")  # the rule itself: tests/test_inheritance.py
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), hook)
    engine.run(until_steps=120)  # reach the period; the update runs at the next iteration boundary
    old_alpha = engine.population.learners.log_alpha.detach().clone()
    ctx = engine.reward_update()
    best, refill = ctx.best, ctx.refill
    buf, pop = engine.population.buffer, engine.population.learners
    ref = buf.rewards(best).astype(np.float64)
    for slot in refill:
        assert engine.rewards[slot].id == f"new{slot}"
        col = buf.rewards(slot).astype(np.float64)
        # Relabelled over the whole buffer with the new function, then matched to the best's mean/std.
        expected = FeatureReward("dist", 50.0, 7.0)(buf.feature_view())
        assert np.corrcoef(col, expected)[0, 1] == pytest.approx(1.0, abs=1e-5)
        assert col.mean() == pytest.approx(ref.mean(), abs=1e-4 * max(1.0, abs(ref.mean())))
        assert col.std() == pytest.approx(ref.std(), rel=1e-3)
        # Inheritance: actor, critics, targets, temperature of the best; anchored with weight 1.0.
        for p in pop.actor:
            assert torch.equal(p[slot], p[best])
        for p in [*pop.critic, *pop.critic_target]:  # rows k and k + K: both critics of learner k
            assert torch.equal(p[slot], p[best]) and torch.equal(p[slot + pop.k], p[best + pop.k])
        assert pop.log_alpha[slot].item() == old_alpha[best].item()
        assert all(torch.equal(m[slot], m[best]) for m in pop.actor_optimizer.exp_avg_sq)  # Adam state copied
        assert pop.anchor_weight[slot].item() == 1.0
    for e in ctx.elites:
        assert pop.anchor_weight[e].item() == 0.0
    a, b = engine.population.ts.posterior()
    assert np.all(a == 1) and np.all(b == 1)  # TS reset at every reward update
    # New rows of a rescaled column use the same fixed map as old rows (no drift, §12 item 4).
    n0 = len(buf)
    engine.step()
    fn = engine.rewards[refill[0]]
    new_rows = buf.rewards(refill[0])[n0:].astype(np.float64)
    raw_new = fn({k: v[n0:] for k, v in buf.feature_view().items()})
    aff = buf.affine(refill[0])
    assert np.allclose(new_rows, raw_new * aff.scale + aff.shift, atol=1e-3 * max(1.0, abs(aff.shift)))


def test_rejected_and_missing_proposals_keep_the_slot() -> None:
    hook = Proposer(lambda ctx, slot: ConstantReward("dist", id=f"const{slot}"))
    engine = make_engine(tiny_task(), tiny_config(total_steps=120, max_rounds=1), scratch_rewards(), hook)
    engine.run(until_steps=120)
    before = [fn.id for fn in engine.rewards]
    actor_before = [p.detach().clone() for p in engine.population.learners.actor]
    ctx = engine.reward_update()
    assert [fn.id for fn in engine.rewards] == before
    rejected = [e for e in engine.events if e["event"] == "candidate_rejected"]
    assert {e["slot"] for e in rejected} == set(ctx.refill) and all("constant" in e["reason"] for e in rejected)
    # nothing inherited
    assert all(torch.equal(a, b) for a, b in zip(actor_before, engine.population.learners.actor, strict=True))
    # Too many proposals is a programming error of the hook.
    engine.propose = lambda c: [FeatureReward("dist")] * (len(c.refill) + 1)
    with pytest.raises(EngineError):
        engine.reward_update()


@pytest.mark.parametrize("learner", GRADIENT_LEARNERS)
def test_nonfinite_reward_and_policy_are_quarantined_then_refilled(learner: str) -> None:
    rewards = scratch_rewards()
    rewards[2] = ArmedNanReward("dist", id="breaks-later")
    engine = make_engine(tiny_task(), tiny_config(total_steps=120, max_rounds=1, learner=learner), rewards,
                         Proposer())
    engine.population.prepare(engine.rewards)
    assert engine.population.quarantined_learners == set()
    rewards[2].armed = True
    while 2 not in engine.population.quarantined_learners and engine.env_steps < 120:
        engine.step()
    assert 2 in engine.population.quarantined_learners and 2 in engine.population.ts.blocked
    assert any(e["event"] == "quarantine" and e["learner"] == 2 and "NaN" in e["reason"] for e in engine.events)
    assert np.isfinite(engine.population.buffer.rewards(2)).all()  # NaN rows were neutralised by the buffer
    # A learner whose weights went NaN acts non-finitely in evaluation and is quarantined too.
    with torch.no_grad():
        engine.population.learners.actor[0][1] = float("nan")
    engine.evaluate(1)
    assert 1 in engine.population.quarantined_learners
    ctx = engine.reward_update()
    assert ctx.slot(1).fitness == -math.inf and ctx.slot(2).fitness == -math.inf
    assert ctx.best == 0 and set(ctx.refill) == {1, 2}
    assert engine.rewards[2].id == "r1s2" and engine.population.quarantined_learners == set()
    assert all(torch.isfinite(p[1]).all() for p in engine.population.learners.actor)  # reset from the best learner
    engine.step()  # the reset learners train again, on finite rewards
    assert engine.population.quarantined_learners == set()
    assert all(torch.isfinite(p).all() for p in engine.population.learners.critic)


@pytest.mark.parametrize(("learner", "name"), [("sac", "SAC"), ("crossq", "CrossQ")])
def test_diverged_learner_stops_training(learner: str, name: str) -> None:
    engine = make_engine(tiny_task(), tiny_config(total_steps=60, learner=learner), scratch_rewards(), Proposer())
    engine.population.prepare(engine.rewards)
    with torch.no_grad():
        engine.population.learners.critic[0][1] = float("nan")  # first critic parameter of learner 1
    engine.step()
    assert 1 in engine.population.quarantined_learners
    assert any(e["event"] == "quarantine" and e["reason"] == f"non-finite {name} loss" for e in engine.events)
    calls: list[list[int]] = []
    update = engine.population.learners.update
    engine.population.learners.update = lambda batch, members: calls.append(list(members)) or update(batch, members)
    engine.step()
    assert calls and all(1 not in members and 0 in members for members in calls)
    assert 1 not in engine.population.ts.select(3, np.random.default_rng(0))


def test_init_setting_extra_learner_always_acts_and_is_ranked() -> None:
    hook = Proposer()
    cfg = tiny_config(setting="init", total_steps=150)
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), hook)
    assert engine.best_slot == 3  # before any ranking, the learner on the task's own reward is handed over
    infos = []
    engine.run(progress=infos.append)
    assert engine.population.num_learners == 4 and engine.population.extra == 3
    assert all(i.acted[-1] == 3 and 3 not in i.acted[:-1] for i in infos)
    assert isinstance(engine.rewards[3], HumanReward)  # the env-reward learner keeps the human reward
    ctx = hook.contexts[0]
    # ranked with the K slots (the reference's with_init), never refilled
    assert len(ctx.slots) == len(ctx.rewards) == 4 and sorted(ctx.ranking) == [0, 1, 2, 3] and 3 not in ctx.refill
    assert "human_reward" in ctx.feature_sample  # the init setting may show the human reward
    with pytest.raises(EngineError):
        make_engine(tiny_task(), cfg, scratch_rewards()[:2], hook)  # init takes K candidates


def test_init_human_learner_ranked_first_is_inherited_and_handed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When the human-reward learner ranks first (forced here: the ranking rule is tests/test_ranking_rule.py's), it
    # is the best, every slot is refilled, inherits its policy (the reference's rule: nothing succeeds in so short
    # a run), and its policy is the one handed over.
    given = [FeatureReward("dist", 1.0, complexity=5.0), FeatureReward("dist", 3.0, 1.0, complexity=5.0),
             FeatureReward("action_norm", 0.1, complexity=5.0)]
    hook = Proposer()
    monkeypatch.setattr("lares_agent.engine.setup.fitness.rank_slots",
                        lambda slots, use_task_return: [3, *(s.slot for s in slots if s.slot != 3)])
    cfg = tiny_config(setting="init", total_steps=150, elites=1, max_rounds=1, inherit="always")
    engine = make_engine(tiny_task(), cfg, given, hook, tmp_path)
    engine.run()
    ctx = hook.contexts[0]
    assert ctx.best == 3 and ctx.elites == (3,) and ctx.refill == (0, 1, 2)
    assert engine.best_slot == 3 and isinstance(engine.rewards[3], HumanReward)
    update = next(e for e in engine.events if e["event"] == "reward_update")
    assert update["best"] == 3 and update["inherited"] == [0, 1, 2]
    assert engine.last_metrics is not None and engine.last_metrics["success_best_slot"] is not None
    policy = engine.save_policy("final")
    assert policy is not None and PolicyArtefact.load(policy).reward_id == "human"


def test_baseline_is_plain_sac_on_human_reward() -> None:
    hook = Proposer()
    engine = make_engine(tiny_task(), tiny_config(setting="baseline", total_steps=150), (), hook)
    engine.run()
    assert engine.population.num_learners == 1 and isinstance(engine.rewards[0], HumanReward)
    assert hook.contexts == [] and engine.round == 0
    assert np.allclose(engine.population.buffer.rewards(0), engine.population.buffer.feature_view()["human_reward"])


def test_fitness_ranking_tie_breaks() -> None:
    def ev(member: int, succ: float, ret: float, final: float) -> MemberEvaluation:
        return MemberEvaluation(member, 2, succ, ret, 0.0, final, final, 10.0)

    r = [FeatureReward("dist", complexity=c) for c in (5.0, 1.0, 1.0, 1.0)]
    evals = [ev(0, 0.5, -10, 0.3), ev(1, 0.5, -5, 0.4), ev(2, 0.5, -5, 0.2), ev(3, 0.9, -50, 0.9)]
    with_return = [slot_evaluation(e, r[e.member], 0.0, False) for e in evals]
    assert rank_slots(with_return, True) == [3, 1, 2, 0]  # success, then task return, then complexity, then index
    scratch = [slot_evaluation(e, r[e.member], 0.0, False) for e in evals]
    assert rank_slots(scratch, False) == [3, 2, 0, 1]  # from scratch: -final progress, never the human return
    penalised = [slot_evaluation(e, r[e.member], 0.1, e.member == 3) for e in evals]
    assert rank_slots(penalised, True) == [1, 2, 0, 3]  # the return before complexity; quarantined last
    assert penalised[0].fitness == 0.5 and penalised[0].complexity_penalty == pytest.approx(0.1 * 5.0)


def test_config_validation() -> None:
    with pytest.raises(ConfigError):
        flat_config(setting="nope")
    with pytest.raises(ConfigError):
        flat_config(population=3, elites=4)
    with pytest.raises(ConfigError):
        flat_config(setting="init", population=1, elites=2)
    with pytest.raises(ConfigError, match="unknown learner 'ppo'"):
        flat_config(learner="ppo")  # type: ignore[arg-type]
    cfg = tiny_config()
    assert EngineConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
    crossq = tiny_config(learner="crossq")
    assert EngineConfig.from_json(json.loads(json.dumps(crossq.to_json()))) == crossq  # tuples rebuilt from lists
    assert isinstance(crossq.learners, ReplayConfig) and isinstance(cfg.learners, ReplayConfig)
    assert crossq.learners.learner_config is TINY_CROSSQ and cfg.learners.learner_config is cfg.learners.sac
    with pytest.raises(EngineError, match="unknown engine config keys"):
        EngineConfig.from_json({**cfg.to_json(), "population_size": 3})  # a name from before: refused, not dropped
    with pytest.raises(EngineError):
        make_engine(tiny_task(), cfg, scratch_rewards()[:2])
    with pytest.raises(EngineError):
        make_engine(tiny_task(has_human_reward=False), tiny_config(setting="baseline"))


# ---------------------------------------------------------------------------------------------- CrossQ learners
def test_crossq_run_updates_rewards_and_inherits_everything(tmp_path: Path) -> None:
    from lares_agent.engine.learners.actor_critic import ActorCriticPopulation

    hook = Proposer()
    cfg = tiny_config(learner="crossq", max_rounds=1, eval_every=0,  # losses add up from update to update
                      inherit="always")
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), hook, run_dir=tmp_path)
    pop = engine.population.learners
    assert isinstance(pop, ActorCriticPopulation) and pop.critic_target is None  # CrossQ: no targets
    engine.run(until_steps=120)
    ctx = engine.reward_update()
    best, refill = ctx.best, ctx.refill
    assert len(refill) == 2 and all(engine.rewards[s].id == f"r1s{s}" for s in refill)
    k = pop.k
    for slot in refill:  # actor, critics, their running statistics and counts, Adam states, temperature
        for p in [*pop.actor, *pop._actor.running]:
            assert torch.equal(p[slot], p[best])
        for p in [*pop.critic, *pop._critic.running]:
            assert torch.equal(p[slot], p[best]) and torch.equal(p[slot + k], p[best + k])
        assert pop._critic.steps[slot] == pop._critic.steps[best] > 5  # past the renormalisation warm-up
        assert pop.log_alpha[slot].item() == pop.log_alpha[best].item()
        assert pop.updates[slot] == pop.updates[best]
        assert all(torch.equal(m[slot], m[best]) for m in pop.q_optimizer.exp_avg_sq)
        assert pop.anchor_weight[slot].item() == 1.0
    assert pop.anchor_weight[best].item() == 0.0
    engine.step()
    pull = engine.population.loss_sum["anchor_loss"]
    assert all(pull[s] > 0 for s in refill) and pull[best] == 0.0  # the L2 pull acts on inherited learners only
    engine.run()
    assert engine.done and engine.round == 1 and not engine.population.quarantined_learners
    metrics = list(read_jsonl(tmp_path / "metrics.jsonl"))
    assert [m["kind"] for m in metrics] == ["update"] and np.isfinite(metrics[0]["losses"]["q_loss"]).all()
    # The observation statistics saw every stored step (warm-up and training), no evaluation step.
    assert pop.obs_norm is not None and pop.obs_norm.count == len(engine.population.buffer)
    assert engine.state_dict()["learner"] == "crossq"


# ---------------------------------------------------------------------------------------------- real tasks
@pytest.mark.parametrize("task_name", ["reach-v3", "Reacher-v5"])
def test_end_to_end_on_registered_tasks(task_name: str, tmp_path: Path) -> None:
    from lares_agent.engine.tasks import get_task

    task = get_task(task_name)
    progress = task.progress_feature
    rewards = [FeatureReward(progress, 1.0), FeatureReward("action_norm", 0.5)]
    hook = Proposer(lambda ctx, slot: FeatureReward(progress, 10.0, -3.0, id=f"{task_name}-r{ctx.round}s{slot}"))
    cfg = tiny_config(population=2, total_steps=160, warmup_steps=40, reward_period=80, eval_every=0,
                      eval_episodes=1, update_eval_episodes=1, horizon=20, max_rounds=1, inherit="always")
    engine = make_engine(task, cfg, rewards, hook, run_dir=tmp_path)
    engine.run()
    engine.close()
    assert engine.env_steps >= 160 and engine.round == 1
    ctx = hook.contexts[0]
    best = ctx.best
    # Relabel + scaling + inheritance on the real task.
    ref = engine.population.buffer.rewards(best).astype(np.float64)
    for slot in ctx.refill:
        assert engine.rewards[slot].id == f"{task_name}-r1s{slot}"
        col = engine.population.buffer.rewards(slot).astype(np.float64)
        assert np.isfinite(col).all() and col.std() > 0
        assert engine.population.learners.anchor_weight[slot].item() == 1.0
    accepted = [e for e in engine.events if e["event"] == "candidate_accepted"]
    assert {e["slot"] for e in accepted} == set(ctx.refill)
    assert all(e["scale"] > 0 for e in accepted)
    assert ref.std() > 0
    assert set(ctx.rollouts) == set(ctx.ranking[:2]) and progress in ctx.rollouts[best][0]
    metrics = list(read_jsonl(tmp_path / "metrics.jsonl"))
    assert [m["kind"] for m in metrics] == ["update"]
    assert (tmp_path / "checkpoints" / "LATEST").is_file()
