"""Read a run's graph trace: every node step from `trace.sqlite`, joined with its LLM calls and candidates."""

from lares_agent.trace.reader import (
    NODES,
    CandidateTrace,
    Lineage,
    LLMCall,
    RunTrace,
    TraceStep,
    UnknownCandidateError,
    read_trace,
)

__all__ = [
    "NODES",
    "CandidateTrace",
    "LLMCall",
    "Lineage",
    "RunTrace",
    "TraceStep",
    "UnknownCandidateError",
    "read_trace",
]
