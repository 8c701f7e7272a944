"""In-process llama.cpp chat model (the default backend), as a LangChain `BaseChatModel`.

One `Llama` object is kept per (path, n_ctx, n_threads) for the life of the process: llama.cpp reuses the KV
cache for the longest shared token prefix of consecutive prompts, so a long fixed system prompt is evaluated
once and later calls only pay for their new tokens (5x faster in docs/feasibility.md §4.4).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from lares_agent.errors import Cancelled
from lares_agent.llm import abort
from lares_agent.llm.answers import one_answer
from lares_agent.llm.cancel import POLL_S, check
from lares_agent.llm.errors import LLMError, LLMTimeout
from lares_agent.llm.formats import REPEAT_PENALTY
from lares_agent.llm.prefix_cache import PrefixStates, common_prefix

_CACHE: dict[tuple[str, int, int], tuple[Any, threading.Lock]] = {}
_PREFIXES: dict[int, PrefixStates] = {}  # id(Llama) -> its saved system-block states, under the model's lock
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


@contextlib.contextmanager
def _threads(llama: Any, threads: int | None, own: int) -> Iterator[None]:
    """Compute with `threads` threads within the block (llama.cpp's `llama_set_n_threads` on the loaded context,
    so no second copy of the model), then with the model's `own` again; None or `own`: nothing to change."""
    if threads is None or threads == own:
        yield
        return
    llama._ctx.set_n_threads(threads, threads)
    try:
        yield
    finally:
        llama._ctx.set_n_threads(own, own)


def release_models() -> None:
    """Drop every cached `Llama` (frees memory; tests and long-lived servers switching models use it)."""
    with _CACHE_LOCK:
        for llama, _ in _CACHE.values():
            abort.forget(llama)
            llama.close()
        _CACHE.clear()
        _PREFIXES.clear()


def prefix_states(llama: Any) -> PrefixStates:
    """The saved shared-prefix states of a cached `Llama` (call under its lock)."""
    return _PREFIXES.setdefault(id(llama), PrefixStates())


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


