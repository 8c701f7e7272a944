"""Shared network pieces: seeded initialisation, stacked (ensemble) MLPs and the tanh-squashed Gaussian.

The single `SACLearner` and the batched `Population` draw their initial weights with the same function
and sample actions with the same function, so a population member and a single learner built from the
same seed are the same network (the equality test relies on it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def layer_sizes(in_dim: int, hidden: Sequence[int], out_dim: int) -> list[tuple[int, int]]:
    """(fan_in, fan_out) of every linear layer of an MLP."""
    dims = [in_dim, *hidden, out_dim]
    return list(zip(dims[:-1], dims[1:], strict=True))


def init_mlp(sizes: Sequence[tuple[int, int]], generator: torch.Generator) -> list[tuple[Tensor, Tensor]]:
    """Weights [out, in] and biases [out] drawn U(-1/sqrt(in), 1/sqrt(in)), like torch's nn.Linear default.

    Drawing from an explicit generator (not the global one) keeps learners reproducible and independent.
    """
    params = []
    for fan_in, fan_out in sizes:
        bound = 1.0 / math.sqrt(fan_in)
        weight = torch.empty(fan_out, fan_in).uniform_(-bound, bound, generator=generator)
        bias = torch.empty(fan_out).uniform_(-bound, bound, generator=generator)
        params.append((weight, bias))
    return params


def member_seeds(seed: int, k: int) -> list[int]:
    """Independent seeds for k learners from one run seed (the reference shared one seed, §12 item 13)."""
    children = np.random.SeedSequence(seed).spawn(k)
    return [int(c.generate_state(1, np.uint64)[0] >> np.uint64(1)) for c in children]


def stacked_mlp(x: Tensor, weights: Sequence[Tensor], biases: Sequence[Tensor]) -> Tensor:
    """E independent MLPs in one go: x [E, B, in], weights [E, in, out], biases [E, 1, out] -> [E, B, out].

    One `baddbmm` per layer runs the whole ensemble as a single batched matmul (ReLU between layers).
    """
    last = len(weights) - 1
    for i, (weight, bias) in enumerate(zip(weights, biases, strict=True)):
        x = torch.baddbmm(bias, x, weight)
        if i < last:
            x = torch.relu(x)
    return x


def squashed_gaussian(
    mean: Tensor, log_std: Tensor, noise: Tensor, log_std_bounds: tuple[float, float]
) -> tuple[Tensor, Tensor]:
    """Reparameterised tanh-Gaussian action and its log-probability (summed over action dims).

    `noise` is a standard normal draw, so u = mean + std * noise and (u - mean) / std = noise exactly.
    The change-of-variables term uses the reference's -log(1 - tanh(u)^2 + 1e-6) (lares-reference §9).
    """
    log_std = log_std.clamp(*log_std_bounds)
    u = mean + log_std.exp() * noise
    action = torch.tanh(u)
    gaussian_log_prob = -0.5 * noise.pow(2) - log_std - _LOG_SQRT_2PI
    log_prob = (gaussian_log_prob - torch.log(1.0 - action.pow(2) + 1e-6)).sum(-1)
    return action, log_prob


class StackedAdam:
    """Adam over stacked tensors whose leading axis indexes ensemble members ("rows").

    Adam is elementwise, so one update of a stacked tensor equals separate Adam updates of its rows, with
    torch's defaults (betas 0.9/0.999, eps 1e-8). Step counts are kept per row, so rows updated on
    different schedules (or copied from another row by `inherit`) keep correct bias corrections. An
    optional per-row pull toward anchor tensors adds the gradient of w_e * ||theta_e - anchor_e||^2
    (LaRes' parameter constraint) without temporaries: grad -= 2 w anchor, then weight decay 2 w.
    Uses torch's fused Adam kernel where available (one pass over memory instead of about eight).
    """

    def __init__(self, params: Sequence[Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, *, fused: bool | None = None):
        self.lr, self.betas, self.eps = lr, betas, eps
        self.fused = hasattr(torch, "_fused_adam_") if fused is None else fused
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]
        self.step = torch.zeros(params[0].shape[0], device=params[0].device)  # float32, as torch's Adam

    @torch.no_grad()
    def update_(self, params: Sequence[Tensor], grads: Sequence[Tensor], rows: Tensor | None = None,
                pull: tuple[Sequence[Tensor], Tensor] | None = None) -> None:
        """One Adam step, in place, of `params` (all rows of the stacks, or the given `rows`).

        With `rows`, `params`, `grads` and the pull's anchors hold only those rows (gathered by the
        caller); the optimiser state rows are gathered here and written back. `pull` is
        (anchors, weight [rows]); `grads` are modified in place.
        """
        if rows is None:
            exp_avg, exp_avg_sq, step = self.exp_avg, self.exp_avg_sq, self.step
        else:
            exp_avg = [m[rows] for m in self.exp_avg]
            exp_avg_sq = [v[rows] for v in self.exp_avg_sq]
            step = self.step[rows]
        step += 1
        weights = [0.0] * step.shape[0] if pull is None else pull[1].tolist()
        for w in sorted(set(weights)):
            sel = [r for r, wr in enumerate(weights) if wr == w]
            if w > 0:
                assert pull is not None
                for grad, anchor in zip(grads, pull[0], strict=True):
                    for r in sel:
                        grad[r].add_(anchor[r], alpha=-2.0 * w)
            group = (params, grads, exp_avg, exp_avg_sq)
            if self.fused:
                p, g, m, v = ([t[r] for t in ts for r in sel] for ts in group)
                steps = [step[r] for _ in params for r in sel]
                torch._fused_adam_(p, g, m, v, [], steps, lr=self.lr, beta1=self.betas[0],
                                   beta2=self.betas[1], weight_decay=2.0 * w, eps=self.eps,
                                   amsgrad=False, maximize=False)
            else:
                index = torch.tensor(sel, device=step.device)
                self._plain_step(*group, step, index, 2.0 * w)
        if rows is not None:
            for full, part in zip(self.exp_avg + self.exp_avg_sq, exp_avg + exp_avg_sq, strict=True):
                full[rows] = part
            self.step[rows] = step

    def _plain_step(self, params: Sequence[Tensor], grads: Sequence[Tensor], exp_avg: Sequence[Tensor],
                    exp_avg_sq: Sequence[Tensor], step: Tensor, index: Tensor, weight_decay: float) -> None:
        """torch.optim.Adam's single-tensor update on rows `index` (fallback without the fused kernel)."""
        beta1, beta2 = self.betas
        step64 = step[index].double()
        step_size = (self.lr / (1.0 - beta1**step64)).float()
        bias_correction2_sqrt = (1.0 - beta2**step64).sqrt().float()
        for param, grad, m, v in zip(params, grads, exp_avg, exp_avg_sq, strict=True):
            shape = (-1,) + (1,) * (param.dim() - 1)
            p, g, mr, vr = param[index], grad[index], m[index], v[index]
            if weight_decay:
                g = g.add(p, alpha=weight_decay)
            mr.lerp_(g, 1.0 - beta1)
            vr.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
            denom = (vr.sqrt() / bias_correction2_sqrt.view(shape)).add_(self.eps)
            p.addcdiv_(mr * step_size.view(shape), denom, value=-1.0)
            param[index], m[index], v[index] = p, mr, vr

    @torch.no_grad()
    def copy_rows_(self, dst: Tensor, src: Tensor) -> None:
        """Copy the state of rows `src` into rows `dst` (same length)."""
        for state in self.exp_avg + self.exp_avg_sq:
            state[dst] = state[src]
        self.step[dst] = self.step[src]

    def state_dict(self) -> dict[str, Any]:
        """Clones of the moments and step counts."""
        return {
            "exp_avg": [m.detach().cpu().clone() for m in self.exp_avg],
            "exp_avg_sq": [v.detach().cpu().clone() for v in self.exp_avg_sq],
            "step": self.step.cpu().clone(),
        }

    @torch.no_grad()
    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        """Restore from `state_dict()` (shapes must match)."""
        for mine, theirs in zip(self.exp_avg + self.exp_avg_sq, [*d["exp_avg"], *d["exp_avg_sq"]],
                                strict=True):
            mine.copy_(theirs)
        self.step.copy_(d["step"])


@torch.no_grad()
def pull_loss(params: Sequence[Tensor], anchors: Sequence[Tensor], weight: Tensor) -> Tensor:
    """w_e * sum ||theta_e - anchor_e||^2 per row e, computed only for rows with w_e > 0."""
    loss = torch.zeros_like(weight)
    for r in torch.nonzero(weight > 0).flatten().tolist():
        total = sum(torch.dist(p[r], a[r]).square() for p, a in zip(params, anchors, strict=True))
        loss[r] = weight[r] * total
    return loss
