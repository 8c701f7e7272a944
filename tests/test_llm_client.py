"""LLMClient: record/replay, retries with back-off, budgets, usage and per-backend schema translation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import ScriptedChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from lares_agent.llm import (
    BudgetExceeded,
    LLMClient,
    LLMConfig,
    LLMError,
    ReplayChatModel,
    ReplayMissing,
    make_client,
)
from lares_agent.llm.local import LlamaCppChatModel
from lares_agent.runs import LLM_CALLS_NAME as RECORD_NAME

SCHEMA = {"type": "object", "properties": {"components": {"type": "object"}}, "required": ["components"]}


def _msgs(text: str) -> list[BaseMessage]:
    return [SystemMessage("You write reward functions."), HumanMessage(text)]


def scripted(*script: Any) -> ScriptedChatModel:
    """Answers (or raises) ``script`` in turn, then repeats its last item; 10 prompt + 5 completion tokens a call."""
    return ScriptedChatModel(script=list(script), usage=(10, 5))


class HttpError(RuntimeError):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


class FakeClock:
    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step  # every call reads it at start and end: each call "takes" one step
        return self.now


def test_record_then_replay_reproduces_every_answer(tmp_path: Path) -> None:
    run = tmp_path / "run1"
    fake = FakeListChatModel(responses=['{"components": {"a": "x"}}', "second", "third"])
    client = LLMClient(fake, LLMConfig(), run / RECORD_NAME)
    run.mkdir()
    prompts = ["propose", "critique", "propose"]
    first = [client.complete(_msgs(p), json_schema=SCHEMA if p == "propose" else None, tag=p, meta={"round": 1}).text
             for p in prompts]
    rows = [json.loads(line) for line in (run / RECORD_NAME).read_text().splitlines()]
    assert [r["answer"] for r in rows] == first and [r["tag"] for r in rows] == prompts
    assert rows[0]["round"] == 1 and rows[0]["messages"][1] == {"role": "user", "content": "propose"}

    replay = make_client(LLMConfig(backend="replay"), tmp_path / "run2", replay_from=run)
    again = [replay.complete(_msgs(p), json_schema=SCHEMA if p == "propose" else None, tag=p).text for p in prompts]
    assert again == first
    assert (tmp_path / "run2" / RECORD_NAME).is_file()  # the replayed run is recorded too
    with pytest.raises(ReplayMissing, match="no answer"):
        replay.complete(_msgs("propose"), json_schema=SCHEMA)


def test_replay_matches_by_content_before_order(tmp_path: Path) -> None:
    record = tmp_path / RECORD_NAME
    client = LLMClient(FakeListChatModel(responses=["A", "B", "C"]), LLMConfig(), record)
    for p in ["a", "b", "c"]:
        client.complete(_msgs(p))
    replay = LLMClient(ReplayChatModel.from_record(record), LLMConfig())
    assert replay.complete(_msgs("c")).text == "C"  # by hash, although recorded third
    assert replay.complete(_msgs("edited prompt")).text == "A"  # no match: next unused in call order
    assert replay.complete(_msgs("b")).text == "B"
    strict = LLMClient(ReplayChatModel.from_record(record, strict=True), LLMConfig())
    with pytest.raises(ReplayMissing, match="no recorded call has these messages"):
        strict.complete(_msgs("edited prompt"))


def test_a_resumed_replay_answers_each_round_from_that_round(tmp_path: Path) -> None:
    """A resume replays from a later round: it gets that round's answers, in attempt and persona order, whether the
    prompts repeat across rounds (same hash) or were edited (no hash match)."""
    record = tmp_path / RECORD_NAME
    answers = [f"r{r}-{node}-{who}" for r in range(3) for node in ("critique", "propose") for who in ("a", "b")]
    client = LLMClient(FakeListChatModel(responses=answers), LLMConfig(), record)
    for r in range(3):
        for node in ("critique", "propose"):
            for who in ("a", "b"):
                client.complete(_msgs(node), tag=node, meta={"node": node, "round": r, "attempt": 1, "persona": who})
    resumed = LLMClient(ReplayChatModel.from_record(record), LLMConfig())
    for r in (2, 1):
        for node, prompt in (("propose", "propose"), ("critique", "an edited critique")):
            got = [resumed.complete(_msgs(prompt), tag=node,
                                    meta={"node": node, "round": r, "attempt": 1, "persona": who}).text
                   for who in ("b", "a")]
            assert got == [f"r{r}-{node}-b", f"r{r}-{node}-a"]
    with pytest.raises(ReplayMissing, match=r"round 2, node propose.*answers of this round.* are used"):
        resumed.complete(_msgs("propose"), tag="propose",
                         meta={"node": "propose", "round": 2, "attempt": 1, "persona": "a"})
    assert resumed.complete(_msgs("critique"), tag="critique").text == "r0-critique-a"  # no round: any answer


def test_replay_needs_a_record(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="needs a record"):
        make_client(LLMConfig(backend="replay"), tmp_path)
    with pytest.raises(LLMError, match="does not exist"):
        make_client(LLMConfig(), tmp_path, replay_from=tmp_path / "nothing")


def test_retries_with_backoff_then_succeeds(tmp_path: Path) -> None:
    model = scripted(TimeoutError("slow"), ConnectionError("reset"), "fine")
    waits: list[float] = []
    client = LLMClient(model, LLMConfig(max_retries=2), tmp_path / RECORD_NAME, sleep=waits.append)
    answer = client.complete(_msgs("x"), tag="propose")
    assert (answer.text, answer.attempt, model.calls) == ("fine", 3, 3)
    assert waits == [0.5, 1.0]
    usage = client.usage
    assert usage["failures"] == 2 and usage["calls"] == 1 and usage["by_tag"]["propose"]["failures"] == 2
    rows = [json.loads(line) for line in (tmp_path / RECORD_NAME).read_text().splitlines()]
    assert [r["ok"] for r in rows] == [False, False, True]


def test_always_failing_model_raises_after_max_retries() -> None:
    model = scripted(*[ConnectionError(f"down {i}") for i in range(10)])
    client = LLMClient(model, LLMConfig(max_retries=2), sleep=lambda s: None)
    with pytest.raises(LLMError, match="failed after 3 attempts: ConnectionError: down 2") as info:
        client.complete(_msgs("x"), tag="propose")
    assert model.calls == 3 and "\n" not in str(info.value)


def test_client_errors_are_not_retried() -> None:
    model = scripted(HttpError(401), HttpError(401), "ok")
    client = LLMClient(model, LLMConfig(max_retries=2), sleep=lambda s: None)
    with pytest.raises(LLMError, match="HTTP 401"):
        client.complete(_msgs("x"))
    assert model.calls == 1


def test_token_budget_refuses_calls_once_spent() -> None:
    model = scripted("ok")
    client = LLMClient(model, LLMConfig(max_total_tokens=30))
    client.complete(_msgs("a"))
    client.complete(_msgs("b"))
    with pytest.raises(BudgetExceeded, match="30 of 30 tokens"):
        client.complete(_msgs("c"), tag="propose")
    assert model.calls == 2 and client.usage["total_tokens"] == 30


def test_wall_budget_counts_time_spent_in_calls() -> None:
    model = scripted("ok")
    client = LLMClient(model, LLMConfig(max_wall_s=15.0), clock=FakeClock(step=10.0))
    client.complete(_msgs("a"))
    client.complete(_msgs("b"))  # 10 s spent < 15 s: allowed
    with pytest.raises(BudgetExceeded, match="time budget"):
        client.complete(_msgs("c"))
    assert model.calls == 2 and client.usage["seconds"] == pytest.approx(20.0)


def test_usage_is_counted_per_tag_and_estimated_without_server_usage() -> None:
    client = LLMClient(FakeListChatModel(responses=["abcdefgh"]), LLMConfig())
    client.complete(_msgs("a"), tag="propose")
    client.complete(_msgs("b"), tag="critique")
    client.complete(_msgs("c"), tag="propose")
    usage = client.usage
    assert usage["calls"] == 3 and usage["by_tag"]["propose"]["calls"] == 2
    assert usage["estimated_calls"] == 3 and usage["by_tag"]["critique"]["completion_tokens"] == 2


class CapturingLlama(LlamaCppChatModel):
    """The local backend's interface without llama.cpp: records what the client asked for."""

    seen: list[dict] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        self.seen.append(dict(kwargs))
        msg = AIMessage("{}", usage_metadata={"input_tokens": 7, "output_tokens": 3, "total_tokens": 10})
        return ChatResult(generations=[ChatGeneration(message=msg)])


def test_local_translation_schema_seed_timeout_and_token_clamp() -> None:
    model = CapturingLlama(model_path="unused.gguf")
    client = LLMClient(model, LLMConfig(seed=5, max_total_tokens=200, timeout_s=30.0))
    client.complete(_msgs("a"), json_schema=SCHEMA, temperature=0.9)
    client.complete(_msgs("a"))
    first, second = model.seen
    assert first["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert first["temperature"] == 0.9 and second["temperature"] == 0.4
    assert (first["seed"], second["seed"]) == (5, 6)  # repeated prompts still sample differently
    assert first["timeout"] == 30.0 and "response_format" not in second
    assert first["max_tokens"] == 200 and second["max_tokens"] == 190  # never more than the budget has left
