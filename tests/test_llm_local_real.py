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
