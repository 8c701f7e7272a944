"""K SAC learners trained as one batched computation.

Every weight matrix of the K actors is one stacked tensor [K, in, out], and the 2K critics (two per
learner) are one ensemble [2K, in, out] with row c*K + k for critic c of member k, so each layer of the
whole population is a single `torch.baddbmm`. Each member reads its own reward column and its own
minibatch (docs/lares-reference.md §12 item 13); losses are summed over members, which leaves every member's
gradient its own, and Adam is elementwise, so a member's update is exactly `SACLearner.update` (tested).
This replaces the reference's one-process-per-learner layout (§12 items 21–23, 26).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.nets import (
    StackedAdam,
    check_members,
    gather_rows,
    init_members,
    layer_sizes,
    member_rows,
    reuse_freed_memory,
    squashed_gaussian,
    stacked_mlp,
)
from lares_agent.engine.learners.obs_norm import ObsNormalizer
from lares_agent.engine.learners.sac import SACConfig, SACLearner

__all__ = ["Population", "SACConfig"]

METRICS = ("q_loss", "actor_loss", "alpha_loss", "alpha", "anchor_loss")


def _stack(per_member: list[list[tuple[Tensor, Tensor]]], device: torch.device) -> list[Tensor]:
    """[[(W [out, in], b [out]) per layer] per member] -> [W [E, in, out], b [E, 1, out], ...] leaves."""
    params = []
    for layer in zip(*per_member, strict=True):
        params.append(torch.stack([w.t() for w, _ in layer]).contiguous().to(device).requires_grad_())
        params.append(torch.stack([b[None] for _, b in layer]).to(device).requires_grad_())
    return params


class Population:
    """K SAC learners (member k is seeded with `member_seeds(seed, k)[k]`, like `SACLearner`)."""

    def __init__(self, k: int, obs_dim: int, act_dim: int, config: SACConfig, seed: int,
                 *, device: str | torch.device = "cpu", tune_malloc: bool = True):
        """`tune_malloc` calls `nets.reuse_freed_memory()` (process-wide; about 13% faster updates on CPU)."""
        if k < 1:
            raise ValueError(f"population size must be positive, got {k}")
        if tune_malloc:
            reuse_freed_memory()
        self.k, self.obs_dim, self.act_dim, self.config = k, obs_dim, act_dim, config
        self.device = torch.device(device)
        self.target_entropy = config.entropy_target(act_dim)
        actor_sizes = layer_sizes(obs_dim, config.hidden, 2 * act_dim)
        critic_sizes = layer_sizes(obs_dim + act_dim, config.hidden, 1)
        # Same draw order as SACLearner (nets.init_members).
        self.generators, actors, qf1s, qf2s = init_members(seed, k, actor_sizes, critic_sizes)
        self.actor = _stack(actors, self.device)
        self.critic = _stack(qf1s + qf2s, self.device)  # rows 0..K-1: qf1, K..2K-1: qf2
        self.critic_target = [p.detach().clone() for p in self.critic]
        self.log_alpha = torch.full((k,), config.init_log_alpha, device=self.device, requires_grad=True)
        self.actor_optimizer = StackedAdam(self.actor, config.lr)
        self.q_optimizer = StackedAdam(self.critic, config.lr)
        self.a_optimizer = StackedAdam([self.log_alpha], config.lr)
        # LaRes parameter constraint (§7): per-member weight; 0 = free.
        self.anchor_weight = torch.zeros(k, device=self.device)
        self.anchor_actor = [p.detach().clone() for p in self.actor]
        self.anchor_critic = [p.detach().clone() for p in self.critic]
        # One normaliser for all members: they share the buffer (obs_norm.py explains).
        self.obs_norm = ObsNormalizer(obs_dim) if config.obs_norm else None

    def observe(self, obs: np.ndarray) -> None:
        """Add collected observations [N, obs_dim] to the shared normalisation statistics (no-op without)."""
        if self.obs_norm is not None:
            self.obs_norm.update(obs)

    def _norm(self, obs: Tensor) -> Tensor:
        return obs if self.obs_norm is None else self.obs_norm.normalize(obs)

    # ------------------------------------------------------------------ networks
    def _policy(self, actor: Sequence[Tensor], obs: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        mean, log_std = torch.split(stacked_mlp(obs, actor[0::2], actor[1::2]), self.act_dim, dim=-1)
        return squashed_gaussian(mean, log_std, noise, self.config.log_std_bounds)

    def _q(self, critic: Sequence[Tensor], obs: Tensor, action: Tensor) -> Tensor:
        """Both critics of each member: obs/action [C, B, ...] -> q [2, C, B]."""
        x = torch.cat([obs, action], dim=-1)
        q = stacked_mlp(torch.cat([x, x]), critic[0::2], critic[1::2], self.config.critic_layer_norm)
        return q.view(2, obs.shape[0], obs.shape[1])

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: np.ndarray, members: np.ndarray, deterministic: bool,
            generator: torch.Generator) -> np.ndarray:
        """Actions in [-1, 1] for observations [M, obs_dim], row i acted by member `members[i]`.

        Noise [M, act_dim] is drawn from `generator` in row order (on this population's device).
        """
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device).reshape(-1, self.obs_dim)
        obs_t = self._norm(obs_t)
        members = np.asarray(members, np.int64).reshape(-1)
        if members.shape[0] != obs_t.shape[0]:
            raise ValueError(f"{obs_t.shape[0]} observations but {members.shape[0]} member ids")
        check_members(sorted(set(members.tolist())), self.k)
        noise = None if deterministic else torch.randn(
            obs_t.shape[0], self.act_dim, generator=generator, device=self.device)
        out = torch.empty(obs_t.shape[0], self.act_dim, device=self.device)
        for m in np.unique(members):
            rows = torch.as_tensor(np.flatnonzero(members == m), device=self.device)
            params = [p[m : m + 1] for p in self.actor]
            head = stacked_mlp(obs_t[rows][None], params[0::2], params[1::2])[0]
            if deterministic:
                out[rows] = torch.tanh(head[:, : self.act_dim])
            else:
                mean, log_std = torch.split(head, self.act_dim, dim=-1)
                assert noise is not None
                out[rows] = squashed_gaussian(mean, log_std, noise[rows], self.config.log_std_bounds)[0]
        return out.cpu().numpy()

    # ------------------------------------------------------------------ learning
    def update(self, batch: Batch, members: Sequence[int] | None = None) -> dict[str, np.ndarray]:
        """One SAC step for each member on its own minibatch (batch row i belongs to `members[i]`).

        Same maths and order as `SACLearner.update`: critics, then the actor on the updated critics
        (§12 item 11), then the temperature, then Polyak targets. Returns per-member metrics [K]
        (NaN for members not updated).
        """
        members = list(range(self.k)) if members is None else [int(m) for m in members]
        check_members(members, self.k)
        if batch.obs.shape[0] != len(members):
            raise ValueError(f"batch has {batch.obs.shape[0]} columns for {len(members)} members")
        cfg, dev = self.config, self.device
        obs, action, reward, next_obs, terminated = (
            torch.as_tensor(x, device=dev)
            for x in (batch.obs, batch.action, batch.reward, batch.next_obs, batch.terminated)
        )
        obs, next_obs = self._norm(obs), self._norm(next_obs)
        noise_shape = (obs.shape[1], self.act_dim)
        noises = [torch.randn(noise_shape, generator=self.generators[m]) for m in members for _ in (0, 1)]
        noise = torch.stack(noises).view(len(members), 2, *noise_shape).to(dev)
        noise_next, noise_pi = noise[:, 0], noise[:, 1]
        rows, critic_rows = member_rows(members, self.k, self.device)
        # All members: the stacks themselves. A subset: gathered copies as fresh leaves, written back below.
        actor, critic = gather_rows(self.actor, rows), gather_rows(self.critic, critic_rows)
        target = gather_rows(self.critic_target, critic_rows)
        log_alpha = gather_rows([self.log_alpha], rows)[0]
        alpha = log_alpha.detach().exp()[:, None]
        weight = self.anchor_weight if rows is None else self.anchor_weight[rows]
        anchored = bool((weight > 0).any())

        # Critics: soft Bellman target, clipped double-Q, (1 - terminated) bootstrap (§12 item 12).
        with torch.no_grad():
            next_action, next_log_prob = self._policy(actor, next_obs, noise_next)
            min_qf_next_target = self._q(target, next_obs, next_action).min(0).values - alpha * next_log_prob
            next_q_value = cfg.reward_scale * reward + (1.0 - terminated) * cfg.gamma * min_qf_next_target
        qf_loss = (self._q(critic, obs, action) - next_q_value).pow(2).mean(-1).sum(0)  # [C]
        q_grads = torch.autograd.grad(qf_loss.sum(), critic)
        q_weight = torch.cat([weight, weight])
        q_anchor = gather_rows(self.anchor_critic, critic_rows)
        q_pull = self.q_optimizer.update_(critic, q_grads, critic_rows, (q_anchor, q_weight) if anchored else None)

        # Actor on the updated critics; critic weights detached, so only the actor gets gradients.
        pi, log_pi = self._policy(actor, obs, noise_pi)
        min_qf_pi = self._q([p.detach() for p in critic], obs, pi).min(0).values
        actor_loss = (alpha * log_pi - min_qf_pi).mean(-1)  # [C]
        pi_grads = torch.autograd.grad(actor_loss.sum(), actor)
        pi_anchor = gather_rows(self.anchor_actor, rows)
        actor_pull = self.actor_optimizer.update_(actor, pi_grads, rows, (pi_anchor, weight) if anchored else None)

        # Temperature: d/d log_alpha of -mean(log_alpha * (log_pi + target_entropy)).
        entropy_gap = log_pi.detach().mean(-1) + self.target_entropy
        alpha_loss = -(log_alpha.detach() * entropy_gap)
        self.a_optimizer.update_([log_alpha], [-entropy_gap], rows)

        with torch.no_grad():
            torch._foreach_lerp_(target, critic, cfg.tau)  # Polyak averaging every step
            if rows is not None:  # write the gathered rows back
                for full, part in zip(self.critic + self.critic_target, critic + target, strict=True):
                    full[critic_rows] = part
                for full, part in zip([*self.actor, self.log_alpha], [*actor, log_alpha], strict=True):
                    full[rows] = part

        anchor_loss = torch.zeros_like(weight)  # the L2 pull's loss, before this step
        if q_pull is not None and actor_pull is not None:
            anchor_loss = q_pull.view(2, -1).sum(0) + actor_pull
        values = torch.stack([qf_loss.detach(), actor_loss.detach(), alpha_loss, log_alpha.detach().exp(),
                              anchor_loss]).cpu().numpy()
        out = np.full((len(METRICS), self.k), np.nan, np.float32)
        out[:, members] = values
        return dict(zip(METRICS, out, strict=True))

    # ------------------------------------------------------------------ inheritance (LaRes §7)
    @torch.no_grad()
    def inherit(self, dst: Sequence[int], src: int, anchor_weight: float) -> None:
        """Make every dst member a copy of src (actor, critics, targets, Adam states, log_alpha and its
        Adam state, which the reference forgot) and pull it toward those copied parameters with
        `anchor_weight` until `release_anchor` or the next `inherit`."""
        dst = [int(m) for m in dst]
        check_members([*dst, src], self.k)
        if anchor_weight < 0:
            raise ValueError(f"anchor_weight must be >= 0, got {anchor_weight}")
        if not dst:
            return
        d = torch.as_tensor(dst, device=self.device)
        s = torch.as_tensor([src], device=self.device)
        d2 = torch.cat([d, d + self.k])  # both critics of each dst member
        s2 = torch.cat([s.expand(len(dst)), (s + self.k).expand(len(dst))])
        groups = [(self.actor, self.anchor_actor, d, s), (self.critic, self.anchor_critic, d2, s2)]
        for params, anchor, dr, sr in groups:
            for p, a in zip(params, anchor, strict=True):
                p[dr] = p[sr]
                a[dr] = p[sr]
        for p in self.critic_target:
            p[d2] = p[s2]
        self.log_alpha[d] = self.log_alpha[s]
        self.actor_optimizer.copy_rows_(d, s)
        self.q_optimizer.copy_rows_(d2, s2)
        self.a_optimizer.copy_rows_(d, s)
        self.anchor_weight[d] = anchor_weight

    def release_anchor(self, members: Sequence[int]) -> None:
        """Free the listed members of the L2 pull (elites train unconstrained)."""
        check_members(list(members), self.k)
        self.anchor_weight[torch.as_tensor(list(members), dtype=torch.long, device=self.device)] = 0.0

    # ------------------------------------------------------------------ export and checkpoints
    @torch.no_grad()
    def to_learner(self, member: int) -> SACLearner:
        """A standalone `SACLearner` with member's networks, targets and temperature (not its optimisers),
        e.g. for an evaluation worker."""
        check_members([member], self.k)
        learner = SACLearner(self.obs_dim, self.act_dim, self.config, seed=0)
        nets = [(learner.actor, self.actor, member), (learner.qf1, self.critic, member),
                (learner.qf2, self.critic, member + self.k), (learner.qf1_target, self.critic_target, member),
                (learner.qf2_target, self.critic_target, member + self.k)]
        for module, stack, row in nets:
            linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
            for linear, w, b in zip(linears, stack[0::2], stack[1::2], strict=True):
                linear.weight.copy_(w[row].t())
                linear.bias.copy_(b[row, 0])
        learner.log_alpha.copy_(self.log_alpha[member : member + 1])
        if learner.obs_norm is not None and self.obs_norm is not None:
            learner.obs_norm.copy_from(self.obs_norm)
        return learner

    def state_dict(self) -> dict[str, Any]:
        """Tensors (cloned, on CPU) and scalars for a checkpoint."""
        def cpu(ts: Sequence[Tensor]) -> list[Tensor]:
            return [t.detach().cpu().clone() for t in ts]
        return {
            "k": self.k, "obs_dim": self.obs_dim, "act_dim": self.act_dim, "hidden": list(self.config.hidden),
            "actor": cpu(self.actor), "critic": cpu(self.critic), "critic_target": cpu(self.critic_target),
            "log_alpha": self.log_alpha.detach().cpu().clone(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "q_optimizer": self.q_optimizer.state_dict(),
            "a_optimizer": self.a_optimizer.state_dict(),
            "anchor_weight": self.anchor_weight.cpu().clone(),
            "anchor_actor": cpu(self.anchor_actor), "anchor_critic": cpu(self.anchor_critic),
            "generators": [g.get_state() for g in self.generators],
            "obs_norm": None if self.obs_norm is None else self.obs_norm.state_dict(),
        }

    @torch.no_grad()
    def load_state_dict(self, d: dict[str, Any]) -> None:
        """Restore from `state_dict()`; shapes are checked before anything changes."""
        mine = (self.k, self.obs_dim, self.act_dim, list(self.config.hidden))
        theirs = (d["k"], d["obs_dim"], d["act_dim"], list(d["hidden"]))
        if mine != theirs:
            raise ValueError(f"population state (k, obs, act, hidden) = {theirs}, this population is {mine}")
        groups = [(self.actor, d["actor"]), (self.critic, d["critic"]), (self.critic_target, d["critic_target"]),
                  (self.anchor_actor, d["anchor_actor"]), (self.anchor_critic, d["anchor_critic"])]
        for params, saved in groups:
            if [p.shape for p in params] != [torch.Size(s.shape) for s in saved]:
                raise ValueError("population state has parameters of other shapes")
        for params, saved in groups:
            for p, s in zip(params, saved, strict=True):
                p.copy_(s)
        self.log_alpha.copy_(d["log_alpha"])
        self.anchor_weight.copy_(d["anchor_weight"])
        self.actor_optimizer.load_state_dict(d["actor_optimizer"])
        self.q_optimizer.load_state_dict(d["q_optimizer"])
        self.a_optimizer.load_state_dict(d["a_optimizer"])
        for g, state in zip(self.generators, d["generators"], strict=True):
            g.set_state(state)
        if self.obs_norm is not None and d.get("obs_norm") is not None:
            self.obs_norm.load_state_dict(d["obs_norm"])
