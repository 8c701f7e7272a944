"""The presets of `lares run --preset`: `demo` (what a bare `lares run` trains, on a laptop) and `paper` (the
reference's setup), and `preset_config`, the one way a preset and the options become a `SearchConfig`. An
option's name is its field's (`--reward-period` is `reward_period`, in `lares run` and `lares sweep --set`);
`parse_field` reads an option's text as its field's type."""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

from lares_agent.errors import ConfigError
from lares_agent.search.config import SearchConfig
from lares_agent.search.options import Learner, Preset

__all__ = ["DEMO_LEARNER", "DEMO_LEARNER_VALUES", "FIELDS", "PAPER_TS_WINDOWS", "PAPER_TS_WINDOW_DEFAULT", "PRESETS",
           "is_tuple_field", "paper_ts_window", "parse_field", "preset_config"]

FIELDS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(SearchConfig))
"""The names an override may have: `SearchConfig`'s fields (`lares run`'s options without their dashes)."""

DEMO_LEARNER: Learner = "crossq"
"""The learner of the `demo` preset (what a bare `lares run` trains); chosen by the learner benchmark on the demo
task (docs/RESULTS.md, "SAC vs CrossQ on the task's own reward")."""
DEMO_LEARNER_VALUES: dict[str, dict[str, Any]] = {}
"""Per-learner values of the demo preset over `SearchConfig`'s defaults. Empty: the defaults (batch 128, initial
temperature 0.1) did better in the default run than the learner benchmark's values (docs/RESULTS.md, "SAC vs
CrossQ on the task's own reward", the default `lares run`)."""

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


def preset_config(preset: str, overrides: Mapping[str, object] | None = None, /) -> SearchConfig:
    """A preset's values, then every override that is not None. An override's key is a `SearchConfig` field
    (`FIELDS`); the preset is the first argument, not a key."""
    overrides = overrides or {}
    for key in overrides:
        if key == "preset":
            raise ConfigError("the preset is preset_config's first argument, not an override")
        if key not in FIELDS:
            close = difflib.get_close_matches(key, sorted(FIELDS), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"unknown SearchConfig field {key!r}{hint} (the fields are in search/config.py)")
    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    for name, values in PRESETS.items():
        if name == preset:
            chosen = dict(values)
            if name == "paper":
                chosen["ts_window"] = paper_ts_window(str(given.get("task", SearchConfig.task)))
            if name == "demo":
                chosen.update(DEMO_LEARNER_VALUES.get(str(given.get("learner", chosen["learner"])), {}))
            return SearchConfig(preset=name, **{**chosen, **given})
    raise ConfigError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")


def parse_field(name: str, text: str, flag: str) -> object:
    """`text` as a value of the field `name`'s type, for an option given as text (`lares run --hidden 256x256`,
    `lares sweep --set hidden=256x256`): ints, floats, booleans, `none` for an optional field, widths as
    `256x256` or `256,256`, names as `a,b`. `flag` names the option in the error. The config's own checks
    (ranges, choices) come after."""
    hint = _hints()[name]
    kinds = _members(hint)
    if type(None) in kinds and text.lower() in ("none", "null", ""):
        return None
    for kind in kinds:
        origin = typing.get_origin(kind)
        try:
            if kind is bool:
                lowered = text.lower()
                if lowered in ("true", "yes", "1", "on"):
                    return True
                if lowered in ("false", "no", "0", "off"):
                    return False
                raise ValueError(text)
            if kind is int:
                return int(text.replace("_", ""))
            if kind is float:
                return float(text)
            if origin is tuple:
                item = typing.get_args(kind)[0]
                if item is int:
                    return tuple(int(p) for p in text.replace("x", ",").split(",") if p)
                return tuple(p.strip() for p in text.split(",") if p.strip())
            if kind is str or origin is Literal:
                return text
        except ValueError:
            continue
    raise ConfigError(f"{flag}: not a valid value of type {hint}")


def is_tuple_field(name: str) -> bool:
    """Whether the field `name` holds a tuple (`hidden`, `ablations`...): JSON gives it as a list."""
    return any(typing.get_origin(h) is tuple for h in _members(_hints().get(name)))


def _hints() -> dict[str, Any]:
    return typing.get_type_hints(SearchConfig)


def _members(hint: Any) -> tuple[Any, ...]:
    """The alternatives of `X | None` (or the hint itself)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (hint,)
