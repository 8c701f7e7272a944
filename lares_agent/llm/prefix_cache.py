"""Saved KV states of the shared prompt prefix (the system block) of one llama.cpp model, and the hit count.

llama-cpp-python reuses only the longest token prefix shared with the *previous* call's tokens
(`Llama.generate`): one call with another system message in between (another persona, another task in the same
process, a `reset()`) and the next call evaluates the whole ~1.5k-token system block again. `PrefixStates`
keeps the KV cache of each system block it has evaluated (sequence 0's state, no logits: tens of MB for the
1.5B model) and loads it back whenever the live tokens share less than that block. It also says, per call,
how many prompt tokens were not evaluated again (`cached_tokens` in `llm_calls.jsonl`).

The anchor (where the shared block ends, in tokens) is found without knowing the chat template: the model's
own chat handler renders the messages once more with the last message emptied, and the common token prefix of
that rendering and the real prompt is the part every call with these earlier messages shares.
"""

from __future__ import annotations

import ctypes
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MIN_ANCHOR_TOKENS", "PrefixStates", "common_prefix"]

MIN_ANCHOR_TOKENS = 32  # shorter shared prefixes cost less to evaluate than to save and load
_MAX_STATES = 4  # distinct system blocks kept (personas x tasks of one process); ~40 MB each for the 1.5B model


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class _Captured(Exception):
    """Raised by the probe's `create_completion` to stop a chat handler once it has built its prompt."""

    def __init__(self, prompt: list[int]) -> None:
        super().__init__("prompt captured")
        self.prompt = prompt


class PrefixStates:
    """The saved system-block states of one `Llama` (use it under that model's lock; it is not thread-safe)."""

    def __init__(self, max_states: int = _MAX_STATES) -> None:
        self.max_states = max_states
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._probes: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self.saves = 0
        self.loads = 0

    def __len__(self) -> int:
        return len(self._states)

    def clear(self) -> None:
        """Drop every saved state (benchmarks start each sequence cold)."""
        self._states.clear()
        self._probes.clear()

    def probe(self, llama: Any, messages: Sequence[Mapping[str, str]]) -> tuple[int, ...]:
        """The tokens of `messages` rendered with the last message's content emptied (cached per earlier messages).

        Empty for a single message: nothing is shared before it.
        """
        if len(messages) < 2:
            return ()
        key = json.dumps([dict(m) for m in messages[:-1]], sort_keys=True)
        hit = self._probes.get(key)
        if hit is not None:
            self._probes.move_to_end(key)
            return hit
        last = dict(messages[-1])
        last["content"] = ""
        tokens = _rendered_prompt(llama, [*[dict(m) for m in messages[:-1]], last])
        self._probes[key] = tokens
        while len(self._probes) > 4 * self.max_states:
            self._probes.popitem(last=False)
        return tokens

    def prepare(self, llama: Any, prompt: Sequence[int], probe: Sequence[int]) -> int:
        """Before `llama` generates for `prompt`: make sure the shared block is in its KV cache; return how many
        prompt tokens this call will not evaluate (what `Llama.generate` reuses after this).

        The block is loaded from a saved state when the live tokens share less of it, or evaluated here (from
        what the live tokens do share) and saved for later calls.
        """
        n = len(prompt)
        live = common_prefix(llama._input_ids, prompt)
        anchor = min(common_prefix(probe, prompt), n - 1)
        if anchor < MIN_ANCHOR_TOKENS or getattr(llama, "_is_recurrent", False):
            return max(0, min(live, n - 1))
        key = tuple(prompt[:anchor])
        if live >= anchor:
            if key in self._states:
                self._states.move_to_end(key)
            return min(live, n - 1)
        state = self._states.get(key)
        if state is not None:
            self._load(llama, key, state)
            self._states.move_to_end(key)
            return anchor
        llama.n_tokens = live  # `Llama.eval` drops the KV cells from n_tokens on and evaluates from there
        llama.eval(list(prompt[live:anchor]))
        self._save(llama, key)
        return live

    def _save(self, llama: Any, key: tuple[int, ...]) -> None:
        from llama_cpp import llama_cpp

        ctx = llama._ctx.ctx
        size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0))
        if written <= 0:
            return  # this context cannot save a sequence: calls still work, without the saved block
        self._keep(key, ctypes.string_at(buf, written))

    def _keep(self, key: tuple[int, ...], state: bytes) -> None:
        """Store a saved state, dropping the least recently used beyond `max_states`."""
        self._states[key] = state
        self.saves += 1
        while len(self._states) > self.max_states:
            self._states.popitem(last=False)

    def _load(self, llama: Any, key: tuple[int, ...], state: bytes) -> None:
        from llama_cpp import llama_cpp

        llama._ctx.kv_cache_seq_rm(0, 0, -1)
        buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if int(llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, buf, len(state), 0)) == 0:
            llama.n_tokens = 0  # nothing usable is cached now; generate() evaluates the whole prompt
            self._states.pop(key, None)
            return
        llama.input_ids[: len(key)] = key
        llama.n_tokens = len(key)
        llama._requires_eval = True  # the logits are not live: the suffix decode refreshes them
        self.loads += 1


def _rendered_prompt(llama: Any, messages: list[dict[str, str]]) -> tuple[int, ...]:
    """The prompt tokens `llama`'s chat handler builds for `messages`, without generating anything: every
    handler ends in `llama.create_completion(prompt=...)`, which is shadowed here to capture its prompt."""
    def capture(*args: Any, **kwargs: Any) -> Any:
        prompt = kwargs.get("prompt", args[0] if args else None)
        raise _Captured(list(prompt) if isinstance(prompt, list) else [])

    shadowed = llama.__dict__.get("create_completion")
    llama.create_completion = capture
    try:
        llama.create_chat_completion(messages=messages, max_tokens=1)
    except _Captured as got:
        return tuple(got.prompt)
    finally:
        if shadowed is None:
            del llama.create_completion
        else:
            llama.create_completion = shadowed
    return ()
