"""Soft Actor-Critic, one learner, readable top to bottom (CleanRL style, paper names).

This is the reference implementation: `actor_critic.ActorCriticPopulation` trains K of these as one batched
computation and is tested against this file; `crossq.py` reuses its networks and helpers. Settings follow
LaRes' learner (docs/lares-reference.md §9: 3x256 ReLU MLPs, Adam 3e-4, batch 128, gamma 0.99, tau 0.005,
automatic entropy with target -|A|), with its defects fixed: the actor loss is built after the critic step on
fresh critic values (§12 item 11, also correct on current torch), and bootstrapping stops only at real
terminations, never at time-limit cuts (§12 item 12).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.nets import init_mlp, layer_sizes, squashed_gaussian
from lares_agent.engine.learners.obs_norm import ObsNormalizer
from lares_agent.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class SACConfig:
    """Hyper-parameters of every SAC learner (defaults: LaRes reference, docs/lares-reference.md §9)."""

    hidden: tuple[int, ...] = (256, 256, 256)
    """Hidden layer widths of the actor and of each critic."""
    lr: float = 3e-4
    """Adam learning rate of actor, critics and temperature."""
    batch_size: int = 128
    """Minibatch size per learner and update."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak factor of the target critics, applied every update."""
    init_log_alpha: float = 0.0
    """Initial log temperature (alpha = 1, as the reference)."""
    log_std_bounds: tuple[float, float] = (-20.0, 2.0)
    """Clamp of the actor's log standard deviation."""
    target_entropy: float | None = None
    """Entropy target of the temperature; None means -|A| (SAC v2)."""
    reward_scale: float = 1.0
    """Multiplier of the reward in the critic target (reference `--reward-scale` 1)."""
    utd_ratio: float = 1.0
    """Updates per learner per env step collected by the whole population (the loop reads it)."""
    critic_layer_norm: bool = False
    """LayerNorm (no affine parameters) before every hidden ReLU of the critics and their targets."""
    obs_norm: bool = False
    """Normalise observations with running statistics of the collected data (`obs_norm.ObsNormalizer`)."""

    def __post_init__(self) -> None:
        # JSON round trips (config.json, checkpoints) give lists; keep the frozen config hashable.
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "log_std_bounds", tuple(float(b) for b in self.log_std_bounds))
        if not self.hidden or min(self.hidden) < 1:
            raise ConfigError(f"hidden must be non-empty positive widths, got {self.hidden}")
        if self.lr <= 0 or self.batch_size < 1 or not 0 <= self.gamma <= 1 or not 0 < self.tau <= 1:
            raise ConfigError("need lr > 0, batch_size >= 1, 0 <= gamma <= 1, 0 < tau <= 1")
        if self.utd_ratio <= 0:
            raise ConfigError(f"utd_ratio must be positive, got {self.utd_ratio}")

    def entropy_target(self, act_dim: int) -> float:
        """The temperature's entropy target for an action space of act_dim dimensions."""
        return -float(act_dim) if self.target_entropy is None else self.target_entropy


def mlp(sizes: list[tuple[int, int]], generator: torch.Generator, *, layer_norm: bool = False,
        pre_linear: Callable[[int], nn.Module] | None = None) -> nn.Sequential:
    """ReLU MLP of nn.Linear layers with weights drawn by `init_mlp` (the population draws the same);
    `layer_norm` puts a LayerNorm without parameters before each ReLU, `pre_linear(fan_in)` a module before
    each linear layer (CrossQ's batch renormalisation)."""
    layers: list[nn.Module] = []
    for i, (weight, bias) in enumerate(init_mlp(sizes, generator)):
        linear = nn.Linear(weight.shape[1], weight.shape[0])
        with torch.no_grad():
            linear.weight.copy_(weight)
            linear.bias.copy_(bias)
        layers += [linear] if pre_linear is None else [pre_linear(weight.shape[1]), linear]
        if i < len(sizes) - 1:
            norm = [nn.LayerNorm(weight.shape[0], elementwise_affine=False)] if layer_norm else []
            layers += [*norm, nn.ReLU()]
    return nn.Sequential(*layers)


class Actor(nn.Module):
    """pi(a|s): MLP -> (mean, log_std) -> tanh-squashed Gaussian; the MLP is SAC's plain one or CrossQ's
    renormalised one."""

    def __init__(self, net: nn.Module, act_dim: int, log_std_bounds: tuple[float, float]):
        super().__init__()
        self.net = net
        self.act_dim = act_dim
        self.log_std_bounds = log_std_bounds

    def forward(self, obs: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        """Sampled action and its log-probability, given standard-normal noise [B, A]."""
        mean, log_std = self.net(obs).split(self.act_dim, dim=-1)
        return squashed_gaussian(mean, log_std, noise, self.log_std_bounds)

    def deterministic(self, obs: Tensor) -> Tensor:
        """The evaluation action tanh(mean)."""
        return torch.tanh(self.net(obs)[..., : self.act_dim])

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool, generator: torch.Generator) -> np.ndarray:
        """Actions in [-1, 1] for observations [M, obs_dim]: sampled with noise from `generator`, or tanh(mean)
        when deterministic."""
        if deterministic:
            return np.asarray(self.deterministic(obs).numpy())
        noise = torch.randn(obs.shape[0], self.act_dim, generator=generator)
        return np.asarray(self(obs, noise)[0].numpy())


