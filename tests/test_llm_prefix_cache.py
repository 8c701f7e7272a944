"""`PrefixStates`' decisions (when to evaluate and save, load, or leave llama.cpp's own reuse) and its count of
reused tokens, on a stand-in for `Llama` that records what it evaluates; the real model is in
test_llm_local_real.py."""

from __future__ import annotations

from typing import Any

from lares_agent.llm.prefix_cache import MIN_ANCHOR_TOKENS, PrefixStates, common_prefix


class FakeLlama:
    """The few `Llama` fields `PrefixStates` touches: the live tokens and `eval`."""

    def __init__(self) -> None:
        self.input_ids: list[int] = []
        self.n_tokens = 0
        self.evaluated = 0

    @property
    def _input_ids(self) -> list[int]:
        return self.input_ids[: self.n_tokens]

    def eval(self, tokens: list[int]) -> None:
        self.input_ids = self.input_ids[: self.n_tokens] + list(tokens)
        self.n_tokens = len(self.input_ids)
        self.evaluated += len(tokens)

    def generate(self, prompt: list[int]) -> None:
        """What Llama.generate does to the live tokens: keep the shared prefix, evaluate the rest, add an answer."""
        self.n_tokens = min(common_prefix(self._input_ids, prompt), len(prompt) - 1)
        self.eval([*prompt[self.n_tokens:], 7, 7])


class Recording(PrefixStates):
    """Keeps the saved token keys instead of llama.cpp's sequence state."""

    def _save(self, llama: Any, key: tuple[int, ...]) -> None:
        self._keep(key, b"kv")

    def _load(self, llama: Any, key: tuple[int, ...], state: bytes) -> None:
        llama.input_ids, llama.n_tokens = list(key), len(key)
        self.loads += 1


def prompt(system: int, user: int, n_system: int = 100) -> tuple[list[int], list[int]]:
    """(prompt, probe): `n_system` tokens of system block `system`, then a user turn; the probe ends the block
    like the chat template does with an emptied user message."""
    block = [1000 * system + i for i in range(n_system)]
    return block + [user] * 20 + [9, 9], [*block, 9, 9, 9]


def call(states: PrefixStates, llama: FakeLlama, tokens: list[int], probe: list[int]) -> tuple[int, int]:
    before = llama.evaluated
    cached = states.prepare(llama, tokens, probe)
    llama.generate(tokens)
    return cached, llama.evaluated - before - 2  # prompt tokens this call evaluated


def test_the_system_block_is_evaluated_once_and_restored_after_another_system() -> None:
    llama, states = FakeLlama(), Recording()
    a1, probe_a = prompt(1, 5)
    b1, probe_b = prompt(2, 6)
    a2, _ = prompt(1, 8)
    assert call(states, llama, a1, probe_a) == (0, len(a1))  # cold: evaluated (block first, then saved)
    assert call(states, llama, b1, probe_b) == (0, len(b1))
    assert states.saves == 2 and states.loads == 0
    assert call(states, llama, a2, probe_a) == (100, len(a2) - 100)  # block a restored, only the user turn paid
    assert states.loads == 1
    a3, _ = prompt(1, 4)
    assert call(states, llama, a3, probe_a) == (100, len(a3) - 100)  # the live tokens share it: no load needed
    assert states.loads == 1 and states.saves == 2


def test_the_count_is_what_llama_reuses_without_a_block() -> None:
    llama, states = FakeLlama(), Recording()
    short, probe = prompt(1, 5, n_system=MIN_ANCHOR_TOKENS - 1)
    assert call(states, llama, short, probe) == (0, len(short))
    assert states.saves == 0  # too short to be worth a saved state
    assert call(states, llama, short, probe) == (len(short) - 1, 1)  # the same prompt again: all but one token


def test_old_states_are_dropped_beyond_the_limit() -> None:
    llama, states = FakeLlama(), Recording(max_states=2)
    for system in range(4):
        tokens, probe = prompt(system, 5)
        call(states, llama, tokens, probe)
    assert len(states) == 2
    tokens, probe = prompt(0, 5)
    assert call(states, llama, tokens, probe)[0] == 0  # system 0 was dropped: evaluated again


def test_the_local_time_limit_counts_generation_from_its_first_token(monkeypatch: Any) -> None:
    """A slow prompt evaluation does not use up the limit (the retry would find the prompt cached and generate the
    whole answer again); generation past the limit stops at the next token."""
    from lares_agent.llm import local

    clock = [100.0]
    monkeypatch.setattr(local.time, "monotonic", lambda: clock[0])
    deadline = local._Deadline(10.0)
    clock[0] += 500.0  # a long prompt evaluation before the first token
    assert deadline(None, None) is False
    clock[0] += 9.0
    assert deadline(None, None) is False and not deadline.fired
    clock[0] += 2.0
    assert deadline(None, None) is True and deadline.fired
