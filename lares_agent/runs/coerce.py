"""Tolerant readers of JSON values for the record schemas.

A report of a crashed or half-finished run is the most useful one, so a record field that is missing, null or
of the wrong type reads as its default (NaN for numbers) instead of failing the whole file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "as_float",
    "as_float_list",
    "as_int",
    "as_int_list",
    "as_mapping",
    "as_opt_float",
    "as_opt_str",
    "as_stats",
    "as_str",
    "int_keyed",
]


def as_int(value: Any) -> int | None:
    """An int, or None for null, booleans, non-numbers and non-finite floats."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def as_float(value: Any) -> float:
    """A float; NaN for null and anything that is not a number."""
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def as_opt_float(value: Any) -> float | None:
    """A float, or None for null and anything that is not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def as_str(value: Any, default: str = "") -> str:
    return default if value is None else str(value)


def as_opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def as_mapping(value: Any) -> dict[str, Any]:
    """A JSON object as a dict with string keys; anything else reads as ``{}``."""
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else []


def as_int_list(value: Any) -> tuple[int, ...]:
    """The ints of a JSON list (other items dropped); anything else reads as ``()``."""
    return tuple(i for i in (as_int(v) for v in _items(value)) if i is not None)


def as_float_list(value: Any) -> tuple[float, ...]:
    """A JSON list of numbers (null, i.e. a non-finite value, reads as NaN); anything else reads as ``()``."""
    return tuple(as_float(v) for v in _items(value))


def int_keyed(value: Any) -> dict[int, Any]:
    """``{"0": x}`` (JSON object keys are strings) -> ``{0: x}``; keys that are not ints are dropped."""
    out: dict[int, Any] = {}
    if isinstance(value, Mapping):
        for k, v in value.items():
            ik = as_int(k)
            if ik is not None:
                out[ik] = v
    return out


def as_stats(value: Any) -> dict[str, dict[str, float]]:
    """``{component: {"mean", "std", "share"}}`` with float values; anything else reads as ``{}``."""
    if not isinstance(value, Mapping):
        return {}
    return {
        str(name): {str(k): as_float(v) for k, v in st.items()}
        for name, st in value.items()
        if isinstance(st, Mapping)
    }
