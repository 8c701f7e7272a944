"""A circuit breaker for one LLM endpoint: stop calling a server that keeps failing the same way.

Without it a hanging server cost 8 calls x 3 attempts x the time-out before training started,
and an all-500 server as many round trips. The breaker counts failed attempts of one kind in a row
(time-out, connection, HTTP status, bad answer); at `threshold` of them (`timeout_threshold` for time-outs,
each of which costs a whole time-out) it opens for the rest of the round: every further call of that round
fails at once with the reason. The next round tries once more (one failure re-opens it); once it has opened
in `rounds_down` rounds in a row without an answer in between, it stays open for the rest of the run.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = ["Breaker", "BreakerTrip"]


@dataclass(frozen=True)
class BreakerTrip:
    """The breaker just opened: for the rest of `round` (None: of the run's unnumbered calls) or of the run."""

    kind: str
    count: int
    round: int | None
    for_run: bool
    reason: str  # the last failure, one line

    def message(self, where: str) -> str:
        span = "the rest of the run" if self.for_run else (
            "the rest of this round" if self.round is None else f"the rest of round {self.round}")
        return (f"LLM endpoint{where} not called for {span}: {self.count} failures in a row of kind {self.kind!r} "
                f"(last: {self.reason})")


@dataclass
class Breaker:
    """Counts failures of one kind in a row; thread-safe (graph nodes may call from several threads)."""

    threshold: int = 3
    timeout_threshold: int = 2
    rounds_down: int = 2
    _round: int | None = None
    _kind: str | None = None
    _count: int = 0
    _open_round: bool = False
    _trial: bool = False  # a round after a trip: one more failure re-opens it
    _rounds_open: int = 0
    _open_run: bool = False
    trip: BreakerTrip | None = None  # the newest trip (what `refusal` reports)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _enter(self, round_: int | None) -> None:
        if round_ == self._round:
            return
        self._round = round_
        if self._open_round:
            self._open_round, self._trial = False, True
        self._kind, self._count = None, 0

    def refusal(self, round_: int | None) -> BreakerTrip | None:
        """The trip that keeps calls of `round_` from being made, or None when a call may go ahead."""
        with self._lock:
            self._enter(round_)
            return self.trip if (self._open_run or self._open_round) else None

    def success(self) -> None:
        with self._lock:
            self._kind, self._count, self._trial, self._rounds_open = None, 0, False, 0

    def failure(self, kind: str, reason: str, round_: int | None) -> BreakerTrip | None:
        """Count one failed attempt; returns the trip when this failure opens the breaker."""
        with self._lock:
            self._enter(round_)
            if self._open_run or self._open_round:
                return None
            self._count = self._count + 1 if kind == self._kind else 1
            self._kind = kind
            limit = 1 if self._trial else (self.timeout_threshold if kind == "timeout" else self.threshold)
            if self._count < limit:
                return None
            self._open_round, self._trial = True, False
            self._rounds_open += 1
            self._open_run = self._rounds_open >= self.rounds_down
            self.trip = BreakerTrip(kind, self._count, round_, self._open_run, reason)
            return self.trip
