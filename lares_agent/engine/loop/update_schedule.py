"""When a reward update runs and how its ``propose`` hook is waited for, shared by the SAC and ES engines.

An update is ``RewardSlots.start``, the hook, ``RewardSlots.finish``. Blocking (ES, and SAC with ``--sync-llm``)
the three run back to back. In the background (SAC, issue 13 item 8) the hook runs on ``ProposalRunner``'s worker
thread and the proposals are installed at the first iteration boundary after it returned, or when the next update
is due ("overdue": it is waited for, and that wait counted, so rounds keep their cadence and never overlap).
The engine supplies only its "is an update due" and "is the one in flight overdue" tests.
"""

from __future__ import annotations

from collections.abc import Callable

from lares_agent.engine.contracts import ProposeFn, UpdateContext
from lares_agent.engine.loop.background import ProposalRunner
from lares_agent.engine.loop.slots import LearnerHooks, RewardSlots

__all__ = ["UpdateSchedule"]


class UpdateSchedule:
    """Runs an engine's reward updates: ``due()`` says one should start; ``background`` runs its hook on the
    worker thread; ``overdue(ctx)`` says a background proposal started at ``ctx`` must be waited for now."""

    def __init__(
        self,
        slots: RewardSlots,
        hooks: LearnerHooks,
        due: Callable[[], bool],
        *,
        background: bool = False,
        overdue: Callable[[UpdateContext], bool] | None = None,
    ) -> None:
        self.slots, self.hooks, self.due, self.background = slots, hooks, due, background
        self.overdue = overdue if overdue is not None else (lambda _ctx: True)
        self.runner = ProposalRunner()

    @property
    def in_flight(self) -> bool:
        """Whether a reward proposal is running in the background."""
        return self.runner.pending is not None

    @property
    def wait(self) -> dict[str, float]:
        """Seconds the learners waited for ``propose`` (``waited_s``) and that it ran (``llm_s``), this session."""
        return {"waited_s": self.runner.waited_s, "llm_s": self.runner.llm_s}

    def step(self, propose: ProposeFn | None) -> None:
        """Install a background proposal that returned (or is overdue); start a due update (in the background
        when configured and there is a hook)."""
        pending = self.runner.pending
        if pending is not None:
            if not (self.runner.ready or self.overdue(pending.ctx)):
                return
            self.finish()
        if not self.due():
            return
        if self.background and propose is not None:
            self.runner.submit(propose, self.slots.start(self.hooks, background=True))
        else:
            self.blocking(propose)

    def blocking(self, propose: ProposeFn | None) -> UpdateContext:
        """A whole update with the learners waiting for ``propose`` (a proposal in flight is installed first)."""
        self.finish()
        pending = self.slots.start(self.hooks)
        proposals, llm_s = self.runner.blocking(propose, pending.ctx)
        return self.slots.finish(self.hooks, pending, proposals, {"llm_s": llm_s, "waited_s": llm_s})

    def finish(self) -> UpdateContext | None:
        """Install the proposal in flight (waiting for it if needed); None when there is none."""
        if self.runner.pending is None:
            return None
        pending, proposals, timing = self.runner.collect()
        return self.slots.finish(self.hooks, pending, proposals, timing)

    def close(self) -> None:
        """Let the worker thread go (a proposal still running finishes on its own; its round is in the trace)."""
        self.runner.close()
