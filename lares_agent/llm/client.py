"""`LLMClient`: the one thing graph nodes call. Retries, time-outs, budgets, usage and the call record.

Graph nodes hand over LangChain messages and, optionally, a JSON schema; the client translates the schema for
the backend (llama.cpp grammar; for a server, its grammar fields, then `json_schema` with a fall-back; nothing for
replay), retries transient failures with bounded exponential back-off, refuses calls once the run's token or wall
budget is spent, and appends every call to the run's `llm_calls.jsonl`, which is also what a replay answers from.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage

from lares_agent.errors import Cancelled
from lares_agent.llm import cancel
from lares_agent.llm.breaker import Breaker, BreakerTrip
from lares_agent.llm.config import LLMConfig
from lares_agent.llm.errors import BadAnswer, BudgetExceeded, ContextTooSmall, EndpointDown, LLMError
from lares_agent.llm.failures import bad_answer, failure_kind, one_line, retryable, status_of
from lares_agent.llm.formats import (
    FORMAT_LADDER,
    FORMAT_STEPS,
    GRAMMAR,
    Endpoint,
    FormatSteps,
    follows_grammar,
    grammar_body,
    names_format,
)
from lares_agent.llm.local import LlamaCppChatModel, to_openai_messages
from lares_agent.llm.replay import ReplayChatModel, call_key, record_file
from lares_agent.llm.usage import UsageLedger, cached_tokens
from lares_agent.llm.window import client_window, message_text
from lares_agent.runs import LLMCallRow

_BACKOFF_BASE_S = 0.5
_BACKOFF_CAP_S = 8.0
_OPENAI_BASE = "https://api.openai.com/v1"  # ChatOpenAI's endpoint when no base_url is set


@dataclass(frozen=True)
class LLMAnswer:
    """One answered call: the text, its token usage, seconds of all attempts, and which attempt answered (1-based)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    attempt: int


def _kind(model: BaseChatModel) -> str:
    """Which schema translation a chat model gets, without importing langchain_openai (slow import).

    A wrapper that declares `wrapped_model` (the fault injector, `faults.py`) gets the kind of what it wraps.
    """
    inner = getattr(model, "wrapped_model", None)
    if isinstance(inner, BaseChatModel):
        return _kind(inner)
    if isinstance(model, LlamaCppChatModel):
        return "local"
    if isinstance(model, ReplayChatModel):
        return "replay"
    if type(model).__module__.startswith("langchain_openai"):
        return "openai"
    return "generic"


