"""Several learners per reward slot (the seed text's section 2.3: rewards at 20-30% of the policies).

With ``learners_per_reward`` N, slot s owns learners ``s*N .. s*N+N-1``; all train on the slot's one buffer
column, with their own initial parameters, minibatches and Thompson-sampling arm. The ``init`` setting's extra
human-reward learner comes last (learner K*N, column K). A slot's fitness is judged on the mean of its healthy
learners' evaluations (``slot_view``), so selection compares rewards rather than seeds; the slot's *leader* (its
best learner by the same grading, ``leaders``) is the policy it hands over and the one replaced slots inherit.
N = 1 is LaRes: learner i is slot i and ``slot_view`` returns the evaluations unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lares_agent.engine.contracts import MemberEvaluation, RewardFunction
from lares_agent.engine.setup.fitness import Rule, rank_slots, slot_evaluations

__all__ = ["LearnerGroups"]

_MEANED = ("success_rate", "task_return", "own_return", "mean_progress", "final_progress", "episode_length",
           "start_progress", "progress_closed", "approach_closed", "action_jerk")


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

    def leaders(
        self,
        evals: Sequence[MemberEvaluation],
        rewards: Sequence[RewardFunction],
        complexity_lambda: float,
        use_task_return: bool,
        quarantined: Callable[[int], bool],
        rule: Rule = "success-then-progress",
    ) -> list[list[int]]:
        """Every slot's learners, best first, graded as slots are (``fitness.slot_evaluations`` over the slot
        learners under the run's ``rule``: success, or the task return or start distance closed before any
        success, then the tie-break); quarantined last.

        ``evals`` are every learner's, in learner order; ``rewards`` every column's."""
        n = self.slot_learners
        col = self.column_of
        graded = slot_evaluations(evals[:n], [rewards[int(col[i])] for i in range(n)], complexity_lambda,
                                  [quarantined(i) for i in range(n)], rule)
        order = rank_slots(graded, use_task_return)
        return [[i for i in order if int(col[i]) == s] for s in range(self.num_slots)]

    def slot_view(
        self, evals: Sequence[MemberEvaluation], ranked: Sequence[Sequence[int]], quarantined: Callable[[int], bool]
    ) -> list[MemberEvaluation]:
        """One evaluation per slot (member = slot), then the extra learner's (member = K): the mean over the slot's
        healthy learners (all of them when none is), with the leader's rollouts and component statistics and
        ``learner_success`` listing every learner's success rate (the spread the report shows). N = 1: the
        evaluations as they are."""
        if self.per_reward == 1:
            return list(evals)
        out = []
        for s, order in enumerate(ranked):
            members = [evals[i] for i in order]
            healthy = [e for i, e in zip(order, members, strict=True) if not (quarantined(i) or e.nonfinite)]
            pool = healthy or members
            lead = pool[0]
            means: dict[str, Any] = {name: _nanmean([getattr(e, name) for e in pool]) for name in _MEANED}
            out.append(dataclasses.replace(
                lead, member=s, episodes=sum(e.episodes for e in pool), nonfinite=not healthy,
                learner_success=tuple(evals[i].success_rate for i in self.learners(s)), **means))
        if self.extra:
            out.append(dataclasses.replace(evals[self.slot_learners], member=self.num_slots))
        return out


def _nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan
