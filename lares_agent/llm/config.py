"""`LLMConfig`: how a run talks to its LLM, shared by the client and the backends (its own module, so that
`client.py` and `openai_compat.py` both import it and not each other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from lares_agent.errors import ConfigError

__all__ = ["DEFAULT_TIMEOUTS", "LLM_BACKENDS", "LLMBackend", "LLMConfig"]

LLMBackend = Literal["local", "openai", "replay"]
LLM_BACKENDS: tuple[LLMBackend, ...] = get_args(LLMBackend)
# Seconds one attempt may take when `timeout_s` is not set: a CPU llama.cpp model needs up to a minute or two
# for a 256-token proposal; an OpenAI-compatible server that has not answered in 60 s is hanging;
# a replay answers from a file.
DEFAULT_TIMEOUTS: dict[LLMBackend, float] = {"local": 120.0, "openai": 60.0, "replay": 10.0}


@dataclass(frozen=True)
class LLMConfig:
    """How a run talks to its LLM. Budgets are per run (per client); None means unlimited."""

    backend: LLMBackend = "local"
    model: str | None = None  # local: known name or GGUF path (None = default 1.5B); openai: model name
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.4  # the seed recommends 0.3-0.5 (docs/DESIGN.md §4)
    max_tokens: int = 384
    n_ctx: int = 4096  # the local model loads with this context
    # tokens a prompt plus its answer must fit in; None: the local model's n_ctx, 2048 for an OpenAI-compatible
    # server (llama.cpp's server default; `window.py`), unknown for a replay
    context: int | None = None
    n_threads: int | None = None  # None: every core this process may use
    seed: int = 0
    timeout_s: float | None = None  # one attempt's limit; None: the backend's (DEFAULT_TIMEOUTS)
    max_retries: int = 2
    max_total_tokens: int | None = None
    max_wall_s: float | None = None  # seconds spent inside LLM calls, retries and back-off included

    def __post_init__(self) -> None:
        if self.backend not in LLM_BACKENDS:
            raise ConfigError(f"unknown LLM backend {self.backend!r}; choose one of: {', '.join(LLM_BACKENDS)}")
        if self.temperature < 0 or self.max_tokens < 1 or self.n_ctx < 1 or self.max_retries < 0:
            raise ConfigError("LLMConfig needs temperature >= 0, max_tokens >= 1, n_ctx >= 1 and max_retries >= 0")
        if (self.timeout_s is not None and self.timeout_s <= 0) or (self.n_threads is not None and self.n_threads < 1):
            raise ConfigError("LLMConfig needs timeout_s > 0 and n_threads >= 1 (or None)")
        if self.context is not None and self.context < 256:
            raise ConfigError(f"the LLM context must be at least 256 tokens (or none), not {self.context}")
        if self.max_total_tokens is not None and self.max_total_tokens < 1:
            raise ConfigError(f"the LLM token budget must be >= 1 (or none), not {self.max_total_tokens}")
        if self.max_wall_s is not None and self.max_wall_s <= 0:
            raise ConfigError(f"the LLM time budget must be > 0 s (or none), not {self.max_wall_s}")

    @property
    def call_timeout_s(self) -> float:
        """One attempt's time limit: `timeout_s`, or the backend's default."""
        return self.timeout_s if self.timeout_s is not None else DEFAULT_TIMEOUTS[self.backend]
