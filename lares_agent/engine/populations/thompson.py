"""Thompson sampling over learners with a true sliding window (LaRes interaction, reference §8).

Each learner is one arm with a Beta(1 + S, 1 + F) posterior on episode success, where S and F count the
successes and failures among the arm's *last W outcomes*. The reference keeps two separate lists capped at
W entries, which caps counts instead of forgetting old outcomes (docs/lares-reference.md §12 item 3): 100 successes
then 100 failures ends at the same posterior as the reverse order. Here each arm keeps a ring of its last W
outcomes, so recent behaviour dominates, which is the point of a window for non-stationary learners.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["ThompsonSampler"]


class ThompsonSampler:
    """Beta-Bernoulli Thompson sampling over ``num_arms`` arms with a sliding window of ``window`` outcomes.

    Arms can be *blocked* (quarantined learners whose networks went non-finite): they get no draws, as the
    reference gives NaN arms a score of -1e9. Randomness always comes from the caller's generator so that a
    restored engine replays the same choices.
    """

    def __init__(self, num_arms: int, window: int) -> None:
        if num_arms < 1:
            raise ValueError(f"ThompsonSampler needs at least one arm, got {num_arms}")
        if window < 1:
            raise ValueError(f"ThompsonSampler window must be >= 1, got {window}")
        self.num_arms = num_arms
        self.window = window
        # Ring of the last W outcomes per arm: 1 success, 0 failure, -1 empty.
        self._ring = np.full((num_arms, window), -1, dtype=np.int8)
        self._pos = np.zeros(num_arms, dtype=np.int64)
        self._blocked = np.zeros(num_arms, dtype=bool)

    # ------------------------------------------------------------------ posterior
    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Successes and failures within each arm's window, each ``[num_arms]`` int."""
        succ = (self._ring == 1).sum(axis=1)
        fail = (self._ring == 0).sum(axis=1)
        return succ, fail

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Beta parameters ``(a, b) = (1 + S, 1 + F)`` of every arm (Beta(1, 1) prior as the reference)."""
        succ, fail = self.counts()
        return 1.0 + succ, 1.0 + fail

    # ------------------------------------------------------------------ choose / record
    def select(self, draws: int, rng: np.random.Generator) -> list[int]:
        """Draw ``draws`` Thompson samples and return the distinct winners in first-win order.

        As the reference, each draw samples every arm's posterior and takes the argmax; repeated winners are
        skipped, so 1..draws distinct arms act. Blocked arms never win; if every arm is blocked the list is
        empty.
        """
        if draws < 1:
            return []
        open_arms = np.flatnonzero(~self._blocked)
        if open_arms.size == 0:
            return []
        a, b = self.posterior()
        theta = rng.beta(a[open_arms], b[open_arms], size=(draws, open_arms.size))
        winners = open_arms[np.argmax(theta, axis=1)]
        _, first = np.unique(winners, return_index=True)
        return [int(w) for w in winners[np.sort(first)]]

    def select_uniform(self, draws: int, rng: np.random.Generator) -> list[int]:
        """Ablation of :meth:`select`: ``draws`` uniform picks among open arms, distinct winners in first-win
        order. Outcomes are ignored; the number of acting arms is distributed as Thompson sampling's under its
        flat Beta(1, 1) prior, so episodes per iteration stay comparable."""
        if draws < 1:
            return []
        open_arms = np.flatnonzero(~self._blocked)
        if open_arms.size == 0:
            return []
        winners = open_arms[rng.integers(0, open_arms.size, size=draws)]
        _, first = np.unique(winners, return_index=True)
        return [int(w) for w in winners[np.sort(first)]]

    def record(self, arm: int, success: bool) -> None:
        """Append one episode outcome to ``arm``'s window, dropping its oldest when the window is full."""
        self._check_arm(arm)
        self._ring[arm, self._pos[arm] % self.window] = 1 if success else 0
        self._pos[arm] += 1

    def record_many(self, arms: Sequence[int], successes: Sequence[bool]) -> None:
        """Record outcomes in order (one per acting learner of an iteration)."""
        if len(arms) != len(successes):
            raise ValueError(f"record_many: {len(arms)} arms but {len(successes)} outcomes")
        for arm, ok in zip(arms, successes, strict=True):
            self.record(int(arm), bool(ok))

    def block(self, arm: int) -> None:
        """Give ``arm`` zero selection weight until :meth:`reset` (quarantine of a non-finite learner)."""
        self._check_arm(arm)
        self._blocked[arm] = True

    @property
    def blocked(self) -> frozenset[int]:
        """Arms currently excluded from selection."""
        return frozenset(int(i) for i in np.flatnonzero(self._blocked))

    def reset(self) -> None:
        """Forget every outcome and unblock every arm; called at each reward update (reference: new TS object)."""
        self._ring.fill(-1)
        self._pos.fill(0)
        self._blocked.fill(False)

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        """Arrays and sizes, for engine checkpoints."""
        return {
            "num_arms": self.num_arms,
            "window": self.window,
            "ring": self._ring.copy(),
            "pos": self._pos.copy(),
            "blocked": self._blocked.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`; the arm count and window must match this sampler."""
        if int(state["num_arms"]) != self.num_arms or int(state["window"]) != self.window:
            raise ValueError(
                f"Thompson state has {state['num_arms']} arms / window {state['window']}, "
                f"sampler has {self.num_arms} / {self.window}"
            )
        self._ring[...] = np.asarray(state["ring"], dtype=np.int8)
        self._pos[...] = np.asarray(state["pos"], dtype=np.int64)
        self._blocked[...] = np.asarray(state["blocked"], dtype=bool)

    def _check_arm(self, arm: int) -> None:
        if not 0 <= arm < self.num_arms:
            raise IndexError(f"arm {arm} out of range for {self.num_arms} arms")
