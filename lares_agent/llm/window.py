"""The context window of the run's model or server: what a prompt and its answer must fit in.

A server started with its defaults (llama.cpp's `python -m llama_cpp.server`, `llama-server`, Ollama) holds 2,048
tokens. Sent a longer request, llama.cpp shortens the answer to what is left, so a JSON answer ends mid-object
(`finish_reason=length`), and the same request fails the same way every time. So the graph fits its prompts into
the window (`graphs/budget.py`), and the client (`client.py`) asks this module three things around each call:
how many answer tokens are left (a call that cannot fit is refused before it is made), what a cut answer or a
context error means (one line with the cause and the fix, never retried unchanged), and what the server's real
context is when it says so (a cut answer's prompt plus completion tokens, or the number in its error), which later
prompts are then trimmed to.

Token counts: the local model counts with its own tokenizer; a server's tokenizer is not at hand (tiktoken would
download its BPE file), so its counts are estimated from characters, conservatively at 3 characters a token
(Qwen2.5's tokenizer averages 3.5 to 3.7 on these prompts), then calibrated on the prompt tokens the server
reports for each answered call.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from lares_agent.llm.errors import AnswerCut, ContextTooSmall

__all__ = ["CHARS_PER_TOKEN", "MESSAGE_TOKENS", "SERVER_CONTEXT", "ContextWindow", "context_fix", "message_text"]

SERVER_CONTEXT = 2048
"""The context assumed for an OpenAI-compatible server without `--llm-context`: llama.cpp's server default."""
CHARS_PER_TOKEN = 3.0
"""Characters per token before a server has reported any count: fewer than any tokenizer of these prompts gives,
so a prompt's estimate is high and it fits."""
MESSAGE_TOKENS = 5
"""Chat-template tokens around each message (`<|im_start|>role\\n ... <|im_end|>\\n`); 3 more start the answer."""
_MIN_RATIO, _MAX_RATIO = 2.0, 5.0  # a calibration outside this is a server's odd count, not its tokenizer
_CONTEXT_WORDS = re.compile(r"context[ _](length|window|size)|maximum context|n_ctx|prompt is too long|"
                            r"exceeds? (the )?(available )?context", re.IGNORECASE)
_CONTEXT_NUMBER = re.compile(r"(?:maximum context length is|context window of|context size(?: of)?|n_ctx\D{0,4})"
                             r"\s*\(?(\d{3,7})", re.IGNORECASE)


def message_text(message: BaseMessage | Mapping[str, Any]) -> str:
    """A message's text (LangChain message or OpenAI-style dict; list contents joined)."""
    content = message.get("content", "") if isinstance(message, Mapping) else message.content
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") if isinstance(p, Mapping) else str(p) for p in content or [])


def context_fix(kind: str, size: int, server_said: bool = False) -> str:
    """How to give the model a larger context, in the words of the server the user runs; where the server showed
    its context (`server_said`), also how to make the prompts fit the one it has."""
    bigger = max(8192, 2 * size)
    if kind == "local":
        return f"pass --llm-context {bigger} (the local model then loads with that context)"
    fix = (f"start the server with a larger context (llama.cpp's `python -m llama_cpp.server --n_ctx {bigger}`, "
           f"`llama-server -c {bigger}`, vLLM `--max-model-len {bigger}`, Ollama `num_ctx {bigger}`) and pass "
           f"--llm-context {bigger}")
    return fix + (f"; or pass --llm-context {size}, the server's, so every prompt is trimmed to fit it from the "
                  "start" if server_said else "")


