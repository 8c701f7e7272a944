"""What the trajectory encoder (``trajectory.py``) and the diagnosis (``diagnosis.py``) both ask of a per-step
feature series, written once so that the text and the facts call the same feature a speed, a flag or a stop."""

from __future__ import annotations

import numpy as np

__all__ = ["FLAG_UNITS", "is_flag", "is_speed", "true_runs"]

FLAG_UNITS = ("bool", "0/1", "flag")


def is_speed(name: str, unit: str) -> bool:
    """A velocity (unit per second, not an acceleration) or a feature named ``*speed``."""
    return ("/s" in unit and "/s^2" not in unit) or name.endswith("speed")


def is_flag(unit: str, values: np.ndarray) -> bool:
    """A 0/1 feature: by its unit, or because every finite value is 0 or 1."""
    if unit in FLAG_UNITS:
        return True
    finite = values[np.isfinite(values)]
    return finite.size > 0 and bool(np.all((finite == 0) | (finite == 1)))


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of every run of True in a boolean array."""
    padded = np.concatenate([[False], mask, [False]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]
