"""Per-component and per-feature influence of one reward, for the report.

Two views answer "what does this reward actually pay for?":

* component share: mean |component| / sum of mean |components| over buffer states. The search logs these
  statistics with each candidate (LaRes never logged components at all, docs/lares-reference.md §12 fix list: "log
  reward components"); without them, they are recomputed from a feature sample if the run saved one.
* feature influence: mean |dr/dx_j| * std(x_j) over a feature sample, from the reward's differentiable torch
  form. Scaling the gradient by the feature's spread makes features with different units comparable.

The reward language lives in ``lares_agent.rewards`` (a lower layer, written separately); it is imported
lazily and any failure there only drops the figure, never the report.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lares_agent.runs import RunLayout
from lares_agent.runs.reader import RunData

__all__ = ["Influence", "component_influence", "gradient_influence", "load_feature_sample"]

# Rows used from the sample: enough for stable means, small enough to stay instant on a laptop.
MAX_SAMPLE_ROWS = 4096
# Not reward features: the success flag and the env's own reward are never inputs of a candidate.
_NON_FEATURES = frozenset({"success", "human_reward"})


@dataclass(frozen=True)
class Influence:
    """Normalised influence (shares summing to 1) of named parts of one reward."""

    reward_id: str
    names: tuple[str, ...]
    shares: tuple[float, ...]
    source: str  # one line for the caption: where the numbers come from


def load_feature_sample(run: RunData) -> dict[str, np.ndarray] | None:
    """The run's saved feature sample (evenly thinned to MAX_SAMPLE_ROWS), or None if there is none."""
    path = RunLayout(run.path).feature_sample
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: np.asarray(npz[k], dtype=np.float64).reshape(-1) for k in npz.files}
    except (OSError, ValueError):
        return None
    if not arrays:
        return None
    n = min(len(a) for a in arrays.values())
    if n == 0:
        return None
    idx = np.linspace(0, n - 1, num=min(n, MAX_SAMPLE_ROWS)).astype(np.int64)
    return {k: a[idx] for k, a in arrays.items()}


def _normalise(names: list[str], weights: np.ndarray, reward_id: str, source: str) -> Influence | None:
    weights = np.where(np.isfinite(weights), np.abs(weights), 0.0)
    total = float(weights.sum())
    if not names or total <= 0.0:
        return None
    return Influence(reward_id, tuple(names), tuple(float(w) for w in weights / total), source)


def _load_rewards_api() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """``(parse_candidate, compile_reward)`` from the rewards layer, or None if it is not available."""
    try:
        from lares_agent.rewards import compile_reward, parse_candidate
    except ImportError:
        return None
    return parse_candidate, compile_reward


def _compile(run: RunData, reward_id: str, sample: Mapping[str, np.ndarray]) -> Any | None:
    """Compile the candidate ``reward_id`` with the rewards layer; None if anything is missing or rejected."""
    cand = run.candidate(reward_id)
    api = _load_rewards_api()
    if cand is None or not cand.components or api is None:
        return None
    parse_candidate, compile_reward = api
    names = [k for k in sample if k not in _NON_FEATURES]
    try:
        parsed = parse_candidate({"components": dict(cand.components), "rationale": cand.rationale}, names)
        return compile_reward(parsed, reward_id)
    except Exception:
        return None


def component_influence(run: RunData, reward_id: str) -> Influence | None:
    """Share of |reward| per component: logged statistics first, else recomputed on the feature sample."""
    cand = run.candidate(reward_id)
    stats = cand.component_stats if cand is not None else {}
    if not stats:  # the engine logs them per judged slot with each reward update: take the latest
        logged = [u.component_stats.get(s, {}) for u in run.updates for s, r in u.judged.items() if r == reward_id]
        stats = next((st for st in reversed(logged) if st), {})
    if stats:
        names = list(stats)
        share = np.array([stats[n].get("share", math.nan) for n in names])
        if np.isfinite(share).any():
            return _normalise(names, share, reward_id, "logged share of |reward|")
        mean = np.array([stats[n].get("mean", math.nan) for n in names])
        return _normalise(names, mean, reward_id, "logged |mean| of each component")
    sample = load_feature_sample(run)
    compiled = None if sample is None else _compile(run, reward_id, sample)
    if compiled is None or sample is None:
        return None
    try:
        comps = compiled.components(sample)
    except Exception:
        return None
    names = list(comps)
    mean_abs = np.array([np.mean(np.abs(np.asarray(comps[n], dtype=np.float64))) for n in names])
    return _normalise(names, mean_abs, reward_id, "mean |component| on the saved feature sample")


def gradient_influence(run: RunData, reward_id: str) -> Influence | None:
    """mean |dr/dx_j| * std(x_j) per feature the reward reads, from its torch form on the feature sample."""
    sample = load_feature_sample(run)
    if sample is None:
        return None
    compiled = _compile(run, reward_id, sample)
    if compiled is None:
        return None
    import torch

    used = getattr(getattr(compiled, "parsed", None), "features_used", None)
    names = sorted(used) if used else [k for k in sample if k not in _NON_FEATURES]
    inputs = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in sample.items()}
    for n in names:
        inputs[n] = inputs[n].clone().requires_grad_(True)
    try:
        total, _ = compiled.torch(inputs)
        total.sum().backward()
    except Exception:
        return None
    weights = np.zeros(len(names))
    for j, n in enumerate(names):
        grad = inputs[n].grad
        if grad is not None:
            weights[j] = float(grad.abs().mean()) * float(np.std(sample[n]))
    return _normalise(names, weights, reward_id, "torch gradients: mean |dr/dx| · std(x) on a feature sample")
