"""Batched population: equals K single SACLearners numerically; inheritance, anchors, acting, checkpoints."""

from __future__ import annotations

from collections.abc import Sequence

import helpers
import numpy as np
import pytest
import torch

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.nets import StackedAdam, member_seeds
from lares_agent.engine.learners.sac import SACConfig, SACLearner
from lares_agent.engine.learners.sac_population import Population

K, OBS, ACT, B = 3, 5, 2, 16
SMALL = SACConfig(hidden=(24, 24), batch_size=B)
TOL = {"rtol": 1e-5, "atol": 1e-6}
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def random_batch(rng: np.random.Generator, c: int) -> Batch:
    return helpers.random_batch(rng, c, B, OBS, ACT)


def assert_member_equals(pop: Population, k: int, learner: SACLearner) -> None:
    twin = pop.to_learner(k)
    for name in ("actor", "qf1", "qf2", "qf1_target", "qf2_target"):
        for p, q in zip(getattr(twin, name).parameters(), getattr(learner, name).parameters(), strict=True):
            torch.testing.assert_close(p, q, **TOL)
    torch.testing.assert_close(twin.log_alpha, learner.log_alpha.detach(), **TOL)


def update_learners(learners: Sequence[SACLearner], batch: Batch, members: Sequence[int]) -> list[dict]:
    return [learners[m].update(batch.column(i)) for i, m in enumerate(members)]


def test_batched_population_equals_per_learner_updates() -> None:
    """Same seeds, same minibatches: K batched learners == K SACLearners, through inherit and subsets."""
    rng = np.random.default_rng(0)
    pop = Population(K, OBS, ACT, SMALL, seed=11)
    learners = [SACLearner(OBS, ACT, SMALL, seed=s) for s in member_seeds(11, K)]
    for k in range(K):
        assert_member_equals(pop, k, learners[k])
    schedule: list[tuple[str, Sequence[int]]] = [
        ("update", range(K)), ("update", range(K)), ("inherit", (0, 2)), ("update", range(K)),
        ("update", (2, 0)), ("release", (2,)), ("update", range(K)), ("update", (1,)),
    ]
    for op, members in schedule:
        if op == "inherit":  # members 0 and 2 inherit from 1 with the L2 pull
            pop.inherit(list(members), 1, anchor_weight=0.5)
            for m in members:
                learners[m].inherit(learners[1], anchor_weight=0.5)
            continue
        if op == "release":
            pop.release_anchor(list(members))
            for m in members:
                learners[m].release_anchor()
            continue
        batch = random_batch(rng, len(members))
        got = pop.update(batch, members=list(members))
        want = update_learners(learners, batch, list(members))
        for i, m in enumerate(members):
            for key, value in want[i].items():
                assert got[key][m] == pytest.approx(value, rel=1e-4, abs=1e-6), (op, key, m)
        for k in set(range(K)) - set(members):
            assert np.isnan(got["q_loss"][k])
    for k in range(K):
        assert_member_equals(pop, k, learners[k])


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


def test_inherit_copies_the_source_and_anchors_the_destination() -> None:
    rng = np.random.default_rng(1)
    pop = Population(K, OBS, ACT, SMALL, seed=3)
    pop.update(random_batch(rng, K))
    pop.inherit([0], src=2, anchor_weight=1.0)
    for stack in (pop.actor, pop.critic_target):
        for t in stack:
            assert torch.equal(t[0], t[2])
    for t, a in zip(pop.actor, pop.anchor_actor, strict=True):
        assert torch.equal(a[0], t[2])
    for t, a in zip(pop.critic, pop.anchor_critic, strict=True):
        assert torch.equal(t[K], t[K + 2]) and torch.equal(a[K], t[K + 2])  # qf2 rows
    for m in pop.actor_optimizer.exp_avg_sq:
        assert torch.equal(m[0], m[2])
    assert pop.log_alpha[0] == pop.log_alpha[2] and pop.a_optimizer.exp_avg[0][0] == pop.a_optimizer.exp_avg[0][2]
    assert pop.anchor_weight.tolist() == [1.0, 0.0, 0.0]
    assert not torch.equal(pop.actor[0][1], pop.actor[0][0])
    metrics = pop.update(random_batch(rng, K))
    assert metrics["anchor_loss"][0] == 0.0  # still at the anchor during this step's forward pass
    assert pop.update(random_batch(rng, K))["anchor_loss"][0] > 0.0
    pop.release_anchor([0])
    assert pop.update(random_batch(rng, K))["anchor_loss"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        pop.inherit([1, 1], src=0, anchor_weight=1.0)
    with pytest.raises(ValueError):
        pop.inherit([2], src=2, anchor_weight=1.0)


def test_act_matches_members_and_is_seedable() -> None:
    pop = Population(K, OBS, ACT, SMALL, seed=5)
    obs = np.random.default_rng(2).normal(size=(6, OBS)).astype(np.float32)
    members = np.array([2, 0, 2, 1, 0, 0])
    det = pop.act(obs, members, deterministic=True, generator=torch.Generator())
    assert det.shape == (6, ACT)
    for i, m in enumerate(members):
        single = pop.to_learner(int(m)).act(obs[i : i + 1], True, torch.Generator())
        np.testing.assert_allclose(det[i : i + 1], single, rtol=1e-5, atol=1e-6)
    a = pop.act(obs, members, False, torch.Generator().manual_seed(9))
    b = pop.act(obs, members, False, torch.Generator().manual_seed(9))
    np.testing.assert_array_equal(a, b)
    assert np.abs(a).max() <= 1.0 and not np.allclose(a, det)
    with pytest.raises(ValueError):
        pop.act(obs, np.array([0, 1]), True, torch.Generator())
    with pytest.raises(ValueError):
        pop.act(obs[:1], np.array([K]), True, torch.Generator())


def test_state_dict_round_trip_continues_identically() -> None:
    rng = np.random.default_rng(3)
    pop = Population(K, OBS, ACT, SMALL, seed=8)
    pop.update(random_batch(rng, K))
    pop.inherit([1], src=0, anchor_weight=0.7)
    state = pop.state_dict()
    twin = Population(K, OBS, ACT, SMALL, seed=99)
    twin.load_state_dict(state)
    batch = random_batch(rng, K)
    a, b = pop.update(batch), twin.update(batch)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    with pytest.raises(ValueError, match="population state"):
        Population(K + 1, OBS, ACT, SMALL, seed=0).load_state_dict(state)


def test_update_checks_members_and_batch() -> None:
    pop = Population(K, OBS, ACT, SMALL, seed=0)
    rng = np.random.default_rng(4)
    with pytest.raises(ValueError, match="columns"):
        pop.update(random_batch(rng, K - 1))
    with pytest.raises(ValueError, match="distinct"):
        pop.update(random_batch(rng, 2), members=[1, 1])
    before = [t[1].clone() for t in pop.actor]
    pop.update(random_batch(rng, 1), members=[0])
    assert all(torch.equal(t[1], b) for t, b in zip(pop.actor, before, strict=True))
