"""The OpenAI-compatible backend against a tiny /v1/chat/completions server on 127.0.0.1 (``fake_openai``)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from email.message import Message
from typing import Any

import pytest
from fake_openai import FakeOpenAI, RefusesFormat, chat_completion, serving
from langchain_core.messages import HumanMessage, SystemMessage
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.llm import LLMClient, LLMConfig, LLMError, make_client
from lares_agent.llm.formats import FORMAT_STEPS, REPEAT_PENALTY, Endpoint, FormatSteps
from lares_agent.llm.openai_compat import make_openai_chat_model
from lares_agent.runs import EVENTS_NAME, LLM_CALLS_NAME, Event, LLMCallRow, RecordFile

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


def _config(base_url: str, model_name: str = "qwen-test", **kw) -> LLMConfig:
    return LLMConfig(backend="openai", model=model_name, base_url=base_url, api_key_env="LARES_TEST_KEY", **kw)


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


def _client(config: LLMConfig, formats: FormatSteps, record: Any = None) -> LLMClient:
    return LLMClient(make_openai_chat_model(config), config, record, sleep=lambda s: None, formats=formats)


def test_a_5xx_naming_the_format_steps_down_and_every_client_of_the_endpoint_remembers(tmp_path) -> None:
    """A server answering json_schema with a 500 "response_format json_schema not supported"."""
    formats = FormatSteps()
    with serving(RefusesFormat(status=500)) as srv:
        config = _config(srv.url)
        first = _client(config, formats, tmp_path / "a.jsonl")
        assert first.complete(MESSAGES, json_schema=SCHEMA).attempt == 1  # the refusal is no failed attempt
        first.complete(MESSAGES, json_schema=SCHEMA)
        assert srv.formats == ["json_schema", "json_object", "json_object"]
        second = _client(config, formats)  # a new client, same endpoint: starts at the step that worked
        second.complete(MESSAGES, json_schema=SCHEMA)
        other_model = _client(_config(srv.url, model_name="other"), formats)  # another endpoint starts at the top
        other_model.complete(MESSAGES, json_schema=SCHEMA)
        assert srv.formats[3:] == ["json_object", "json_schema", "json_object"]
    assert formats.level(Endpoint(srv.url, "qwen-test")) == 1
    rows = RecordFile(tmp_path / "a.jsonl", LLMCallRow.from_json).read()
    assert [(r.ok, r.response_format) for r in rows] == [(False, "json_schema"), (True, "json_object"),
                                                         (True, "json_object")]
    assert rows[0].error is not None and rows[0].error.startswith(
        "response_format json_schema refused, stepping down to json_object: ")
    assert first.breaker.refusal(None) is None  # a format refusal is no endpoint failure


def test_a_server_refusing_every_format_ends_without_one() -> None:
    with serving(RefusesFormat(refused=("json_schema", "json_object"), status=503)) as srv:
        steps: list[tuple[str, str]] = []
        client = _client(_config(srv.url), FormatSteps())
        client.on_format_step = lambda endpoint, refused, step, error: steps.append((refused, step))
        assert client.complete(MESSAGES, json_schema=SCHEMA).attempt == 1
    assert srv.formats == ["json_schema", "json_object", "none"]
    assert steps == [("json_schema", "json_object"), ("json_object", "none")]


GBNF = 'root ::= "{" sp "\\"components\\"" sp ":" sp "{}" sp "}"\nsp ::= " "?'


class GrammarServer(FakeOpenAI):
    """Keeps every request body; answers what the grammar writes, or, with `ignores`, free text when a grammar
    was sent (a server that drops unknown fields)."""

    def __init__(self, ignores: bool = False) -> None:
        super().__init__()
        self.ignores = ignores
        self.bodies: list[dict[str, Any]] = []

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.bodies.append(body)
        text = "Reward: -tcp_to_obj" if self.ignores and "grammar" in body else '{"components": {}}'
        return 200, chat_completion(text, body["model"], 21, 9)


def test_a_server_reading_gbnf_gets_the_grammar_and_no_response_format(tmp_path) -> None:
    formats = FormatSteps()
    with serving(GrammarServer()) as srv:
        client = _client(_config(srv.url), formats, tmp_path / "g.jsonl")
        client.complete(MESSAGES, json_schema=SCHEMA, grammar=GBNF)
        client.complete(MESSAGES, json_schema=SCHEMA)  # a call without a grammar keeps the response_format
    first, second = srv.bodies
    assert first["grammar"] == GBNF and "response_format" not in first  # llama.cpp's field, alone
    assert first["guided_grammar"] == GBNF and first["structured_outputs"] == {"grammar": GBNF}  # vLLM's
    assert first["repeat_penalty"] == REPEAT_PENALTY == 1.0  # llama-cpp-python's server would take 1.1
    assert "repeat_penalty" not in second  # a server that may not read llama.cpp's fields gets none
    assert "grammar" not in second and second["response_format"]["type"] == "json_schema"
    rows = RecordFile(tmp_path / "g.jsonl", LLMCallRow.from_json).read()
    assert [r.response_format for r in rows] == ["grammar", "json_schema"]
    assert formats.grammar(Endpoint(srv.url, "qwen-test"))


def test_a_refused_grammar_steps_down_to_the_response_format_once_per_endpoint(tmp_path) -> None:
    """A server that refuses the `grammar` field with a 400 naming it (as OpenAI's own does)."""
    formats = FormatSteps()
    steps: list[tuple[str, str, str]] = []
    with serving(RefusesFormat(refused=("grammar",), status=400)) as srv:
        client = _client(_config(srv.url), formats, tmp_path / "r.jsonl")
        client.on_format_step = lambda endpoint, refused, step, why: steps.append((refused, step, why))
        assert client.complete(MESSAGES, json_schema=SCHEMA, grammar=GBNF).attempt == 1
        client.complete(MESSAGES, json_schema=SCHEMA, grammar=GBNF)
        _client(_config(srv.url), formats).complete(MESSAGES, json_schema=SCHEMA, grammar=GBNF)  # same endpoint
    assert srv.formats == ["grammar", "json_schema", "json_schema", "json_schema"]  # not sent again
    assert len(steps) == 1 and steps[0][:2] == ("grammar", "json_schema") and "grammar" in steps[0][2]
    assert not formats.grammar(Endpoint(srv.url, "qwen-test"))
    rows = RecordFile(tmp_path / "r.jsonl", LLMCallRow.from_json).read()
    assert rows[0].error is not None and rows[0].error.startswith("grammar refused, stepping down to json_schema: ")
    assert client.breaker.refusal(None) is None and client.usage["failures"] == 1


def test_a_server_ignoring_the_grammar_is_asked_with_the_response_format_after_its_first_answer() -> None:
    steps: list[tuple[str, str]] = []
    with serving(GrammarServer(ignores=True)) as srv:
        client = _client(_config(srv.url), FormatSteps())
        client.on_format_step = lambda endpoint, refused, step, why: steps.append((refused, step))
        first = client.complete(MESSAGES, json_schema=SCHEMA, grammar=GBNF)
        second = client.complete(MESSAGES, json_schema=SCHEMA, grammar=GBNF)
    assert first.text == "Reward: -tcp_to_obj"  # handed on as it came: the caller judges the answer
    assert json.loads(second.text) == {"components": {}}
    assert ["grammar" in b for b in srv.bodies] == [True, False]
    assert srv.bodies[1]["response_format"]["type"] == "json_schema" and steps == [("grammar", "json_schema")]


def test_openais_own_endpoint_is_never_asked_with_the_grammar(monkeypatch) -> None:
    monkeypatch.setenv("LARES_TEST_KEY", "sk-test")
    client = _client(LLMConfig(backend="openai", model="gpt-x", api_key_env="LARES_TEST_KEY"), FormatSteps())
    assert client._format(SCHEMA, GBNF) == "json_schema" and client._format(None, GBNF) is None


class Flaky(FakeOpenAI):
    """A 500 that says nothing about the format on the first `failures` requests, then answers."""

    def __init__(self, failures: int, message: str = "internal error: worker crashed") -> None:
        super().__init__()
        self.failures = failures
        self.message = message
        self.formats: list[str] = []

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.formats.append((body.get("response_format") or {}).get("type", "none"))
            n = len(self.formats)
        if n <= self.failures:
            return 500, {"error": {"message": self.message, "type": "server_error"}}
        return 200, chat_completion(json.dumps({"components": {"near": "-tcp_to_obj"}}), body["model"], 21, 9)


def test_a_plain_5xx_is_retried_with_the_same_format() -> None:
    formats = FormatSteps()
    with serving(Flaky(failures=1)) as srv:
        client = _client(_config(srv.url, max_retries=2), formats)
        answer = client.complete(MESSAGES, json_schema=SCHEMA)
    assert answer.attempt == 2 and srv.formats == ["json_schema", "json_schema"]
    assert formats.level(Endpoint(srv.url, "qwen-test")) == 0 and client.usage["failures"] == 1


def test_a_plain_5xx_that_persists_still_trips_the_breaker() -> None:
    with serving(Flaky(failures=100)) as srv:
        client = _client(_config(srv.url, max_retries=1), FormatSteps())
        for _ in range(3):
            with pytest.raises(LLMError):
                client.complete(MESSAGES, json_schema=SCHEMA, meta={"round": 1})
    assert set(srv.formats) == {"json_schema"}
    assert client.breaker.refusal(1) is not None


TINY = ["--task", "Reacher-v5", "--budget", "300", "--reward-period", "150", "--population", "2", "--elites", "1",
        "--no-report", "--no-retrieval", "--seed", "5", "--handover-episodes", "2"]


@pytest.mark.slow
def test_a_run_against_a_server_answering_grammar_and_json_schema_with_500_steps_down_and_succeeds(tmp_path) -> None:
    with serving(RefusesFormat(refused=("grammar", "json_schema"), status=500)) as srv:
        result = CliRunner().invoke(app, ["run", *TINY, "--llm", "openai", "--model", "fake", "--base-url", srv.url,
                                          "--run-dir", str(tmp_path / "runs")],
                                    env={"LARES_HOME": str(tmp_path), "COLUMNS": "240", "OPENAI_API_KEY": ""})
        assert result.exit_code == 0, result.output
        (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
        rows = RecordFile(run / LLM_CALLS_NAME, LLMCallRow.from_json).read()
        # each refused once, for the whole run
        assert srv.formats.count("grammar") == 1 and srv.formats.count("json_schema") == 1
        schema_rows = [r for r in rows if r.schema is not None]
        assert [(r.response_format, r.ok) for r in schema_rows[:2]] == [("grammar", False), ("json_schema", False)]
        assert schema_rows[2:] and all(r.ok and r.response_format == "json_object" for r in schema_rows[2:])
        # each step is in the run's events, once: endpoint, refused and next format, the server's error
        steps = [e for e in RecordFile(run / EVENTS_NAME, Event.from_json).read() if e.event == "llm_format_step"]
        assert [(e.get("refused"), e.get("next")) for e in steps] == [("grammar", "json_schema"),
                                                                      ("json_schema", "json_object")], steps
        assert all(srv.url in e.get("endpoint") and e.get("error") and e.time is not None for e in steps)
        assert "grammar" in steps[0].get("error")
        # the step is remembered for the endpoint in this process: a later client starts at json_object
        assert FORMAT_STEPS.level(Endpoint(srv.url, "fake")) == 1
        later = make_client(LLMConfig(backend="openai", model="fake", base_url=srv.url), None)
        later.complete(MESSAGES, json_schema=SCHEMA)
        assert srv.formats[-1] == "json_object"


class CachingServer(FakeOpenAI):
    """Reports, like OpenAI and vLLM, how many prompt tokens its prefix cache served."""

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        payload = chat_completion('{"components": {}}', body["model"], 40, 3)
        payload["usage"]["prompt_tokens_details"] = {"cached_tokens": 32}
        return 200, payload


def test_a_server_reported_prefix_cache_hit_is_recorded(tmp_path) -> None:
    with serving(CachingServer()) as srv:
        _client(_config(srv.url), FormatSteps(), tmp_path / "c.jsonl").complete(MESSAGES, json_schema=SCHEMA)
    (row,) = RecordFile(tmp_path / "c.jsonl", LLMCallRow.from_json).read()
    assert (row.prompt_tokens, row.cached_tokens, row.response_format) == (40, 32, "json_schema")
