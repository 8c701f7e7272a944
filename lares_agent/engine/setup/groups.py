"""Several learners per reward slot (the seed text's section 2.3: rewards at 20-30% of the policies).

With ``learners_per_reward`` N, slot s owns learners ``s*N .. s*N+N-1``; all train on the slot's one buffer
column, with their own initial parameters, minibatches and Thompson-sampling arm. The ``init`` setting's extra
human-reward learner comes last (learner K*N, column K). These are the index maps only; a slot's fitness is judged
on the mean of its healthy learners' evaluations, and its *leader* (its best learner by the same grading) is the
policy it hands over and the one replaced slots inherit (``fitness.rank``, ``fitness.slot_view``). N = 1 is LaRes:
learner i is slot i.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["LearnerGroups"]


@dataclass(frozen=True)
class LearnerGroups:
    """Which learners belong to which reward slot (and so to which buffer column)."""

    num_slots: int
    per_reward: int = 1
    extra: bool = False
    """The ``init`` setting's extra human-reward learner (one, whatever N)."""

    def __post_init__(self) -> None:
        if self.num_slots < 1 or self.per_reward < 1:
            raise ValueError(f"need >= 1 slot and >= 1 learner per reward, got {self.num_slots}, {self.per_reward}")

    @property
    def slot_learners(self) -> int:
        """Learners that belong to reward slots (K * N): the Thompson-sampling arms."""
        return self.num_slots * self.per_reward

    @property
    def num_learners(self) -> int:
        return self.slot_learners + (1 if self.extra else 0)

    @property
    def extra_learner(self) -> int | None:
        return self.slot_learners if self.extra else None

    @functools.cached_property
    def column_of(self) -> np.ndarray:
        """[num_learners] buffer column (= slot; K for the extra learner) of every learner (computed once)."""
        cols = np.repeat(np.arange(self.num_slots, dtype=np.int64), self.per_reward)
        return np.append(cols, self.num_slots) if self.extra else cols

    def learners(self, column: int) -> list[int]:
        """The learners training on a column (a slot's N learners, or the extra learner)."""
        if column == self.num_slots and self.extra:
            return [self.slot_learners]
        if not 0 <= column < self.num_slots:
            raise IndexError(f"column {column} out of range")
        return list(range(column * self.per_reward, (column + 1) * self.per_reward))
