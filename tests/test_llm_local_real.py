"""The one real-model test: assemble the installed 0.5B GGUF and get schema-constrained JSON from llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from lares_agent.llm import LLMClient, LLMConfig, LLMError
from lares_agent.llm.local import LlamaCppChatModel
from lares_agent.llm.models import KNOWN_MODELS, ensure_model, parts_installed

SPEC = KNOWN_MODELS["qwen2.5-coder-0.5b"]
SCHEMA = {
    "type": "object",
    "properties": {
        "components": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 60},
                       "maxProperties": 3},
        "rationale": {"type": "string", "maxLength": 80},
    },
    "required": ["components", "rationale"],
}
MESSAGES = [
    SystemMessage("You write reward functions for a robot arm. Features: tcp_to_obj, obj_to_target, action_norm."),
    HumanMessage("Propose a reward with at most 3 components for pushing the object to the target. Answer in JSON."),
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not parts_installed(SPEC), reason="0.5B model parts not installed (test extra)"),
]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_model(SPEC, tmp_path_factory.mktemp("models"))


def test_small_model_answers_json_under_a_schema(model_path: Path, tmp_path: Path) -> None:
    chat = LlamaCppChatModel(model_path=str(model_path), n_ctx=2048, n_threads=1)
    client = LLMClient(chat, LLMConfig(max_tokens=120, timeout_s=300.0), tmp_path / "llm_calls.jsonl")
    answer = client.complete(MESSAGES, json_schema=SCHEMA, tag="propose")
    data = json.loads(answer.text)
    assert set(data) >= {"components", "rationale"} and isinstance(data["components"], dict)
    assert answer.prompt_tokens > 20 and answer.completion_tokens > 0
    assert (tmp_path / "llm_calls.jsonl").read_text().count("\n") == 1


def test_local_deadline_stops_generation_and_model_stays_usable(model_path: Path) -> None:
    chat = LlamaCppChatModel(model_path=str(model_path), n_ctx=2048, n_threads=1)
    strict = LLMClient(chat, LLMConfig(max_tokens=64, timeout_s=1e-6, max_retries=0))
    with pytest.raises(LLMError, match="time limit"):
        strict.complete(MESSAGES)
    relaxed = LLMClient(chat, LLMConfig(max_tokens=8, timeout_s=300.0))
    assert relaxed.complete(MESSAGES).completion_tokens > 0


def test_the_shared_system_block_is_served_from_cache_even_after_another_system(model_path: Path,
                                                                                tmp_path: Path) -> None:
    """llama.cpp alone reuses only what the previous call shares; the saved system-block state
    serves it after a call with another system message too, and every call records what it reused."""
    from lares_agent.llm.local import get_llama, prefix_states
    from lares_agent.runs import LLMCallRow, RecordFile

    system = SystemMessage(" ".join(f"Feature note {i}: tcp_to_obj is a distance in metres." for i in range(12)))
    other = SystemMessage("You audit reward functions. " + system.content)
    calls = [[system, HumanMessage("Propose a reward.")], [other, HumanMessage("Audit a reward.")],
             [system, HumanMessage("Propose another reward.")]]
    record = tmp_path / "llm_calls.jsonl"
    chat = LlamaCppChatModel(model_path=str(model_path), n_ctx=2048, n_threads=1)
    get_llama(str(model_path), 2048, 1)[0].reset()
    client = LLMClient(chat, LLMConfig(max_tokens=2, timeout_s=300.0), record)
    for messages in calls:
        client.complete(messages)
    rows = RecordFile(record, LLMCallRow.from_json).read()
    block = prefix_states(chat.load()).probe(chat.load(), [{"role": "system", "content": system.content},
                                                           {"role": "user", "content": "x"}])
    assert len(block) > 100 and rows[0].cached_tokens == 0
    assert rows[1].cached_tokens is not None and rows[1].cached_tokens < 10  # the other system differs at once
    assert rows[2].cached_tokens is not None and rows[2].cached_tokens >= len(block) - 8  # the block, restored
    assert rows[2].prompt_tokens > rows[2].cached_tokens


def test_a_stop_aborts_the_local_model_mid_batch_and_the_model_stays_usable(model_path: Path) -> None:
    """A stop used to wait for the whole answer, and checks between prompt batches alone still waited for a batch;
    llama.cpp's abort callback now ends the decode within a graph node (`llm/abort.py`), and the KV cache stays
    consistent for the next call."""
    import threading
    import time

    from lares_agent.errors import Cancelled

    chat = LlamaCppChatModel(model_path=str(model_path), n_ctx=2048, n_threads=1)
    chat.load().reset()
    system = SystemMessage(" ".join(f"Feature note {i}: tcp_to_obj is a distance in metres." for i in range(60)))
    client = LLMClient(chat, LLMConfig(max_tokens=256, timeout_s=300.0, max_retries=3))
    stop = threading.Event()
    client.cancelled = stop.is_set
    threading.Timer(0.5, stop.set).start()  # inside the first prompt batch (about 800 tokens to evaluate)
    began = time.monotonic()
    with pytest.raises(Cancelled):
        client.complete([system, MESSAGES[1]], json_schema=SCHEMA)
    assert stop.is_set() and time.monotonic() - began < 0.5 + 2.0
    client.cancelled = lambda: False
    answer = client.complete([system, MESSAGES[1]], json_schema=SCHEMA, max_tokens=120)
    assert set(json.loads(answer.text)) >= {"components", "rationale"}
