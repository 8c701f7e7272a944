"""Record every LLM call of a run, and replay a run offline and deterministically from that record.

The record is `llm_calls.jsonl` in the run directory, one JSON object per call (append + flush, so a
killed run keeps every finished call). The replay model answers from it: a graph call (one whose `meta` names
its round and node) takes only answers recorded at the same round, node, attempt and persona, so a resumed
replay, which starts again at a later round, gets that round's answers and equals the uninterrupted replay.
Among those (or among all answers, for a call without a round), a call is matched by a hash of its messages and
schema (the k-th identical call gets the k-th recorded answer), and when the prompt has changed it falls back
to the next unused answer in call order, so a replay survives small prompt edits.
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


Slot = tuple[int, str, Any, Any]  # (round, node, attempt, persona) of a graph call


def call_slot(meta: Mapping[str, Any] | None) -> Slot | None:
    """Where in the run a call was made: its graph round, node, attempt and persona (`graphs/asking.py`), or
    None for a call made outside the graph (no round), which is matched against the whole record."""
    meta = meta or {}
    round_, node = meta.get("round"), meta.get("node")
    if not isinstance(round_, int) or isinstance(round_, bool) or not isinstance(node, str):
        return None
    return (round_, node, meta.get("attempt"), meta.get("persona"))


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

    Pass the schema of a call as the `json_schema` keyword so the hash matches the one recorded, and its `meta`
    as the `meta` keyword so a graph call is answered from its own round and node (`LLMClient` does both).
    With `strict=True` only exact (messages, schema) matches are accepted.
    """

    rows: list[LLMCallRow]
    strict: bool = False
    source: str = ""
    _used: list[bool] = PrivateAttr(default_factory=list)
    _slots: list[Slot | None] = PrivateAttr(default_factory=list)
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
            self._slots = [call_slot(row.meta) for row in self.rows]

    def _pool(self, slot: Slot | None) -> list[int]:
        """The rows a call may take, in call order: those of its slot when the record has slots (a resumed
        replay starts at a later round and must not take an earlier round's answers), else every row."""
        if slot is None or all(s is None for s in self._slots):
            return list(range(len(self.rows)))
        return [i for i, s in enumerate(self._slots) if s == slot]

    def _pick(self, key: str, slot: Slot | None) -> LLMCallRow:
        self._sync()
        pool = [i for i in self._pool(slot) if not self._used[i]]
        chosen = next((i for i in pool if self.rows[i].key == key), None)
        if chosen is None and not self.strict and pool:
            chosen = pool[0]
        if chosen is not None:
            self._used[chosen] = True
            return self.rows[chosen]
        where = "" if slot is None else f" (round {slot[0]}, node {slot[1]}, attempt {slot[2]}, persona {slot[3]})"
        own = len(self._pool(slot))
        if self.strict and pool:
            reason = "no recorded call has these messages"
        elif own < len(self.rows):
            reason = f"all {own} recorded answers of this round, node, attempt and persona are used"
        else:
            reason = f"all {len(self.rows)} recorded answers are used"
        raise ReplayMissing(
            f"replay record {self.source or '(in memory)'} has no answer for call #{self._calls}{where}: {reason}"
        )

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        key = call_key(messages, kwargs.get("json_schema"))
        meta = kwargs.get("meta")
        with self._lock:
            self._calls += 1
            row = self._pick(key, call_slot(meta if isinstance(meta, Mapping) else None))
        tokens = (row.prompt_tokens, row.completion_tokens)
        return one_answer(row.answer or "", {"replayed": True, "matched": row.key == key}, tokens)
