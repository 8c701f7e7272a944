"""What only CrossQ has: its config, batch renormalisation in train/eval modes, the joint batch's statistics, the
policy delay, and acting on running statistics. Batched == single learners, inheritance and checkpoints:
test_actor_critic.py (for SAC and CrossQ)."""

from __future__ import annotations

import helpers
import numpy as np
import pytest
import torch

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.actor_critic import ActorCriticPopulation
from lares_agent.engine.learners.crossq import BatchRenorm, CrossQConfig, batch_renorm, renorm_limits

K, OBS, ACT, B = 3, 5, 2, 16
# Short renorm warm-up and relaxation so the tests cover batch norm, the ramp and full renormalisation.
SMALL = CrossQConfig(actor_hidden=(24, 24), critic_hidden=(32, 32), batch_size=B,
                     renorm_warmup_steps=2, renorm_relax_steps=3)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def random_batch(rng: np.random.Generator, c: int) -> Batch:
    return helpers.random_batch(rng, c, B, OBS, ACT)


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


def test_acting_leaves_the_running_statistics_alone() -> None:
    """Acting runs in eval mode (running statistics, nothing changes); a train-mode update moves them."""
    rng = np.random.default_rng(1)
    pop = ActorCriticPopulation(K, OBS, ACT, SMALL, seed=5)
    for _ in range(3):
        pop.update(random_batch(rng, K))
    stats = [t.clone() for t in pop._actor.running + pop._critic.running]
    obs = rng.normal(size=(6, OBS)).astype(np.float32)
    members = np.array([2, 0, 2, 1, 0, 0])
    pop.act(obs, members, deterministic=True, generator=torch.Generator())
    pop.act(obs, members, deterministic=False, generator=torch.Generator().manual_seed(9))
    assert all(torch.equal(a, b) for a, b in zip(stats, pop._actor.running + pop._critic.running, strict=True))
    pop.update(random_batch(rng, K))
    assert not torch.equal(stats[0], pop._actor.running[0])  # step 4 of policy delay 3: the actor's too
    assert not torch.equal(stats[len(pop._actor.running)], pop._critic.running[0])


def test_critic_statistics_cover_the_joint_batch_and_the_actor_steps_every_delay() -> None:
    """The critic's input statistics after one update are those of [(s, a); (s', a')] (2B rows); the actor
    (and its statistics) change on updates 1 and 4 only, with policy_delay 3."""
    rng = np.random.default_rng(2)
    pop = ActorCriticPopulation(K, OBS, ACT, SMALL, seed=1)
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


def _plain_renorm(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, running_mean: torch.Tensor,
                  running_var: torch.Tensor, r_max: float, d_max: float, eps: float) -> torch.Tensor:
    """The train-mode formula as plain autograd sees it (r and d held constant)."""
    mean = x.mean(-2, keepdim=True)
    std = ((x - mean).square().mean(-2, keepdim=True) + eps).sqrt()
    running_std = (running_var + eps).sqrt()
    r = (std / running_std).clamp(1.0 / r_max, r_max).detach()
    d = ((mean - running_mean) / running_std).clamp(-d_max, d_max).detach()
    return (x - mean) / std * r * scale + d * scale + shift


@pytest.mark.parametrize("shape", [(64, 5), (3, 64, 5)])
def test_batch_renorm_gradient_is_autograds(shape: tuple[int, ...]) -> None:
    """The written-out backward gives autograd's gradients of the plain formula for the input, scale and shift,
    past the warm-up (r and d active, some clipped) and single or stacked, and moves the statistics the same."""
    gen = torch.Generator().manual_seed(0)
    cfg = CrossQConfig(renorm_warmup_steps=0, renorm_relax_steps=0, renorm_momentum=0.3)
    lead, feat = shape[:-2], shape[-1]
    # Per feature: r clipped below, free, free, clipped above; d clipped on the third.
    spread = torch.tensor([0.1, 1.0, 3.0, 10.0, 30.0], dtype=torch.float64)
    offset = torch.tensor([0.0, 1.0, 20.0, 0.0, -1.0], dtype=torch.float64)
    x = (torch.randn(*shape, generator=gen, dtype=torch.float64) * spread + offset).requires_grad_()
    scale = (1 + 0.2 * torch.randn(*lead, 1, feat, generator=gen, dtype=torch.float64)).requires_grad_()
    shift = (0.1 * torch.randn(*lead, 1, feat, generator=gen, dtype=torch.float64)).requires_grad_()
    weights = torch.randn(*shape, generator=gen, dtype=torch.float64)
    stats = (torch.full((*lead, 1, feat), 0.5, dtype=torch.float64), torch.full((*lead, 1, feat), 2.0,
                                                                              dtype=torch.float64))
    mine_stats = [t.clone() for t in stats]
    mine = batch_renorm(x, scale, shift, *mine_stats, torch.ones(lead, dtype=torch.long), cfg, True)
    plain = _plain_renorm(x, scale, shift, *stats, cfg.r_max, cfg.d_max, cfg.renorm_eps)
    torch.testing.assert_close(mine, plain)
    for a, b in zip(torch.autograd.grad((mine * weights).sum(), [x, scale, shift]),
                    torch.autograd.grad((plain * weights).sum(), [x, scale, shift]), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)  # r_max is float32: 1/r_max rounds
    torch.testing.assert_close(mine_stats[0], 0.7 * stats[0] + 0.3 * x.detach().mean(-2, keepdim=True))
    torch.testing.assert_close(mine_stats[1], 0.7 * stats[1] + 0.3 * x.detach().var(-2, keepdim=True))
    data = torch.randn(*shape, generator=gen, dtype=torch.float64)  # no gradient asked for the input
    (g_scale,) = torch.autograd.grad(batch_renorm(data, scale, shift, *[t.clone() for t in stats],
                                                  torch.ones(lead, dtype=torch.long), cfg, True).sum(), [scale])
    assert g_scale.shape == scale.shape
