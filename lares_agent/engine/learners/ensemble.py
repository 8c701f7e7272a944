"""E stacked networks for a batched population: every weight matrix of the E networks is one tensor [E, in, out],
so a layer of all of them is one `torch.baddbmm` (`nets.stacked_mlp`). With batch renormalisation (CrossQ) each
row also keeps its own running statistics and its own count of train-mode forwards, and its batch statistics are
taken over its own rows of the input only (the reduction runs over dim 1 of [E, N, F]), so a row behaves exactly
like one `crossq.BatchRenorm` network.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from lares_agent.engine.learners.crossq import BatchRenorm, CrossQConfig, batch_renorm
from lares_agent.engine.learners.nets import stacked_mlp

__all__ = ["Ensemble", "detached_rows"]


def detached_rows(stack: Sequence[Tensor], rows: Tensor | None) -> list[Tensor]:
    """The given rows of every stacked tensor, detached, for forwards without gradients."""
    return [t.detach() if rows is None else t.detach()[rows] for t in stack]


class Ensemble:
    """E stacked networks: parameters (leaves), and with batch renormalisation the running statistics of
    every layer and per-row counts of train-mode forwards."""

    def __init__(self, per_member: list[list[tuple[Tensor, Tensor]]], device: torch.device, *,
                 renorm: CrossQConfig | None = None, layer_norm: bool = False):
        """`renorm`: batch renormalisation before every linear layer with these settings; `layer_norm`: a
        LayerNorm without parameters before every hidden ReLU (SAC's critic option)."""
        e = len(per_member)
        self.renorm, self.layer_norm = renorm, layer_norm
        params: list[Tensor] = []
        self.running: list[Tensor] = []
        for layer in zip(*per_member, strict=True):
            fan_in = layer[0][0].shape[1]
            if renorm is not None:
                params += [torch.ones(e, 1, fan_in), torch.zeros(e, 1, fan_in)]
                self.running += [torch.zeros(e, 1, fan_in, device=device), torch.ones(e, 1, fan_in, device=device)]
            params += [torch.stack([w.t() for w, _ in layer]), torch.stack([b[None] for _, b in layer])]
        self.params = [p.to(device).contiguous().requires_grad_() for p in params]
        self.steps = torch.zeros(e, dtype=torch.long, device=device)

    def forward(self, x: Tensor, params: Sequence[Tensor], running: Sequence[Tensor], steps: Tensor | None,
                training: bool) -> Tensor:
        """x [E, N, in] -> [E, N, out] through the given rows' `params` (W, b per layer; with renormalisation
        scale, shift, W, b) and `running` (mean, var per layer, updated in place in training). `steps` [E]
        (training only) counts each row's earlier train-mode forwards; `advance_` moves it on."""
        if self.renorm is None:
            return stacked_mlp(x, params[0::2], params[1::2], self.layer_norm)
        layers = len(params) // 4
        for i in range(layers):
            scale, shift, weight, bias = params[4 * i : 4 * i + 4]
            x = batch_renorm(x, scale, shift, running[2 * i], running[2 * i + 1], steps, self.renorm, training)
            x = stacked_mlp(x, [weight], [bias])
            if i < layers - 1:
                x = torch.relu(x)
        return x

    @torch.no_grad()
    def advance_(self, rows: Tensor | None) -> None:
        """Count one train-mode forward of the given rows (all rows for None)."""
        if self.running:
            self.steps[slice(None) if rows is None else rows] += 1

    @torch.no_grad()
    def copy_rows_(self, dst: Tensor, src: Tensor) -> None:
        """Running statistics and forward counts of rows `src` into rows `dst` (parameters: the caller)."""
        for t in self.running:
            t[dst] = t[src]
        self.steps[dst] = self.steps[src]

    @torch.no_grad()
    def export_(self, module: torch.nn.Module, params: Sequence[Tensor], row: int) -> None:
        """Copy row `row` of `params` (these stacks or a copy of them) and of the statistics into a single
        learner's network of nn.Linear (and `BatchRenorm`) layers."""
        linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
        norms = [m for m in module.modules() if isinstance(m, BatchRenorm)]
        per = 4 if self.renorm is not None else 2
        for i, linear in enumerate(linears):
            p = params[per * i : per * (i + 1)]
            linear.weight.copy_(p[-2][row].t())
            linear.bias.copy_(p[-1][row, 0])
            if norms:
                norms[i].scale.copy_(p[0][row])
                norms[i].shift.copy_(p[1][row])
                norms[i].running_mean.copy_(self.running[2 * i][row])
                norms[i].running_var.copy_(self.running[2 * i + 1][row])
                norms[i].steps.copy_(self.steps[row])
