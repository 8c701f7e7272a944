"""K CrossQ learners trained as one batched computation (the CrossQ twin of `sac_population.Population`).

Every weight matrix of the K actors is one stacked tensor [K, in, out] and the 2K critics one ensemble
[2K, in, out] (row c*K + k: critic c of member k), so each layer of the whole population is one
`torch.baddbmm`. Batch renormalisation is per member: a member's statistics are taken over its own
minibatch rows only (the reduction runs over dim 1 of [E, N, F]), and every member keeps its own running
mean and variance [E, 1, F] and its own count of train-mode forwards. Losses are summed over members, which
leaves every member's gradient its own, and Adam is elementwise, so a member's update is exactly
`CrossQLearner.update` (tested). Each member reads its own reward column (docs/lares-reference.md §12 item 13)
and counts its own updates, so members updated on different schedules keep their own policy delay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.crossq import BatchRenorm, CrossQConfig, CrossQLearner, batch_renorm
from lares_agent.engine.learners.nets import (
    StackedAdam,
    check_members,
    gather_rows,
    init_members,
    layer_sizes,
    member_rows,
    reuse_freed_memory,
    scatter_rows,
    squashed_gaussian,
    stacked_mlp,
)
from lares_agent.engine.learners.obs_norm import ObsNormalizer

__all__ = ["CrossQConfig", "CrossQPopulation", "stacked_renorm_mlp"]

METRICS = ("q_loss", "actor_loss", "alpha_loss", "alpha", "anchor_loss")


def stacked_renorm_mlp(x: Tensor, params: Sequence[Tensor], running: Sequence[Tensor], steps: Tensor | None,
                       config: CrossQConfig, training: bool) -> Tensor:
    """E renormalised MLPs at once: x [E, N, in] -> [E, N, out].

    `params` per layer: (scale, shift, W, b) with renormalisation, (W, b) without (`running` empty);
    `running` per layer: (mean, var) [E, 1, in], updated in place in training. `steps` [E] (training only)
    counts each row's earlier train-mode forwards; the caller advances it.
    """
    per = 4 if running else 2
    layers = len(params) // per
    for i in range(layers):
        p = params[per * i : per * (i + 1)]
        if running:
            x = batch_renorm(x, p[0], p[1], running[2 * i], running[2 * i + 1], steps, config, training)
        x = stacked_mlp(x, [p[-2]], [p[-1]])
        if i < layers - 1:
            x = torch.relu(x)
    return x


class _Ensemble:
    """E stacked networks: parameters (leaves), running statistics and per-row forward counts."""

    def __init__(self, per_member: list[list[tuple[Tensor, Tensor]]], renorm: bool, device: torch.device):
        e = len(per_member)
        params: list[Tensor] = []
        self.running: list[Tensor] = []
        for layer in zip(*per_member, strict=True):
            fan_in = layer[0][0].shape[1]
            if renorm:
                params += [torch.ones(e, 1, fan_in), torch.zeros(e, 1, fan_in)]
                self.running += [torch.zeros(e, 1, fan_in, device=device), torch.ones(e, 1, fan_in, device=device)]
            params += [torch.stack([w.t() for w, _ in layer]), torch.stack([b[None] for _, b in layer])]
        self.params = [p.to(device).contiguous().requires_grad_() for p in params]
        self.steps = torch.zeros(e, dtype=torch.long, device=device)


class CrossQPopulation:
    """K CrossQ learners with one batched update; the public interface of `sac_population.Population`.

    Members are independent: separate seeds (weights and action noise), optimiser states, temperatures,
    running statistics and update counts. One `ObsNormalizer` serves all members when `config.obs_norm`
    (they share the buffer; see obs_norm.py), fed by `observe`.
    """

    def __init__(self, k: int, obs_dim: int, act_dim: int, config: CrossQConfig, seed: int,
                 device: str | torch.device = "cpu", tune_malloc: bool = True):
        if k < 1:
            raise ValueError(f"population size must be positive, got {k}")
        if tune_malloc:
            reuse_freed_memory()
        self.k, self.obs_dim, self.act_dim, self.config = k, obs_dim, act_dim, config
        self.device = torch.device(device)
        self.target_entropy = config.entropy_target(act_dim)
        actor_sizes = layer_sizes(obs_dim, config.actor_hidden, 2 * act_dim)
        critic_sizes = layer_sizes(obs_dim + act_dim, config.critic_hidden, 1)
        # Same draw order as CrossQLearner (nets.init_members).
        self.generators, actors, qf1s, qf2s = init_members(seed, k, actor_sizes, critic_sizes)
        self._actor = _Ensemble(actors, config.actor_renorm, self.device)
        self._critic = _Ensemble(qf1s + qf2s, True, self.device)  # rows 0..K-1: qf1, K..2K-1: qf2
        self.actor, self.critic = self._actor.params, self._critic.params
        self.log_alpha = torch.full((k,), config.init_log_alpha, device=self.device, requires_grad=True)
        self.actor_optimizer = StackedAdam(self.actor, config.lr, config.adam_betas)
        self.q_optimizer = StackedAdam(self.critic, config.lr, config.adam_betas)
        self.a_optimizer = StackedAdam([self.log_alpha], config.lr)
        self.updates = torch.zeros(k, dtype=torch.long)
        # Rows: the actor's last actor loss, alpha loss and L2 pull, reported between its steps.
        self.last = torch.zeros(3, k, device=self.device)
        self.anchor_weight = torch.zeros(k, device=self.device)  # LaRes parameter constraint (§7); 0 = free
        self.anchor_actor = [p.detach().clone() for p in self.actor]
        self.anchor_critic = [p.detach().clone() for p in self.critic]
        self.obs_norm = ObsNormalizer(obs_dim) if config.obs_norm else None

    # ------------------------------------------------------------------ helpers
    def _norm(self, obs: Tensor) -> Tensor:
        return obs if self.obs_norm is None else self.obs_norm.normalize(obs)

    def _policy(self, actor: Sequence[Tensor], running: Sequence[Tensor], steps: Tensor | None, obs: Tensor,
                noise: Tensor, training: bool) -> tuple[Tensor, Tensor]:
        head = stacked_renorm_mlp(obs, actor, running, steps, self.config, training)
        mean, log_std = torch.split(head, self.act_dim, dim=-1)
        return squashed_gaussian(mean, log_std, noise, self.config.log_std_bounds)

    def observe(self, obs: np.ndarray) -> None:
        """Add collected observations [N, obs_dim] to the shared normalisation statistics (no-op without)."""
        if self.obs_norm is not None:
            self.obs_norm.update(obs)

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: np.ndarray, members: np.ndarray, deterministic: bool,
            generator: torch.Generator) -> np.ndarray:
        """Actions in [-1, 1] for observations [M, obs_dim], row i acted by member `members[i]`, with the
        running statistics (eval mode: acting changes nothing). Noise [M, act_dim] comes from `generator`."""
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
            running = [t[m : m + 1] for t in self._actor.running]
            head = stacked_renorm_mlp(obs_t[rows][None], params, running, None, self.config, False)[0]
            if deterministic:
                out[rows] = torch.tanh(head[:, : self.act_dim])
            else:
                mean, log_std = torch.split(head, self.act_dim, dim=-1)
                assert noise is not None
                out[rows] = squashed_gaussian(mean, log_std, noise[rows], self.config.log_std_bounds)[0]
        return out.cpu().numpy()

    # ------------------------------------------------------------------ learning
    def update(self, batch: Batch, members: Sequence[int] | None = None) -> dict[str, np.ndarray]:
        """One CrossQ step for each member on its own minibatch (batch row i belongs to `members[i]`).

        Same maths and order as `CrossQLearner.update`: the critic step on the joint batch, then for the
        members whose update count is a multiple of `policy_delay` the actor and temperature step. Returns
        per-member metrics [K] (NaN for members not updated; between actor steps the last actor losses).
        """
        members = list(range(self.k)) if members is None else [int(m) for m in members]
        check_members(members, self.k)
        if batch.obs.shape[0] != len(members):
            raise ValueError(f"batch has {batch.obs.shape[0]} columns for {len(members)} members")
        dev = self.device
        obs, action, reward, next_obs, terminated = (
            torch.as_tensor(x, device=dev)
            for x in (batch.obs, batch.action, batch.reward, batch.next_obs, batch.terminated)
        )
        obs, next_obs = self._norm(obs), self._norm(next_obs)
        noise_shape = (obs.shape[1], self.act_dim)
        noises = [torch.randn(noise_shape, generator=self.generators[m]) for m in members for _ in (0, 1)]
        noise = torch.stack(noises).view(len(members), 2, *noise_shape).to(dev)
        q_loss, q_pull = self._critic_step(members, obs, action, reward, next_obs, terminated, noise[:, 0])
        due = [i for i, m in enumerate(members) if int(self.updates[m]) % self.config.policy_delay == 0]
        self.updates[members] += 1
        if due:
            index = torch.as_tensor(due, device=dev)
            self._actor_step([members[i] for i in due], obs[index], noise[index, 1])
        rows = torch.as_tensor(members, device=dev)
        anchor_loss = self.last[2, rows] + (q_pull.view(2, -1).sum(0) if q_pull is not None else 0.0)
        values = torch.stack([q_loss, self.last[0, rows], self.last[1, rows], self.log_alpha.detach()[rows].exp(),
                              anchor_loss]).cpu().numpy()
        out = np.full((len(METRICS), self.k), np.nan, np.float32)
        out[:, members] = values
        return dict(zip(METRICS, out, strict=True))

    def _critic_step(self, members: list[int], obs: Tensor, action: Tensor, reward: Tensor, next_obs: Tensor,
                     terminated: Tensor, noise_next: Tensor) -> tuple[Tensor, Tensor | None]:
        """Critic losses [C] and the L2 pull's loss [2C] (None when no member is anchored)."""
        cfg, c, b = self.config, len(members), obs.shape[1]
        rows, critic_rows = member_rows(members, self.k, self.device)
        with torch.no_grad():  # next actions with the actor's running statistics (eval mode)
            actor = [p.detach() if rows is None else p.detach()[rows] for p in self.actor]
            actor_running = [t if rows is None else t[rows] for t in self._actor.running]
            next_action, next_log_prob = self._policy(actor, actor_running, None, next_obs, noise_next, False)
            alpha = self.log_alpha.detach()[list(members)].exp()[:, None]
        critic = gather_rows(self.critic, critic_rows)
        running = gather_rows(self._critic.running, critic_rows)
        steps = self._critic.steps if critic_rows is None else self._critic.steps[critic_rows]
        # One train-mode forward of the joint batch [(s, a); (s', a')] per critic (paper §3.2).
        joint = torch.cat([torch.cat([obs, action], -1), torch.cat([next_obs, next_action], -1)], dim=1)
        q = stacked_renorm_mlp(torch.cat([joint, joint]), critic, running, steps, cfg, True).view(2, c, 2 * b)
        with torch.no_grad():  # stop-gradient bootstrap, (1 - terminated) only (§12 item 12)
            min_qf_next = q[..., b:].min(0).values - alpha * next_log_prob
            next_q_value = cfg.reward_scale * reward + (1.0 - terminated) * cfg.gamma * min_qf_next
        qf_loss = (q[..., :b] - next_q_value).pow(2).mean(-1).sum(0)  # [C]
        grads = torch.autograd.grad(qf_loss.sum(), critic)
        weight = self.anchor_weight if rows is None else self.anchor_weight[rows]
        pull = None
        if bool((weight > 0).any()):
            pull = (gather_rows(self.anchor_critic, critic_rows), torch.cat([weight, weight]))
        q_pull = self.q_optimizer.update_(critic, grads, critic_rows, pull)
        scatter_rows(self.critic, critic, critic_rows)
        scatter_rows(self._critic.running, running, critic_rows)
        if critic_rows is None:
            self._critic.steps += 1
        else:
            self._critic.steps[critic_rows] += 1
        return qf_loss.detach(), q_pull

    def _actor_step(self, members: list[int], obs: Tensor, noise_pi: Tensor) -> None:
        """Actor (train mode) on the updated critics (eval mode, detached) and temperature, for `members`."""
        rows, critic_rows = member_rows(members, self.k, self.device)
        actor = gather_rows(self.actor, rows)
        running = gather_rows(self._actor.running, rows)
        steps = self._actor.steps if rows is None else self._actor.steps[rows]
        log_alpha = gather_rows([self.log_alpha], rows)[0]
        alpha = log_alpha.detach().exp()[:, None]
        pi, log_pi = self._policy(actor, running, steps, obs, noise_pi, True)
        critic = [p.detach() if critic_rows is None else p.detach()[critic_rows] for p in self.critic]
        critic_running = [t if critic_rows is None else t[critic_rows] for t in self._critic.running]
        x = torch.cat([obs, pi], -1)
        q = stacked_renorm_mlp(torch.cat([x, x]), critic, critic_running, None, self.config, False)
        min_qf_pi = q.view(2, len(members), -1).min(0).values
        actor_loss = (alpha * log_pi - min_qf_pi).mean(-1)  # [D]
        grads = torch.autograd.grad(actor_loss.sum(), actor)
        weight = self.anchor_weight if rows is None else self.anchor_weight[rows]
        pull = (gather_rows(self.anchor_actor, rows), weight) if bool((weight > 0).any()) else None
        actor_pull = self.actor_optimizer.update_(actor, grads, rows, pull)
        # Temperature: d/d log_alpha of -mean(log_alpha * (log_pi + target_entropy)).
        entropy_gap = log_pi.detach().mean(-1) + self.target_entropy
        alpha_loss = -(log_alpha.detach() * entropy_gap)  # before the step, as the reference reports it
        self.a_optimizer.update_([log_alpha], [-entropy_gap], rows)
        with torch.no_grad():
            scatter_rows(self.actor, actor, rows)
            scatter_rows(self._actor.running, running, rows)
            scatter_rows([self.log_alpha], [log_alpha], rows)
            if self._actor.running:
                if rows is None:
                    self._actor.steps += 1
                else:
                    self._actor.steps[rows] += 1
            pull_loss = actor_pull if actor_pull is not None else torch.zeros_like(actor_loss)
            index = torch.as_tensor(members, device=self.device)
            self.last[:, index] = torch.stack([actor_loss.detach(), alpha_loss, pull_loss])

    # ------------------------------------------------------------------ inheritance (LaRes §7)
    @torch.no_grad()
    def inherit(self, dst: Sequence[int], src: int, anchor_weight: float) -> None:
        """Make every dst member a copy of src (actor, critics, their running statistics and forward counts,
        Adam states, log_alpha and its Adam state, update count) and pull it toward those copied parameters
        with `anchor_weight` until `release_anchor` or the next `inherit`. The observation normaliser is
        shared by all members, so it needs no copy."""
        dst = [int(m) for m in dst]
        check_members([*dst, src], self.k)
        if anchor_weight < 0:
            raise ValueError(f"anchor_weight must be >= 0, got {anchor_weight}")
        if not dst:
            return
        d = torch.as_tensor(dst, device=self.device)
        s = torch.as_tensor([src], device=self.device).expand(len(dst))
        d2 = torch.cat([d, d + self.k])  # both critics of each dst member
        s2 = torch.cat([s, s + self.k])
        groups = [(self.actor, self.anchor_actor, d, s), (self.critic, self.anchor_critic, d2, s2)]
        for params, anchor, dr, sr in groups:
            for p, a in zip(params, anchor, strict=True):
                p[dr] = p[sr]
                a[dr] = p[sr]
        for ensemble, dr, sr in [(self._actor, d, s), (self._critic, d2, s2)]:
            for t in ensemble.running:
                t[dr] = t[sr]
            ensemble.steps[dr] = ensemble.steps[sr]
        self.log_alpha[d] = self.log_alpha[s]
        self.actor_optimizer.copy_rows_(d, s)
        self.q_optimizer.copy_rows_(d2, s2)
        self.a_optimizer.copy_rows_(d, s)
        self.updates[d.cpu()] = self.updates[s.cpu()]
        self.last[:2, d] = self.last[:2, s]
        self.last[2, d] = 0.0  # at the anchor
        self.anchor_weight[d] = anchor_weight

    def release_anchor(self, members: Sequence[int]) -> None:
        """Free the listed members of the L2 pull (elites train unconstrained)."""
        check_members(list(members), self.k)
        rows = torch.as_tensor(list(members), dtype=torch.long, device=self.device)
        self.anchor_weight[rows] = 0.0
        self.last[2, rows] = 0.0

    # ------------------------------------------------------------------ export and checkpoints
    @torch.no_grad()
    def to_learner(self, member: int) -> CrossQLearner:
        """A standalone `CrossQLearner` with member's networks, running statistics, temperature, update count
        and observation statistics (not its optimisers), e.g. for an evaluation worker or a test."""
        check_members([member], self.k)
        learner = CrossQLearner(self.obs_dim, self.act_dim, self.config, seed=0)
        nets = [(learner.actor, self._actor, member), (learner.qf1, self._critic, member),
                (learner.qf2, self._critic, member + self.k)]
        for module, ensemble, row in nets:
            linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
            norms = [m for m in module.modules() if isinstance(m, BatchRenorm)]
            per = 4 if norms else 2
            for i, linear in enumerate(linears):
                p = ensemble.params[per * i : per * (i + 1)]
                linear.weight.copy_(p[-2][row].t())
                linear.bias.copy_(p[-1][row, 0])
                if norms:
                    norms[i].scale.copy_(p[0][row])
                    norms[i].shift.copy_(p[1][row])
                    norms[i].running_mean.copy_(ensemble.running[2 * i][row])
                    norms[i].running_var.copy_(ensemble.running[2 * i + 1][row])
                    norms[i].steps.copy_(ensemble.steps[row])
        learner.log_alpha.copy_(self.log_alpha[member : member + 1])
        learner.updates = int(self.updates[member])
        learner.last_actor_loss, learner.last_alpha_loss, learner.last_actor_anchor = (
            float(v) for v in self.last[:, member])
        if learner.obs_norm is not None and self.obs_norm is not None:
            learner.obs_norm.copy_from(self.obs_norm)
        return learner

    def state_dict(self) -> dict[str, Any]:
        """Tensors (cloned, on CPU) and scalars for a checkpoint: parameters, running statistics, optimiser
        states, temperatures, update counts, anchors, generators and the observation statistics."""
        def cpu(ts: Sequence[Tensor]) -> list[Tensor]:
            return [t.detach().cpu().clone() for t in ts]
        return {
            "k": self.k, "obs_dim": self.obs_dim, "act_dim": self.act_dim,
            "actor_hidden": list(self.config.actor_hidden), "critic_hidden": list(self.config.critic_hidden),
            "actor": cpu(self.actor), "critic": cpu(self.critic),
            "actor_running": cpu(self._actor.running), "critic_running": cpu(self._critic.running),
            "actor_steps": self._actor.steps.cpu().clone(), "critic_steps": self._critic.steps.cpu().clone(),
            "log_alpha": self.log_alpha.detach().cpu().clone(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "q_optimizer": self.q_optimizer.state_dict(),
            "a_optimizer": self.a_optimizer.state_dict(),
            "updates": self.updates.clone(), "last": self.last.cpu().clone(),
            "anchor_weight": self.anchor_weight.cpu().clone(),
            "anchor_actor": cpu(self.anchor_actor), "anchor_critic": cpu(self.anchor_critic),
            "generators": [g.get_state() for g in self.generators],
            "obs_norm": None if self.obs_norm is None else self.obs_norm.state_dict(),
        }

    @torch.no_grad()
    def load_state_dict(self, d: dict[str, Any]) -> None:
        """Restore from `state_dict()`; shapes are checked before anything changes."""
        mine = (self.k, self.obs_dim, self.act_dim, list(self.config.actor_hidden), list(self.config.critic_hidden))
        theirs = (d["k"], d["obs_dim"], d["act_dim"], list(d["actor_hidden"]), list(d["critic_hidden"]))
        if mine != theirs:
            raise ValueError(f"population state (k, obs, act, actor, critic) = {theirs}, this population is {mine}")
        groups = [(self.actor, d["actor"]), (self.critic, d["critic"]), (self._actor.running, d["actor_running"]),
                  (self._critic.running, d["critic_running"]), (self.anchor_actor, d["anchor_actor"]),
                  (self.anchor_critic, d["anchor_critic"])]
        for params, saved in groups:
            if [p.shape for p in params] != [torch.Size(s.shape) for s in saved]:
                raise ValueError("population state has parameters of other shapes")
        if (self.obs_norm is None) != (d["obs_norm"] is None):
            raise ValueError("population state and this population disagree on observation normalisation")
        for params, saved in groups:
            for p, s in zip(params, saved, strict=True):
                p.copy_(s)
        self._actor.steps.copy_(d["actor_steps"])
        self._critic.steps.copy_(d["critic_steps"])
        self.log_alpha.copy_(d["log_alpha"])
        self.updates.copy_(d["updates"])
        self.last.copy_(d["last"])
        self.anchor_weight.copy_(d["anchor_weight"])
        self.actor_optimizer.load_state_dict(d["actor_optimizer"])
        self.q_optimizer.load_state_dict(d["q_optimizer"])
        self.a_optimizer.load_state_dict(d["a_optimizer"])
        for g, state in zip(self.generators, d["generators"], strict=True):
            g.set_state(state)
        if self.obs_norm is not None:
            self.obs_norm.load_state_dict(d["obs_norm"])
