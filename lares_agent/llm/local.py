"""In-process llama.cpp chat model (the default backend), as a LangChain `BaseChatModel`.

One `Llama` object is kept per (path, n_ctx, n_threads) for the life of the process: llama.cpp reuses the KV
cache for the longest shared token prefix of consecutive prompts, so a long fixed system prompt is evaluated
once and later calls only pay for their new tokens (5x faster in docs/feasibility.md §4.4).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from lares_agent.llm.answers import one_answer
from lares_agent.llm.errors import LLMError, LLMTimeout

_CACHE: dict[tuple[str, int, int], tuple[Any, threading.Lock]] = {}
_CACHE_LOCK = threading.Lock()


def default_threads() -> int:
    """Cores this process may run on (affinity-aware where the OS says so)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def get_llama(path: str, n_ctx: int, n_threads: int, seed: int = 0) -> tuple[Any, threading.Lock]:
    """The process-wide `Llama` for (path, n_ctx, n_threads) and the lock that serialises its use.

    `llama_cpp` is imported here, not at module import, so the CLI and the other backends start without it.
    """
    key = (os.path.realpath(path), n_ctx, n_threads)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        try:
            from llama_cpp import Llama
        except ImportError as exc:  # pragma: no cover - llama-cpp-python is a hard dependency
            raise LLMError(f"llama-cpp-python is not importable ({exc}); fix: pip install llama-cpp-python") from None
        try:
            llama = Llama(
                model_path=key[0], n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, seed=seed, verbose=False
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise LLMError(f"llama.cpp could not load {path}: {exc}") from None
        entry = (llama, threading.Lock())
        if not _CACHE:
            # Close models before interpreter teardown: llama.cpp's own __del__ then finds its C library already
            # unloaded and prints a traceback at exit.
            atexit.register(release_models)
        _CACHE[key] = entry
        return entry


def release_models() -> None:
    """Drop every cached `Llama` (frees memory; tests and long-lived servers switching models use it)."""
    with _CACHE_LOCK:
        for llama, _ in _CACHE.values():
            llama.close()
        _CACHE.clear()


def _role(message: BaseMessage) -> str:
    kind = message.type
    if kind == "human":
        return "user"
    if kind == "ai":
        return "assistant"
    if kind in ("system", "tool"):
        return kind
    return "user"


def to_openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages as OpenAI-style role/content dicts (text content only)."""
    out: list[dict[str, str]] = []
    for m in messages:
        content = m.content if isinstance(m.content, str) else m.text
        out.append({"role": _role(m), "content": content})
    return out


class _Deadline:
    """A llama.cpp stopping criterion that ends generation at a wall-clock deadline.

    llama.cpp has no cancel call, and exceptions raised in its C sampler callbacks are swallowed; a stopping
    criterion is plain Python checked once per generated token, so a call is bounded by the deadline plus
    one token (prompt evaluation itself is bounded by n_ctx).
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        if time.monotonic() > self.deadline:
            self.fired = True
        return self.fired


@contextlib.contextmanager
def _with_deadline(llama: Any, deadline: _Deadline) -> Iterator[None]:
    """Add `deadline` to the stopping criteria of every completion `llama` runs inside the block.

    The chat handlers build their own stopping criteria and call `llama.create_completion`; shadowing that
    method on this one instance (we hold its lock) is the only way to add ours for every chat format.
    """
    from llama_cpp import Llama, StoppingCriteriaList

    def create_completion(*args: Any, stopping_criteria: Any = None, **kwargs: Any) -> Any:
        kwargs["stopping_criteria"] = StoppingCriteriaList([*(stopping_criteria or []), deadline])
        return Llama.create_completion(llama, *args, **kwargs)

    llama.create_completion = create_completion
    try:
        yield
    finally:
        del llama.create_completion


class LlamaCppChatModel(BaseChatModel):
    """Chat completions from a GGUF file through llama-cpp-python, in process.

    Per-call options (LangChain `invoke(..., **kwargs)`): `temperature`, `max_tokens`, `seed`,
    `response_format` (llama's `{"type": "json_object", "schema": {...}}` grammar-constrained JSON) and
    `timeout` (seconds, enforced per generated token).
    """

    model_path: str
    n_ctx: int = 4096
    n_threads: int | None = None
    seed: int = 0
    temperature: float = 0.4
    max_tokens: int = 384
    timeout: float | None = None

    @property
    def _llm_type(self) -> str:
        return "llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "n_ctx": self.n_ctx, "n_threads": self.threads}

    @property
    def threads(self) -> int:
        """Threads llama.cpp uses: the configured number, else every core this process may use."""
        return self.n_threads if self.n_threads else default_threads()

    def load(self) -> Any:
        """Load (or fetch the cached) `Llama`; callers may do this up front to keep load time out of a call."""
        return get_llama(self.model_path, self.n_ctx, self.threads, self.seed)[0]

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        llama, lock = get_llama(self.model_path, self.n_ctx, self.threads, self.seed)
        timeout = kwargs.pop("timeout", self.timeout)
        params: dict[str, Any] = {
            "messages": to_openai_messages(messages),
            "temperature": kwargs.pop("temperature", self.temperature),
            "max_tokens": kwargs.pop("max_tokens", self.max_tokens),
            "seed": kwargs.pop("seed", self.seed),
            "stop": stop or [],
        }
        response_format: Mapping[str, Any] | None = kwargs.pop("response_format", None)
        if response_format is not None:
            params["response_format"] = dict(response_format)
        with lock:  # a Llama context is not thread-safe
            if timeout:
                deadline = _Deadline(time.monotonic() + timeout)
                with _with_deadline(llama, deadline):
                    result = llama.create_chat_completion(**params)
                if deadline.fired:
                    raise LLMTimeout(f"local model ran past its {timeout:g} s time limit")
            else:
                result = llama.create_chat_completion(**params)
        choice = result["choices"][0]
        text = choice["message"].get("content") or ""
        usage = result.get("usage") or {}
        tokens = (int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
        metadata = {"finish_reason": choice.get("finish_reason"), "model": os.path.basename(self.model_path)}
        return one_answer(text, metadata, tokens, llm_output={"token_usage": dict(usage)})

