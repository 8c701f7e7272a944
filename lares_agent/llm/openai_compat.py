"""OpenAI-compatible chat model (OpenAI, vLLM, Ollama, llama-server) through `langchain-openai`.

Token usage is read from each response's `usage` (LangChain's `usage_metadata`); nothing here calls
`get_num_tokens`, which loads a tiktoken BPE file from the internet and fails offline (docs/feasibility.md §1.3).
Retries belong to `LLMClient`, so the OpenAI SDK's own retries are switched off (no retry storms).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pydantic import SecretStr

from lares_agent.llm.config import LLMConfig
from lares_agent.llm.errors import LLMError

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

# Local servers (vLLM, Ollama, llama-server) accept any key but the SDK insists on one being set.
_PLACEHOLDER_KEY = "not-needed"


def make_openai_chat_model(config: LLMConfig) -> ChatOpenAI:
    """A `ChatOpenAI` for `config` (model name required; the key comes from `config.api_key_env`).

    Without `base_url` the official OpenAI endpoint is meant, and a missing key is an error; with a
    `base_url` (a local server) a missing key is replaced by a placeholder.
    """
    if not config.model:
        raise LLMError("the openai backend needs a model name; fix: pass --llm-model NAME (as the server calls it)")
    key = os.environ.get(config.api_key_env, "")
    if not key:
        if config.base_url is None:
            raise LLMError(
                f"no API key: ${config.api_key_env} is empty; fix: export it, or pass --base-url for a local server"
            )
        key = _PLACEHOLDER_KEY
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:  # pragma: no cover - langchain-openai is a hard dependency
        raise LLMError(f"langchain-openai is not importable ({exc}); fix: pip install langchain-openai") from None
    return ChatOpenAI(
        model=config.model,
        base_url=config.base_url,
        api_key=SecretStr(key),
        temperature=config.temperature,
        max_completion_tokens=config.max_tokens,  # the alias of ChatOpenAI's `max_tokens` field
        seed=config.seed,
        timeout=config.call_timeout_s,
        max_retries=0,
    )
