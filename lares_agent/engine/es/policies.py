"""Small deterministic policies stored as flat parameter vectors, evaluated for many vectors at once.

ES perturbs a flat vector, so the policy is a pure function ``act(spec, params [P, D], obs [P, E, obs_dim])``
that unpacks P parameter vectors into batched weight tensors and runs one ``einsum`` per layer: all P
perturbations (times E environments each) act in a single numpy call instead of P*E small ones.

Observation normalisation (Salimans et al. 2017 §2.2, "virtual batch"-free variant) is a running mean/var
kept in an immutable ``RunningNorm``: it is updated from rollout observations by the caller and applied to
every member alike, so it never adds a difference between antithetic twins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PolicyBatch", "PolicySpec", "RunningNorm", "act", "init_params", "num_params"]


@dataclass(frozen=True)
class PolicySpec:
    """A tanh MLP (``hidden=()`` gives a linear policy) with actions in [-1, 1] (policy space).

    Actions are mapped onto the env's Box by ``engine.rollout.to_env_action``, as for SAC, so both learners
    hand the features the same env-space actions.
    """

    obs_dim: int
    act_dim: int
    hidden: tuple[int, ...] = ()

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return (self.obs_dim, *self.hidden, self.act_dim)


def num_params(spec: PolicySpec) -> int:
    """Length of the flat parameter vector (weights then bias, layer by layer)."""
    s = spec.layer_sizes
    return sum(s[i] * s[i + 1] + s[i + 1] for i in range(len(s) - 1))


def init_params(spec: PolicySpec, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    """Scaled-normal hidden weights (fan-in) and a zero output layer: the first policy outputs 0 (box centre).

    A zero output layer is the usual ES start (Salimans et al. use small output weights): the initial
    policy is calm, and the first generations explore around it instead of around saturated actions.
    """
    s = spec.layer_sizes
    parts: list[np.ndarray] = []
    for i in range(len(s) - 1):
        last = i == len(s) - 2
        w = np.zeros((s[i + 1], s[i])) if last else rng.standard_normal((s[i + 1], s[i])) * scale / np.sqrt(s[i])
        parts += [w.reshape(-1), np.zeros(s[i + 1])]
    return np.concatenate(parts)


def _unpack(spec: PolicySpec, params: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    s = spec.layer_sizes
    p = params.shape[0]
    out, k = [], 0
    for i in range(len(s) - 1):
        n_w = s[i] * s[i + 1]
        w = params[:, k : k + n_w].reshape(p, s[i + 1], s[i])
        k += n_w
        b = params[:, k : k + s[i + 1]]
        k += s[i + 1]
        out.append((w, b))
    return out


def act(spec: PolicySpec, params: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """Actions in [-1, 1] for P parameter vectors on E observations each: [P, D], [P, E, obs_dim] -> [P, E, A]."""
    params = np.asarray(params, dtype=np.float64)
    if params.ndim != 2 or params.shape[1] != num_params(spec):
        raise ValueError(f"params must be [P, {num_params(spec)}], got {params.shape}")
    h = np.asarray(obs, dtype=np.float64)
    for w, b in _unpack(spec, params):
        h = np.tanh(np.einsum("pei,poi->peo", h, w) + b[:, None, :])
    return h


@dataclass(frozen=True)
class RunningNorm:
    """Running observation mean/variance (parallel Welford); ``apply`` standardises and clips to ±clip."""

    mean: np.ndarray
    var: np.ndarray
    count: float
    clip: float = 5.0

    @classmethod
    def create(cls, dim: int, clip: float = 5.0) -> RunningNorm:
        return cls(mean=np.zeros(dim), var=np.ones(dim), count=1e-4, clip=clip)

    def update(self, batch: np.ndarray) -> RunningNorm:
        """Merge the rows of ``batch`` [N, dim] into the statistics (Chan et al. parallel variance)."""
        x = np.asarray(batch, dtype=np.float64).reshape(-1, self.mean.size)
        n = x.shape[0]
        if n == 0:
            return self
        b_mean, b_var = x.mean(axis=0), x.var(axis=0)
        tot = self.count + n
        delta = b_mean - self.mean
        mean = self.mean + delta * n / tot
        m2 = self.var * self.count + b_var * n + delta**2 * self.count * n / tot
        return RunningNorm(mean=mean, var=m2 / tot, count=tot, clip=self.clip)

    def apply(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(np.clip((obs - self.mean) / np.sqrt(self.var + 1e-8), -self.clip, self.clip))

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "var": self.var, "count": float(self.count), "clip": float(self.clip)}

    @classmethod
    def from_state_dict(cls, d: dict[str, Any]) -> RunningNorm:
        return cls(mean=np.asarray(d["mean"], dtype=np.float64), var=np.asarray(d["var"], dtype=np.float64),
                   count=float(d["count"]), clip=float(d["clip"]))


@dataclass(frozen=True)
class PolicyBatch:
    """One parameter vector per sub-env as a picklable policy ``obs [N, obs_dim] -> actions [N, act_dim]``.

    Plain data (no closure), so it can be sent to rollout worker processes; ``chunk`` gives the policy of a
    contiguous block of sub-envs. Every backend acts through this one code path, so their numbers agree.
    """

    spec: PolicySpec
    params: np.ndarray
    """[N, D]: the parameters acting in sub-env n."""
    norm: RunningNorm | None = None

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        o = self.norm.apply(obs) if self.norm is not None else np.asarray(obs, dtype=np.float64)
        return act(self.spec, self.params, o[:, None, :])[:, 0]

    def chunk(self, start: int, stop: int) -> PolicyBatch:
        return PolicyBatch(self.spec, self.params[start:stop], self.norm)
