"""`build_graph()`: the one place that wires the round graph.

    START -> [analyse -> critique | critique] -> propose -> validate -> (propose ... | END)

The graph holds no run data: nodes read the run's `RunContext` through LangGraph's `Runtime` (passed per
invoke, see graphs/round.py). With a checkpointer (`open_trace(run_dir)`: SQLite at `run_dir/trace.sqlite`)
every node step is stored, which is the trace `lares trace` lists and what lets a killed round resume.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from lares_agent.graphs import nodes, reflect
from lares_agent.graphs.context import RunContext
from lares_agent.graphs.routing import route_after_validate, route_start
from lares_agent.graphs.state import RoundInput, RoundState
from lares_agent.runs.layout import TRACE_NAME
from lares_agent.runs.oserrors import sqlite_file_error

__all__ = ["TRACE_NAME", "RoundGraph", "TraceSaver", "build_graph", "open_trace"]

RoundGraph = CompiledStateGraph[RoundState, RunContext, RoundInput, RoundState]
"""The compiled round graph: state, context, input and output schemas."""


def _start(state: RoundState, runtime: Runtime[RunContext]) -> Literal["analyse", "critique", "propose", "__end__"]:
    return route_start(state, reflect=runtime.context.limits.reflect)


def _after_validate(state: RoundState, runtime: Runtime[RunContext]) -> Literal["propose", "__end__"]:
    return route_after_validate(state, max_attempts=1 + runtime.context.limits.retry_budget)


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> RoundGraph:
    """Compile the round graph; what the engine's reward-update hook invokes (`run_round`) with a context."""
    graph = StateGraph(RoundState, context_schema=RunContext, input_schema=RoundInput)
    graph.add_node("analyse", reflect.analyse)
    graph.add_node("critique", reflect.critique)
    graph.add_node("propose", nodes.propose)
    graph.add_node("validate", nodes.validate)
    graph.add_conditional_edges(START, _start, ["analyse", "critique", "propose", END])
    graph.add_edge("analyse", "critique")
    graph.add_edge("critique", "propose")
    graph.add_edge("propose", "validate")
    graph.add_conditional_edges("validate", _after_validate, ["propose", END])
    return graph.compile(checkpointer=checkpointer)


_THEN = ", then `lares resume` the run"


class TraceSaver(SqliteSaver):
    """LangGraph's SQLite checkpointer whose failures name the trace file and the cause in one line.

    Every read and write of `SqliteSaver` (and its lazy `setup`) goes through `cursor()`, so wrapping it turns
    sqlite's bare `disk I/O error` into a `RunFileError` saying which file and why (a full disk, a read-only
    folder), as checkpoint and log writes do (`runs/oserrors.py`).
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        super().__init__(conn)
        self.path = path

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        try:
            with super().cursor(transaction) as cur:
                yield cur
        except sqlite3.Error as exc:
            raise sqlite_file_error("the graph trace", self.path, exc, _THEN) from exc


def open_trace(run_dir: Path) -> TraceSaver:
    """A SQLite checkpointer on `run_dir/trace.sqlite` (built from a connection: SqliteSaver 3.x is not a
    context manager, docs/feasibility.md §4.5). Close it with `saver.conn.close()`."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / TRACE_NAME
    try:
        conn = sqlite3.connect(str(path), check_same_thread=False)
    except sqlite3.Error as exc:
        raise sqlite_file_error("the graph trace", path, exc, _THEN) from exc
    return TraceSaver(conn, path)
