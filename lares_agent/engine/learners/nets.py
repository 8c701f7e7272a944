"""Shared network pieces: seeded initialisation, stacked (ensemble) MLPs, the tanh-squashed Gaussian, and the
row bookkeeping of a population's stacks (which rows a member set is, gathering and writing back rows).

The single learners and the batched `ActorCriticPopulation` draw their initial weights with the same function
and sample actions with the same function, so a population member and a single learner built from the
same seed are the same network (the equality test relies on it).
"""

from __future__ import annotations

import ctypes
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_NARROW = 16  # output widths below this take the transposed matmul path in `stacked_mlp`


def layer_sizes(in_dim: int, hidden: Sequence[int], out_dim: int) -> list[tuple[int, int]]:
    """(fan_in, fan_out) of every linear layer of an MLP."""
    dims = [in_dim, *hidden, out_dim]
    return list(itertools.pairwise(dims))


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


MLPParams = list[tuple[Tensor, Tensor]]


def init_members(seed: int, k: int, actor_sizes: Sequence[tuple[int, int]], critic_sizes: Sequence[tuple[int, int]]
                 ) -> tuple[list[torch.Generator], list[MLPParams], list[MLPParams], list[MLPParams]]:
    """K members' generators, actors and twin critics. Member k draws actor, qf1, qf2 in that order from a
    generator seeded with ``member_seeds(seed, k)[k]``: the order the single learners use, so a population's
    member starts where a single learner of that seed does."""
    generators: list[torch.Generator] = []
    actors, qf1s, qf2s = [], [], []
    for member_seed in member_seeds(seed, k):
        generator = torch.Generator().manual_seed(member_seed)
        actors.append(init_mlp(actor_sizes, generator))
        qf1s.append(init_mlp(critic_sizes, generator))
        qf2s.append(init_mlp(critic_sizes, generator))
        generators.append(generator)
    return generators, actors, qf1s, qf2s


def stacked_mlp(
    x: Tensor, weights: Sequence[Tensor], biases: Sequence[Tensor], layer_norm: bool = False
) -> Tensor:
    """E independent MLPs in one go: x [E, B, in], weights [E, in, out], biases [E, 1, out] -> [E, B, out].

    One `baddbmm` per layer runs the whole ensemble as a single batched matmul (ReLU between layers;
    with `layer_norm`, a LayerNorm without affine parameters before each ReLU, as the single learner's).
    """
    last = len(weights) - 1
    for i, (weight, bias) in enumerate(zip(weights, biases, strict=True)):
        narrow = weight.shape[-1] < _NARROW  # the Q and actor heads
        x = _NarrowLinear.apply(x, weight, bias) if narrow else torch.baddbmm(bias, x, weight)  # type: ignore[no-untyped-call]
        if i < last:
            if layer_norm:
                x = torch.nn.functional.layer_norm(x, x.shape[-1:])
            x = torch.relu(x)
    return x


class _NarrowLinear(torch.autograd.Function):
    """x @ W + b for a narrow output (Q head, actor head) in the orientations CPU matmuls are fast in.

    The forward runs as (W^T x^T)^T: CPU bmm is 2-4x slower for an output of fewer than 16 columns. Autograd's
    backward of that form would hand the input's gradient on transposed, and every elementwise pass over it
    (the ReLU's backward first) walks it across the grain, many times slower than over contiguous memory; this
    backward computes it as g W^T, contiguous, and the weight's as (g^T x)^T.
    """

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        ctx.save_for_backward(x, weight)
        return torch.baddbmm(bias.transpose(1, 2), weight.transpose(1, 2), x.transpose(1, 2)).transpose(1, 2)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, *grads: Tensor) -> tuple[Tensor | None, ...]:
        grad = grads[0]
        x, weight = ctx.saved_tensors  # type: ignore[attr-defined]
        need_x, need_w, need_b = ctx.needs_input_grad  # type: ignore[attr-defined]
        dx = torch.bmm(grad, weight.transpose(1, 2)) if need_x else None
        dw = torch.bmm(grad.transpose(1, 2), x).transpose(1, 2) if need_w else None
        db = grad.sum(1, keepdim=True) if need_b else None
        return dx, dw, db


