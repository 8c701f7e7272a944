"""The numeric ranges of `lares run`'s options, checked when a `SearchConfig` is made: before a run folder exists,
and for every trial of a sweep before its folder exists (`SweepSpec.check` builds each trial's config).

Two kinds of check. Every number must be finite (`nan` passes every `<` and `>` test, so a range check alone lets
it through to the learner or the LLM request). And the sizes that take memory in proportion are bounded before
any is taken: the population (one learner each), the networks' widths and depth, the minibatch, the ES population,
the warm-up (the replay buffer is sized from it): a mistyped `--population 100000` is one line, not every byte of
the machine. The bounds are far above what the presets and the LaRes reference use (K=5, 3x256 networks, batch
128, docs/lares-reference.md).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

__all__ = ["MAX_BATCH", "MAX_DEPTH", "MAX_POPULATION", "MAX_WIDTH", "range_problems"]

MAX_POPULATION = 64  # reward candidates, one learner (or --learners-per-reward of them) each
MAX_LEARNERS = 256  # --population x --learners-per-reward
MAX_WIDTH = 4096  # units of one hidden layer
MAX_DEPTH = 8  # hidden layers
MAX_BATCH = 1 << 16
MAX_ES_POPULATION = 4096
MAX_WARMUP = 1_000_000  # the replay buffer holds the warm-up too
MAX_EVAL_EPISODES = 10_000
MAX_THREADS = 1024
MAX_TEMPERATURE = 2.0  # the OpenAI API's upper bound; llama.cpp samples any value but gives noise beyond it


# the fields whose own check in config_checks.config_problems refuses nan and inf already, with their range
_CHECKED_FINITE = ("lr", "max_minutes", "llm_timeout", "complexity_lambda", "candidates_per_slot", "reward_gain")


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def range_problems(cfg: Any) -> list[str]:
    """One line per option of `cfg` (a `SearchConfig`, whose checks call this as it is made: hence no import of it here)
    outside its range, the flag named as typed; empty when every one is in it."""
    problems = [f"{_flag(f.name)} must be a finite number, not {value}"
                for f in dataclasses.fields(cfg) if f.name not in _CHECKED_FINITE
                and isinstance(value := getattr(cfg, f.name), float) and not math.isfinite(value)]
    nan = {line.split()[0] for line in problems}
    if cfg.population > MAX_POPULATION:
        problems.append(f"--population must be at most {MAX_POPULATION} (one learner per candidate), not "
                        f"{cfg.population:,}")
    elif cfg.population * cfg.learners_per_reward > MAX_LEARNERS:
        problems.append(f"--population x --learners-per-reward must be at most {MAX_LEARNERS} learners, not "
                        f"{cfg.population * cfg.learners_per_reward:,}")
    for name, widths in (("hidden", cfg.hidden), ("critic_hidden", cfg.critic_hidden)):
        if widths is None:
            continue
        if not 1 <= len(widths) <= MAX_DEPTH or not all(1 <= w <= MAX_WIDTH for w in widths):
            shown = "x".join(str(w) for w in widths) or "(none)"
            problems.append(f"{_flag(name)} must be 1 to {MAX_DEPTH} layers of 1 to {MAX_WIDTH} units, not {shown}")
    # (field, lowest, highest); a lowest of None is the engine's own check (EngineConfig, ReplayConfig, ESConfig)
    bounds: tuple[tuple[str, int | None, int], ...] = (
        ("batch_size", 1, MAX_BATCH), ("es_population", None, MAX_ES_POPULATION), ("warmup_steps", None, MAX_WARMUP),
        ("eval_episodes", 1, MAX_EVAL_EPISODES), ("torch_threads", 0, MAX_THREADS), ("ts_window", None, 1_000_000),
        ("tournament_size", 1, MAX_POPULATION))
    for name, low, high in bounds:
        value = getattr(cfg, name)
        if low is None and value > high:
            problems.append(f"{_flag(name)} must be at most {high:,}, not {value:,}")
        elif low is not None and not low <= value <= high:
            problems.append(f"{_flag(name)} must be between {low} and {high:,}, not {value:,}")
    if "--temperature" not in nan and not 0.0 <= cfg.temperature <= MAX_TEMPERATURE:
        problems.append(f"--temperature must be between 0 and {MAX_TEMPERATURE:g}, not {cfg.temperature:g}")
    if "--utd" not in nan and not cfg.utd > 0:
        problems.append(f"--utd must be a positive number of updates per env step, not {cfg.utd:g}")
    if "--anchor-weight" not in nan and cfg.anchor_weight < 0:
        problems.append(f"--anchor-weight must be 0 (off) or more, not {cfg.anchor_weight:g}")
    return problems
