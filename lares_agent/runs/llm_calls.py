"""The ``llm_calls.jsonl`` record: one line per attempt of one LLM call (``LLMClient._record``).

The same file is the run's cost account (report), the graph trace's call log (``lares trace``) and what a
replay answers from (``llm/replay.py``): a replay matches a call by ``key`` and hands back ``answer``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lares_agent.runs.coerce import as_float, as_int, as_mapping, as_opt_str, as_str

__all__ = ["MAX_STORED_ANSWER", "LLMCallRow"]

# Characters of an answer (and of an error line) stored: a model's real answer is a few thousand, and a server that
# streams megabytes per call would otherwise grow the file by that much per call (300 such calls: tens of MB).
# A cut answer keeps its start and says its full length (`answer_chars`); a replay hands back what was stored.
MAX_STORED_ANSWER = 65_536
_MAX_STORED_ERROR = 2_000


@dataclass(frozen=True)
class LLMCallRow:
    """One attempt of one LLM call; a retried call has several lines with the same ``call`` index."""

    call: int  # the client's call index (0-based, per run)
    tag: str  # what the caller named the call (the graph node)
    answer: str | None  # None when the attempt failed
    ok: bool = True
    error: str | None = None  # one line: exception type and message
    round: int | None = None  # the graph round (copied from meta)
    meta: Mapping[str, Any] = field(default_factory=dict)  # the graph's {node, round, attempt, persona}
    key: str = ""  # call_key(messages, schema): what a replay matches on
    messages: tuple[Mapping[str, str], ...] = ()  # OpenAI-style {role, content}
    schema: Mapping[str, Any] | None = None  # the JSON schema asked for
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    attempt: int = 1  # the client's retry number (1 = first try)
    backend: str = ""  # local | openai | replay | generic
    time: str = ""  # ISO 8601 (UTC), when the attempt was recorded
    fault: str | None = None  # an injected fault's kind (llm/faults.py); absent otherwise
    cached_tokens: int | None = None  # prompt tokens served from the backend's prefix cache; None: not reported
    response_format: str | None = None  # openai: grammar | json_schema | json_object | none, what it asked with
    answer_chars: int | None = None  # the answer's full length where the stored one is cut (MAX_STORED_ANSWER)

    @property
    def node(self) -> str:
        """The graph node that made the call (``meta["node"]``; a call made outside the graph has its tag)."""
        return as_str(self.meta.get("node")) or self.tag

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "call": self.call,
            "tag": self.tag,
            "round": self.round,
            "meta": dict(self.meta),
            "key": self.key,
            "messages": [dict(m) for m in self.messages],
            "schema": None if self.schema is None else dict(self.schema),
            "answer": self.answer if self.answer is None else self.answer[:MAX_STORED_ANSWER],
            "ok": self.ok,
            "error": self.error if self.error is None else self.error[:_MAX_STORED_ERROR],
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": self.seconds,
            "attempt": self.attempt,
            "backend": self.backend,
            "time": self.time,
        }
        if self.fault is not None:
            data["fault"] = self.fault
        if self.cached_tokens is not None:
            data["cached_tokens"] = self.cached_tokens
        if self.response_format is not None:
            data["response_format"] = self.response_format
        full = self.answer_chars if self.answer_chars is not None else len(self.answer or "")
        if full > MAX_STORED_ANSWER:
            data["answer_chars"] = full  # the stored answer is its first MAX_STORED_ANSWER characters
        return data

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> LLMCallRow:
        answer = row.get("answer")
        seconds = as_float(row.get("seconds"))
        schema = row.get("schema")
        return cls(
            call=as_int(row.get("call")) or 0,
            tag=as_str(row.get("tag")),
            answer=answer if isinstance(answer, str) else None,
            ok=bool(row.get("ok", True)),
            error=as_opt_str(row.get("error")),
            round=as_int(row.get("round")),
            meta=as_mapping(row.get("meta")),
            key=as_str(row.get("key")),
            messages=tuple(as_mapping(m) for m in row.get("messages") or [] if isinstance(m, Mapping)),
            schema=as_mapping(schema) if isinstance(schema, Mapping) else None,
            prompt_tokens=as_int(row.get("prompt_tokens")) or 0,
            completion_tokens=as_int(row.get("completion_tokens")) or 0,
            seconds=0.0 if math.isnan(seconds) else seconds,
            attempt=as_int(row.get("attempt")) or 1,
            backend=as_str(row.get("backend")),
            time=as_str(row.get("time")),
            fault=as_opt_str(row.get("fault")),
            cached_tokens=as_int(row.get("cached_tokens")),
            response_format=as_opt_str(row.get("response_format")),
            answer_chars=as_int(row.get("answer_chars")),
        )
