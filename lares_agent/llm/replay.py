"""Record every LLM call of a run, and replay a run offline and deterministically from that record.

The record is `llm_calls.jsonl` in the run directory, one JSON object per call (append + flush, so a
killed run keeps every finished call). The replay model answers from it: a call is matched by a hash of
its messages and schema (the k-th identical call gets the k-th recorded answer), and when the prompt has
changed it falls back to the next unused answer in call order, so a replay survives small prompt edits.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import PrivateAttr

from lares_agent.llm.answers import one_answer
from lares_agent.llm.errors import LLMError, ReplayMissing
from lares_agent.llm.local import to_openai_messages
from lares_agent.runs import LLM_CALLS_NAME, LLMCallRow, RecordFile


def call_key(
    messages: Sequence[BaseMessage] | Sequence[Mapping[str, str]], json_schema: Mapping[str, Any] | None
) -> str:
    """Stable hash of what determines an answer: the messages (role, text) and the requested schema."""
    plain: Sequence[Mapping[str, str]] = [
        m if isinstance(m, Mapping) else to_openai_messages([m])[0] for m in messages
    ]
    body = json.dumps(
        {"messages": [[m["role"], m["content"]] for m in plain], "schema": json_schema},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def record_path(source: Path) -> Path:
    """The record file for `source`: the path itself, or `llm_calls.jsonl` inside a run directory."""
    return source / LLM_CALLS_NAME if source.is_dir() else source


def record_file(path: Path) -> RecordFile[LLMCallRow]:
    """The typed call record at `path` (what `LLMClient` appends to and a replay reads)."""
    return RecordFile(path, LLMCallRow.from_json)


def load_record(source: Path) -> list[LLMCallRow]:
    """The answered calls of a record, in call order; failed attempts are skipped, and so are lines torn by a
    killed run (a kill loses at most the call in flight, never the record). A missing file raises LLMError."""
    path = record_path(source)
    if not path.is_file():
        raise LLMError(f"replay record {path} does not exist; fix: pass a run directory that has {LLM_CALLS_NAME}")
    return [row for row in record_file(path).read() if row.ok and row.answer is not None]


class ReplayChatModel(BaseChatModel):
    """A chat model that answers only from a recorded run; never touches a network or a model file.

    Pass the schema of a call as the `json_schema` keyword so the hash matches the one recorded.
    With `strict=True` only exact (messages, schema) matches are accepted.
    """

    rows: list[LLMCallRow]
    strict: bool = False
    source: str = ""
    _used: list[bool] = PrivateAttr(default_factory=list)
    _calls: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_record(cls, source: Path, strict: bool = False) -> ReplayChatModel:
        """Load a record file (or a run directory holding one)."""
        return cls(rows=load_record(source), strict=strict, source=str(record_path(source)))

    @property
    def _llm_type(self) -> str:
        return "replay"

    def remaining(self) -> int:
        """Recorded answers not handed out yet."""
        self._sync()
        return self._used.count(False)

    def _sync(self) -> None:
        if len(self._used) != len(self.rows):
            self._used = [False] * len(self.rows)

    def _pick(self, key: str) -> LLMCallRow:
        self._sync()
        for i, row in enumerate(self.rows):
            if not self._used[i] and row.key == key:
                self._used[i] = True
                return row
        if not self.strict:
            for i, row in enumerate(self.rows):
                if not self._used[i]:
                    self._used[i] = True
                    return row
        reason = (
            "no recorded call has these messages" if self.strict else f"all {len(self.rows)} recorded answers are used"
        )
        raise ReplayMissing(
            f"replay record {self.source or '(in memory)'} has no answer for call #{self._calls}: {reason}"
        )

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        key = call_key(messages, kwargs.get("json_schema"))
        with self._lock:
            self._calls += 1
            row = self._pick(key)
        tokens = (row.prompt_tokens, row.completion_tokens)
        return one_answer(row.answer or "", {"replayed": True, "matched": row.key == key}, tokens)
