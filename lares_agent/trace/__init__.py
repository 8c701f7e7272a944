"""Read a run's graph trace: every node step from `trace.sqlite`, joined with its LLM calls and candidates."""

from lares_agent.trace.reader import read_trace
from lares_agent.trace.types import (
    NODES,
    CandidateTrace,
    Lineage,
    LLMCall,
    NoteTrace,
    RunTrace,
    TraceStep,
    UnknownCandidateError,
)

__all__ = [
    "NODES",
    "CandidateTrace",
    "LLMCall",
    "Lineage",
    "NoteTrace",
    "RunTrace",
    "TraceStep",
    "UnknownCandidateError",
    "read_trace",
]
