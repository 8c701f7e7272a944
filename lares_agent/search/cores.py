"""How many cores a run uses, and how llama.cpp's threads share them with the learners' torch threads: every core
for round 0, while the learners wait for its rewards, and the cores torch leaves free for the rounds that run beside
learning."""

from __future__ import annotations

import os
from typing import Protocol

__all__ = ["CoreSettings", "background_llm_threads", "initial_llm_threads", "run_cores"]


class CoreSettings(Protocol):
    """The options of a run these rules read (`SearchConfig` has them; this module loads before it)."""

    @property
    def cores(self) -> int: ...
    @property
    def sync_llm(self) -> bool: ...
    @property
    def learner(self) -> str: ...
    @property
    def llm_backend(self) -> str: ...
    @property
    def torch_threads(self) -> int: ...


def run_cores(cfg: CoreSettings) -> int:
    """The cores the run may use: `cores`, else every core this process may run on (affinity-aware)."""
    if cfg.cores > 0:
        return cfg.cores
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def background_llm_threads(cfg: CoreSettings) -> int | None:
    """llama.cpp's threads when its rounds run beside the learners (SAC/CrossQ without `--sync-llm`): the cores
    torch does not use, at least one. Its threads meet at every layer, so one more busy thread than cores stalls
    them all (the same effect as `torch_threads`' note in search/live_run.py). None: every core (blocking rounds)."""
    if cfg.sync_llm or cfg.learner == "es" or cfg.llm_backend != "local" or cfg.torch_threads <= 0:
        return None
    return max(1, run_cores(cfg) - cfg.torch_threads)


def initial_llm_threads(cfg: CoreSettings) -> int | None:
    """llama.cpp's threads for round 0, while the learners wait for its rewards: every core of the run, where
    later rounds leave the learners theirs (`background_llm_threads`). None: the model's own setting."""
    return run_cores(cfg) if background_llm_threads(cfg) is not None else None
