"""The batched population, for SAC and CrossQ alike: equals K single reference learners numerically; inheritance,
anchors, acting, member subsets, non-finite losses, checkpoints; and the stacked Adam it steps with."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import helpers
import numpy as np
import pytest
import torch

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.actor_critic import ActorCriticPopulation
from lares_agent.engine.learners.crossq import CrossQConfig, CrossQLearner
from lares_agent.engine.learners.nets import StackedAdam, member_seeds, stacked_mlp
from lares_agent.engine.learners.sac import SACConfig, SACLearner

K, OBS, ACT, B = 3, 5, 2, 16
CONFIGS: dict[str, Any] = {
    "sac": SACConfig(hidden=(24, 24), batch_size=B),
    # A short renorm warm-up and ramp, so a few updates cover batch norm, the ramp and full renormalisation.
    "crossq": CrossQConfig(actor_hidden=(24, 24), critic_hidden=(32, 32), batch_size=B,
                           renorm_warmup_steps=2, renorm_relax_steps=3),
}
LEARNERS: dict[str, Any] = {"sac": SACLearner, "crossq": CrossQLearner}
KINDS = pytest.mark.parametrize("kind", ["sac", "crossq"])
TOL = {"rtol": 1e-5, "atol": 1e-6}
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def random_batch(rng: np.random.Generator, c: int) -> Batch:
    return helpers.random_batch(rng, c, B, OBS, ACT)


def population(kind: str, seed: int, **changes: Any) -> ActorCriticPopulation:
    return ActorCriticPopulation(K, OBS, ACT, dataclasses.replace(CONFIGS[kind], **changes), seed)


def networks(learner: SACLearner | CrossQLearner) -> dict[str, torch.Tensor]:
    """Every parameter and buffer of a single learner's networks: targets (SAC), running statistics and
    forward counts (CrossQ)."""
    names = [name for name in ("actor", "qf1", "qf2", "qf1_target", "qf2_target") if hasattr(learner, name)]
    out = {f"{name}.{key}": value for name in names for key, value in getattr(learner, name).state_dict().items()}
    out["log_alpha"] = learner.log_alpha.detach()
    return out


def assert_member_equals(pop: ActorCriticPopulation, k: int, learner: SACLearner | CrossQLearner) -> None:
    twin, want = networks(pop.to_learner(k)), networks(learner)
    assert twin.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(twin[key], want[key], **TOL, msg=lambda m, key=key: f"{key}: {m}")
    if isinstance(learner, CrossQLearner):
        assert pop.updates[k] == learner.updates


@KINDS
@pytest.mark.parametrize("obs_norm", [False, True])
def test_batched_population_equals_per_learner_updates(kind: str, obs_norm: bool) -> None:
    """Same seeds, same minibatches: K batched learners == K single learners, losses and every parameter, target
    and running statistic, through subsets (CrossQ: members out of phase in the policy delay), inherit and
    release."""
    cfg = dataclasses.replace(CONFIGS[kind], obs_norm=obs_norm)
    rng = np.random.default_rng(0)
    pop = ActorCriticPopulation(K, OBS, ACT, cfg, seed=11)
    learners = [LEARNERS[kind](OBS, ACT, cfg, seed=s) for s in member_seeds(11, K)]
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
            phases.append(len({int(pop.updates[m]) % pop.policy_delay for m in members}))
            got = pop.update(batch, members=list(members))
            for i, m in enumerate(members):
                for key, value in learners[m].update(batch.column(i)).items():
                    assert got[key][m] == pytest.approx(value, rel=1e-4, abs=1e-6), (op, key, m)
            for k in set(range(K)) - set(members):
                assert np.isnan(got["q_loss"][k])
    # CrossQ: some updates stepped the actors of only some of their members; SAC steps every actor every time.
    assert (max(phases) > 1) == (kind == "crossq")
    for k in range(K):
        assert_member_equals(pop, k, learners[k])
    assert pop.updates.tolist() == [9, 9, 9]  # inherit copies the count


@KINDS
def test_inherit_copies_everything_and_anchors(kind: str) -> None:
    rng = np.random.default_rng(3)
    pop = population(kind, seed=3)
    for _ in range(2):
        pop.update(random_batch(rng, K))
    pop.update(random_batch(rng, 1), members=[2])  # member 2 is one update ahead
    pop.inherit([0], src=2, anchor_weight=1.0)
    for stack in (pop.actor, pop._actor.running, pop.actor_optimizer.exp_avg, pop.actor_optimizer.exp_avg_sq):
        for t in stack:
            assert torch.equal(t[0], t[2])
    for stack in (pop.critic, pop.critic_target or [], pop._critic.running, pop.q_optimizer.exp_avg_sq):
        for t in stack:
            assert torch.equal(t[0], t[2]) and torch.equal(t[K], t[K + 2])  # qf1 and qf2 rows
    for t, a in zip(pop.actor, pop.anchor_actor, strict=True):
        assert torch.equal(a[0], t[2])
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
    with pytest.raises(ValueError):
        pop.inherit([2], src=2, anchor_weight=1.0)


@KINDS
def test_act_matches_members_and_is_seedable(kind: str) -> None:
    rng = np.random.default_rng(1)
    pop = population(kind, seed=5)
    for _ in range(3):  # CrossQ: running statistics away from their start
        pop.update(random_batch(rng, K))
    obs = rng.normal(size=(6, OBS)).astype(np.float32)
    members = np.array([2, 0, 2, 1, 0, 0])
    det = pop.act(obs, members, deterministic=True, generator=torch.Generator())
    assert det.shape == (6, ACT)
    again = pop.act(obs[::-1].copy(), members[::-1].copy(), True, torch.Generator())[::-1]
    np.testing.assert_array_equal(det, again)  # row by row: no batch statistics in acting
    for i, m in enumerate(members):
        single = pop.to_learner(int(m)).act(obs[i : i + 1], True, torch.Generator())
        np.testing.assert_allclose(det[i : i + 1], single, **TOL)
    a = pop.act(obs, members, False, torch.Generator().manual_seed(9))
    np.testing.assert_array_equal(a, pop.act(obs, members, False, torch.Generator().manual_seed(9)))
    assert np.abs(a).max() <= 1.0 and not np.allclose(a, det)
    with pytest.raises(ValueError):
        pop.act(obs, np.array([0, 1]), True, torch.Generator())
    with pytest.raises(ValueError):
        pop.act(obs[:1], np.array([K]), True, torch.Generator())


@KINDS
def test_state_dict_round_trip_continues_identically(kind: str) -> None:
    rng = np.random.default_rng(4)
    pop = population(kind, seed=8, obs_norm=True)
    pop.observe(rng.normal(size=(30, OBS)))
    for _ in range(4):
        pop.update(random_batch(rng, K))
    pop.inherit([1], src=0, anchor_weight=0.7)
    pop.update(random_batch(rng, 2), members=[0, 2])
    twin = population(kind, seed=99, obs_norm=True)
    twin.load_state_dict(pop.state_dict())
    for _ in range(3):
        batch = random_batch(rng, K)
        a, b = pop.update(batch), twin.update(batch)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    obs = rng.normal(size=(4, OBS)).astype(np.float32)
    np.testing.assert_array_equal(pop.act(obs, np.arange(4) % K, False, torch.Generator().manual_seed(1)),
                                  twin.act(obs, np.arange(4) % K, False, torch.Generator().manual_seed(1)))
    state = pop.state_dict()
    with pytest.raises(ValueError, match="population state"):
        ActorCriticPopulation(K + 1, OBS, ACT, pop.config, seed=0).load_state_dict(state)
    with pytest.raises(ValueError, match="population state"):  # the other learner's checkpoint
        population("crossq" if kind == "sac" else "sac", seed=0, obs_norm=True).load_state_dict(state)
    with pytest.raises(ValueError, match="normalisation"):
        population(kind, seed=0).load_state_dict(state)


@KINDS
def test_non_finite_loss_stays_in_its_member(kind: str) -> None:
    rng = np.random.default_rng(5)
    pop = population(kind, seed=2)
    batch = random_batch(rng, K)
    batch.reward[1, 3] = np.nan
    stats = pop.update(batch)
    assert np.isnan(stats["q_loss"][1]) and np.isfinite(stats["q_loss"][[0, 2]]).all()
    stats = pop.update(random_batch(rng, K))  # member 1's critic is now NaN; the others stay finite
    assert not np.isfinite(stats["q_loss"][1] + stats["actor_loss"][1])
    assert np.isfinite(stats["q_loss"][[0, 2]] + stats["actor_loss"][[0, 2]]).all()
    for t in pop.critic + pop._critic.running:
        assert torch.isfinite(t[[0, 2, K, K + 2]]).all()


@KINDS
def test_update_checks_members_and_batch(kind: str) -> None:
    pop = population(kind, seed=0)
    rng = np.random.default_rng(6)
    with pytest.raises(ValueError, match="columns"):
        pop.update(random_batch(rng, K - 1))
    with pytest.raises(ValueError, match="distinct"):
        pop.update(random_batch(rng, 2), members=[1, 1])
    actor_before = [t[1].clone() for t in pop.actor + pop._actor.running]
    critic_stacks = pop.critic + (pop.critic_target or []) + pop._critic.running
    critic_before = [t[[1, K + 1]].clone() for t in critic_stacks]
    member_0 = pop.critic[0][0].clone()
    pop.update(random_batch(rng, 1), members=[0])
    assert all(torch.equal(t[1], b) for t, b in zip(pop.actor + pop._actor.running, actor_before, strict=True))
    assert all(torch.equal(t[[1, K + 1]], b) for t, b in zip(critic_stacks, critic_before, strict=True))
    assert not torch.equal(pop.critic[0][0], member_0)  # member 0 did step
    assert pop.updates.tolist() == [1, 0, 0]


def test_stacked_adam_equals_torch_adam_per_row() -> None:
    """Both Adam paths (fused kernel and plain fallback) equal torch.optim.Adam row by row, with
    rows updated on different schedules (per-row step counts) and an L2 pull toward anchors."""
    gen = torch.Generator().manual_seed(0)
    shapes = [(4, 3, 5), (4, 1, 5)]
    init = [torch.randn(s, generator=gen) for s in shapes]
    anchors = [torch.randn(s, generator=gen) for s in shapes]
    weight = torch.tensor([0.0, 0.3, 0.3, 1.0])
    for fused in (True, False):
        stacked = [t.clone() for t in init]
        opt = StackedAdam(stacked, lr=0.01, fused=fused)
        rows = [[t[r].clone().requires_grad_() for t in init] for r in range(4)]
        ref_opts = [torch.optim.Adam(r, lr=0.01) for r in rows]
        for step in range(4):
            members = [0, 1, 2, 3] if step % 2 == 0 else [3, 1]
            # transposed (non-contiguous) gradients, as autograd returns for the narrow layers
            grads = [torch.randn((len(members), s[2], s[1]), generator=gen).transpose(1, 2) for s in shapes]
            index = None if len(members) == 4 else torch.tensor(members)
            params = stacked if index is None else [t[index] for t in stacked]
            pull = ([a if index is None else a[index] for a in anchors], weight[members])
            opt.update_(params, [g.clone() for g in grads], index, pull)
            if index is not None:
                for t, part in zip(stacked, params, strict=True):
                    t[index] = part
            for i, m in enumerate(members):
                ref_opts[m].zero_grad()
                loss = sum((p * g[i]).sum() + weight[m] * (p - a[m]).pow(2).sum()
                           for p, g, a in zip(rows[m], grads, anchors, strict=True))
                loss.backward()
                ref_opts[m].step()
        for r in range(4):
            for t, ref in zip(stacked, rows[r], strict=True):
                torch.testing.assert_close(t[r], ref.detach(), rtol=1e-5, atol=1e-6)
        assert opt.step.tolist() == [2.0, 4.0, 2.0, 4.0]


def test_narrow_heads_give_autograds_gradients_with_a_contiguous_input_gradient() -> None:
    """The Q and actor heads' written-out backward equals autograd's of x @ W + b, and hands the input's gradient
    on contiguous (the ReLU's backward over a transposed one is many times slower)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 32, 20, generator=gen, dtype=torch.float64).requires_grad_()
    weight = torch.randn(4, 20, 3, generator=gen, dtype=torch.float64).requires_grad_()
    bias = torch.randn(4, 1, 3, generator=gen, dtype=torch.float64).requires_grad_()
    out = stacked_mlp(x, [weight], [bias])
    plain = torch.baddbmm(bias, x, weight)
    torch.testing.assert_close(out, plain)
    g = torch.randn(4, 32, 3, generator=gen, dtype=torch.float64)
    mine = torch.autograd.grad(torch.relu(out).mul(g).sum(), [x, weight, bias])
    theirs = torch.autograd.grad(torch.relu(plain).mul(g).sum(), [x, weight, bias])
    for a, b in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a, b)
    (dx,) = torch.autograd.grad(stacked_mlp(x, [weight], [bias]).sum(), [x])
    assert dx.is_contiguous()