class LLMClient:
    """Calls a LangChain chat model with retries, budgets, usage accounting and recording.

    `sleep` and `clock` are injectable so tests check the back-off schedule without sleeping.
    """

    def __init__(
        self,
        chat_model: BaseChatModel,
        config: LLMConfig,
        record_path: Path | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        breaker: Breaker | None = None,
        spent: UsageLedger | None = None,
        formats: FormatSteps | None = None,
    ) -> None:
        """`spent`: usage the run had before this client (a resume), counted against its budgets.
        `formats`: where the response_format each endpoint accepts is remembered (default: per process)."""
        self.chat_model = chat_model
        self.config = config
        self.record_path = record_path
        self._record_file = record_file(record_path) if record_path is not None else None
        self.kind = _kind(chat_model)
        self._sleep = sleep
        self._clock = clock
        self._ledger = spent if spent is not None else UsageLedger()
        self.formats = formats if formats is not None else FORMAT_STEPS
        served = getattr(chat_model, "wrapped_model", chat_model)  # the fault injector's endpoint is its model's
        self.endpoint = Endpoint(str(getattr(served, "openai_api_base", None) or _OPENAI_BASE),
                                 str(getattr(served, "model_name", "") or ""))
        # each step down of the grammar or response_format: (endpoint, refused format, next format, why)
        self.on_format_step: Callable[[Endpoint, str, str, str], None] | None = None
        self._count = 0
        self._lock = threading.Lock()
        self.breaker = breaker if breaker is not None else Breaker()
        self.on_trip: Callable[[BreakerTrip, str], None] | None = None  # the run logs each trip (with its message)
        self.deadline: float | None = None  # `clock()` value after which no call is made (`--max-minutes`)
        self.window = client_window(chat_model, config.context, self.kind, self._where())  # what prompts fit in
        self.cancelled: cancel.CancelFn | None = None  # the run's stop request: calls give up (`cancel.py`)
        # llama.cpp threads for the local model's calls while set (`threads_while`), e.g. every core while the
        # learners wait for round 0; None: the model's own setting
        self.threads: int | None = None

    @contextlib.contextmanager
    def threads_while(self, threads: int | None) -> Iterator[None]:
        """Within the block the local model computes with `threads` threads (None: its own setting); the other
        backends ignore it."""
        before, self.threads = self.threads, threads
        try:
            yield
        finally:
            self.threads = before

    @property
    def usage(self) -> dict[str, Any]:
        """Totals and per tag: calls, prompt_tokens, completion_tokens, seconds, failures (a copy)."""
        return self._ledger.snapshot()

    def _check_budget(self, tag: str) -> None:
        cfg = self.config
        if cfg.max_total_tokens is not None and self._ledger.tokens >= cfg.max_total_tokens:
            raise BudgetExceeded(
                f"LLM token budget spent ({self._ledger.tokens} of {cfg.max_total_tokens} tokens); call {tag!r} refused"
            )
        if cfg.max_wall_s is not None and self._ledger.seconds >= cfg.max_wall_s:
            raise BudgetExceeded(
                f"LLM time budget spent ({self._ledger.seconds:.1f} of {cfg.max_wall_s:g} s); call {tag!r} refused"
            )
        if self.deadline is not None and self._clock() >= self.deadline:
            raise BudgetExceeded(f"the run's time limit (--max-minutes) is reached; call {tag!r} refused")

    def _timeout(self) -> float:
        """This attempt's time-out: the backend's, cut to what the run's time limits leave."""
        cfg = self.config
        timeout = cfg.call_timeout_s
        if cfg.max_wall_s is not None:
            timeout = min(timeout, cfg.max_wall_s - self._ledger.seconds)
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - self._clock())
        return max(0.01, timeout)

    def _format(self, json_schema: Mapping[str, Any] | None, grammar: str | None = None) -> str | None:
        """What an openai-compatible call asks with now: the grammar until the endpoint gave it up (never at
        OpenAI's own, which has none), else the response_format (None: other backends, or neither given)."""
        if self.kind != "openai":
            return None
        if grammar is not None and self.endpoint.base_url != _OPENAI_BASE and self.formats.grammar(self.endpoint):
            return GRAMMAR
        return None if json_schema is None else FORMAT_LADDER[self.formats.level(self.endpoint)]

    def _kwargs(
        self, json_schema: Mapping[str, Any] | None, temperature: float, max_tokens: int, seed: int,
        level: str | None = None, grammar: str | None = None, meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Backend-specific call options: the schema translation lives here and nowhere else. A `grammar` (GBNF
        text) replaces the schema for the local model, which decodes under it; the other backends keep the
        schema."""
        if self.kind == "replay":  # the meta picks the round's own answers (llm/replay.py)
            return {"json_schema": dict(json_schema) if json_schema is not None else None, "meta": dict(meta or {})}
        if self.kind == "generic":
            return {}
        kw: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
        kw["timeout"] = self._timeout()
        if self.kind == "local":
            if self.threads is not None:
                kw["threads"] = self.threads
            if grammar is not None:
                kw["grammar"] = grammar
            elif json_schema is not None:
                kw["response_format"] = {"type": "json_object", "schema": dict(json_schema)}
        elif level == GRAMMAR and grammar is not None:  # openai-compatible, a server that reads GBNF
            kw["extra_body"] = grammar_body(grammar)
        elif json_schema is not None:  # openai-compatible
            if level == "json_schema":
                kw["response_format"] = {
                    "type": "json_schema", "json_schema": {"name": "answer", "schema": dict(json_schema)}
                }
            elif level == "json_object":
                kw["response_format"] = {"type": "json_object"}
        return kw

    def complete(
        self,
        messages: Sequence[BaseMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        grammar: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        tag: str = "",
        meta: Mapping[str, Any] | None = None,
        annotate: Callable[[str], Mapping[str, Any]] | None = None,
    ) -> LLMAnswer:
        """Ask the model once (retrying transient failures) and return its answer with usage.

        `annotate(text)`: the caller's verdict on the answer (e.g. the fact checker's drop count), merged into the
        recorded `meta`, so llm_calls.jsonl holds it on the call's own row.

        Raises BudgetExceeded before calling when the run's budget is spent, LLMError when every attempt
        failed or the failure is not transient (the message says which and why, on one line); `Cancelled`
        within a fraction of a second once `cancelled()` holds (the run was asked to stop), whatever the call does.
        """
        cfg = self.config
        with self._lock:
            self._check_budget(tag)
            index = self._count
            self._count += 1
        temp = cfg.temperature if temperature is None else temperature
        limit = cfg.max_tokens if max_tokens is None else max_tokens
        if cfg.max_total_tokens is not None:  # never ask for more than the budget has left
            limit = max(1, min(limit, cfg.max_total_tokens - self._ledger.tokens))
        seed = cfg.seed + index  # distinct samples for repeated prompts, reproducible per run
        limit = self.window.answer_room(messages, limit, tag)  # ContextTooSmall: a call that cannot fit is not made
        attempts = cfg.max_retries + 1
        spent = 0.0
        attempt = 0
        last: BaseException | None = None
        round_ = (meta or {}).get("round")
        round_ = round_ if isinstance(round_, int) else None
        while attempt < attempts:
            attempt += 1
            if attempt > 1:
                self._check_budget(tag)
            refused = self.breaker.refusal(round_)
            if refused is not None:
                raise EndpointDown(refused.message(self._where()))
            fmt = self._format(json_schema, grammar)
            kwargs = self._kwargs(json_schema, temp, limit, seed, fmt, grammar, meta)
            start = self._clock()
            try:
                message = cancel.invoke(self.chat_model, self.kind, messages, kwargs, self.cancelled)
            except Cancelled:
                raise  # a stop, not a failure: no retry, no breaker, no record
            except Exception as raw:
                exc = self.window.explain(bad_answer(raw, self.kind), tag, limit)  # a cut answer, a context error
                took = self._clock() - start
                spent += took
                used = (int(getattr(exc, "prompt_tokens", 0)), int(getattr(exc, "completion_tokens", 0)))
                self._ledger.failure(tag, took, *used)
                step = None if isinstance(exc, ContextTooSmall) else self._step_down_format(exc, fmt, json_schema)
                self._record(index, tag, meta, messages, json_schema, getattr(exc, "answer", None), *used, took,
                             attempt, exc, response_format=fmt, format_step=step)
                if isinstance(exc, ContextTooSmall):
                    raise exc from raw  # the same request fails the same way: not retried, not the breaker's
                if step is not None:
                    attempt -= 1  # a rejected response_format is the server's limit, not a failed attempt
                    continue
                last = exc
                trip = self.breaker.failure(failure_kind(exc), one_line(exc), round_)
                if trip is not None:
                    note = trip.message(self._where())
                    if self.on_trip is not None:
                        self.on_trip(trip, note)
                    plural = "s" if attempt > 1 else ""
                    raise EndpointDown(f"LLM call {tag!r}{self._where()} failed after {attempt} attempt{plural}: "
                                       f"{one_line(exc)}; {note}") from exc
                if not retryable(exc):
                    if isinstance(exc, BadAnswer):
                        raise BadAnswer(f"LLM call {tag!r}{self._where()}: {exc}") from raw
                    if isinstance(exc, LLMError):
                        raise
                    raise LLMError(f"LLM call {tag!r}{self._where()} failed: {one_line(exc)}") from exc
                if attempt < attempts:
                    wait = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (attempt - 1))
                    cancel.pause(wait, self.cancelled, self._sleep)
                    self._ledger.wait(tag, wait)
                    spent += wait
                continue
            took = self._clock() - start
            spent += took
            self.breaker.success()
            text = message_text(message)
            usage = getattr(message, "usage_metadata", None) or {}
            estimated = not usage
            prompt_tokens = int(usage.get("input_tokens", 0)) if usage else self._estimate(messages)
            completion_tokens = int(usage.get("output_tokens", 0)) if usage else max(1, len(text) // 4)
            self.window.observe(messages, 0 if estimated else prompt_tokens)
            finish = (getattr(message, "response_metadata", None) or {}).get("finish_reason")
            if finish == "length" and (json_schema is not None or grammar is not None):  # unusable: not retried
                cut = self.window.cut(tag, prompt_tokens, completion_tokens, limit)
                self._ledger.failure(tag, took, prompt_tokens, completion_tokens)
                self._record(index, tag, meta, messages, json_schema, text, prompt_tokens, completion_tokens, took,
                             attempt, cut, response_format=fmt)
                raise cut
            if fmt == GRAMMAR and not follows_grammar(text):  # a server that ignores unknown fields
                self._drop_grammar(json_schema, "the answer is not the JSON object the grammar writes: the server "
                                   "ignores the grammar fields")
            self._ledger.success(tag, prompt_tokens, completion_tokens, took, estimated)
            fault = (getattr(message, "response_metadata", None) or {}).get("injected_fault")
            if annotate is not None:
                meta = {**(meta or {}), **annotate(text)}
            self._record(index, tag, meta, messages, json_schema, text, prompt_tokens, completion_tokens, took, attempt,
                         fault=fault, cached_tokens=cached_tokens(message), response_format=fmt)
            return LLMAnswer(text, prompt_tokens, completion_tokens, spent, attempt)
        assert last is not None
        raise LLMError(f"LLM call {tag!r}{self._where()} failed after {attempts} attempts: {one_line(last)}") from last

    def _where(self) -> str:
        """' to <endpoint>' / ' on <model file>' for error messages, so the user sees what was unreachable."""
        base = getattr(self.chat_model, "openai_api_base", None)
        if base:
            return f" to {base}"
        path = getattr(self.chat_model, "model_path", None)
        return f" on {path}" if path else ""

    @staticmethod
    def _estimate(messages: Sequence[BaseMessage]) -> int:
        """About 4 characters per token; used only when a server reports no usage (no tokenizer download)."""
        return max(1, sum(len(message_text(m)) for m in messages) // 4)

    def _step_down_format(self, exc: BaseException, refused: str | None,
                          json_schema: Mapping[str, Any] | None) -> str | None:
        """The weaker format to retry with when an OpenAI-compatible server refused `refused`, else None.

        Any HTTP error (4xx or 5xx: some servers answer an unsupported `json_schema` with a 500) whose message
        names the format steps grammar -> json_schema -> json_object -> none, remembered for the endpoint
        (`formats.py`); an error about something else (a plain 5xx, a context-length 400) keeps the format and is
        retried or raised as before.
        """
        status = status_of(exc)
        if refused is None or status is None or status < 400 or not names_format(str(exc)):
            return None
        if refused == GRAMMAR:
            return self._drop_grammar(json_schema, one_line(exc))
        level = self.formats.step_down(self.endpoint, FORMAT_LADDER.index(refused))
        if level is None:
            return None
        step = FORMAT_LADDER[level]
        if self.on_format_step is not None:
            self.on_format_step(self.endpoint, refused, step, one_line(exc))
        return step

    def _drop_grammar(self, json_schema: Mapping[str, Any] | None, why: str) -> str:
        """The endpoint refused or ignored the grammar: the format asked with from now on, the step said once."""
        step = self._format(json_schema) or "none"
        if self.formats.drop_grammar(self.endpoint) and self.on_format_step is not None:
            self.on_format_step(self.endpoint, GRAMMAR, step, why)
        return step

    def _record(
        self,
        index: int,
        tag: str,
        meta: Mapping[str, Any] | None,
        messages: Sequence[BaseMessage],
        json_schema: Mapping[str, Any] | None,
        answer: str | None,
        prompt_tokens: int,
        completion_tokens: int,
        seconds: float,
        attempt: int,
        error: BaseException | None = None,
        fault: str | None = None,
        cached_tokens: int | None = None,
        response_format: str | None = None,
        format_step: str | None = None,
    ) -> None:
        if self._record_file is None:
            return
        plain = to_openai_messages(messages)
        meta = dict(meta or {})
        row = LLMCallRow(
            call=index,
            tag=tag,
            round=meta.get("round"),
            meta=meta,
            key=call_key(plain, json_schema),
            messages=tuple(plain),
            schema=json_schema,
            answer=answer,
            ok=error is None,
            error=None if error is None else (
                f"{_format_name(response_format)} refused, stepping down to {format_step}: {one_line(error)}"
                if format_step is not None else one_line(error)),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            seconds=round(seconds, 4),
            attempt=attempt,
            backend=self.kind,
            time=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            # set only by the fault injector (faults.py), so a test can match each fault to its call
            fault=fault or getattr(error, "fault_kind", None) or None,
            cached_tokens=cached_tokens,
            response_format=response_format,
        )
        with self._lock:
            self._record_file.append(row)


def _format_name(response_format: str | None) -> str:
    """How a refused format is named in a call's error: the grammar is no response_format."""
    return GRAMMAR if response_format == GRAMMAR else f"response_format {response_format}"
