"""Single SAC learner: defaults, a finite update on a random batch, the terminated-only bootstrap, anchors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import random_transitions

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.sac import SACConfig, SACLearner

OBS, ACT, B = 6, 3, 32
SMALL = SACConfig(hidden=(32, 32), batch_size=B)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def random_batch(seed: int, terminated: float = 0.0) -> Batch:
    rng = np.random.default_rng(seed)
    return Batch(
        **random_transitions(rng, (B,), OBS, ACT),
        terminated=np.full(B, terminated, np.float32),
        indices=np.arange(B),
    )


def test_defaults_follow_the_reference() -> None:
    cfg = SACConfig()
    assert cfg.hidden == (256, 256, 256) and cfg.lr == 3e-4 and cfg.batch_size == 128
    assert cfg.gamma == 0.99 and cfg.tau == 0.005 and cfg.init_log_alpha == 0.0
    assert cfg.entropy_target(4) == -4.0 and SACConfig(target_entropy=-1.5).entropy_target(4) == -1.5
    assert SACConfig(hidden=[8, 8]).hidden == (8, 8)  # type: ignore[arg-type]  # from JSON
    with pytest.raises(ValueError):
        SACConfig(hidden=())
    with pytest.raises(ValueError):
        SACConfig(tau=0.0)


def test_update_on_a_random_batch() -> None:
    learner = SACLearner(OBS, ACT, SMALL, seed=0)
    assert [m.out_features for m in learner.actor.net if isinstance(m, torch.nn.Linear)] == [32, 32, 2 * ACT]
    actor_before = [p.detach().clone() for p in learner.actor.parameters()]
    qf1_before = [p.detach().clone() for p in learner.qf1.parameters()]
    target_before = [p.detach().clone() for p in learner.qf1_target.parameters()]
    metrics = learner.update(random_batch(1))
    assert set(metrics) == {"q_loss", "actor_loss", "alpha_loss", "alpha", "anchor_loss"}
    assert all(np.isfinite(v) for v in metrics.values())
    assert metrics["anchor_loss"] == 0.0 and metrics["alpha"] < 1.0  # entropy > target drives alpha down
    assert all(not torch.equal(a, b) for a, b in zip(actor_before, learner.actor.parameters(), strict=True))
    # Polyak: target moved by exactly tau of the way to the updated critic
    for t0, t1, q1 in zip(target_before, learner.qf1_target.parameters(), learner.qf1.parameters(), strict=True):
        torch.testing.assert_close(t1, t0 + SMALL.tau * (q1 - t0))
    assert all(not torch.equal(a, b) for a, b in zip(qf1_before, learner.qf1.parameters(), strict=True))


def test_actions_are_bounded_and_deterministic_is_tanh_mean() -> None:
    learner = SACLearner(OBS, ACT, SMALL, seed=0)
    obs = np.random.default_rng(2).normal(size=(5, OBS)).astype(np.float32)
    sampled = learner.act(obs, deterministic=False, generator=torch.Generator().manual_seed(3))
    again = learner.act(obs, deterministic=False, generator=torch.Generator().manual_seed(3))
    assert sampled.shape == (5, ACT) and np.abs(sampled).max() <= 1.0
    np.testing.assert_array_equal(sampled, again)
    mean = learner.actor.net(torch.as_tensor(obs))[:, :ACT]
    np.testing.assert_allclose(learner.act(obs, True, torch.Generator()), torch.tanh(mean).detach().numpy())


def test_termination_cuts_the_bootstrap() -> None:
    """With terminated = 1 the critic target is the reward alone (truncation is never passed in)."""
    for terminated, expect_reward_only in [(1.0, True), (0.0, False)]:
        learner = SACLearner(OBS, ACT, SMALL, seed=4)
        batch = random_batch(5, terminated=terminated)
        obs, action, reward = (torch.as_tensor(x) for x in (batch.obs, batch.action, batch.reward))
        with torch.no_grad():
            reward_only = (F.mse_loss(learner.qf1(obs, action), reward)
                           + F.mse_loss(learner.qf2(obs, action), reward)).item()
        q_loss = learner.update(batch)["q_loss"]
        assert (q_loss == pytest.approx(reward_only, rel=1e-5)) is expect_reward_only


def test_seeds_make_learners_reproducible_and_distinct() -> None:
    a, b, c = (SACLearner(OBS, ACT, SMALL, seed=s) for s in (7, 7, 8))
    batch = random_batch(6)
    ma, mb, mc = a.update(batch), b.update(batch), c.update(batch)
    assert ma == mb and ma["q_loss"] != mc["q_loss"]


def test_inherit_copies_everything_and_anchors() -> None:
    src, dst = SACLearner(OBS, ACT, SMALL, seed=1), SACLearner(OBS, ACT, SMALL, seed=2)
    for i in range(3):
        src.update(random_batch(10 + i))
    dst.inherit(src, anchor_weight=1.0)
    for mine, theirs in [(dst.actor, src.actor), (dst.qf2_target, src.qf2_target)]:
        for p, q in zip(mine.parameters(), theirs.parameters(), strict=True):
            assert torch.equal(p, q)
    assert torch.equal(dst.log_alpha, src.log_alpha)
    assert dst.a_optimizer.state_dict()["state"][0]["step"] == 3  # alpha's Adam state comes along
    first = dst.update(random_batch(20))
    assert first["anchor_loss"] == 0.0  # parameters still equal their anchors in the forward pass
    second = dst.update(random_batch(21))
    assert second["anchor_loss"] > 0.0
    dst.release_anchor()
    assert dst.update(random_batch(22))["anchor_loss"] == 0.0
