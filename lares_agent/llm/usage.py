"""Usage accounting for one run's LLM calls: totals and per-tag counters behind a lock.

Kept apart from the client so the budget rules (what counts, when a run is over budget) read in one place.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lares_agent.runs import LLMCallRow

_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "seconds", "failures")


def cached_tokens(message: Any) -> int | None:
    """Prompt tokens the backend served from its prefix cache: the local model's `cached_tokens`, an OpenAI-
    compatible server's `prompt_tokens_details.cached_tokens` (LangChain's `input_token_details.cache_read`)."""
    local = (getattr(message, "response_metadata", None) or {}).get("cached_tokens")
    if isinstance(local, int):
        return local
    details = (getattr(message, "usage_metadata", None) or {}).get("input_token_details") or {}
    cached = details.get("cache_read")
    return int(cached) if isinstance(cached, int) else None


def _zero() -> dict[str, Any]:
    return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "failures": 0}


@dataclass
class UsageLedger:
    """Counts calls, tokens, seconds (spent inside LLM calls, retries and back-off included) and failures."""

    total: dict[str, Any] = field(default_factory=_zero)
    by_tag: dict[str, dict[str, Any]] = field(default_factory=dict)
    estimated_calls: int = 0  # calls whose token counts were estimated (the server sent no usage)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_calls(cls, rows: Iterable[LLMCallRow]) -> UsageLedger:
        """The usage of calls already made (a resumed run's `llm_calls.jsonl`), so the run's token and time
        budgets count them: without this a resume started again at 0."""
        ledger = cls()
        for row in rows:
            if row.ok:
                ledger._add(row.tag, calls=1, prompt_tokens=row.prompt_tokens,
                            completion_tokens=row.completion_tokens, seconds=row.seconds)
            else:  # a failed call's tokens, where the server reported them (a cut answer), were spent too
                ledger._add(row.tag, failures=1, prompt_tokens=row.prompt_tokens,
                            completion_tokens=row.completion_tokens, seconds=row.seconds)
        return ledger

    def _add(self, tag: str, **delta: float) -> None:
        row = self.by_tag.setdefault(tag, _zero())
        for key, value in delta.items():
            self.total[key] += value
            row[key] += value

    def success(self, tag: str, prompt_tokens: int, completion_tokens: int, seconds: float, estimated: bool) -> None:
        """Account one answered call."""
        with self.lock:
            self._add(tag, calls=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, seconds=seconds)
            self.estimated_calls += int(estimated)

    def failure(self, tag: str, seconds: float, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        """Account one failed attempt: its time counts against the wall budget, and the tokens the server reported
        for it (a cut answer's) against the token budget."""
        with self.lock:
            self._add(tag, failures=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                      seconds=seconds)

    def wait(self, tag: str, seconds: float) -> None:
        """Account back-off time between attempts."""
        with self.lock:
            self._add(tag, seconds=seconds)

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens so far."""
        return int(self.total["prompt_tokens"] + self.total["completion_tokens"])

    @property
    def seconds(self) -> float:
        """Seconds spent in LLM calls so far."""
        return float(self.total["seconds"])

    def snapshot(self) -> dict[str, Any]:
        """A copy: `{"calls", "prompt_tokens", "completion_tokens", "total_tokens", "seconds", "failures",
        "estimated_calls", "by_tag": {tag: {...same counters...}}}`."""
        with self.lock:
            out: dict[str, Any] = {k: self.total[k] for k in _FIELDS}
            out["total_tokens"] = self.tokens
            out["estimated_calls"] = self.estimated_calls
            out["by_tag"] = copy.deepcopy(self.by_tag)
        return out
