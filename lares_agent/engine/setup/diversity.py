"""How diverse the reward population still is: distinct rewards, and how far apart their policies behave.

Diversity is logged every reward update; when it falls below a threshold the proposer is asked to explore (new
structure) instead of refining the elites (docs/DESIGN.md §4: exploring proposals may also use a higher
temperature). The ES population measures it (``populations/es.py``); its thresholds are part of the run's config
(``ESPopulationConfig.diversity``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lares_agent.engine.contracts import Diversity

__all__ = ["DiversityConfig", "behaviour_distance", "distinct_fraction", "measure_diversity", "should_explore"]


def distinct_fraction(keys: Sequence[str]) -> float:
    """Distinct keys / number of keys (1.0: all different; 1/K: all the same)."""
    return len(set(keys)) / len(keys) if keys else 0.0


def behaviour_distance(per_slot_features: Sequence[Mapping[str, np.ndarray]], names: Sequence[str]) -> float:
    """Mean pairwise distance between policies' mean feature values, in units of each feature's step spread.

    Each policy is described by the mean over its evaluated steps of every named feature. A feature's scale
    is its standard deviation over all steps of all policies, so metres, speeds and booleans compare on one
    scale, and the value means "how far apart the policies' typical states are, relative to how much states
    vary within episodes": near 0, every policy behaves alike whatever its reward text says. A feature that
    never varies adds 0. Divided by sqrt(F) so it does not grow with the number of features.
    """
    k = len(per_slot_features)
    if k < 2 or not names:
        return 0.0
    means = np.zeros((k, len(names)))
    scale = np.zeros(len(names))
    for j, n in enumerate(names):
        cols = [np.asarray(f[n], dtype=np.float64).reshape(-1) for f in per_slot_features]
        allv = np.concatenate(cols)
        allv = allv[np.isfinite(allv)]
        scale[j] = allv.std() if allv.size else 0.0
        means[:, j] = [float(np.nanmean(c)) if np.isfinite(c).any() else 0.0 for c in cols]
    z = np.where(scale > 1e-12, means / np.where(scale > 1e-12, scale, 1.0), 0.0)
    diff = np.linalg.norm(z[:, None, :] - z[None, :, :], axis=-1) / np.sqrt(len(names))
    return float(diff[np.triu_indices(k, 1)].mean())


@dataclass(frozen=True)
class DiversityConfig:
    """Thresholds below which the proposer is told to explore."""

    min_distinct_fraction: float = 0.6
    min_behaviour_distance: float = 0.05


def should_explore(distinct_frac: float, behaviour_dist: float, config: DiversityConfig) -> bool:
    """Explore when either the reward texts or the policies' behaviours have become too alike."""
    return distinct_frac < config.min_distinct_fraction or behaviour_dist < config.min_behaviour_distance


def measure_diversity(
    rewards: Sequence[Any], per_slot_features: Sequence[Mapping[str, np.ndarray]], names: Sequence[str],
    config: DiversityConfig,
) -> Diversity:
    """Distinct canonical rewards and behaviour distance of their policies, with the explore decision."""
    keys = [r.key for r in rewards]
    frac = distinct_fraction(keys)
    dist = behaviour_distance(per_slot_features, names)
    return Diversity(distinct=len(set(keys)), distinct_fraction=frac, behaviour_distance=dist,
                     explore=should_explore(frac, dist, config))