@dataclass
class ContextWindow:
    """One client's context: `tokens` (None: unknown, nothing is fitted or refused), how text is counted, and what
    the server has shown of its own context and tokenizer. Thread-safe (graph nodes may call from several threads).

    `on_note(line)`: told once per cause (a smaller context learned, a call refused, an answer cut), so the run can
    put the cause and its fix on the screen and in events.jsonl.
    """

    tokens: int | None
    kind: str = "openai"
    counter: Callable[[str], int] | None = None  # an exact tokenizer (the local model's); None: estimate
    where: str = ""  # ' to <endpoint>' for messages
    on_note: Callable[[str], None] | None = None
    learned: int | None = None  # the server's context as its answers or errors showed it
    chars_per_token: float = CHARS_PER_TOKEN
    _calibrated: bool = False
    _said: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def size(self) -> int | None:
        """The tokens a prompt plus its answer may take: the configured context, or less where the server said so."""
        if self.tokens is None:
            return self.learned
        return self.tokens if self.learned is None else min(self.tokens, self.learned)

    def count(self, text: str) -> int:
        """Tokens of `text`: exact for the local model, else a high estimate from its characters."""
        if self.counter is not None:
            try:
                return self.counter(text)
            except Exception:  # a model that cannot tokenize now: estimate, as for a server
                pass
        return math.ceil(len(text) / self.chars_per_token)

    def count_messages(self, messages: Sequence[BaseMessage] | Sequence[Mapping[str, Any]]) -> int:
        """Tokens of a whole request: every message's text plus the chat template around it."""
        return sum(self.count(message_text(m)) + MESSAGE_TOKENS for m in messages) + 3

    def answer_room(self, messages: Sequence[BaseMessage], max_tokens: int, tag: str) -> int:
        """The answer tokens to ask for: `max_tokens`, or what the context leaves when that is less but at least
        half of it. Raises ContextTooSmall (before any call) when not even half is left."""
        size = self.size
        if size is None:
            return max_tokens
        prompt = self.count_messages(messages)
        left = size - prompt
        if left >= max_tokens:
            return max_tokens
        if left >= math.ceil(max_tokens / 2):
            return left
        cause = (f"LLM call {tag!r}{self.where} not made: its prompt takes about {prompt:,} tokens, which leaves "
                 f"{max(left, 0):,} of the {size:,}-token context for an answer of up to {max_tokens:,} tokens")
        line = f"{cause}; fix: {context_fix(self.kind, size)}"
        self._note("refused", line)
        raise ContextTooSmall(line)

    def observe(self, messages: Sequence[BaseMessage], prompt_tokens: int) -> None:
        """Calibrate the estimate on a prompt the server counted (the local model counts exactly already)."""
        if self.counter is not None or prompt_tokens <= 0:
            return
        chars = sum(len(message_text(m)) for m in messages)
        body = prompt_tokens - MESSAGE_TOKENS * len(messages) - 3
        if body <= 0 or chars <= 0:
            return
        ratio = chars / body
        if not _MIN_RATIO <= ratio <= _MAX_RATIO:
            return
        with self._lock:  # the most tokens a character took so far, with 5% to spare
            seen = ratio * 0.95
            self.chars_per_token = seen if not self._calibrated else min(self.chars_per_token, seen)
            self._calibrated = True

    def cut(self, tag: str, prompt_tokens: int, completion_tokens: int, max_tokens: int) -> AnswerCut:
        """What an answer that ended at its token limit means. When it ended before `max_tokens`, the server
        shortened it to what its context had left: its context is the prompt plus the answer, remembered here."""
        head = (f"LLM call {tag!r}{self.where}: the answer was cut after {completion_tokens:,} tokens "
                f"(finish_reason=length)")
        if 0 < completion_tokens < max_tokens and prompt_tokens > 0:
            context = prompt_tokens + completion_tokens
            self._learn(context)
            line = (f"{head}: the prompt took {prompt_tokens:,} tokens of the server's {context:,}-token context, "
                    f"leaving too little for an answer of up to {max_tokens:,} tokens; the next prompts are trimmed "
                    f"to fit it; fix: {context_fix(self.kind, context, server_said=True)}")
            self._note("context", line)
        else:
            line = f"{head}: the model wrote more than the {max_tokens:,} tokens a candidate may take; not retried"
        return AnswerCut(line, prompt_tokens, completion_tokens)

    def explain(self, exc: BaseException, tag: str, max_tokens: int) -> BaseException:
        """`exc` as ContextTooSmall / AnswerCut when it is a context failure, else `exc` unchanged: the OpenAI SDK's
        LengthFinishReasonError (raised for a cut answer under a response_format; it holds the completion and its
        usage) or a server's error about its context length (whose number is remembered)."""
        completion = getattr(exc, "completion", None)
        if type(exc).__name__ == "LengthFinishReasonError" and completion is not None:
            usage = getattr(completion, "usage", None)
            prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
            made = int(getattr(usage, "completion_tokens", 0) or 0)
            cut = self.cut(tag, prompt, made, max_tokens)
            cut.answer = _completion_text(completion)
            return cut
        text = str(exc)
        if not _CONTEXT_WORDS.search(text):
            return exc
        number = _CONTEXT_NUMBER.search(text)
        size = int(number.group(1)) if number else self.size
        if number:
            self._learn(size or 0)
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        said = f"the server's {size:,}-token context" if size else "the server's context"
        line = (f"LLM call {tag!r}{self.where}: the prompt and its answer do not fit {said} ({first[:200]}); "
                f"fix: {context_fix(self.kind, size or SERVER_CONTEXT, server_said=number is not None)}")
        self._note("context", line)
        return ContextTooSmall(line)

    def _learn(self, context: int) -> None:
        if context > 0:
            with self._lock:
                self.learned = context if self.learned is None else min(self.learned, context)

    def _note(self, cause: str, line: str) -> None:
        with self._lock:
            if cause in self._said:
                return
            self._said.add(cause)
        if self.on_note is not None:
            self.on_note(line)


def _completion_text(completion: Any) -> str | None:
    """The text of an OpenAI SDK `ChatCompletion`'s first choice (what a cut answer said before the cut)."""
    try:
        return str(completion.choices[0].message.content or "")
    except (AttributeError, IndexError, TypeError):
        return None


def client_window(chat_model: Any, context: int | None, kind: str, where: str) -> ContextWindow:
    """The window of a client's chat model: `context` (`LLMConfig.context`) or the backend's own, the local model's
    n_ctx (and its tokenizer), `SERVER_CONTEXT` for a server; unknown for a replay or another chat model."""
    served = getattr(chat_model, "wrapped_model", chat_model)  # the fault injector's window is its model's
    if kind == "local":
        n_ctx = int(getattr(served, "n_ctx", context or 0) or 0) or None
        tokens = min(context, n_ctx) if context and n_ctx else (context or n_ctx)
        return ContextWindow(tokens, kind, _local_counter(served), where)
    return ContextWindow(context or (SERVER_CONTEXT if kind == "openai" else None), kind, None, where)


def _local_counter(model: Any) -> Callable[[str], int] | None:
    """The local model's own token count (its vocabulary only, so no lock on a call in flight is needed)."""
    if not getattr(model, "model_path", None):
        return None

    def count(text: str) -> int:
        from lares_agent.llm.local import get_llama

        llama, _ = get_llama(model.model_path, model.n_ctx, model.threads, model.seed)
        return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    return count