class SoftQNetwork(nn.Module):
    """Q(s, a): MLP over the concatenated observation and action."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        out: Tensor = self.net(torch.cat([obs, action], dim=-1))
        return out.squeeze(-1)


def squared_distance(module: nn.Module, anchor: nn.Module) -> Tensor:
    """sum_k ||theta_k - theta_k^anchor||^2 over all parameters (LaRes' parameter constraint, §7)."""
    pairs = zip(module.parameters(), anchor.parameters(), strict=True)
    return sum(((p - a).pow(2).sum() for p, a in pairs), start=torch.zeros(()))


def observe_into(obs_norm: ObsNormalizer | None, obs: np.ndarray) -> None:
    """Add collected observations [N, obs_dim] to the normalisation statistics (no-op without)."""
    if obs_norm is not None:
        obs_norm.update(obs)


class Anchor:
    """The L2 pull of a learner toward the parameters it inherited (LaRes' parameter constraint, §7): frozen copies
    of the actor and both critics, and a weight (0: no pull)."""

    def __init__(self, actor: nn.Module, qf1: nn.Module, qf2: nn.Module) -> None:
        self.weight = 0.0
        self.actor, self.qf1, self.qf2 = (copy.deepcopy(m).requires_grad_(False) for m in (actor, qf1, qf2))

    def critic_loss(self, qf1: nn.Module, qf2: nn.Module) -> Tensor:
        return self.weight * (squared_distance(qf1, self.qf1) + squared_distance(qf2, self.qf2))

    def actor_loss(self, actor: nn.Module) -> Tensor:
        return self.weight * squared_distance(actor, self.actor)

    def hold(self, actor: nn.Module, qf1: nn.Module, qf2: nn.Module, weight: float) -> None:
        """Anchor to copies of these networks' current parameters with ``weight``."""
        for mine, theirs in ((self.actor, actor), (self.qf1, qf1), (self.qf2, qf2)):
            mine.load_state_dict(theirs.state_dict())
        self.weight = weight


def copy_optimisers(mine: Iterable[torch.optim.Optimizer], theirs: Iterable[torch.optim.Optimizer]) -> None:
    """Each optimiser takes a deep copy of the other's state (moments and step counts)."""
    for dst, src in zip(mine, theirs, strict=True):
        dst.load_state_dict(copy.deepcopy(src.state_dict()))


def normalized(obs_norm: ObsNormalizer | None, obs: Tensor) -> Tensor:
    """Observations as the networks see them: normalised, or as they are without a normaliser."""
    return obs if obs_norm is None else obs_norm.normalize(obs)


class SACLearner:
    """One SAC learner: actor, twin critics with targets, temperature, their Adam optimisers.

    All randomness (initial weights and the update's action noise) comes from one generator seeded with
    `seed`, drawn in a fixed order, so a learner is reproducible on its own.
    """

    def __init__(self, obs_dim: int, act_dim: int, config: SACConfig, seed: int):
        self.config = config
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.generator = torch.Generator().manual_seed(seed)
        self.actor = Actor(mlp(layer_sizes(obs_dim, config.hidden, 2 * act_dim), self.generator), act_dim,
                           config.log_std_bounds)
        critic_sizes = layer_sizes(obs_dim + act_dim, config.hidden, 1)
        self.qf1 = SoftQNetwork(mlp(critic_sizes, self.generator, layer_norm=config.critic_layer_norm))
        self.qf2 = SoftQNetwork(mlp(critic_sizes, self.generator, layer_norm=config.critic_layer_norm))
        self.qf1_target = copy.deepcopy(self.qf1).requires_grad_(False)
        self.qf2_target = copy.deepcopy(self.qf2).requires_grad_(False)
        self.log_alpha = torch.tensor([config.init_log_alpha], requires_grad=True)
        self.target_entropy = config.entropy_target(act_dim)
        self.q_optimizer = torch.optim.Adam([*self.qf1.parameters(), *self.qf2.parameters()], lr=config.lr)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.lr)
        self.a_optimizer = torch.optim.Adam([self.log_alpha], lr=config.lr)
        self.anchor = Anchor(self.actor, self.qf1, self.qf2)
        self.obs_norm = ObsNormalizer(obs_dim) if config.obs_norm else None

    def observe(self, obs: np.ndarray) -> None:
        """Add collected observations [N, obs_dim] to the normalisation statistics (no-op without)."""
        observe_into(self.obs_norm, obs)

    def act(self, obs: np.ndarray, deterministic: bool, generator: torch.Generator) -> np.ndarray:
        """Actions in [-1, 1] for observations [M, obs_dim]: sampled, or tanh(mean) when deterministic."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32).reshape(-1, self.obs_dim)
        return self.actor.act(normalized(self.obs_norm, obs_t), deterministic, generator)

    def update(self, batch: Batch) -> dict[str, float]:
        """One gradient step of critics, actor and temperature on a minibatch [B, ...]; returns losses."""
        obs, action, next_obs = (torch.as_tensor(x) for x in (batch.obs, batch.action, batch.next_obs))
        obs, next_obs = normalized(self.obs_norm, obs), normalized(self.obs_norm, next_obs)
        reward, terminated = torch.as_tensor(batch.reward), torch.as_tensor(batch.terminated)
        noise_next = torch.randn(action.shape, generator=self.generator)
        noise_pi = torch.randn(action.shape, generator=self.generator)
        alpha = self.log_alpha.exp().detach()
        cfg = self.config

        # Critic: soft Bellman target with clipped double-Q; (1 - terminated), never truncated (§12 item 12).
        with torch.no_grad():
            next_action, next_log_prob = self.actor(next_obs, noise_next)
            qf1_next_target = self.qf1_target(next_obs, next_action)
            qf2_next_target = self.qf2_target(next_obs, next_action)
            min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - alpha * next_log_prob
            next_q_value = cfg.reward_scale * reward + (1.0 - terminated) * cfg.gamma * min_qf_next_target
        qf1_a_values = self.qf1(obs, action)
        qf2_a_values = self.qf2(obs, action)
        qf_loss = F.mse_loss(qf1_a_values, next_q_value) + F.mse_loss(qf2_a_values, next_q_value)
        q_anchor = self.anchor.critic_loss(self.qf1, self.qf2)
        self.q_optimizer.zero_grad()
        torch.autograd.backward(qf_loss + q_anchor)
        self.q_optimizer.step()

        # Actor: built after the critic step, on the updated critics (§12 item 11).
        pi, log_pi = self.actor(obs, noise_pi)
        min_qf_pi = torch.min(self.qf1(obs, pi), self.qf2(obs, pi))
        actor_loss = (alpha * log_pi - min_qf_pi).mean()
        actor_anchor = self.anchor.actor_loss(self.actor)
        self.actor_optimizer.zero_grad()
        (actor_loss + actor_anchor).backward()
        self.actor_optimizer.step()

        # Temperature: automatic entropy adjustment toward target_entropy = -|A|.
        alpha_loss = -(self.log_alpha * (log_pi.detach() + self.target_entropy)).mean()
        self.a_optimizer.zero_grad()
        alpha_loss.backward()
        self.a_optimizer.step()

        # Target critics: Polyak averaging every step (target-update-interval 1).
        with torch.no_grad():
            for param, target_param in zip(self._critic_params(), self._target_params(), strict=True):
                target_param.lerp_(param, cfg.tau)

        return {
            "q_loss": qf_loss.item(),
            "actor_loss": actor_loss.item(),
            "alpha_loss": alpha_loss.item(),
            "alpha": self.log_alpha.exp().item(),
            "anchor_loss": (q_anchor + actor_anchor).item(),
        }

    def inherit(self, src: SACLearner, anchor_weight: float) -> None:
        """Become a copy of `src` (networks, targets, all optimiser states, temperature) and anchor to it.

        The reference copies everything but alpha's own Adam state (§7); that is copied here too.
        """
        for mine, theirs in [
            (self.actor, src.actor), (self.qf1, src.qf1), (self.qf2, src.qf2),
            (self.qf1_target, src.qf1_target), (self.qf2_target, src.qf2_target),
        ]:
            mine.load_state_dict(theirs.state_dict())
        with torch.no_grad():
            self.log_alpha.copy_(src.log_alpha)
        copy_optimisers((self.q_optimizer, self.actor_optimizer, self.a_optimizer),
                        (src.q_optimizer, src.actor_optimizer, src.a_optimizer))
        if self.obs_norm is not None and src.obs_norm is not None:
            self.obs_norm.copy_from(src.obs_norm)
        self.anchor.hold(src.actor, src.qf1, src.qf2, anchor_weight)

    def release_anchor(self) -> None:
        """Drop the L2 pull (an elite keeps its parameters free)."""
        self.anchor.weight = 0.0

    def _critic_params(self) -> Iterator[Tensor]:
        yield from self.qf1.parameters()
        yield from self.qf2.parameters()

    def _target_params(self) -> Iterator[Tensor]:
        yield from self.qf1_target.parameters()
        yield from self.qf2_target.parameters()
