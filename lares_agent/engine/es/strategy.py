"""OpenAI-ES (Salimans et al. 2017) as pure functions over an explicit state: ``init / ask / tell``.

The shape follows evosax / EvoTorch's functional API (docs/style-anchors.md §1.5): the configuration is static,
everything that changes lives in an immutable ``ESState``, randomness comes in as an ``np.random.Generator``
on every call, and no function keeps hidden globals. Unlike evosax we *maximise* fitness (RL returns).

One generation::

    population, state = ask(config, state, rng)        # [P, D] antithetic perturbations of state.mean
    fitness = evaluate(population)                      # [P], higher is better
    state, metrics = tell(config, state, population, fitness)

Details that matter for RL (Salimans et al. §2.1–2.3): antithetic (mirrored) noise halves the gradient
variance; centred ranks make the step invariant to the scale of the reward (LLM rewards have arbitrary
scales, docs/DESIGN.md §3); weight decay keeps parameters small; the learning rate is cosine-annealed as the seed
text recommends ("ES 学习率应采用余弦退火调度").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from lares_agent.errors import ConfigError

__all__ = [
    "ESConfig",
    "ESConfigError",
    "ESState",
    "ask",
    "centered_ranks",
    "cosine_lr",
    "es_gradient",
    "init",
    "tell",
]


class ESConfigError(ConfigError):
    """An ES setting is out of range; ``reason`` says which and why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ESConfig:
    """Static OpenAI-ES settings (defaults from Salimans et al. 2017 where they give one)."""

    population_size: int = 32
    """Perturbations per generation; even, because they come in antithetic pairs."""
    sigma: float = 0.05
    """Standard deviation of the Gaussian parameter noise."""
    learning_rate: float = 0.03
    """Initial step size of the optimiser."""
    final_learning_rate: float = 0.003
    """Step size reached at the end of the cosine schedule."""
    total_generations: int = 200
    """Length of the cosine schedule; later generations keep ``final_learning_rate``."""
    optimizer: Literal["adam", "sgd"] = "adam"
    momentum: float = 0.9
    """SGD momentum (ignored by Adam)."""
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.005
    """L2 coefficient added to the (ascent) gradient, as the OpenAI-ES ``l2coeff``."""
    rank_shaping: bool = True
    """Centred-rank fitness shaping; off means raw z-scored fitness."""
    normalize_obs: bool = True
    """Used by policy rollouts (``policies.RunningNorm``); the core ES ignores it."""

    def __post_init__(self) -> None:
        if self.population_size < 2 or self.population_size % 2:
            raise ESConfigError(f"population_size must be an even number >= 2, got {self.population_size}")
        if not self.sigma > 0:
            raise ESConfigError(f"sigma must be > 0, got {self.sigma}")
        if not (self.learning_rate > 0 and self.final_learning_rate >= 0):
            raise ESConfigError("learning rates must be positive (final may be 0)")
        if self.total_generations < 1:
            raise ESConfigError(f"total_generations must be >= 1, got {self.total_generations}")
        if self.optimizer not in ("adam", "sgd"):
            raise ESConfigError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        if self.weight_decay < 0:
            raise ESConfigError(f"weight_decay must be >= 0, got {self.weight_decay}")


@dataclass(frozen=True)
class ESState:
    """Everything that changes between generations. Arrays are never mutated in place."""

    mean: np.ndarray
    """Current search-distribution centre (the policy parameters), float64 [D]."""
    m: np.ndarray
    """Adam first moment, or the SGD velocity."""
    v: np.ndarray
    """Adam second moment (zeros for SGD)."""
    generation: int
    best_fitness: float
    """Best fitness of any evaluated perturbation so far (-inf before the first tell)."""
    best_params: np.ndarray

    def state_dict(self) -> dict[str, Any]:
        """Plain arrays and scalars, for ``engine/state/checkpoint.py`` (no pickle)."""
        return {
            "mean": self.mean, "m": self.m, "v": self.v, "generation": self.generation,
            "best_fitness": float(self.best_fitness), "best_params": self.best_params,
        }

    @classmethod
    def from_state_dict(cls, d: dict[str, Any]) -> ESState:
        """Inverse of :meth:`state_dict`."""
        return cls(
            mean=np.asarray(d["mean"], dtype=np.float64), m=np.asarray(d["m"], dtype=np.float64),
            v=np.asarray(d["v"], dtype=np.float64), generation=int(d["generation"]),
            best_fitness=float(d["best_fitness"]), best_params=np.asarray(d["best_params"], dtype=np.float64),
        )


def init(config: ESConfig, mean: np.ndarray) -> ESState:
    """Start a search centred on ``mean`` (a flat parameter vector) with zeroed optimiser moments."""
    del config  # the state layout does not depend on it; kept for the evosax-style signature
    x = np.array(mean, dtype=np.float64).reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ESConfigError("initial mean must be a non-empty finite vector")
    zeros = np.zeros_like(x)
    return ESState(mean=x, m=zeros, v=zeros.copy(), generation=0, best_fitness=-math.inf, best_params=x.copy())


