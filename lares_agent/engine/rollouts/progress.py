"""The share of a distance an episode closed: numpy only, so the rewards layer's verifier reads episodes with the
engine's own rule without loading the simulator."""

from __future__ import annotations

import numpy as np

__all__ = ["SUCCESS_FEATURE", "progress_closed"]

SUCCESS_FEATURE = "success"
_NO_DISTANCE = 1e-9  # a start this close to the goal has nothing to close: the episode scores 0


def progress_closed(prog: np.ndarray) -> float:
    """(first - last) / |first| of a lower-is-better progress series, clipped to [-1, 1] (NaN: non-finite).

    Normalised so that tasks and start states with different distances compare on one scale; clipped so one
    episode that runs far away cannot outweigh the others."""
    p = np.asarray(prog, np.float64).reshape(-1)
    if p.size == 0 or not np.isfinite(p[[0, -1]]).all():
        return float("nan")
    start, end = float(p[0]), float(p[-1])
    if abs(start) < _NO_DISTANCE:
        return 0.0
    return float(np.clip((start - end) / abs(start), -1.0, 1.0))
