"""One chat answer as LangChain's `ChatResult`: the wrapping every backend of this package ends a call with.

The llama.cpp, replay and fault-injecting models each answer a call with exactly one generation; building it
here keeps their token accounting (input + output = total, read by `LLMClient`'s usage ledger) identical.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = ["one_answer"]


def one_answer(
    text: str,
    metadata: Mapping[str, Any],
    tokens: tuple[int, int] | None = None,
    llm_output: dict[str, Any] | None = None,
) -> ChatResult:
    """`text` as the single generation of a call, with `metadata` as its response metadata.

    `tokens` is (prompt, completion) when the backend knows them; None leaves `usage_metadata` unset, so the
    client estimates the counts instead of trusting zeros.
    """
    usage = None
    if tokens is not None:
        prompt, completion = tokens
        usage = UsageMetadata(input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion)
    message = AIMessage(content=text, usage_metadata=usage, response_metadata=dict(metadata))
    return ChatResult(generations=[ChatGeneration(message=message)], llm_output=llm_output)