def cosine_lr(generation: int, total: int, initial: float, final: float) -> float:
    """Cosine annealing from ``initial`` (generation 0) to ``final`` (generation ``total`` and after)."""
    t = min(max(generation, 0), total) / max(total, 1)
    return final + 0.5 * (initial - final) * (1.0 + math.cos(math.pi * t))


def centered_ranks(fitness: np.ndarray) -> np.ndarray:
    """Ranks mapped linearly onto [-0.5, 0.5] (Salimans et al. 2017); ties share their mean rank.

    Rank shaping makes the update depend only on the order of the returns, so a reward scaled by 1000 or
    shifted by a constant trains exactly like the original.
    """
    f = np.asarray(fitness, dtype=np.float64).reshape(-1)
    n = f.size
    if n < 2:
        return np.zeros(n)
    order = np.argsort(f, kind="stable")
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.arange(n, dtype=np.float64)
    # average the ranks of tied values so that equal returns get equal weight
    uniq, inverse = np.unique(f, return_inverse=True)
    if uniq.size < n:
        ranks = np.bincount(inverse, weights=ranks)[inverse] / np.bincount(inverse)[inverse]
    return ranks / (n - 1) - 0.5


def _shape(config: ESConfig, fitness: np.ndarray) -> np.ndarray:
    if config.rank_shaping:
        return centered_ranks(fitness)
    std = fitness.std()
    return (fitness - fitness.mean()) / std if std > 0 else np.zeros_like(fitness)


def es_gradient(config: ESConfig, state: ESState, population: np.ndarray, fitness: np.ndarray) -> np.ndarray:
    """Ascent direction: ``sum_i shaped_i * eps_i / (P * sigma)`` with ``eps_i`` recovered from ``population``.

    The noise is recomputed as ``(x_i - mean) / sigma`` instead of being carried in the state, so ``tell``
    needs only what the caller evaluated.
    """
    eps = (population - state.mean) / config.sigma
    shaped = _shape(config, fitness)
    return np.asarray(shaped @ eps / (population.shape[0] * config.sigma))


def ask(config: ESConfig, state: ESState, rng: np.random.Generator) -> tuple[np.ndarray, ESState]:
    """Sample ``population_size`` antithetic perturbations ``mean ± sigma * eps``: rows i and i + P/2 mirror."""
    half = rng.standard_normal((config.population_size // 2, state.mean.size))
    eps = np.concatenate([half, -half], axis=0)
    return state.mean + config.sigma * eps, state


def tell(
    config: ESConfig, state: ESState, population: np.ndarray, fitness: np.ndarray
) -> tuple[ESState, dict[str, float]]:
    """One optimiser step on the shaped fitness; returns the new state and scalar metrics.

    Non-finite fitness (a diverged rollout) is ranked below every finite value instead of poisoning the
    gradient with NaN.
    """
    pop = np.asarray(population, dtype=np.float64)
    fit = np.asarray(fitness, dtype=np.float64).reshape(-1)
    if pop.shape != (config.population_size, state.mean.size) or fit.shape != (config.population_size,):
        raise ESConfigError(
            f"tell expects population [{config.population_size}, {state.mean.size}] and fitness "
            f"[{config.population_size}], got {pop.shape} and {fit.shape}"
        )
    finite = np.isfinite(fit)
    safe = np.where(finite, fit, (fit[finite].min() - 1.0) if finite.any() else 0.0)
    lr = cosine_lr(state.generation, config.total_generations, config.learning_rate, config.final_learning_rate)
    # OpenAI-ES: weight decay enters the ascent gradient as -l2coeff * theta
    g = es_gradient(config, state, pop, safe) - config.weight_decay * state.mean
    t = state.generation + 1
    if config.optimizer == "adam":
        m = config.beta1 * state.m + (1.0 - config.beta1) * g
        v = config.beta2 * state.v + (1.0 - config.beta2) * g * g
        a = lr * math.sqrt(1.0 - config.beta2**t) / (1.0 - config.beta1**t)
        step = a * m / (np.sqrt(v) + config.eps)
    else:
        m = config.momentum * state.m + (1.0 - config.momentum) * g
        v = state.v
        step = lr * m
    best = int(np.argmax(safe))
    improved = bool(finite.any()) and safe[best] > state.best_fitness
    new_state = replace(
        state, mean=state.mean + step, m=m, v=v, generation=t,
        best_fitness=float(safe[best]) if improved else state.best_fitness,
        best_params=pop[best].copy() if improved else state.best_params,
    )
    metrics = {
        "lr": lr, "fitness_mean": float(safe.mean()), "fitness_max": float(safe.max()),
        "grad_norm": float(np.linalg.norm(g)), "step_norm": float(np.linalg.norm(step)),
        "nonfinite": float((~finite).sum()),
    }
    return new_state, metrics
