"""Running observation normalisation, shared by the SAC and CrossQ learners.

Observations of MetaWorld mix positions (about 0.1 m), quaternions and a goal that is constant within an
episode; scaling each dimension to zero mean and unit variance over the collected data makes one learning
rate fit all of them. The statistics come only from data the loop collects (`update`), never from a
learner's update or an evaluation, so evaluation sees frozen statistics and a minibatch is normalised the
same way for every member that samples it.

One normaliser per population, not one per member: all members learn from the same shared buffer
(docs/lares-reference.md §4), so per-member copies updated from the same data would be identical. Inheriting
a learner therefore inherits its normalisation trivially, and the normaliser is saved once in the
population's checkpoint. A single reference learner owns its own instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["ObsNormalizer"]


class ObsNormalizer:
    """Mean and variance of every observation dimension over all rows seen, merged batch by batch.

    The merge is the parallel-variance formula of Chan, Golub and LeVeque (1979), in float64, so the
    result equals the statistics of all rows at once (up to rounding) whatever the batch sizes.
    `normalize` returns (obs - mean) / sqrt(var + eps), clipped to +-clip; before any data it is the
    identity (mean 0, variance 1).
    """

    def __init__(self, dim: int, clip: float = 10.0, eps: float = 1e-8) -> None:
        if dim < 1 or clip <= 0 or eps <= 0:
            raise ValueError(f"need dim >= 1, clip > 0, eps > 0; got {dim}, {clip}, {eps}")
        self.dim, self.clip, self.eps = dim, clip, eps
        self.count = 0
        self.mean = np.zeros(dim, np.float64)
        self.m2 = np.zeros(dim, np.float64)  # sum of squared deviations from the mean
        self._cache: dict[torch.device, tuple[Tensor, Tensor]] = {}

    @property
    def var(self) -> np.ndarray:
        """Population variance per dimension (1 before any data)."""
        return self.m2 / self.count if self.count > 0 else np.ones(self.dim)

    def update(self, obs: np.ndarray) -> None:
        """Merge the rows of `obs` [N, dim] into the statistics (non-finite rows are skipped)."""
        x = np.asarray(obs, np.float64).reshape(-1, self.dim)
        x = x[np.all(np.isfinite(x), axis=1)]
        n = x.shape[0]
        if n == 0:
            return
        batch_mean = x.mean(0)
        batch_m2 = ((x - batch_mean) ** 2).sum(0)
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + batch_m2 + delta**2 * (self.count * n / total)
        self.count = total
        self._cache.clear()

    def normalize(self, obs: Tensor) -> Tensor:
        """(obs - mean) / std, clipped; float32, on obs' device, no statistics change."""
        if obs.device not in self._cache:
            mean = torch.as_tensor(self.mean, dtype=torch.float32, device=obs.device)
            inv_std = torch.as_tensor(1.0 / np.sqrt(self.var + self.eps), dtype=torch.float32, device=obs.device)
            self._cache[obs.device] = (mean, inv_std)
        mean, inv_std = self._cache[obs.device]
        return ((obs - mean) * inv_std).clamp(-self.clip, self.clip)

    def copy_from(self, other: ObsNormalizer) -> None:
        """Take over another normaliser's statistics (e.g. a single learner inheriting from another)."""
        self.load_state_dict(other.state_dict())

    def state_dict(self) -> dict[str, Any]:
        """Copies of the statistics (float64) and settings."""
        return {"dim": self.dim, "clip": self.clip, "eps": self.eps, "count": self.count,
                "mean": self.mean.copy(), "m2": self.m2.copy()}

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        """Restore from `state_dict()` (the dimension must match)."""
        if int(d["dim"]) != self.dim:
            raise ValueError(f"observation normaliser of dim {d['dim']}, this one has dim {self.dim}")
        self.clip, self.eps, self.count = float(d["clip"]), float(d["eps"]), int(d["count"])
        self.mean = np.array(d["mean"], np.float64)
        self.m2 = np.array(d["m2"], np.float64)
        self._cache.clear()