@functools.lru_cache(maxsize=16)
def compiled_grammar(text: str) -> Any:
    """A GBNF grammar compiled once per text (a run asks under one grammar per task); a grammar llama.cpp cannot
    read is a ValueError naming it, not a failed call."""
    from llama_cpp.llama_grammar import LlamaGrammar

    try:
        return LlamaGrammar.from_string(text, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise ValueError(f"llama.cpp refused the answer grammar ({exc})") from None


class _Deadline:
    """A llama.cpp stopping criterion that ends generation once it has run ``limit`` seconds.

    llama.cpp has no cancel call, and exceptions raised in its C sampler callbacks are swallowed; a stopping
    criterion is plain Python checked once per generated token, so generation is bounded by the limit plus one
    token. The clock starts at the first generated token: prompt evaluation is bounded by n_ctx already, and
    counting it made a call on a busy core spend its limit evaluating a new prompt, give up, and evaluate nothing
    on the retry (its prompt then sat in the KV cache) but generate it all again.
    """

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.started: float | None = None
        self.fired = False

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        now = time.monotonic()
        if self.started is None:
            self.started = now
        if now - self.started > self.limit:
            self.fired = True
        return self.fired


class _Hooks:
    """What the shadowed `create_completion` did in one call: prompt tokens reused from the KV cache."""

    def __init__(self) -> None:
        self.cached_tokens: int | None = None


@contextlib.contextmanager
def _completion_hooks(
    llama: Any, deadline: _Deadline | None, prefixes: PrefixStates | None, probe: Sequence[int],
    cancel: Callable[[], bool] | None = None,
) -> Iterator[_Hooks]:
    """Shadow `llama.create_completion` for the calls inside the block: add `deadline` to the stopping criteria,
    put the shared prefix in the KV cache first (`PrefixStates`), and count the prompt tokens reused. With
    `cancel`, shadow `llama.eval` too: it raises `Cancelled` before each prompt batch and each generated token
    once the run is asked to stop (llama.cpp has no cancel call; its own batches, so the numbers do not change).

    The chat handlers build their own stopping criteria and call `llama.create_completion`; shadowing that
    method on this one instance (we hold its lock) is the only way to reach every chat format.
    """
    from llama_cpp import Llama, StoppingCriteriaList

    hooks = _Hooks()

    def eval_batches(tokens: Sequence[int]) -> None:
        step = max(1, int(llama.n_batch))
        for i in range(0, max(len(tokens), 1), step):  # an empty call still reaches llama (it trims the cache)
            check(cancel, "the local model's answer")
            Llama.eval(llama, tokens[i : i + step])

    def create_completion(*args: Any, stopping_criteria: Any = None, **kwargs: Any) -> Any:
        if deadline is not None:
            stopping_criteria = StoppingCriteriaList([*(stopping_criteria or []), deadline])
        kwargs["stopping_criteria"] = stopping_criteria
        prompt = kwargs.get("prompt", args[0] if args else None)
        if isinstance(prompt, list) and prompt:
            if prefixes is not None:
                hooks.cached_tokens = prefixes.prepare(llama, prompt, probe)
            else:  # what Llama.generate reuses on its own: the prefix shared with the previous call's tokens
                hooks.cached_tokens = min(common_prefix(llama._input_ids, prompt), len(prompt) - 1)
        return Llama.create_completion(llama, *args, **kwargs)

    llama.create_completion = create_completion
    if cancel is not None:
        llama.eval = eval_batches
    try:
        yield hooks
    finally:
        del llama.create_completion
        if cancel is not None:
            del llama.eval


class LlamaCppChatModel(BaseChatModel):
    """Chat completions from a GGUF file through llama-cpp-python, in process.

    Per-call options (LangChain `invoke(..., **kwargs)`): `temperature`, `max_tokens`, `seed`,
    `response_format` (llama's `{"type": "json_object", "schema": {...}}` grammar-constrained JSON) and
    `timeout` (seconds of generation from the first token, checked per token) and `cancel` (a callable: once it
    holds, the call raises `Cancelled` within a graph node of llama.cpp's computation, `abort.py`, or else before
    the next prompt batch or token). `prefix_cache` keeps the KV state
    of each shared prefix (the system block) and restores it when the previous call did not share it
    (`prefix_cache.py`); off, only llama.cpp's reuse of the previous call's tokens is left. Each answer's response
    metadata holds `cached_tokens`, the prompt tokens not evaluated again.
    """

    model_path: str
    n_ctx: int = 4096
    n_threads: int | None = None
    seed: int = 0
    temperature: float = 0.4
    max_tokens: int = 384
    timeout: float | None = None
    prefix_cache: bool = True

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
        cancel: Callable[[], bool] | None = kwargs.pop("cancel", None)  # the run's stop request (`cancel.py`)
        threads: int | None = kwargs.pop("threads", None)  # this call's threads (`LLMClient.threads_while`)
        params: dict[str, Any] = {
            "messages": to_openai_messages(messages),
            "temperature": kwargs.pop("temperature", self.temperature),
            "max_tokens": kwargs.pop("max_tokens", self.max_tokens),
            "seed": kwargs.pop("seed", self.seed),
            "stop": stop or [],
            "repeat_penalty": REPEAT_PENALTY,  # as a server that reads the grammar is asked (llm/formats.py)
        }
        response_format: Mapping[str, Any] | None = kwargs.pop("response_format", None)
        grammar: str | None = kwargs.pop("grammar", None)
        if grammar is not None:
            params["grammar"] = compiled_grammar(grammar)
        elif response_format is not None:
            params["response_format"] = dict(response_format)
        with lock, _threads(llama, threads, self.threads):  # a Llama context is not thread-safe
            prefixes = prefix_states(llama) if self.prefix_cache else None
            probe = prefixes.probe(llama, params["messages"]) if prefixes is not None else ()
            deadline = _Deadline(timeout) if timeout else None
            with abort.aborting(llama, cancel, POLL_S) as flag, \
                    _completion_hooks(llama, deadline, prefixes, probe, cancel) as hooks:
                try:
                    result = llama.create_chat_completion(**params)
                except RuntimeError:  # llama_decode returned 2: aborted mid-batch (abort.py)
                    if flag is not None and flag.is_set:
                        raise Cancelled("the local model's answer given up: the run was asked to stop") from None
                    raise
            if deadline is not None and deadline.fired:
                raise LLMTimeout(f"local model ran past its {timeout:g} s time limit")
        choice = result["choices"][0]
        text = choice["message"].get("content") or ""
        usage = result.get("usage") or {}
        tokens = (int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
        metadata = {"finish_reason": choice.get("finish_reason"), "model": os.path.basename(self.model_path),
                    "cached_tokens": hooks.cached_tokens}
        return one_answer(text, metadata, tokens, llm_output={"token_usage": dict(usage)})

