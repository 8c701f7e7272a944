"""Synthetic feature samples for checking a reward before any real state exists (e.g. `lares reward check`).

The engine checks candidates on buffer samples; this is the fallback when there is no buffer: each feature
is drawn over a plausible range for its unit, so that nan/inf traps (log of a distance minus a constant,
1/distance) show up just as they would on real states.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["UNIT_RANGES", "feature_range", "synthetic_sample"]

# unit -> (low, high) of a uniform draw; unknown units get [0, 1] (most features are distances or norms)
UNIT_RANGES: dict[str, tuple[float, float]] = {
    "m": (0.0, 1.0),
    "m/s": (0.0, 2.0),
    "rad": (-math.pi, math.pi),
    "rad/s": (-10.0, 10.0),
    "1": (0.0, 1.0),
    "": (0.0, 1.0),
}
_BOOL_UNITS = frozenset({"bool", "0/1", "{0,1}", "flag"})


def feature_range(feature: Any) -> tuple[float, float]:
    """The declared range of a feature: its own `low`/`high` where it declares them, else its unit's range
    (`UNIT_RANGES`; a 0/1 flag spans [0, 1]). A distance's range starts at 0: the goal."""
    low, high = getattr(feature, "low", None), getattr(feature, "high", None)
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low <= high:
        return float(low), float(high)
    unit = "" if isinstance(feature, str) else str(getattr(feature, "unit", "")).strip().lower()
    if unit in _BOOL_UNITS:
        return 0.0, 1.0
    return UNIT_RANGES.get(unit, UNIT_RANGES[""])


def synthetic_sample(features: Iterable[Any], n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """n rows per feature; `features` are objects with `name` and `unit` (engine `Feature`) or plain names."""
    if n < 1:
        raise ValueError("a sample needs at least one row")
    sample: dict[str, np.ndarray] = {}
    for feature in features:
        name = feature if isinstance(feature, str) else feature.name
        unit = "" if isinstance(feature, str) else str(getattr(feature, "unit", "")).strip().lower()
        if unit in _BOOL_UNITS:
            sample[name] = rng.integers(0, 2, size=n).astype(np.float64)
        else:
            low, high = feature_range(feature)
            sample[name] = rng.uniform(low, high, size=n)
    return sample
