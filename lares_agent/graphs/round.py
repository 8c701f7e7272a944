"""`run_round()`: run (or resume) one round of the graph on its own thread; `RoundResult` is what it produced.

One thread per round (`thread_id`). With a checkpointer a finished thread returns its stored result and an
interrupted one resumes from its last step, so a killed round never asks the LLM again for what it accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from lares_agent.graphs.build import RoundGraph
from lares_agent.graphs.context import RunContext
from lares_agent.graphs.state import CandidateRecord, RoundInput, StepRecord
from lares_agent.rewards import CompiledReward

__all__ = ["RoundResult", "run_round"]


@dataclass(frozen=True)
class RoundResult:
    """What one round produced, for the search layer and the run files.

    `accepted` are records (id, canonical components, rationale, key), what the trace keeps. `compiled` holds the
    functions validate compiled for them in this process, by id; a record without one (a round the trace gave back
    after a resume) is compiled with `rewards.compile_record`, which gives the same function: its canonical text
    parses back to the same tree (tests/test_fuzz_rewards.py).
    """

    round: int
    accepted: tuple[CandidateRecord, ...]
    rejected: tuple[CandidateRecord, ...]
    analysis: str
    critique: str
    critique_id: str | None
    attempts: int
    steps: tuple[StepRecord, ...]
    feedback: tuple[dict[str, str], ...] = ()  # the user's notes the round took (its critique states them)
    compiled: Mapping[str, CompiledReward] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_state(cls, state: Mapping[str, Any], compiled: Mapping[str, CompiledReward] | None = None) -> RoundResult:
        return cls(
            round=int(state.get("round", 0)),
            accepted=tuple(state.get("accepted") or ()),
            rejected=tuple(state.get("rejected") or ()),
            analysis=str(state.get("analysis") or ""),
            critique=str(state.get("critique") or ""),
            critique_id=state.get("critique_id"),
            attempts=int(state.get("attempts") or 0),
            steps=tuple(state.get("steps") or ()),
            feedback=tuple(state.get("feedback") or ()),
            compiled=dict(compiled or {}),
        )


def _check_input(round_input: Mapping[str, Any]) -> RoundInput:
    if "round" not in round_input or "n_wanted" not in round_input:
        raise ValueError("round input needs 'round' and 'n_wanted'")
    if int(round_input["n_wanted"]) < 0:
        raise ValueError(f"n_wanted must be >= 0, got {round_input['n_wanted']}")
    unknown = set(round_input) - set(RoundInput.__annotations__)
    if unknown:
        raise ValueError(f"unknown round input key(s): {', '.join(sorted(unknown))}")
    return cast(RoundInput, dict(round_input))


def run_round(graph: RoundGraph, round_input: Mapping[str, Any], thread_id: str, context: RunContext) -> RoundResult:
    """Run one round on thread `thread_id` with this round's `context` (never stored in the trace; its own
    `compiled`, which comes back in the result)."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    context = replace(context, compiled={})
    payload: RoundInput | None = _check_input(round_input)
    if graph.checkpointer is not None:
        snapshot = graph.get_state(config)
        if snapshot.values:
            # Finished only when nothing is left to run: a thread killed between a step's saved writes and the
            # next checkpoint shows values, no `next`, but a pending task (seen with SIGKILL during `analyse`).
            if not snapshot.next and not snapshot.tasks:
                return RoundResult.from_state(snapshot.values)
            payload = None  # resume from the last checkpoint and the writes saved after it
    # "sync": each step's checkpoint is on disk before the next node runs, so a kill loses at most that node
    # (only with a checkpointer: langgraph 1.2 fails on durability without one).
    if graph.checkpointer is not None:
        state = graph.invoke(payload, config, context=context, durability="sync")
    else:
        state = graph.invoke(payload, config, context=context)
    return RoundResult.from_state(state, context.compiled)
