"""K SAC or CrossQ learners trained as one batched computation.

Every weight matrix of the K actors is one stacked tensor [K, in, out] and the 2K critics one ensemble
[2K, in, out] (row c*K + k: critic c of member k), so each layer of the whole population is one
`torch.baddbmm`. Each member reads its own reward column and its own minibatch (docs/lares-reference.md §12
item 13); losses are summed over members, which leaves every member's gradient its own, and Adam is
elementwise, so a member's update is exactly its single learner's (`sac.SACLearner`, `crossq.CrossQLearner`;
tested). This replaces the reference's one-process-per-learner layout (§12 items 21–23, 26).

The config's type picks the algorithm. The two differ only in where the bootstrap value comes from (CrossQ
paper §3; the `crossq.py` docstring has the details):

* SAC: Polyak-averaged target critics evaluate (s', a'), the live critics (s, a); the actor steps every update;
* CrossQ: no targets; one train-mode pass of the live critics over the joint batch [(s, a); (s', a')], with
  batch renormalisation before every linear layer, per member over its own rows (its own running statistics
  and count of train-mode forwards); each member's actor steps every `policy_delay` of its own updates, and
  its last actor losses are reported in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.crossq import CrossQConfig, CrossQLearner
from lares_agent.engine.learners.ensemble import Ensemble, detached_rows
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
    to_host,
)
from lares_agent.engine.learners.obs_norm import ObsNormalizer
from lares_agent.engine.learners.sac import SACConfig, SACLearner, normalized, observe_into

__all__ = ["METRICS", "ActorCriticPopulation"]

METRICS = ("q_loss", "actor_loss", "alpha_loss", "alpha", "anchor_loss")


def _widths(config: SACConfig | CrossQConfig) -> dict[str, list[int]]:
    """The hidden widths as a checkpoint names them (SAC: one list for actor and critics)."""
    if isinstance(config, CrossQConfig):
        return {"actor_hidden": list(config.actor_hidden), "critic_hidden": list(config.critic_hidden)}
    return {"hidden": list(config.hidden)}


class ActorCriticPopulation:
    """K SAC or CrossQ learners with one batched update (`protocols.PopulationLearner`).

    Members are independent: member k is seeded with `member_seeds(seed, K)[k]` like its single learner
    (weights and action noise), and has its own optimiser states, temperature, statistics and update count.
    One `ObsNormalizer` serves all members when `config.obs_norm` (they share the buffer; see obs_norm.py).

    On `device`: parameters, optimiser states, statistics, anchors; minibatches and observations are copied there.
    Random draws stay on the members' CPU generators (the same stream on every device); actions, metrics and
    checkpoints come back to the host; update counts and who is anchored stay there (branching never waits).
    """

    def __init__(self, k: int, obs_dim: int, act_dim: int, config: SACConfig | CrossQConfig, seed: int,
                 *, device: str | torch.device = "cpu", tune_malloc: bool = True):
        """`tune_malloc` calls `nets.reuse_freed_memory()` (process-wide; faster updates on CPU)."""
        if k < 1:
            raise ValueError(f"population size must be positive, got {k}")
        if tune_malloc:
            reuse_freed_memory()
        self.k, self.obs_dim, self.act_dim, self.config = k, obs_dim, act_dim, config
        self.device = torch.device(device)
        self.target_entropy = config.entropy_target(act_dim)
        crossq = config if isinstance(config, CrossQConfig) else None
        if isinstance(config, CrossQConfig):
            actor_hidden, critic_hidden, self.tau = config.actor_hidden, config.critic_hidden, 0.0
        else:  # tau: the Polyak factor of the targets
            actor_hidden, critic_hidden, self.tau = config.hidden, config.hidden, config.tau
        actor_sizes = layer_sizes(obs_dim, actor_hidden, 2 * act_dim)
        critic_sizes = layer_sizes(obs_dim + act_dim, critic_hidden, 1)
        # Same draw order as the single learners (nets.init_members).
        self.generators, actors, qf1s, qf2s = init_members(seed, k, actor_sizes, critic_sizes)
        self._actor = Ensemble(actors, self.device, renorm=crossq if crossq and crossq.actor_renorm else None)
        # Rows 0..K-1: qf1, K..2K-1: qf2.
        self._critic = Ensemble(qf1s + qf2s, self.device, renorm=crossq,
                                layer_norm=isinstance(config, SACConfig) and config.critic_layer_norm)
        self.actor, self.critic = self._actor.params, self._critic.params
        # SAC's Polyak-averaged targets; CrossQ has none (its bootstrap value comes from the joint pass).
        self.critic_target = None if crossq else [p.detach().clone() for p in self.critic]
        self.policy_delay = crossq.policy_delay if crossq else 1
        betas = crossq.adam_betas if crossq else (0.9, 0.999)
        self.log_alpha = torch.full((k,), config.init_log_alpha, device=self.device, requires_grad=True)
        self.actor_optimizer = StackedAdam(self.actor, config.lr, betas)
        self.q_optimizer = StackedAdam(self.critic, config.lr, betas)
        self.a_optimizer = StackedAdam([self.log_alpha], config.lr)
        self.updates = torch.zeros(k, dtype=torch.long)
        # Rows: the actor's last actor loss, alpha loss and L2 pull, reported between its steps.
        self.last = torch.zeros(3, k, device=self.device)
        self.anchor_weight = torch.zeros(k, device=self.device)  # LaRes parameter constraint (§7); 0 = free
        self._anchored = np.zeros(k, bool)  # anchor_weight > 0, in host memory
        self.anchor_actor = [p.detach().clone() for p in self.actor]
        self.anchor_critic = [p.detach().clone() for p in self.critic]
        self.obs_norm = ObsNormalizer(obs_dim) if config.obs_norm else None

    def observe(self, obs: np.ndarray) -> None:
        """Add collected observations [N, obs_dim] to the shared normalisation statistics (no-op without)."""
        observe_into(self.obs_norm, obs)

    # ------------------------------------------------------------------ networks
    def _policy(self, actor: Sequence[Tensor], running: Sequence[Tensor], steps: Tensor | None, obs: Tensor,
                noise: Tensor, training: bool) -> tuple[Tensor, Tensor]:
        mean, log_std = torch.split(self._actor.forward(obs, actor, running, steps, training), self.act_dim, dim=-1)
        return squashed_gaussian(mean, log_std, noise, self.config.log_std_bounds)

    def _q(self, critic: Sequence[Tensor], running: Sequence[Tensor], steps: Tensor | None, obs: Tensor,
           action: Tensor, training: bool) -> Tensor:
        """Both critics of each member: obs/action [C, N, ...] -> q [2, C, N]."""
        x = torch.cat([obs, action], dim=-1)
        q = self._critic.forward(torch.cat([x, x]), critic, running, steps, training)
        return q.view(2, obs.shape[0], obs.shape[1])

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: np.ndarray, members: np.ndarray, deterministic: bool,
            generator: torch.Generator) -> np.ndarray:
        """Actions in [-1, 1] for observations [M, obs_dim], row i acted by member `members[i]`, with the
        running statistics (eval mode: acting changes nothing). Noise [M, act_dim] comes from `generator`
        in row order (drawn on the CPU, then copied to this population's device)."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device).reshape(-1, self.obs_dim)
        obs_t = normalized(self.obs_norm, obs_t)
        members = np.asarray(members, np.int64).reshape(-1)
        if members.shape[0] != obs_t.shape[0]:
            raise ValueError(f"{obs_t.shape[0]} observations but {members.shape[0]} member ids")
        check_members(sorted(set(members.tolist())), self.k)
        noise = None if deterministic else torch.randn(
            obs_t.shape[0], self.act_dim, generator=generator).to(self.device)
        out = torch.empty(obs_t.shape[0], self.act_dim, device=self.device)
        for m in np.unique(members):
            rows = torch.as_tensor(np.flatnonzero(members == m), device=self.device)
            params = [p[m : m + 1] for p in self.actor]
            running = [t[m : m + 1] for t in self._actor.running]
            head = self._actor.forward(obs_t[rows][None], params, running, None, False)[0]
            if deterministic:
                out[rows] = torch.tanh(head[:, : self.act_dim])
            else:
                mean, log_std = torch.split(head, self.act_dim, dim=-1)
                assert noise is not None
                out[rows] = squashed_gaussian(mean, log_std, noise[rows], self.config.log_std_bounds)[0]
        return to_host(out)

    # ------------------------------------------------------------------ learning
    def update(self, batch: Batch, members: Sequence[int] | None = None) -> dict[str, np.ndarray]:
        """One step for each member on its own minibatch (batch row i belongs to `members[i]`).

        Same maths and order as the single learner's `update`: the critics, then for the members whose update
        count is a multiple of the policy delay (SAC: all) the actor on the updated critics (§12 item 11) and
        the temperature. Returns per-member metrics [K] (NaN for members not updated; between actor steps
        the last actor losses).
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
        obs, next_obs = normalized(self.obs_norm, obs), normalized(self.obs_norm, next_obs)
        noise_shape = (obs.shape[1], self.act_dim)
        noises = [torch.randn(noise_shape, generator=self.generators[m]) for m in members for _ in (0, 1)]
        noise = torch.stack(noises).view(len(members), 2, *noise_shape).to(dev)
        q_loss, q_pull = self._critic_step(members, obs, action, reward, next_obs, terminated, noise[:, 0])
        due = [i for i, m in enumerate(members) if int(self.updates[m]) % self.policy_delay == 0]
        self.updates[members] += 1
        if len(due) == len(members):
            self._actor_step(members, obs, noise[:, 1])
        elif due:
            index = torch.as_tensor(due, device=dev)
            self._actor_step([members[i] for i in due], obs[index], noise[index, 1])
        rows = torch.as_tensor(members, device=dev)
        anchor_loss = self.last[2, rows] + (q_pull.view(2, -1).sum(0) if q_pull is not None else 0.0)
        values = to_host(torch.stack([q_loss, self.last[0, rows], self.last[1, rows],
                                      self.log_alpha.detach()[rows].exp(), anchor_loss]))
        out = np.full((len(METRICS), self.k), np.nan, np.float32)
        out[:, members] = values
        return dict(zip(METRICS, out, strict=True))

    def _critic_step(self, members: list[int], obs: Tensor, action: Tensor, reward: Tensor, next_obs: Tensor,
                     terminated: Tensor, noise_next: Tensor) -> tuple[Tensor, Tensor | None]:
        """Critic losses [C] and the L2 pull's loss [2C] (None when no member is anchored)."""
        cfg, b = self.config, obs.shape[1]
        rows, critic_rows = member_rows(members, self.k, self.device)
        with torch.no_grad():  # next actions with the actor's running statistics (eval mode)
            actor, actor_running = detached_rows(self.actor, rows), detached_rows(self._actor.running, rows)
            next_action, next_log_prob = self._policy(actor, actor_running, None, next_obs, noise_next, False)
            alpha = self.log_alpha.detach()[members].exp()[:, None]
        critic = gather_rows(self.critic, critic_rows)
        running = gather_rows(self._critic.running, critic_rows)
        steps = self._critic.steps if critic_rows is None else self._critic.steps[critic_rows]
        target = [] if self.critic_target is None else gather_rows(self.critic_target, critic_rows)
        if self.critic_target is None:  # CrossQ: one train-mode pass of the joint batch per critic (paper §3.2)
            q = self._q(critic, running, steps, torch.cat([obs, next_obs], 1), torch.cat([action, next_action], 1),
                        True)
            q_now, q_next = q[..., :b], q[..., b:]
        else:  # SAC: the target critics on (s', a'), the live ones on (s, a)
            with torch.no_grad():
                q_next = self._q(target, [], None, next_obs, next_action, False)
            q_now = self._q(critic, running, steps, obs, action, True)
        with torch.no_grad():  # soft Bellman target, clipped double-Q, (1 - terminated) only (§12 item 12)
            min_qf_next = q_next.min(0).values - alpha * next_log_prob
            next_q_value = cfg.reward_scale * reward + (1.0 - terminated) * cfg.gamma * min_qf_next
        qf_loss = (q_now - next_q_value).pow(2).mean(-1).sum(0)  # [C]
        grads = torch.autograd.grad(qf_loss.sum(), critic)
        weight = self.anchor_weight if rows is None else self.anchor_weight[rows]
        pull = None
        if self._anchored[members].any():
            pull = (gather_rows(self.anchor_critic, critic_rows), torch.cat([weight, weight]))
        host_rows = None if critic_rows is None else [*members, *(m + self.k for m in members)]
        q_pull = self.q_optimizer.update_(critic, grads, host_rows, pull)
        if self.critic_target is not None:
            with torch.no_grad():
                torch._foreach_lerp_(target, critic, self.tau)  # Polyak averaging every update
                scatter_rows(self.critic_target, target, critic_rows)
        scatter_rows(self.critic, critic, critic_rows)
        scatter_rows(self._critic.running, running, critic_rows)
        self._critic.advance_(critic_rows)
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
        critic = detached_rows(self.critic, critic_rows)
        critic_running = detached_rows(self._critic.running, critic_rows)
        min_qf_pi = self._q(critic, critic_running, None, obs, pi, False).min(0).values
        actor_loss = (alpha * log_pi - min_qf_pi).mean(-1)  # [D]
        grads = torch.autograd.grad(actor_loss.sum(), actor)
        weight = self.anchor_weight if rows is None else self.anchor_weight[rows]
        pull = (gather_rows(self.anchor_actor, rows), weight) if self._anchored[members].any() else None
        host_rows = None if rows is None else members
        actor_pull = self.actor_optimizer.update_(actor, grads, host_rows, pull)
        # Temperature: d/d log_alpha of -mean(log_alpha * (log_pi + target_entropy)).
        entropy_gap = log_pi.detach().mean(-1) + self.target_entropy
        alpha_loss = -(log_alpha.detach() * entropy_gap)  # before the step, as the reference reports it
        self.a_optimizer.update_([log_alpha], [-entropy_gap], host_rows)
        with torch.no_grad():
            scatter_rows(self.actor, actor, rows)
            scatter_rows(self._actor.running, running, rows)
            scatter_rows([self.log_alpha], [log_alpha], rows)
            self._actor.advance_(rows)
            pull_loss = actor_pull if actor_pull is not None else torch.zeros_like(actor_loss)
            index = torch.as_tensor(members, device=self.device)
            self.last[:, index] = torch.stack([actor_loss.detach(), alpha_loss, pull_loss])

    # ------------------------------------------------------------------ inheritance (LaRes §7)
    @torch.no_grad()
    def inherit(self, dst: Sequence[int], src: int, anchor_weight: float) -> None:
        """Make every dst member a copy of src (actor, critics, targets, running statistics and forward
        counts, Adam states, log_alpha and its Adam state, which the reference forgot, update count) and pull
        it toward those copied parameters with `anchor_weight` until `release_anchor` or the next `inherit`.
        The observation normaliser is shared by all members, so it needs no copy."""
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
        for p in self.critic_target or []:
            p[d2] = p[s2]
        self._actor.copy_rows_(d, s)
        self._critic.copy_rows_(d2, s2)
        self.log_alpha[d] = self.log_alpha[s]
        sources = [src] * len(dst)  # host indices: the optimisers' and update counts' host copies
        self.actor_optimizer.copy_rows_(dst, sources)
        self.q_optimizer.copy_rows_([*dst, *(m + self.k for m in dst)], [*sources, *[src + self.k] * len(dst)])
        self.a_optimizer.copy_rows_(dst, sources)
        self.updates[dst] = self.updates[sources]
        self.last[:2, d] = self.last[:2, s]
        self.last[2, d] = 0.0  # at the anchor
        self.anchor_weight[d] = anchor_weight
        self._anchored[dst] = anchor_weight > 0

    def release_anchor(self, members: Sequence[int]) -> None:
        """Free the listed members of the L2 pull (elites train unconstrained)."""
        check_members(list(members), self.k)
        rows = torch.as_tensor(list(members), dtype=torch.long, device=self.device)
        self.anchor_weight[rows] = 0.0
        self.last[2, rows] = 0.0
        self._anchored[list(members)] = False

    # ------------------------------------------------------------------ export and checkpoints
    @torch.no_grad()
    def to_learner(self, member: int) -> SACLearner | CrossQLearner:
        """A single learner with member's networks (and targets or running statistics), temperature, update
        count and observation statistics (not its optimisers), e.g. for an evaluation worker or a test."""
        check_members([member], self.k)
        learner: SACLearner | CrossQLearner
        if isinstance(self.config, CrossQConfig):
            learner = CrossQLearner(self.obs_dim, self.act_dim, self.config, seed=0)
            learner.updates = int(self.updates[member])
            learner.last_actor_loss, learner.last_alpha_loss, learner.last_actor_anchor = (
                float(v) for v in self.last[:, member])
        else:
            learner = SACLearner(self.obs_dim, self.act_dim, self.config, seed=0)
            assert self.critic_target is not None
            self._critic.export_(learner.qf1_target, self.critic_target, member)
            self._critic.export_(learner.qf2_target, self.critic_target, member + self.k)
        self._actor.export_(learner.actor, self.actor, member)
        self._critic.export_(learner.qf1, self.critic, member)
        self._critic.export_(learner.qf2, self.critic, member + self.k)
        learner.log_alpha.copy_(self.log_alpha[member : member + 1])
        if learner.obs_norm is not None and self.obs_norm is not None:
            learner.obs_norm.copy_from(self.obs_norm)
        return learner

    def _stacks(self) -> dict[str, list[Tensor]]:
        """Every list of stacked tensors by its checkpoint name (SAC: targets; CrossQ: running statistics)."""
        stacks = {"actor": self.actor, "critic": self.critic,
                  "anchor_actor": self.anchor_actor, "anchor_critic": self.anchor_critic}
        if self.critic_target is not None:
            return {**stacks, "critic_target": self.critic_target}
        return {**stacks, "actor_running": self._actor.running, "critic_running": self._critic.running}

    def state_dict(self) -> dict[str, Any]:
        """Tensors (cloned, on CPU) and scalars for a checkpoint: parameters, targets or running statistics,
        optimiser states, temperatures, update counts, anchors, generators and the observation statistics."""
        state = {
            "k": self.k, "obs_dim": self.obs_dim, "act_dim": self.act_dim, **_widths(self.config),
            **{name: [t.detach().cpu().clone() for t in stack] for name, stack in self._stacks().items()},
            "log_alpha": self.log_alpha.detach().cpu().clone(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "q_optimizer": self.q_optimizer.state_dict(),
            "a_optimizer": self.a_optimizer.state_dict(),
            "updates": self.updates.clone(), "last": self.last.cpu().clone(),
            "anchor_weight": self.anchor_weight.cpu().clone(),
            "generators": [g.get_state() for g in self.generators],
            "obs_norm": None if self.obs_norm is None else self.obs_norm.state_dict(),
        }
        if self.critic_target is None:
            state |= {"actor_steps": self._actor.steps.cpu().clone(), "critic_steps": self._critic.steps.cpu().clone()}
        return state

    @torch.no_grad()
    def load_state_dict(self, d: dict[str, Any]) -> None:
        """Restore from `state_dict()`; shapes are checked before anything changes. Update counts may be
        missing (older SAC checkpoints: SAC steps its actor every update, so they change nothing)."""
        widths = _widths(self.config)
        mine = (self.k, self.obs_dim, self.act_dim, widths)
        theirs = (d["k"], d["obs_dim"], d["act_dim"], {key: list(d.get(key, [])) for key in widths})
        if mine != theirs:
            raise ValueError(f"population state (k, obs, act, widths) = {theirs}, this population is {mine}")
        stacks = self._stacks()
        for name, params in stacks.items():
            saved = d.get(name)
            if saved is None or [p.shape for p in params] != [torch.Size(s.shape) for s in saved]:
                raise ValueError(f"population state has no {name} of this population's shapes")
        if "obs_norm" in d and (self.obs_norm is None) != (d["obs_norm"] is None):
            raise ValueError("population state and this population disagree on observation normalisation")
        for name, params in stacks.items():
            for p, s in zip(params, d[name], strict=True):
                p.copy_(s)
        if self.critic_target is None:
            self._actor.steps.copy_(d["actor_steps"])
            self._critic.steps.copy_(d["critic_steps"])
        if "updates" in d:
            self.updates.copy_(d["updates"])
            self.last.copy_(d["last"])
        self.log_alpha.copy_(d["log_alpha"])
        self.anchor_weight.copy_(d["anchor_weight"])
        self._anchored[:] = torch.as_tensor(d["anchor_weight"]).cpu().numpy() > 0
        self.actor_optimizer.load_state_dict(d["actor_optimizer"])
        self.q_optimizer.load_state_dict(d["q_optimizer"])
        self.a_optimizer.load_state_dict(d["a_optimizer"])
        for g, state in zip(self.generators, d["generators"], strict=True):
            g.set_state(state)
        if self.obs_norm is not None and d.get("obs_norm") is not None:
            self.obs_norm.load_state_dict(d["obs_norm"])