def squashed_gaussian(
    mean: Tensor, log_std: Tensor, noise: Tensor, log_std_bounds: tuple[float, float]
) -> tuple[Tensor, Tensor]:
    """Reparameterised tanh-Gaussian action and its log-probability (summed over action dims).

    `noise` is a standard normal draw, so u = mean + std * noise and (u - mean) / std = noise exactly.
    The change-of-variables term uses the reference's -log(1 - tanh(u)^2 + 1e-6) (docs/lares-reference.md §9).
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

    The state lives on the parameters' device; a copy of the step counts in host memory decides between the two
    kernel paths without reading the device (a read waits for the GPU, and `meta` tensors have no values).
    Rows are given as a tensor or as a list of indices; a list is what keeps the host copy free to index.
    """

    def __init__(self, params: Sequence[Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, *, fused: bool | None = None):
        self.lr, self.betas, self.eps = lr, betas, eps
        self.fused = hasattr(torch, "_fused_adam_") if fused is None else fused
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]
        self.step = torch.zeros(params[0].shape[0], device=params[0].device)  # float32, as torch's Adam
        self._host_step = np.zeros(params[0].shape[0], np.int64)  # = self.step, in host memory

    def _rows(self, rows: Tensor | Sequence[int] | None) -> tuple[Tensor | None, list[int] | None]:
        """Rows as an index tensor on the state's device and as host indices (None, None: every row)."""
        if rows is None:
            return None, None
        host = rows.tolist() if isinstance(rows, Tensor) else [int(r) for r in rows]
        index = rows.to(self.step.device) if isinstance(rows, Tensor) else torch.as_tensor(
            host, dtype=torch.long, device=self.step.device)
        return index, host

    @torch.no_grad()
    def update_(self, params: Sequence[Tensor], grads: Sequence[Tensor], rows: Tensor | Sequence[int] | None = None,
                pull: tuple[Sequence[Tensor], Tensor] | None = None) -> Tensor | None:
        """One Adam step, in place, of `params` (all rows of the stacks, or the given `rows`).

        With `rows`, `params`, `grads` and the pull's anchors hold only those rows (gathered by the
        caller); the optimiser state rows are gathered here and written back. `pull` is
        (anchors, weight [rows]); `grads` are modified in place. Returns the pull's loss per row
        (w * ||theta - anchor||^2 before the step), or None without a pull.
        """
        index, host = self._rows(rows)
        if index is None:
            exp_avg, exp_avg_sq, step = self.exp_avg, self.exp_avg_sq, self.step
        else:
            exp_avg = [m[index] for m in self.exp_avg]
            exp_avg_sq = [v[index] for v in self.exp_avg_sq]
            step = self.step[index]
        step += 1
        host_step = self._host_step if host is None else self._host_step[host]
        self._host_step[slice(None) if host is None else host] += 1
        loss = None
        if pull is not None:  # grad += d/dtheta of w ||theta - anchor||^2 = 2 w (theta - anchor)
            anchors, weight = pull
            squared = torch.zeros_like(weight)
            for param, grad, anchor in zip(params, grads, anchors, strict=True):
                diff = param - anchor
                grad.addcmul_(diff, 2.0 * weight.view((-1,) + (1,) * (param.dim() - 1)))
                squared += torch.linalg.vector_norm(diff.flatten(1), dim=1).square()
            loss = weight * squared
        if not self.fused:
            self._plain_step(params, grads, exp_avg, exp_avg_sq, step)
        elif bool((host_step == host_step[0]).all()):  # the usual case: one fused call over whole stacks
            self._fused_step(params, grads, exp_avg, exp_avg_sq, [step[0]] * len(params))
        else:  # rows at different step counts: one fused call over row views
            p, g, m, v = ([t[r] for t in ts for r in range(step.shape[0])]
                          for ts in (params, grads, exp_avg, exp_avg_sq))
            self._fused_step(p, g, m, v, [step[r] for _ in params for r in range(step.shape[0])])
        if index is not None:
            for full, part in zip(self.exp_avg + self.exp_avg_sq, exp_avg + exp_avg_sq, strict=True):
                full[index] = part
            self.step[index] = step
        return loss

    def _fused_step(self, params: Sequence[Tensor], grads: Sequence[Tensor], exp_avg: Sequence[Tensor],
                    exp_avg_sq: Sequence[Tensor], steps: Sequence[Tensor]) -> None:
        """torch's fused Adam kernel (the one behind `torch.optim.Adam(fused=True)`); steps already +1.

        The kernel walks raw memory, so every tensor must be contiguous: gradients of the narrow layers
        arrive transposed (see `stacked_mlp`) and are copied here (they are small).
        """
        grads = [g.contiguous() for g in grads]
        torch._fused_adam_(list(params), grads, list(exp_avg), list(exp_avg_sq), [], list(steps),
                           lr=self.lr, beta1=self.betas[0], beta2=self.betas[1], weight_decay=0.0,
                           eps=self.eps, amsgrad=False, maximize=False)

    def _plain_step(self, params: Sequence[Tensor], grads: Sequence[Tensor], exp_avg: Sequence[Tensor],
                    exp_avg_sq: Sequence[Tensor], step: Tensor) -> None:
        """torch.optim.Adam's single-tensor update with per-row bias corrections (fallback)."""
        beta1, beta2 = self.betas
        step64 = step.double()
        step_size = (self.lr / (1.0 - beta1**step64)).float()
        bias_correction2_sqrt = (1.0 - beta2**step64).sqrt().float()
        for param, grad, m, v in zip(params, grads, exp_avg, exp_avg_sq, strict=True):
            shape = (-1,) + (1,) * (param.dim() - 1)
            m.lerp_(grad, 1.0 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
            denom = (v.sqrt() / bias_correction2_sqrt.view(shape)).add_(self.eps)
            param.addcdiv_(m * step_size.view(shape), denom, value=-1.0)

    @torch.no_grad()
    def copy_rows_(self, dst: Tensor | Sequence[int], src: Tensor | Sequence[int]) -> None:
        """Copy the state of rows `src` into rows `dst` (same length)."""
        (d, dst_host), (s, src_host) = self._rows(dst), self._rows(src)
        for state in self.exp_avg + self.exp_avg_sq:
            state[d] = state[s]
        self.step[d] = self.step[s]
        self._host_step[dst_host] = self._host_step[src_host]

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
        self._host_step[:] = torch.as_tensor(d["step"]).cpu().round().long().numpy()


def reuse_freed_memory() -> bool:
    """Ask glibc malloc to keep freed blocks for reuse instead of handing them back to the OS.

    Each update allocates dozens of same-sized activation tensors (about 1 MB each); by default glibc
    returns such blocks to the OS and the next update page-faults them in again (its cost: docs/RESULTS.md, "Two
    process settings: torch threads and freed memory"). Process-wide (it only changes when memory is returned to
    the OS); a no-op returning False where glibc is not the allocator.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        mmap_ok = libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024)  # glibc's maximum on 64-bit
        trim_ok = libc.mallopt(m_trim_threshold, 1024 * 1024 * 1024)
        return bool(mmap_ok and trim_ok)
    except (OSError, AttributeError):
        return False


def to_host(t: Tensor) -> np.ndarray:
    """``t`` as a numpy array in host memory. A ``meta`` tensor (shapes without values: a population built on the
    meta device shows where its tensors go without computing) gives NaNs of its shape."""
    if t.device.type == "meta":
        return np.full(tuple(t.shape), np.nan, np.float32)
    return np.asarray(t.detach().cpu().numpy())


def check_members(members: Sequence[int], k: int) -> None:
    """Raise ValueError unless ``members`` are distinct indices of a population of ``k``."""
    if len(set(members)) != len(members) or not all(0 <= m < k for m in members):
        raise ValueError(f"members must be distinct indices in 0..{k - 1}, got {list(members)}")


def member_rows(members: Sequence[int], k: int, device: torch.device) -> tuple[Tensor | None, Tensor | None]:
    """Row indices of the members in the actor stack [K] and the twin-critic stack [2K] (critic c of member m is
    row c*K + m); (None, None) for all members in order, which then use the stacks themselves."""
    if list(members) == list(range(k)):
        return None, None
    rows = torch.as_tensor(members, dtype=torch.long, device=device)
    return rows, torch.cat([rows, rows + k])


def gather_rows(stack: Sequence[Tensor], rows: Tensor | None) -> list[Tensor]:
    """The given rows of every stacked tensor as fresh leaves (the stacks themselves for all rows)."""
    if rows is None:
        return list(stack)
    return [t.detach()[rows].requires_grad_(t.requires_grad) for t in stack]


@torch.no_grad()
def scatter_rows(full: Sequence[Tensor], part: Sequence[Tensor], rows: Tensor | None) -> None:
    """Write gathered rows back (nothing to do when the stacks themselves were used)."""
    if rows is not None:
        for f, p in zip(full, part, strict=True):
            f[rows] = p
