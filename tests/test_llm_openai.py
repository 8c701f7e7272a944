"""The OpenAI-compatible backend against a tiny /v1/chat/completions server on 127.0.0.1 (``fake_openai``)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from email.message import Message
from typing import Any

import pytest
from fake_openai import FakeOpenAI, chat_completion, serving
from langchain_core.messages import HumanMessage, SystemMessage

from lares_agent.llm import LLMClient, LLMConfig, LLMError, make_client
from lares_agent.llm.openai_compat import make_openai_chat_model

SCHEMA = {"type": "object", "properties": {"components": {"type": "object"}}, "required": ["components"]}
MESSAGES = [SystemMessage("Answer in JSON."), HumanMessage("propose a reward")]


class FakeServer(FakeOpenAI):
    """Answers chat completions with a fixed JSON text; optionally rejects `json_schema` like older servers."""

    def __init__(self, reject_json_schema: bool) -> None:
        super().__init__()
        self.reject_json_schema = reject_json_schema
        self.requests: list[dict] = []
        self.timeout = 5.0

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append({"path": path, "auth": headers.get("Authorization"), **body})
        fmt = (body.get("response_format") or {}).get("type")
        if self.reject_json_schema and fmt == "json_schema":
            error = {"message": "response_format json_schema unsupported", "type": "invalid_request_error"}
            return 400, {"error": error}
        answer = json.dumps({"components": {"near": "-tcp_to_obj"}, "n": len(self.requests)})
        return 200, chat_completion(answer, body["model"], 21, 9)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with serving(FakeServer(reject_json_schema=False)) as srv:
        yield srv


@pytest.fixture
def old_server() -> Iterator[FakeServer]:
    with serving(FakeServer(reject_json_schema=True)) as srv:
        yield srv


@pytest.fixture(autouse=True)
def no_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Token counting must never need tiktoken (it downloads its BPE file; docs/feasibility.md §1.3)."""
    import tiktoken

    def refuse(*args, **kwargs):
        raise AssertionError("tiktoken was used")

    monkeypatch.setattr(tiktoken, "get_encoding", refuse)
    monkeypatch.setattr(tiktoken, "encoding_for_model", refuse)


def _config(base_url: str, **kw) -> LLMConfig:
    return LLMConfig(backend="openai", model="qwen-test", base_url=base_url, api_key_env="LARES_TEST_KEY", **kw)


def test_openai_backend_sends_json_schema_and_reads_usage(server: FakeServer, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LARES_TEST_KEY", "sk-test")
    client = make_client(_config(server.url, seed=3), tmp_path)
    answer = client.complete(MESSAGES, json_schema=SCHEMA, temperature=0.7, max_tokens=50, tag="propose")
    assert json.loads(answer.text)["components"] == {"near": "-tcp_to_obj"}
    assert (answer.prompt_tokens, answer.completion_tokens) == (21, 9)
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer sk-test"
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}
    assert sent["temperature"] == 0.7 and sent["seed"] == 3
    assert sent["messages"][0] == {"role": "system", "content": "Answer in JSON."}
    assert client.usage["estimated_calls"] == 0 and client.usage["total_tokens"] == 30


def test_rejected_json_schema_falls_back_to_json_object(old_server: FakeServer) -> None:
    config = _config(old_server.url)
    client = LLMClient(make_openai_chat_model(config), config, sleep=lambda s: None)
    first = client.complete(MESSAGES, json_schema=SCHEMA)
    second = client.complete(MESSAGES, json_schema=SCHEMA)
    assert json.loads(first.text)["n"] == 2 and json.loads(second.text)["n"] == 3
    formats = [r.get("response_format", {}).get("type") for r in old_server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]  # the downgrade is remembered
    assert first.attempt == 1 and client.usage["failures"] == 1


def test_unreachable_endpoint_is_one_clear_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = _config(f"http://127.0.0.1:{port}/v1", timeout_s=2.0, max_retries=1)
    client = LLMClient(make_openai_chat_model(config), config, sleep=lambda s: None)
    with pytest.raises(LLMError, match=r"failed after 2 attempts: .*Connection") as info:
        client.complete(MESSAGES, tag="propose")
    assert "\n" not in str(info.value) and f"127.0.0.1:{port}" in str(info.value)


def test_official_endpoint_needs_a_key(monkeypatch) -> None:
    monkeypatch.delenv("LARES_TEST_KEY", raising=False)
    with pytest.raises(LLMError, match=r"\$LARES_TEST_KEY is empty"):
        make_openai_chat_model(LLMConfig(backend="openai", model="gpt-x", api_key_env="LARES_TEST_KEY"))
    with pytest.raises(LLMError, match="needs a model name"):
        make_openai_chat_model(LLMConfig(backend="openai", base_url="http://127.0.0.1:1/v1"))
