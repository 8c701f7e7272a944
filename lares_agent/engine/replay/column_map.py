"""The one map from a reward function's raw output to the reward a learner samples from its buffer column.

LaRes matches a new reward column's mean/std to the best elite's column with an affine map fixed when the column
is set (docs/lares-reference.md §6; fixed for the column's life, so old and new rows agree, §12 item 4). The seed
text (its section 3.2) suggests a sigmoid at the reward's output when rewards fluctuate wildly between candidates
or rounds; `ColumnMap` adds that as an optional squash before the affine match, fixed at the same moment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

RewardNormalisation = Literal["affine", "sigmoid", "tanh"]
REWARD_NORMALISATIONS: tuple[RewardNormalisation, ...] = get_args(RewardNormalisation)

__all__ = ["REWARD_NORMALISATIONS", "Affine", "ColumnMap", "RewardNormalisation"]


@dataclass(frozen=True)
class ColumnMap:
    """`apply(raw) = squash(raw) * scale + shift`, every number fixed when the column is set.

    `kind` 'affine' (LaRes, the default): squash(raw) = raw, and `mean`/`std` are unused. 'sigmoid' / 'tanh':
    squash(raw) = sigmoid(z) in (0, 1) or tanh(z) in (-1, 1) with z = (raw - mean) / std, the column's raw
    mean/std over the buffer at set time; standardising first makes the squash act on the same part of its curve
    whatever the candidate's raw scale, so two candidates whose rewards differ by any factor squash alike.

    Order: standardise, squash, then the affine match to the reference column computed on the squashed values.
    The match last keeps LaRes' invariant (a new column has the best elite's mean/std, so the learner that
    inherits the elite's critic sees rewards on its scale); the squash before it only bounds the shape, so one
    candidate's outliers cannot dominate its column. Squashing after the match would instead throw the elite's
    scale away (every column in (0, 1)) and make the match pointless.
    """

    shift: float = 0.0
    scale: float = 1.0
    kind: RewardNormalisation = "affine"
    mean: float = 0.0
    std: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in REWARD_NORMALISATIONS:
            raise ValueError(f"unknown reward normalisation {self.kind!r}; choose one of "
                             f"{', '.join(REWARD_NORMALISATIONS)}")
        if not self.std > 0:
            raise ValueError(f"a column map's std must be positive, got {self.std}")

    def squash(self, raw: np.ndarray) -> np.ndarray:
        """The part before the affine match, float64 (raw itself for 'affine')."""
        x = np.asarray(raw, np.float64)
        if self.kind == "affine":
            return x
        z = (x - self.mean) / self.std
        if self.kind == "tanh":
            return np.tanh(z)
        return 0.5 + 0.5 * np.tanh(0.5 * z)  # sigmoid(z) without exp overflow for large |z|

    def apply(self, raw: np.ndarray) -> np.ndarray:
        """Raw rewards -> the rewards learners see, float64."""
        return self.squash(raw) * self.scale + self.shift


Affine = ColumnMap
"""The name of the LaRes-only map before squashing existed (`Affine(shift, scale)` is still an affine map)."""
