"""What a run reports: `RunStatus` after each iteration (the progress display), `RunOutcome` at its end (the CLI's
last screen and exit code, the sweep's trial verdict)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lares_agent.runs import LLMHealth, RunLayout
from lares_agent.runs.handover import HandoverRecord

__all__ = ["NotifyFn", "ProgressFn", "RunOutcome", "RunStatus"]

@dataclass(frozen=True)
class RunStatus:
    """What a progress display needs after each iteration."""

    env_steps: int
    budget: int
    round: int
    best_success: float
    """Best success of any learner at any evaluation so far (the reference's number, docs/lares-reference.md
    §12 item 16)."""
    llm_in_flight: bool
    elapsed_s: float
    ranked_success: float | None = None
    """Success of the slot the run ranks first, at the newest evaluation (None before the first)."""


@dataclass(frozen=True)
class RunOutcome:
    run: RunLayout
    env_steps: int
    finished: bool
    best_success: float
    wall_s: float
    ranked_success: float | None = None
    """The ranked-first slot's success at the last evaluation (None: the run never evaluated)."""
    stopped_by: str | None = None  # "SIGTERM" / "SIGINT" when a signal asked the run to stop
    exit_code: int = 0  # what the CLI exits with after a signal (128 + its number), else 0
    llm: LLMHealth | None = None  # None: the run asks no LLM (baseline)
    already_finished: bool = False  # `lares resume` of a finished run: nothing was run or written
    llm_wait_s: float = 0.0
    """Wall seconds the learners waited for the LLM's reward rounds in this session."""
    llm_s: float = 0.0
    """Wall seconds the reward rounds' proposals ran in this session (in the background they overlap training)."""
    initial_llm_s: float = 0.0
    """Wall seconds of the initial population's proposals (round 0, before any learner exists)."""
    session_wall_s: float = 0.0
    """Wall seconds of this session (``wall_s`` adds a resumed run's earlier sessions)."""
    abandoned_round: int | None = None
    """The reward round a stop gave up (search/stopping.py): not installed, no checkpoint after it, and
    `lares resume` redoes it (None: none)."""
    handover: HandoverRecord | None = None
    """How the final policy was chosen on fresh episodes (None: the ranked-first one was written, with
    `--handover-episodes 0` or one learner)."""

    @property
    def llm_wait_share(self) -> float:
        """The learners' wait as a share of this session's wall time."""
        return self.llm_wait_s / self.session_wall_s if self.session_wall_s > 0 else 0.0

    def wait_sentence(self) -> str:
        """The last screen's line on the time the LLM cost the learners."""
        initial = self.initial_llm_s / self.session_wall_s if self.session_wall_s > 0 else 0.0
        return (f"learners waited {self.llm_wait_s:.0f} s for the LLM ({self.llm_wait_share:.0%} of wall time); "
                f"reward rounds ran {self.llm_s:.0f} s, the initial proposals {self.initial_llm_s:.0f} s "
                f"({initial:.0%}, before any learner had a reward)")


ProgressFn = Callable[[RunStatus], None]
NotifyFn = Callable[[str], None]
