"""CrossQ: batched population == K single CrossQLearners; batch renormalisation in train/eval modes; the joint
batch; policy delay; inheritance; per-member non-finite losses; exact checkpoint resume."""

from __future__ import annotations

from collections.abc import Sequence

import helpers
import numpy as np
import pytest
import torch

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.crossq import BatchRenorm, CrossQConfig, CrossQLearner, renorm_limits
from lares_agent.engine.learners.crossq_population import CrossQPopulation
from lares_agent.engine.learners.nets import member_seeds

K, OBS, ACT, B = 3, 5, 2, 16
# Short renorm warm-up and relaxation so the tests cover batch norm, the ramp and full renormalisation.
SMALL = CrossQConfig(actor_hidden=(24, 24), critic_hidden=(32, 32), batch_size=B,
                     renorm_warmup_steps=2, renorm_relax_steps=3)
TOL = {"rtol": 1e-5, "atol": 1e-6}
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def random_batch(rng: np.random.Generator, c: int) -> Batch:
    return helpers.random_batch(rng, c, B, OBS, ACT)


def state_of(learner: CrossQLearner) -> dict[str, torch.Tensor]:
    """Every parameter and buffer (running statistics, forward counts) of a learner's networks."""
    out = {}
    for name in ("actor", "qf1", "qf2"):
        for key, value in getattr(learner, name).state_dict().items():
            out[f"{name}.{key}"] = value
    out["log_alpha"] = learner.log_alpha.detach()
    return out


def assert_member_equals(pop: CrossQPopulation, k: int, learner: CrossQLearner) -> None:
    twin, want = state_of(pop.to_learner(k)), state_of(learner)
    assert twin.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(twin[key], want[key], **TOL, msg=lambda m, key=key: f"{key}: {m}")
    assert pop.updates[k] == learner.updates


def test_config_defaults_and_checks() -> None:
    cfg = CrossQConfig()
    assert cfg.actor_hidden == (128, 128) and cfg.critic_hidden == (256, 256) and cfg.policy_delay == 3
    assert cfg.adam_betas == (0.5, 0.999) and cfg.renorm_momentum == 0.01 and cfg.lr == 1e-3
    assert cfg.entropy_target(4) == -4.0
    assert CrossQConfig(critic_hidden=[8, 8]).critic_hidden == (8, 8)  # type: ignore[arg-type]  # from JSON
    for bad in ({"critic_hidden": ()}, {"policy_delay": 0}, {"r_max": 0.5}, {"adam_betas": (1.0, 0.9)}):
        with pytest.raises(ValueError):
            CrossQConfig(**bad)  # type: ignore[arg-type]


def test_renorm_limits_warm_up_then_relax() -> None:
    steps = torch.tensor([0, 2, 3, 4, 5, 100])
    r_max, d_max = renorm_limits(steps, SMALL)  # warm-up 2 forwards, then 3 forwards of ramp
    torch.testing.assert_close(r_max, torch.tensor([1.0, 1.0, 1 + 2 / 3, 1 + 4 / 3, 3.0, 3.0]))
    torch.testing.assert_close(d_max, torch.tensor([0.0, 0.0, 5 / 3, 10 / 3, 5.0, 5.0]))
    jump = CrossQConfig(renorm_warmup_steps=2)
    assert renorm_limits(torch.tensor([2, 3]), jump)[0].tolist() == [1.0, 3.0]


