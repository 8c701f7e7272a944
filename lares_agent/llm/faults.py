"""Fault injection for LLM backends: a chat model that wraps another and fails on purpose, reproducibly.

A run must survive whatever a model or server does (docs/DESIGN.md §4: nodes never crash on garbage; the reference
regenerated without bound on bad answers, docs/lares-reference.md §12 item 28). `FaultyChatModel` sits between the
`LLMClient` and any LangChain chat model and, at a configurable rate drawn from a seeded generator, replaces
an answer by one of the faults below. Every injected fault is kept (`faults()`), optionally appended to an
events file, and carries its kind so `LLMClient` writes it into `llm_calls.jsonl` next to the call it spoiled.

A test and benchmark utility: nothing in a normal run builds one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import PrivateAttr

from lares_agent.llm.answers import one_answer
from lares_agent.llm.errors import LLMTimeout
from lares_agent.llm.replay import call_key
from lares_agent.runs import Event, RecordFile

__all__ = [
    "FAULT_KINDS",
    "FaultRecord",
    "FaultyChatModel",
    "InjectedConnectionError",
    "InjectedTimeout",
    "read_faults",
]

# Raised: "timeout" (transient, LLMClient retries it), "connection" (a plain transport error, retried too).
# Answered: the rest reach the graph, which must turn each into a rejected candidate with a reason.
FAULT_KINDS: tuple[str, ...] = ("timeout", "connection", "empty", "prose", "truncated", "wrong_fields", "hostile")

_PROSE = (
    "Sure! A good reward for this task would reward the arm for getting closer to the target and give a "
    "bonus once it succeeds. Let me know if you want me to write it as code."
)
_WRONG_FIELDS = (
    '{"candidates": [{"terms": {"reach": "-fingertip_to_target"}, "why": "closer is better"}]}',
    '{"reward": "-fingertip_to_target", "explanation": "closer is better"}',
    '{"candidates": [{"components": ["-fingertip_to_target"], "rationale": "a list, not an object"}]}',
)
# Valid JSON in the right shape whose expressions the reward language must refuse (tests/data holds more).
_HOSTILE = (
    "__import__('os').system('echo pwned')",
    "().__class__.__bases__[0].__subclasses__()",
    "exp(exp(exp(exp(x))))",
    "x**2**3**4",
    "1e308 * 1e308",
    "eval('1+1')",
    "[t for t in range(10**9)]",
    "getattr(x, '__globals__')",
    "ｅｘｐ(x)",
    "(" * 40 + "x" + ")" * 40 + "**" + "9" * 400,
)
_STAND_IN = '{"candidates": [{"components": {"reach": "-x", "bonus": "5*x"}, "rationale": "stand-in answer"}]}'


class InjectedTimeout(LLMTimeout):
    """An injected time-out; `fault_kind` lets the call record say it was injected."""

    fault_kind = "timeout"


class InjectedConnectionError(ConnectionError):
    """An injected connection failure (not an LLMError: the client must classify it like an SDK error)."""

    fault_kind = "connection"


@dataclass(frozen=True)
class FaultRecord:
    """One injected fault: which call (0-based, per wrapper), its kind, and a one-line reason."""

    call: int
    kind: str
    reason: str
    key: str  # call_key of the messages, as LLMClient records it (schema omitted: generic backends get none)

    def to_event(self, when: float | None = None) -> Event:
        """The fault as an ``llm_fault`` event line (``when``: Unix time)."""
        return Event.of("llm_fault", **asdict(self), time=when)


def read_faults(path: Path) -> list[FaultRecord]:
    """The fault records an events file holds (other lines, and a line torn by a kill, are skipped)."""
    return [
        FaultRecord(int(e.fields["call"]), str(e.fields["kind"]), str(e.fields["reason"]), str(e.get("key", "")))
        for e in _fault_file(path).read()
        if e.event == "llm_fault"
    ]


def _fault_file(path: Path) -> RecordFile[Event]:
    return RecordFile(Path(path), Event.from_json)


class FaultyChatModel(BaseChatModel):
    """Wraps `inner` and injects faults at `rate` (0..1), kinds drawn uniformly from `kinds`, seeded by `seed`.

    The draw happens once per call, before the inner model is asked, so the fault sequence depends only on
    the seed and the call count, not on the inner model's answers. Answer faults ("truncated") spoil the inner
    model's real answer where it has one, so the cut falls inside realistic JSON.
    """

    inner: BaseChatModel
    rate: float = 0.5
    kinds: tuple[str, ...] = FAULT_KINDS
    seed: int = 0
    events_path: str | None = None  # append one JSON line per fault (events.jsonl style)
    _rng: Any = PrivateAttr(default=None)
    _faults: list[FaultRecord] = PrivateAttr(default_factory=list)
    _calls: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be in [0, 1], got {self.rate}")
        unknown = [k for k in self.kinds if k not in FAULT_KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"unknown fault kind(s) {unknown or '(none given)'}; choose from {', '.join(FAULT_KINDS)}")
        self._rng = np.random.default_rng(self.seed)

    @property
    def _llm_type(self) -> str:
        return f"faulty-{getattr(self.inner, '_llm_type', 'model')}"

    @property
    def wrapped_model(self) -> BaseChatModel:
        """What LLMClient looks through to pick the backend's call options (schema translation)."""
        return self.inner

    def faults(self) -> list[FaultRecord]:
        """Every fault injected so far, in call order (a copy)."""
        with self._lock:
            return list(self._faults)

    @property
    def calls(self) -> int:
        """Calls seen so far (faulted or not)."""
        return self._calls

    def _draw(self) -> tuple[int, str | None, int]:
        with self._lock:
            call = self._calls
            self._calls += 1
            faulted = bool(self._rng.random() < self.rate)
            kind = self.kinds[int(self._rng.integers(len(self.kinds)))] if faulted else None
            pick = int(self._rng.integers(1 << 30))
        return call, kind, pick

    def _log(self, call: int, kind: str, reason: str, messages: Sequence[BaseMessage]) -> None:
        record = FaultRecord(call, kind, reason, call_key(messages, None))
        with self._lock:
            self._faults.append(record)
        if self.events_path is not None:
            _fault_file(Path(self.events_path)).append(record.to_event(time.time()))

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        call, kind, pick = self._draw()
        if kind is None:
            return self.inner._generate(messages, stop=stop, **kwargs)
        if kind == "timeout":
            reason = "injected fault: the model did not answer within its time limit"
            self._log(call, kind, reason, messages)
            raise InjectedTimeout(reason)
        if kind == "connection":
            reason = "injected fault: connection refused by the server"
            self._log(call, kind, reason, messages)
            raise InjectedConnectionError(reason)
        text, reason = self._spoiled(kind, pick, messages, stop, kwargs)
        self._log(call, kind, reason, messages)
        return one_answer(text, {"injected_fault": kind})

    def _spoiled(
        self, kind: str, pick: int, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> tuple[str, str]:
        """The answer text of an answer fault and its reason."""
        if kind == "empty":
            return "", "injected fault: empty answer"
        if kind == "prose":
            return _PROSE, "injected fault: prose instead of JSON"
        if kind == "wrong_fields":
            return _WRONG_FIELDS[pick % len(_WRONG_FIELDS)], "injected fault: JSON with the wrong field names"
        if kind == "hostile":
            expr = _HOSTILE[pick % len(_HOSTILE)]
            text = json.dumps({"candidates": [{"components": {"reward": expr}, "rationale": "trust me"}]})
            return text, f"injected fault: hostile expression {expr[:40]!r}"
        # truncated: the inner model's own answer cut short (a stand-in when it has no text)
        result = self.inner._generate(messages, stop=stop, **kwargs)
        content = result.generations[0].message.content if result.generations else ""
        content = content.strip() if isinstance(content, str) else ""
        full = content if len(content) >= 8 else _STAND_IN
        cut = max(1, min(len(full) - 1, (pick % max(1, len(full) - 1)) + 1))
        if full.lstrip().startswith("{") and cut <= full.find("{"):
            cut = full.find("{") + 1
        return full[:cut], f"injected fault: answer truncated at {cut} of {len(full)} characters"
