"""The presets of `lares run --preset`: `demo` (what a bare `lares run` trains, on a laptop) and `paper` (the
reference's setup), and `preset_config`, the one way a preset and the flags become a `SearchConfig`."""

from __future__ import annotations

import re
from typing import Any

from lares_agent.errors import ConfigError
from lares_agent.search.config import Learner, Preset, SearchConfig

__all__ = ["DEMO_LEARNER", "DEMO_LEARNER_VALUES", "PAPER_TS_WINDOWS", "PAPER_TS_WINDOW_DEFAULT", "PRESETS",
           "paper_ts_window", "preset_config"]

DEMO_LEARNER: Learner = "crossq"
"""The learner of the `demo` preset (what a bare `lares run` trains): CrossQ, which won the learner benchmark on the
demo task (reach-v3 at 15k env steps, 3 seeds: 0.77 against SAC's 0.13; docs/RESULTS.md, "The learner")."""
DEMO_LEARNER_VALUES: dict[str, dict[str, Any]] = {}
"""Per-learner values of the demo preset over `SearchConfig`'s defaults (batch 128, initial temperature 0.1). Empty:
two default runs (docs/RESULTS.md) favoured CrossQ with these (best learner 100%, 15.7 min) over the learner
benchmark's batch 256 and temperature 1.0 (0%, 24.8 min): LLM rewards are scaled far below the task's own reward,
and a temperature of 1.0 then drowns them."""

# The embedded default finishes in under 10 minutes on 2 cores (see README); `paper` is the reference's setup
# (docs/lares-reference.md §9-10: K=5, E=3, 1e6 steps, reward period 2e5, 10k warm-up, 3x256 networks, batch 128,
# UTD 1, Adam 3e-4, alpha 1, 20 evaluation episodes every 1e4 steps, LLM temperature 1.0, 150-step MetaWorld
# episodes) with the Thompson window of the task's run.sh line (`PAPER_TS_WINDOWS`), and each task's own horizon:
# MetaWorld's is 150 already, and a Gymnasium task keeps its registered limit (HalfCheetah-v5: 1000).
PRESETS: dict[Preset, dict[str, Any]] = {
    "demo": {"learner": DEMO_LEARNER},
    "paper": {
        "learner": "sac",
        "population": 5,
        "elites": 3,
        "budget": 1_000_000,
        "reward_period": 200_000,
        "warmup_steps": 10_000,
        "eval_every": 10_000,
        "eval_episodes": 20,
        "checkpoint_every": 50_000,
        "hidden": (256, 256, 256),
        "batch_size": 128,
        "utd": 1.0,
        "init_alpha": 1.0,
        "lr": 3e-4,
        "temperature": 1.0,
        "anchor_weight": 1.0,
        "horizon": None,
    },
}
# The reference's run.sh `--windows_length` per task (docs/lares-reference.md §8); a task it does not launch gets
# the flag's default, 1000 (arguments.py, §10).
PAPER_TS_WINDOWS: dict[str, int] = {
    "window-close": 500, "window-open": 200, "button-press": 50, "door-close": 100, "drawer-open": 200,
    "coffee-pull": 20, "coffee-push": 20, "hand-insert": 50, "basketball": 50, "dial-turn": 50, "soccer": 100,
    "push-back": 100, "pick-out-of-hole": 200, "hammer": 500, "peg-unplug-side": 500, "peg-insert-side": 500,
    "button-press-topdown": 500,
}  # fmt: skip
PAPER_TS_WINDOW_DEFAULT = 1000


def paper_ts_window(task: str) -> int:
    """The reference's Thompson window for `task` (MetaWorld names without their version: push-back-v3 -> push-back)."""
    base = re.sub(r"-v\d+$", "", task)
    return PAPER_TS_WINDOWS.get(base, PAPER_TS_WINDOW_DEFAULT)


def preset_config(preset: str, **overrides: Any) -> SearchConfig:
    """A preset's values, then every override that is not None."""
    given = {k: v for k, v in overrides.items() if v is not None}
    for name, values in PRESETS.items():
        if name == preset:
            chosen = dict(values)
            if name == "paper":
                chosen["ts_window"] = paper_ts_window(str(given.get("task", SearchConfig.task)))
            if name == "demo":
                chosen.update(DEMO_LEARNER_VALUES.get(str(given.get("learner", chosen["learner"])), {}))
            return SearchConfig(preset=name, **{**chosen, **given})
    raise ConfigError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
