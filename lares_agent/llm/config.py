"""`LLMConfig`: how a run talks to its LLM, shared by the client and the backends (its own module, so that
`client.py` and `openai_compat.py` both import it and not each other)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LLMConfig"]


@dataclass(frozen=True)
class LLMConfig:
    """How a run talks to its LLM. Budgets are per run (per client); None means unlimited."""

    backend: str = "local"  # "local" | "openai" | "replay"
    model: str | None = None  # local: known name or GGUF path (None = default 1.5B); openai: model name
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.4  # the seed recommends 0.3-0.5 (docs/DESIGN.md §4)
    max_tokens: int = 384
    n_ctx: int = 4096
    n_threads: int | None = None  # None: every core this process may use
    seed: int = 0
    timeout_s: float = 120.0
    max_retries: int = 2
    max_total_tokens: int | None = None
    max_wall_s: float | None = None  # seconds spent inside LLM calls, retries and back-off included

