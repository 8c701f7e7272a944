"""What a stop leaves behind when it gives up the reward round in flight.

A first SIGTERM/SIGINT used to wait for the round's LLM calls (benchmarks/README.md, "Stopping during an LLM
round"). Now it cancels them (`LLMClient.cancelled` is the run's `StopRequest`, `llm/cancel.py`), so the round raises
`errors.Cancelled` within a second and is abandoned, never installed:

- in a training round the engine abandons it (`LaResEngine._abandon`): no candidate installed, no checkpoint
  written after it, so the resume restores the checkpoint from before the round and redoes it, as after a kill;
- in round 0 no engine exists yet: the run ends here with nothing trained and no checkpoint, and the resume
  starts the engine again, the graph's round-0 thread going on from its last stored step.

A round that returns before its next LLM call is installed as usual: a stop gives up only what is still waiting.
"""

from __future__ import annotations

from lares_agent.runs import RunLayout, RunLog
from lares_agent.search.outcome import NotifyFn, RunOutcome
from lares_agent.search.signals import StopRequest

__all__ = ["ROUND_0_ABANDONED", "ROUND_0_BESIDE_ABANDONED", "ROUND_ABANDONED", "end_in_round_0"]

ROUND_ABANDONED = ("the reward round in flight was given up: its candidates are not installed and no checkpoint is "
                   "written after it; `lares resume` redoes it from the checkpoint before it")
ROUND_0_ABANDONED = ("round 0 was given up before it delivered the initial rewards: nothing was trained or "
                     "checkpointed; `lares resume` asks the LLM for round 0 again")
ROUND_0_BESIDE_ABANDONED = ("round 0 was given up before it delivered its rewards: the learners trained on the task's "
                            "own reward meanwhile, but no checkpoint is written before round 0's; `lares resume` "
                            "starts the run again and asks the LLM for round 0 again")


def end_in_round_0(log: RunLog, run: RunLayout, stop: StopRequest, earlier_s: float, session_s: float,
                   notify: NotifyFn | None) -> RunOutcome:
    """The `run_end` line and the outcome of a run whose round 0 a stop gave up (`earlier_s`: the wall seconds of
    the run's earlier sessions, `session_s`: this one's)."""
    if notify is not None:
        notify(ROUND_0_ABANDONED)
    wall = earlier_s + session_s
    log.event("run_end", env_steps=0, finished=False, wall_s=wall, session_wall_s=session_s, best_success=0.0,
              initial_llm_s=session_s, stopped_by=stop.name, abandoned_round=0)
    return RunOutcome(run, 0, False, 0.0, wall, stopped_by=stop.name or None, exit_code=stop.exit_code,
                      initial_llm_s=session_s, session_wall_s=session_s, abandoned_round=0)