def test_batch_renorm_layer_train_and_eval() -> None:
    """Warm-up: plain batch norm; eval: running statistics, nothing changes; later: r and d are clipped."""
    layer = BatchRenorm(3, CrossQConfig(renorm_warmup_steps=1, renorm_momentum=0.5))
    x = torch.randn(64, 3, generator=torch.Generator().manual_seed(0)) * 4.0 + 10.0
    out = layer.train()(x)
    torch.testing.assert_close(out.mean(0), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.std(0, correction=0), torch.ones(3), atol=1e-3, rtol=0)
    torch.testing.assert_close(layer.running_mean[0], 0.5 * x.mean(0))
    torch.testing.assert_close(layer.running_var[0], 0.5 + 0.5 * x.var(0))
    assert int(layer.steps) == 1
    before = [t.clone() for t in layer.buffers()]
    layer.eval()
    for _ in range(2):
        torch.testing.assert_close(layer(x), (x - layer.running_mean) / (layer.running_var + 1e-3).sqrt())
    assert all(torch.equal(a, b) for a, b in zip(before, layer.buffers(), strict=True))
    # Past the warm-up: a batch 100x wider than the running std gets r = 3 (clipped), d = +-5 (clipped).
    layer.train()(x)
    wide = torch.randn(64, 3, generator=torch.Generator().manual_seed(1)) * 1e3 + 1e4
    mean, std = wide.mean(0), (wide.var(0, correction=0) + 1e-3).sqrt()
    expected = (wide - mean) / std * 3.0 + 5.0
    with torch.no_grad():
        layer.running_mean.copy_(torch.zeros(1, 3))
        layer.running_var.copy_(torch.ones(1, 3))
    torch.testing.assert_close(layer.train()(wide), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("obs_norm", [False, True])
def test_batched_population_equals_per_learner_updates(obs_norm: bool) -> None:
    """Same seeds, same minibatches: K batched learners == K CrossQLearners, losses and every parameter and
    running statistic, through subsets (members out of phase in the policy delay), inherit and release."""
    cfg = CrossQConfig(**{**SMALL.__dict__, "obs_norm": obs_norm})
    rng = np.random.default_rng(0)
    pop = CrossQPopulation(K, OBS, ACT, cfg, seed=11)
    learners = [CrossQLearner(OBS, ACT, cfg, seed=s) for s in member_seeds(11, K)]
    for k in range(K):
        assert_member_equals(pop, k, learners[k])
    schedule: list[tuple[str, Sequence[int]]] = [
        ("observe", ()), ("update", range(K)), ("update", (2, 0)), ("update", range(K)), ("observe", ()),
        ("inherit", (0, 2)), ("update", range(K)), ("update", (1,)), ("release", (2,)),
        *[("update", range(K))] * 4, ("update", (0, 2)), ("update", range(K)),
    ]
    phases: list[int] = []  # distinct policy-delay phases among the members of each update
    for op, members in schedule:
        if op == "observe":
            obs = rng.normal(size=(40, OBS)) * 3.0 + 1.0
            pop.observe(obs)
            for learner in learners:
                learner.observe(obs)
        elif op == "inherit":  # members 0 and 2 inherit from 1 with the L2 pull
            pop.inherit(list(members), 1, anchor_weight=0.5)
            for m in members:
                learners[m].inherit(learners[1], anchor_weight=0.5)
        elif op == "release":
            pop.release_anchor(list(members))
            for m in members:
                learners[m].release_anchor()
        else:
            batch = random_batch(rng, len(members))
            phases.append(len({int(pop.updates[m]) % cfg.policy_delay for m in members}))
            got = pop.update(batch, members=list(members))
            for i, m in enumerate(members):
                for key, value in learners[m].update(batch.column(i)).items():
                    assert got[key][m] == pytest.approx(value, rel=1e-4, abs=1e-6), (op, key, m)
            for k in set(range(K)) - set(members):
                assert np.isnan(got["q_loss"][k])
    assert max(phases) > 1  # some updates stepped the actors of only some of their members
    for k in range(K):
        assert_member_equals(pop, k, learners[k])
    assert pop.updates.tolist() == [learner.updates for learner in learners]


def test_eval_mode_acting_uses_running_statistics() -> None:
    rng = np.random.default_rng(1)
    pop = CrossQPopulation(K, OBS, ACT, SMALL, seed=5)
    for _ in range(3):
        pop.update(random_batch(rng, K))
    stats = [t.clone() for t in pop._actor.running + pop._critic.running]
    obs = rng.normal(size=(6, OBS)).astype(np.float32)
    members = np.array([2, 0, 2, 1, 0, 0])
    first = pop.act(obs, members, deterministic=True, generator=torch.Generator())
    again = pop.act(obs[::-1].copy(), members[::-1].copy(), True, torch.Generator())[::-1]
    np.testing.assert_array_equal(first, again)  # per-row: no batch statistics in acting
    assert all(torch.equal(a, b) for a, b in zip(stats, pop._actor.running + pop._critic.running, strict=True))
    for i, m in enumerate(members):
        single = pop.to_learner(int(m)).act(obs[i : i + 1], True, torch.Generator())
        np.testing.assert_allclose(first[i : i + 1], single, **TOL)
    a = pop.act(obs, members, False, torch.Generator().manual_seed(9))
    np.testing.assert_array_equal(a, pop.act(obs, members, False, torch.Generator().manual_seed(9)))
    assert np.abs(a).max() <= 1.0 and not np.allclose(a, first)
    pop.update(random_batch(rng, K))  # a train-mode update moves the critics' statistics
    assert not torch.equal(stats[len(pop._actor.running)], pop._critic.running[0])
    with pytest.raises(ValueError):
        pop.act(obs, np.array([0, 1]), True, torch.Generator())


def test_critic_statistics_cover_the_joint_batch_and_the_actor_steps_every_delay() -> None:
    """The critic's input statistics after one update are those of [(s, a); (s', a')] (2B rows); the actor
    (and its statistics) change on updates 1 and 4 only, with policy_delay 3."""
    rng = np.random.default_rng(2)
    pop = CrossQPopulation(K, OBS, ACT, SMALL, seed=1)
    batch = random_batch(rng, K)
    actor_trace = []
    for step in range(5):
        before = [p.detach().clone() for p in pop.actor]
        pop.update(batch if step == 0 else random_batch(rng, K))
        if step == 0:
            joint_obs = np.concatenate([batch.obs, batch.next_obs], axis=1)  # [K, 2B, OBS]
            got = pop._critic.running[0][:K, 0, :OBS].numpy()  # qf1 of each member, the obs columns
            np.testing.assert_allclose(got, 0.01 * joint_obs.mean(1), rtol=1e-4, atol=1e-7)
            np.testing.assert_allclose(pop._critic.running[0][K:, 0, :OBS].numpy(), got)  # qf2 alike
        actor_trace.append(not all(torch.equal(a, p) for a, p in zip(before, pop.actor, strict=True)))
    assert actor_trace == [True, False, False, True, False]
    assert pop._critic.steps.tolist() == [5] * (2 * K) and pop._actor.steps.tolist() == [2] * K


def test_inherit_copies_everything_and_anchors() -> None:
    rng = np.random.default_rng(3)
    pop = CrossQPopulation(K, OBS, ACT, SMALL, seed=3)
    for _ in range(2):
        pop.update(random_batch(rng, K))
    pop.update(random_batch(rng, 1), members=[2])  # member 2 is one update ahead
    pop.inherit([0], src=2, anchor_weight=1.0)
    for stack in (pop.actor, pop._actor.running, pop.actor_optimizer.exp_avg, pop.actor_optimizer.exp_avg_sq):
        for t in stack:
            assert torch.equal(t[0], t[2])
    for stack in (pop.critic, pop._critic.running, pop.q_optimizer.exp_avg_sq):
        for t in stack:
            assert torch.equal(t[0], t[2]) and torch.equal(t[K], t[K + 2])  # qf1 and qf2 rows
    for t, a in zip(pop.critic, pop.anchor_critic, strict=True):
        assert torch.equal(a[K], t[K + 2])
    assert pop._actor.steps[0] == pop._actor.steps[2] and pop._critic.steps[K] == pop._critic.steps[K + 2]
    assert pop.updates[0] == pop.updates[2] == 3 and pop.log_alpha[0] == pop.log_alpha[2]
    assert pop.q_optimizer.step[0] == pop.q_optimizer.step[2] == 3
    assert pop.a_optimizer.exp_avg[0][0] == pop.a_optimizer.exp_avg[0][2]
    assert pop.anchor_weight.tolist() == [1.0, 0.0, 0.0]
    assert not torch.equal(pop.actor[2][1], pop.actor[2][0])
    first = pop.update(random_batch(rng, K))
    assert first["anchor_loss"][0] == 0.0  # still at the anchor during this step's forward pass
    assert pop.update(random_batch(rng, K))["anchor_loss"][0] > 0.0
    pop.release_anchor([0])
    assert pop.update(random_batch(rng, K))["anchor_loss"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        pop.inherit([1, 1], src=0, anchor_weight=1.0)


def test_state_dict_round_trip_continues_identically() -> None:
    cfg = CrossQConfig(**{**SMALL.__dict__, "obs_norm": True})
    rng = np.random.default_rng(4)
    pop = CrossQPopulation(K, OBS, ACT, cfg, seed=8)
    pop.observe(rng.normal(size=(30, OBS)))
    for _ in range(4):
        pop.update(random_batch(rng, K))
    pop.inherit([1], src=0, anchor_weight=0.7)
    pop.update(random_batch(rng, 2), members=[0, 2])
    twin = CrossQPopulation(K, OBS, ACT, cfg, seed=99)
    twin.load_state_dict(pop.state_dict())
    for _ in range(3):
        batch = random_batch(rng, K)
        a, b = pop.update(batch), twin.update(batch)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    obs = rng.normal(size=(4, OBS)).astype(np.float32)
    np.testing.assert_array_equal(pop.act(obs, np.arange(4) % K, True, torch.Generator()),
                                  twin.act(obs, np.arange(4) % K, True, torch.Generator()))
    with pytest.raises(ValueError, match="population state"):
        CrossQPopulation(K + 1, OBS, ACT, cfg, seed=0).load_state_dict(pop.state_dict())
    with pytest.raises(ValueError, match="normalisation"):
        CrossQPopulation(K, OBS, ACT, SMALL, seed=0).load_state_dict(pop.state_dict())


def test_non_finite_loss_stays_in_its_member() -> None:
    rng = np.random.default_rng(5)
    pop = CrossQPopulation(K, OBS, ACT, SMALL, seed=2)
    batch = random_batch(rng, K)
    batch.reward[1, 3] = np.nan
    stats = pop.update(batch)
    assert np.isnan(stats["q_loss"][1]) and np.isfinite(stats["q_loss"][[0, 2]]).all()
    stats = pop.update(random_batch(rng, K))  # member 1's critic is now NaN; the others stay finite
    assert not np.isfinite(stats["q_loss"][1] + stats["actor_loss"][1])
    assert np.isfinite(stats["q_loss"][[0, 2]] + stats["actor_loss"][[0, 2]]).all()
    for t in pop._critic.running:
        assert torch.isfinite(t[[0, 2, K, K + 2]]).all()


def test_update_checks_members_and_batch() -> None:
    pop = CrossQPopulation(K, OBS, ACT, SMALL, seed=0)
    rng = np.random.default_rng(6)
    with pytest.raises(ValueError, match="columns"):
        pop.update(random_batch(rng, K - 1))
    with pytest.raises(ValueError, match="distinct"):
        pop.update(random_batch(rng, 2), members=[1, 1])
    before = [t[1].clone() for t in pop.actor + pop._critic.running]
    pop.update(random_batch(rng, 1), members=[0])
    assert all(torch.equal(t[1], b) for t, b in zip(pop.actor + pop._critic.running, before, strict=True))
