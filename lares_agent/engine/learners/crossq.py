"""CrossQ, one learner, readable top to bottom (paper names): SAC without target networks, made stable by
batch renormalisation in the critic over a joint batch of current and next state-actions.

Bhatt, Palenicek et al., "CrossQ: Batch Normalization in Deep RL for Greater Sample Efficiency and
Simplicity", ICLR 2024. What differs from `sac.SACLearner`:

* no target critics: the bootstrap value comes from the live critics with a stop-gradient (paper §3);
* batch (re)normalisation before every linear layer of the critics, and of the actor as sb3-contrib does;
* the critic sees (s, a) and (s', pi(s')) concatenated into ONE batch of 2B rows, so the normalisation's
  batch statistics cover the mixture of both distributions (paper §3.2: separate forwards, or a target
  network's statistics, leave the next-state half out of distribution);
* the actor (and the temperature) step only every `policy_delay` critic steps (paper §4, TD3's delay);
* Adam with beta1 = 0.5 for actor and critics (the paper's setting).

Normalisation uses Batch Renormalization (Ioffe 2017): plain batch statistics while training starts, then
the batch statistics corrected toward the running ones by r (clipped to [1/r_max, r_max]) and d (clipped to
[-d_max, d_max]), as sb3-contrib's `BatchRenorm` with its warm-up. Acting, evaluation, next actions for the
target and the critic inside the actor loss all use the running statistics (eval mode); only the critic's
joint forward and the actor's forward in its own step use and update batch statistics (train mode).
The networks, the anchor distance and the observation helpers are SAC's (`sac.py`).
`actor_critic.ActorCriticPopulation` trains K of these as one batched computation and is tested against this
file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.nets import layer_sizes
from lares_agent.engine.learners.obs_norm import ObsNormalizer
from lares_agent.engine.learners.sac import (
    Actor,
    Anchor,
    SoftQNetwork,
    copy_optimisers,
    mlp,
    normalized,
    observe_into,
)
from lares_agent.errors import ConfigError

__all__ = ["CrossQConfig", "CrossQLearner", "batch_renorm", "renorm_limits"]


@dataclass(frozen=True, kw_only=True)
class CrossQConfig:
    """Hyper-parameters of every CrossQ learner (defaults: sb3-contrib's CrossQ, with smaller widths, actor 2x128
    and critic 2x256, chosen in docs/RESULTS.md, "SAC vs CrossQ on the task's own reward"; the paper's critic is
    2x2048, sb3-contrib's 2x1024)."""

    actor_hidden: tuple[int, ...] = (128, 128)
    """Hidden layer widths of the actor."""
    critic_hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of each of the two critics."""
    lr: float = 1e-3
    """Adam learning rate of actor, critics and temperature (sb3-contrib: 1e-3)."""
    batch_size: int = 256
    """Minibatch size per learner and update; the critic's joint batch has twice as many rows."""
    gamma: float = 0.99
    """Discount factor."""
    policy_delay: int = 3
    """Critic steps per actor (and temperature) step; the actor steps on updates 1, 1 + delay, ..."""
    adam_betas: tuple[float, float] = (0.5, 0.999)
    """Adam betas of actor and critics (paper: beta1 0.5); the temperature keeps torch's defaults."""
    actor_renorm: bool = True
    """Batch renormalisation in the actor too (sb3-contrib's default)."""
    renorm_momentum: float = 0.01
    """Rate of the running mean/variance: running += momentum * (batch - running)."""
    renorm_eps: float = 1e-3
    """Added to variances before the square root."""
    renorm_warmup_steps: int = 100_000
    """Train-mode forwards of plain batch normalisation (r = 1, d = 0) before renormalisation starts."""
    renorm_relax_steps: int = 0
    """Forwards over which r_max and d_max grow linearly from (1, 0) after the warm-up (Ioffe 2017 §4);
    0 jumps to them at once, as sb3-contrib."""
    r_max: float = 3.0
    """Largest correction of the batch standard deviation toward the running one."""
    d_max: float = 5.0
    """Largest correction of the batch mean toward the running one, in running standard deviations."""
    init_log_alpha: float = 0.0
    """Initial log temperature (alpha = 1, as sb3-contrib's 'auto')."""
    log_std_bounds: tuple[float, float] = (-20.0, 2.0)
    """Clamp of the actor's log standard deviation."""
    target_entropy: float | None = None
    """Entropy target of the temperature; None means -|A| (SAC v2)."""
    reward_scale: float = 1.0
    """Multiplier of the reward in the critic target."""
    utd_ratio: float = 1.0
    """Updates per learner per env step collected by the whole population (the loop reads it)."""
    obs_norm: bool = False
    """Normalise observations with running statistics of the collected data (`obs_norm.ObsNormalizer`)."""

    def __post_init__(self) -> None:
        # JSON round trips (config.json, checkpoints) give lists; keep the frozen config hashable.
        for name in ("actor_hidden", "critic_hidden"):
            object.__setattr__(self, name, tuple(int(h) for h in getattr(self, name)))
            if not getattr(self, name) or min(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be non-empty positive widths, got {getattr(self, name)}")
        for name in ("log_std_bounds", "adam_betas"):
            object.__setattr__(self, name, tuple(float(b) for b in getattr(self, name)))
        if self.lr <= 0 or self.batch_size < 2 or not 0 <= self.gamma <= 1 or self.policy_delay < 1:
            raise ConfigError("need lr > 0, batch_size >= 2, 0 <= gamma <= 1, policy_delay >= 1")
        if not all(0 <= b < 1 for b in self.adam_betas) or len(self.adam_betas) != 2:
            raise ConfigError(f"adam_betas must be two values in [0, 1), got {self.adam_betas}")
        if not 0 < self.renorm_momentum <= 1 or self.renorm_eps <= 0 or self.r_max < 1 or self.d_max < 0:
            raise ConfigError("need 0 < renorm_momentum <= 1, renorm_eps > 0, r_max >= 1, d_max >= 0")
        if self.renorm_warmup_steps < 0 or self.renorm_relax_steps < 0 or self.utd_ratio <= 0:
            raise ConfigError("renorm warm-up and relax steps must be >= 0 and utd_ratio positive")

    def entropy_target(self, act_dim: int) -> float:
        """The temperature's entropy target for an action space of act_dim dimensions."""
        return -float(act_dim) if self.target_entropy is None else self.target_entropy


def renorm_limits(steps: Tensor, config: CrossQConfig) -> tuple[Tensor, Tensor]:
    """(r_max, d_max) after `steps` earlier train-mode forwards: (1, 0) during the warm-up (= batch norm),
    then the configured limits, reached linearly over `renorm_relax_steps` (Ioffe 2017 §4)."""
    past = steps.double() - config.renorm_warmup_steps
    relax = config.renorm_relax_steps
    frac = (past / relax).clamp(0.0, 1.0) if relax > 0 else (past > 0).double()
    return (1.0 + (config.r_max - 1.0) * frac).float(), (config.d_max * frac).float()


def batch_renorm(x: Tensor, scale: Tensor, shift: Tensor, running_mean: Tensor, running_var: Tensor,
                 steps: Tensor | None, config: CrossQConfig, training: bool) -> Tensor:
    """Batch Renormalization (Ioffe 2017, Algorithm 1) over the rows (dim -2) of x [..., N, F].

    Statistics and affine parameters are [..., 1, F]; `steps` (training only) counts earlier train-mode
    forwards, with the leading shape [...]. In training the
    output is (x - mu_B) / sigma_B * r + d with r, d held constant in the backward pass, and the running
    mean and (unbiased) variance move by `renorm_momentum` toward the batch's, in place. In eval mode it is
    (x - running_mean) / sqrt(running_var + eps): no batch statistics, nothing changes.
    """
    eps = config.renorm_eps
    if not training:  # scale * (x - mean) / std + shift as one multiply-add over x
        factor = scale * torch.rsqrt(running_var + eps)
        return torch.addcmul(shift - running_mean * factor, x, factor)
    if steps is None:
        raise ValueError("batch_renorm in training needs the count of earlier forwards (steps)")
    n = x.shape[-2]
    r_max, d_max = (t.view(*steps.shape, 1, 1) for t in renorm_limits(steps, config))
    out: Tensor
    out, batch_mean, batch_var = _RenormTrain.apply(  # type: ignore[no-untyped-call]
        x, scale, shift, running_mean, running_var, r_max, d_max, eps)
    with torch.no_grad():
        running_mean.lerp_(batch_mean, config.renorm_momentum)
        running_var.lerp_(batch_var * (n / max(n - 1, 1)), config.renorm_momentum)
    return out


class _RenormTrain(torch.autograd.Function):
    """The train-mode renormalisation with its backward written out. Autograd's own graph of it walks the
    [..., N, F] activations many times (and materialises broadcast gradients), and that elementwise work, not the
    matmuls, is most of a CrossQ critic update (`benchmarks/learners.py`); this backward is two reductions and
    two multiply-adds. Same forward arithmetic as the plain expression; the gradient equals autograd's up to
    rounding (tests/test_crossq.py)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: Tensor, scale: Tensor, shift: Tensor,
                running_mean: Tensor, running_var: Tensor, r_max: Tensor, d_max: Tensor,
                eps: float) -> tuple[Tensor, Tensor, Tensor]:
        # The batch statistics from the centred input (one reduction pass each; torch's `var` over a strided
        # dim is several times slower), then (x - mu_B) / sigma_B * r + d folded into one multiply-add.
        batch_mean = x.mean(-2, keepdim=True)
        centred = x - batch_mean
        batch_var = centred.square().mean(-2, keepdim=True)
        batch_std = (batch_var + eps).sqrt()
        running_std = (running_var + eps).sqrt()
        r = torch.minimum(torch.maximum(batch_std / running_std, 1.0 / r_max), r_max)
        d = torch.minimum(torch.maximum((batch_mean - running_mean) / running_std, -d_max), d_max)
        ctx.save_for_backward(centred, batch_std, scale, r, d)
        ctx.shift_shape = shift.shape  # type: ignore[attr-defined]
        ctx.mark_non_differentiable(batch_mean, batch_var)
        return torch.addcmul(scale * d + shift, centred, scale * r / batch_std), batch_mean, batch_var

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, *grads: Tensor) -> tuple[Tensor | None, ...]:
        """y = a * c + scale * d + shift with c = x - mean(x), a = scale * r / sigma, sigma = sqrt(mean(c^2) +
        eps): dx = a * (g - mean(g)) - a * c * mean(g * c) / sigma^2 (the batch-norm gradient; mean(c) = 0)."""
        grad = grads[0]
        centred, std, scale, r, d = ctx.saved_tensors  # type: ignore[attr-defined]
        need_x, need_scale, need_shift = ctx.needs_input_grad[:3]  # type: ignore[attr-defined]
        n = grad.shape[-2]
        g_sum = grad.sum(-2, keepdim=True)
        gc_sum = (grad * centred).sum(-2, keepdim=True) if need_x or need_scale else None
        dx = dscale = None
        if need_x:
            assert gc_sum is not None
            a = scale * r / std
            dx = torch.addcmul(a * g_sum / -n, grad, a)
            dx = torch.addcmul(dx, centred, a * gc_sum / (-n * std.square()))
        if need_scale:
            assert gc_sum is not None
            dscale = (r / std * gc_sum + d * g_sum).sum_to_size(scale.shape)
        dshift = g_sum.sum_to_size(ctx.shift_shape) if need_shift else None  # type: ignore[attr-defined]
        return dx, dscale, dshift, None, None, None, None, None


class BatchRenorm(nn.Module):
    """A `batch_renorm` layer over F features: learnable scale and shift, running statistics as buffers."""

    def __init__(self, features: int, config: CrossQConfig):
        super().__init__()
        self.config = config
        self.scale = nn.Parameter(torch.ones(1, features))
        self.shift = nn.Parameter(torch.zeros(1, features))
        self.running_mean: Tensor
        self.running_var: Tensor
        self.steps: Tensor
        self.register_buffer("running_mean", torch.zeros(1, features))
        self.register_buffer("running_var", torch.ones(1, features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x: Tensor) -> Tensor:
        out = batch_renorm(x, self.scale, self.shift, self.running_mean, self.running_var, self.steps,
                           self.config, self.training)
        if self.training:
            self.steps += 1
        return out


@contextmanager
def train_mode(*modules: nn.Module) -> Iterator[None]:
    """Batch statistics inside the block (and running statistics updated); eval mode again after it."""
    for m in modules:
        m.train()
    try:
        yield
    finally:
        for m in modules:
            m.eval()


class CrossQLearner:
    """One CrossQ learner: actor, twin critics (no targets), temperature, their Adam optimisers.

    All randomness (initial weights and the update's action noise) comes from one generator seeded with
    `seed`, drawn in the order actor, qf1, qf2, then per update the next-action noise and the actor noise
    (both drawn every update, also when the actor does not step). Networks stay in eval mode except
    inside the two train-mode forwards of `update`.
    """

    def __init__(self, obs_dim: int, act_dim: int, config: CrossQConfig, seed: int):
        self.config = config
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.generator = torch.Generator().manual_seed(seed)
        # Batch renormalisation before every linear layer (paper Fig. 2; sb3-contrib's `pre_linear_modules`).
        renorm = partial(BatchRenorm, config=config)
        actor_net = mlp(layer_sizes(obs_dim, config.actor_hidden, 2 * act_dim), self.generator,
                        pre_linear=renorm if config.actor_renorm else None)
        self.actor = Actor(actor_net, act_dim, config.log_std_bounds).eval()
        critic_sizes = layer_sizes(obs_dim + act_dim, config.critic_hidden, 1)
        self.qf1 = SoftQNetwork(mlp(critic_sizes, self.generator, pre_linear=renorm)).eval()
        self.qf2 = SoftQNetwork(mlp(critic_sizes, self.generator, pre_linear=renorm)).eval()
        self.log_alpha = torch.tensor([config.init_log_alpha], requires_grad=True)
        self.target_entropy = config.entropy_target(act_dim)
        betas = config.adam_betas
        self.q_optimizer = torch.optim.Adam([*self.qf1.parameters(), *self.qf2.parameters()], config.lr, betas)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), config.lr, betas)
        self.a_optimizer = torch.optim.Adam([self.log_alpha], lr=config.lr)
        self.updates = 0
        # The actor's last losses, reported on the updates in between its steps (they stay finite).
        self.last_actor_loss = self.last_alpha_loss = self.last_actor_anchor = 0.0
        self.anchor = Anchor(self.actor, self.qf1, self.qf2)
        self.obs_norm = ObsNormalizer(obs_dim) if config.obs_norm else None

    def observe(self, obs: np.ndarray) -> None:
        """Add collected observations [N, obs_dim] to the normalisation statistics (no-op without)."""
        observe_into(self.obs_norm, obs)

    def act(self, obs: np.ndarray, deterministic: bool, generator: torch.Generator) -> np.ndarray:
        """Actions in [-1, 1] for observations [M, obs_dim], with running statistics (eval mode)."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32).reshape(-1, self.obs_dim)
        return self.actor.act(normalized(self.obs_norm, obs_t), deterministic, generator)

    def update(self, batch: Batch) -> dict[str, float]:
        """One critic step, and every `policy_delay`-th call an actor and temperature step; returns losses."""
        cfg = self.config
        obs, next_obs = (normalized(self.obs_norm, torch.as_tensor(x)) for x in (batch.obs, batch.next_obs))
        action, reward = torch.as_tensor(batch.action), torch.as_tensor(batch.reward)
        terminated = torch.as_tensor(batch.terminated)
        noise_next = torch.randn(action.shape, generator=self.generator)
        noise_pi = torch.randn(action.shape, generator=self.generator)
        alpha = self.log_alpha.exp().detach()
        b = obs.shape[0]

        # Critic: next actions from the actor with running statistics, then ONE train-mode forward of the
        # joint batch [(s, a); (s', a')] per critic (paper §3.2); the next-state half is the bootstrap value,
        # with a stop-gradient in place of a target network; (1 - terminated), never truncated (§12 item 12).
        with torch.no_grad():
            next_action, next_log_prob = self.actor(next_obs, noise_next)
        joint_obs, joint_action = torch.cat([obs, next_obs]), torch.cat([action, next_action])
        with train_mode(self.qf1, self.qf2):
            qf1_cur, qf1_next = self.qf1(joint_obs, joint_action).split(b)
            qf2_cur, qf2_next = self.qf2(joint_obs, joint_action).split(b)
        with torch.no_grad():
            min_qf_next = torch.min(qf1_next, qf2_next) - alpha * next_log_prob
            next_q_value = cfg.reward_scale * reward + (1.0 - terminated) * cfg.gamma * min_qf_next
        qf_loss = F.mse_loss(qf1_cur, next_q_value) + F.mse_loss(qf2_cur, next_q_value)
        q_anchor = self.anchor.critic_loss(self.qf1, self.qf2)
        self.q_optimizer.zero_grad()
        torch.autograd.backward(qf_loss + q_anchor)
        self.q_optimizer.step()

        # Delayed actor and temperature (paper §4): the actor in train mode, the updated critics with
        # their running statistics; only the actor's optimiser steps.
        if self.updates % cfg.policy_delay == 0:
            with train_mode(self.actor):
                pi, log_pi = self.actor(obs, noise_pi)
            min_qf_pi = torch.min(self.qf1(obs, pi), self.qf2(obs, pi))
            actor_loss = (alpha * log_pi - min_qf_pi).mean()
            actor_anchor = self.anchor.actor_loss(self.actor)
            self.actor_optimizer.zero_grad()
            torch.autograd.backward(actor_loss + actor_anchor)
            self.actor_optimizer.step()
            alpha_loss = -(self.log_alpha * (log_pi.detach() + self.target_entropy)).mean()
            self.a_optimizer.zero_grad()
            torch.autograd.backward(alpha_loss)
            self.a_optimizer.step()
            self.last_actor_loss, self.last_alpha_loss = actor_loss.item(), alpha_loss.item()
            self.last_actor_anchor = float(actor_anchor.detach())
        self.updates += 1
        return {
            "q_loss": qf_loss.item(),
            "actor_loss": self.last_actor_loss,
            "alpha_loss": self.last_alpha_loss,
            "alpha": self.log_alpha.exp().item(),
            "anchor_loss": float(q_anchor.detach()) + self.last_actor_anchor,
        }

    def inherit(self, src: CrossQLearner, anchor_weight: float) -> None:
        """Become a copy of `src` (networks with their running statistics, optimiser states, temperature,
        update count, observation statistics) and anchor to its parameters."""
        for mine, theirs in [(self.actor, src.actor), (self.qf1, src.qf1), (self.qf2, src.qf2)]:
            mine.load_state_dict(theirs.state_dict())
        with torch.no_grad():
            self.log_alpha.copy_(src.log_alpha)
        copy_optimisers((self.q_optimizer, self.actor_optimizer, self.a_optimizer),
                        (src.q_optimizer, src.actor_optimizer, src.a_optimizer))
        self.updates = src.updates
        self.last_actor_loss, self.last_alpha_loss = src.last_actor_loss, src.last_alpha_loss
        self.last_actor_anchor = 0.0  # at its anchor
        if self.obs_norm is not None and src.obs_norm is not None:
            self.obs_norm.copy_from(src.obs_norm)
        self.anchor.hold(src.actor, src.qf1, src.qf2, anchor_weight)

    def release_anchor(self) -> None:
        """Drop the L2 pull (an elite keeps its parameters free)."""
        self.anchor.weight = 0.0
        self.last_actor_anchor = 0.0
