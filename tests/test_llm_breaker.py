"""Bounded LLM waiting: a hanging or all-500 endpoint is called a few times, not
24; `--max-minutes` cuts the wait; a non-JSON 200 answer is one bad answer, not a retried AttributeError."""

from __future__ import annotations

import threading
import time
from email.message import Message
from typing import Any

import pytest
from fake_openai import FakeOpenAI, chat_completion, serving
from langchain_core.messages import HumanMessage

from lares_agent.llm import BudgetExceeded, LLMClient, LLMConfig, LLMError
from lares_agent.llm.breaker import Breaker
from lares_agent.llm.config import DEFAULT_TIMEOUTS
from lares_agent.llm.errors import EndpointDown
from lares_agent.llm.openai_compat import make_openai_chat_model

SCHEMA = {"type": "object", "properties": {"candidates": {"type": "array"}}}


class Broken(FakeOpenAI):
    """Answers every request with `mode`: "500", "hang" (until released), "html" (a 200 that is not JSON), "empty"
    (a 200 whose `choices` list is empty), "ok"."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode, self.requests = mode, 0
        self.release = threading.Event()

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes]:
        with self.lock:
            self.requests += 1
        if self.mode == "hang":
            self.release.wait(30)
        if self.mode == "500":
            return 500, {"error": {"message": "internal error", "type": "server_error"}}
        if self.mode == "html":
            return 200, b"<html><body>proxy login</body></html>"
        if self.mode == "empty":  # a well-formed completion without any choice
            return 200, {**chat_completion("", "fake", 10, 0), "choices": []}
        return 200, chat_completion('{"candidates": []}', "fake", 10, 5)


def _client(server: Broken, **config: Any) -> LLMClient:
    cfg = LLMConfig(backend="openai", model="fake", base_url=server.url, **config)
    return LLMClient(make_openai_chat_model(cfg), cfg, sleep=lambda s: None)


def _ask(client: LLMClient, round_: int = 0) -> Exception:
    with pytest.raises(LLMError) as info:
        client.complete([HumanMessage("hi")], json_schema=SCHEMA, tag="propose", meta={"round": round_})
    return info.value


def test_breaker_opens_for_the_round_then_for_the_run() -> None:
    breaker = Breaker()
    assert breaker.failure("http 500", "500", 0) is None and breaker.failure("http 500", "500", 0) is None
    trip = breaker.failure("http 500", "500", 0)
    assert trip is not None and trip.round == 0 and not trip.for_run
    assert breaker.refusal(0) is trip
    assert breaker.refusal(1) is None  # the next round tries once more ...
    trip = breaker.failure("http 500", "500", 1)  # ... and one failure re-opens it, now for the run
    assert trip is not None and trip.for_run and breaker.refusal(7) is trip
    other = Breaker()
    for kind in ("timeout", "http 500", "timeout", "http 500"):  # different kinds in a row do not add up
        assert other.failure(kind, kind, 0) is None
    assert other.failure("timeout", "t", 0) is None
    assert other.failure("timeout", "t", 0) is not None  # two time-outs in a row do
    recovered = Breaker()
    recovered.failure("connection", "c", 0), recovered.failure("connection", "c", 0)
    recovered.success()
    assert recovered.failure("connection", "c", 0) is None


def test_an_all_500_endpoint_is_called_three_times_per_round() -> None:
    with serving(Broken("500")) as server:
        client = _client(server)
        trips: list[str] = []
        client.on_trip = lambda trip, message: trips.append(message)
        first = _ask(client)
        assert isinstance(first, EndpointDown) and "failed after 3 attempts" in str(first)
        for _ in range(7):  # the other calls of round 0: refused at once
            assert "not called for the rest of round 0" in str(_ask(client))
        assert server.requests == 3 and len(trips) == 1 and "'http 500'" in trips[0]
        _ask(client, round_=1)  # round 1: one more try, then the breaker stays open for the run
        assert server.requests == 4 and "the rest of the run" in str(_ask(client, round_=2))


def test_a_hanging_endpoint_costs_two_time_outs_not_twenty_four() -> None:
    with serving(Broken("hang")) as server:
        try:
            client = _client(server, timeout_s=0.3)
            start = time.monotonic()
            for _ in range(8):
                _ask(client)
            took = time.monotonic() - start
            assert server.requests == 2, server.requests
            assert took < 3.0, took  # before: 8 calls x 3 attempts x the time-out
        finally:
            server.release.set()


def test_the_run_deadline_cuts_the_wait_and_refuses_later_calls() -> None:
    with serving(Broken("hang")) as server:
        try:
            client = _client(server)  # the backend's own time-out: 60 s
            assert LLMConfig(backend="openai").call_timeout_s == DEFAULT_TIMEOUTS["openai"] == 60.0
            client.deadline = time.monotonic() + 0.4
            start = time.monotonic()
            _ask(client)
            assert time.monotonic() - start < 5.0
            refused = _ask(client, round_=1)
            assert isinstance(refused, BudgetExceeded) and "--max-minutes" in str(refused)
        finally:
            server.release.set()


def test_a_non_json_200_answer_is_a_bad_answer_and_not_retried() -> None:
    with serving(Broken("html")) as server:
        client = _client(server)
        error = _ask(client)
        assert "not with an OpenAI chat completion" in str(error) and "AttributeError" not in type(error).__name__
        assert server.requests == 1


def test_an_empty_choices_list_is_a_bad_answer_and_not_an_index_error() -> None:
    with serving(Broken("empty")) as server:
        error = _ask(_client(server))
        assert "an empty 'choices' list" in str(error) and "IndexError" not in type(error).__name__
        assert server.requests == 1
