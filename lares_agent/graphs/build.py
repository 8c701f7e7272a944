"""`build_graph()`: the one place that wires the round graph; `run_round()` runs (or resumes) one round.

    START -> [analyse -> critique | critique] -> propose -> validate -> (propose ... | END)

One thread per round (`thread_id`); with a checkpointer (`open_trace(run_dir)`: SQLite at
`run_dir/trace.sqlite`) every node step is stored, which is the trace `lares trace` lists and what lets a
killed round resume without losing what was already accepted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from lares_agent.graphs.deps import GraphDeps
from lares_agent.graphs.nodes import RoundNodes
from lares_agent.graphs.routing import route_after_validate, route_start
from lares_agent.graphs.state import CandidateRecord, RoundInput, RoundState, StepRecord
from lares_agent.rewards import CompiledReward, compile_reward, parse_candidate
from lares_agent.runs.layout import TRACE_NAME
from lares_agent.tools.checks import allowed_features

__all__ = ["TRACE_NAME", "RoundResult", "build_graph", "open_trace", "run_round", "compile_accepted"]


def build_graph(deps: GraphDeps, checkpointer: BaseCheckpointSaver | None = None) -> Any:
    """Compile the round graph over `deps`; the result is what the engine's reward-update hook invokes."""
    nodes = RoundNodes(deps)
    graph = StateGraph(RoundState, input_schema=RoundInput)
    graph.add_node("analyse", nodes.analyse)
    graph.add_node("critique", nodes.critique)
    graph.add_node("propose", nodes.propose)
    graph.add_node("validate", nodes.validate)
    start = partial(route_start, reflect=deps.limits.reflect)
    graph.add_conditional_edges(START, start, ["analyse", "critique", "propose", END])
    graph.add_edge("analyse", "critique")
    graph.add_edge("critique", "propose")
    graph.add_edge("propose", "validate")
    router = partial(route_after_validate, max_attempts=1 + deps.limits.retry_budget)
    graph.add_conditional_edges("validate", router, ["propose", END])
    return graph.compile(checkpointer=checkpointer)


def open_trace(run_dir: Path) -> SqliteSaver:
    """A SQLite checkpointer on `run_dir/trace.sqlite` (built from a connection: SqliteSaver 3.x is not a
    context manager, docs/feasibility.md §4.5). Close it with `saver.conn.close()`."""
    run_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(run_dir / TRACE_NAME), check_same_thread=False)
    return SqliteSaver(conn)


@dataclass(frozen=True)
class RoundResult:
    """What one round produced, for the search layer and the run files."""

    round: int
    accepted: tuple[CandidateRecord, ...]
    rejected: tuple[CandidateRecord, ...]
    analysis: str
    critique: str
    critique_id: str | None
    attempts: int
    steps: tuple[StepRecord, ...]

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> RoundResult:
        return cls(
            round=int(state.get("round", 0)),
            accepted=tuple(state.get("accepted") or ()),
            rejected=tuple(state.get("rejected") or ()),
            analysis=str(state.get("analysis") or ""),
            critique=str(state.get("critique") or ""),
            critique_id=state.get("critique_id"),
            attempts=int(state.get("attempts") or 0),
            steps=tuple(state.get("steps") or ()),
        )


def _check_input(round_input: Mapping[str, Any]) -> RoundInput:
    if "round" not in round_input or "n_wanted" not in round_input:
        raise ValueError("round input needs 'round' and 'n_wanted'")
    if int(round_input["n_wanted"]) < 0:
        raise ValueError(f"n_wanted must be >= 0, got {round_input['n_wanted']}")
    unknown = set(round_input) - set(RoundInput.__annotations__)
    if unknown:
        raise ValueError(f"unknown round input key(s): {', '.join(sorted(unknown))}")
    return RoundInput(**round_input)  # type: ignore[typeddict-item]


def run_round(graph: Any, round_input: Mapping[str, Any], thread_id: str) -> RoundResult:
    """Run one round on thread `thread_id`. With a checkpointer, a finished thread returns its stored result
    and an interrupted one resumes from its last step (accepted candidates are never proposed twice)."""
    config = {"configurable": {"thread_id": thread_id}}
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
    extra = {"durability": "sync"} if graph.checkpointer is not None else {}
    state = graph.invoke(payload, config, **extra)
    return RoundResult.from_state(state)


def compile_accepted(deps: GraphDeps, result: RoundResult) -> dict[str, CompiledReward]:
    """Compiled rewards of a round's accepted candidates: from `deps.registry`, recompiled when missing
    (after a resume in a new process the registry starts empty)."""
    names = allowed_features(deps.task)
    out: dict[str, CompiledReward] = {}
    for rec in result.accepted:
        cid = rec["id"]
        if cid not in deps.registry:
            data = {"components": dict(rec["components"]), "rationale": rec.get("rationale", "")}
            parsed = parse_candidate(data, names, deps.limits.checks.limits)
            deps.registry[cid] = compile_reward(parsed, cid)
        out[cid] = deps.registry[cid]
    return out
