"""The reward proposal, run blocking or beside training: the learners need not stall on the LLM.

A reward update is two halves (``LaResEngine._start_update`` / ``_finish_update``) around the ``propose`` hook.
Blocking, the learners wait for the whole hook (the reference's behaviour, kept by ``--sync-llm``). In the
background the hook runs on one worker thread (llama.cpp through ctypes and torch both release the GIL) while the
learners keep training on their current rewards; the engine installs the proposals at the first step boundary
after the hook returns, or waits for them when the next update is due. Nothing here is LLM or graph code.

``waited_s`` is the wall time the learners spent blocked on the hook (blocking: every call; background: only a
wait at the end of a run or when the next update is due before the previous proposal returned); ``llm_s`` is
the wall time the hook itself ran.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from lares_agent.engine.contracts import MemberEvaluation, ProposeFn, RewardFunction, UpdateContext

__all__ = ["PendingUpdate", "ProposalRunner"]


@dataclass(frozen=True)
class PendingUpdate:
    """A started reward update: its context (what the proposer sees), the evaluations it ranked and the best
    slot, which stays the one new slots inherit from when the proposals are installed later."""

    ctx: UpdateContext
    evals: tuple[MemberEvaluation, ...]
    best: int


class ProposalRunner:
    """Runs an engine's ``propose`` hook, blocking or on a single worker thread, and accounts the time."""

    def __init__(self) -> None:
        self.waited_s = 0.0
        self.llm_s = 0.0
        self._executor: ThreadPoolExecutor | None = None
        self._future: Future[tuple[list[RewardFunction], float]] | None = None
        self.pending: PendingUpdate | None = None
        """The update whose proposal is running in the background (None: none in flight)."""

    def _timed(self, propose: ProposeFn | None, ctx: UpdateContext) -> tuple[list[RewardFunction], float]:
        start = time.monotonic()
        try:
            return (list(propose(ctx)) if propose is not None else []), time.monotonic() - start
        finally:
            self.llm_s += time.monotonic() - start

    def blocking(self, propose: ProposeFn | None, ctx: UpdateContext) -> tuple[list[RewardFunction], float]:
        """The hook called in the caller's thread, and its seconds: the learners wait for all of it."""
        start = time.monotonic()
        try:
            return self._timed(propose, ctx)
        finally:
            self.waited_s += time.monotonic() - start

    def submit(self, propose: ProposeFn, pending: PendingUpdate) -> None:
        """Start the hook on the worker thread for ``pending`` (at most one in flight)."""
        if self.pending is not None:
            raise RuntimeError("a reward proposal is already in flight")
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lares-propose")
        self.pending = pending
        self._future = self._executor.submit(self._timed, propose, pending.ctx)

    @property
    def ready(self) -> bool:
        """Whether the proposal in flight has returned (or raised)."""
        return self._future is not None and self._future.done()

    def collect(self) -> tuple[PendingUpdate, list[RewardFunction], dict[str, float]]:
        """The update in flight, its proposals and its timing: ``llm_s`` the hook ran, ``waited_s`` the engine
        waited for it here (0 when it had returned); a hook that raised raises here, in the engine's thread."""
        if self.pending is None or self._future is None:
            raise RuntimeError("no reward proposal is in flight")
        pending, future = self.pending, self._future
        start = time.monotonic()
        try:
            proposals, llm_s = future.result()
        finally:
            waited = time.monotonic() - start
            self.waited_s += waited
            self.pending, self._future = None, None
        return pending, proposals, {"llm_s": llm_s, "waited_s": waited}

    def close(self) -> None:
        """Let the worker thread go (a proposal still running finishes on its own; its round is in the trace)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
