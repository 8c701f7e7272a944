"""What a sweep is (`lares sweep`): tasks x methods x seeds, the `lares run` options every trial shares, and each
trial's `SearchConfig`. Pure and checked up front: every trial's config is built and checked (`check_start`)
before a sweep folder or a Ray cluster exists (options are checked before a run folder is made).

Methods: ``lares`` is the reward search with the options given; ``lares-init`` and ``lares-scratch`` are the same
search in one setting each (the paper's two: the task's own reward refined, or written from the task's text), so
one sweep holds both arms beside their baselines; ``human`` is the learner alone on the
task's own reward (`setting="baseline"`, engine/setup/slots.py); ``sparse`` is the same learner on the task's
success indicator alone (`baseline_reward="success"`); ``retrain`` is the same learner alone on a found reward,
given to the sweep as ``--set reward_from=RUN[:REWARD_ID]`` or ``--set reward_file=FILE`` and resolved into the
options once, when the sweep is made (search/found_reward.py), so every trial trains on the same reward however
the source run changes later. Each ablation name (``no-relabel``, ``no-thompson``,
``no-scaling``, ``no-constraint``, ``no-reflection``, ``no-retrieval``, ``no-llm``, ``random-edit``,
``critique-edit``: search/options.py ABLATIONS) is the reward search without that part, so one sweep compares LaRes
with its ablations; ``lares-init``, ``no-llm``, ``random-edit``, ``critique-edit`` and ``human`` on the same seeds
tell what the LLM adds beyond tuning the task's own constants, beyond structural edits made at random and beyond the
critique's computed edits. All share every engine setting the options give.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from lares_agent.errors import ConfigError
from lares_agent.runs import atomic_write_text
from lares_agent.runs.sweep_layout import trial_id
from lares_agent.search.config import SearchConfig
from lares_agent.search.found_reward import REWARD_KEYS, from_file, from_run
from lares_agent.search.options import ABLATIONS
from lares_agent.search.presets import FIELDS, is_tuple_field, parse_field, preset_config

__all__ = ["METHODS", "SEARCH_METHODS", "Method", "SweepSpec", "Trial", "parse_sets"]

Method = Literal["lares", "lares-init", "lares-scratch", "lares-potential", "human", "sparse", "retrain",
                 "no-relabel", "no-thompson", "no-scaling", "no-constraint", "no-reflection", "no-retrieval", "no-llm",
                 "random-edit", "critique-edit"]
METHODS: tuple[Method, ...] = get_args(Method)
SEARCH_METHODS: tuple[Method, ...] = ("lares", "lares-init", "lares-scratch", "lares-potential")  # compared to the rest
_BASELINE = {"setting": "baseline", "population": 1, "elites": 1}
_METHOD_VALUES: dict[str, dict[str, Any]] = {
    "lares": {},
    "lares-init": {"setting": "init"},
    "lares-scratch": {"setting": "scratch"},
    # from scratch, the LLM writes a potential Phi(s) over the success reward (docs/DESIGN.md, `--shaping potential`)
    "lares-potential": {"setting": "scratch", "shaping": "potential"},
    "human": {**_BASELINE, "baseline_reward": "human"},
    "sparse": {**_BASELINE, "baseline_reward": "success"},
    "retrain": {**_BASELINE, "baseline_reward": "human"},  # the found reward is in the options (REWARD_KEYS)
    **{name: {"ablations": (name,)} for name in ABLATIONS},
}
_GRID_KEYS = {"task": "--tasks", "seed": "--seeds", "preset": "--preset"}
_PATH_KEYS = ("rewards_file", "replay_from")  # trials run in other processes and folders: made absolute
_FOUND_KEYS = ("reward_from", "reward_file")  # not fields: read into REWARD_KEYS by `parse_sets`


@dataclass(frozen=True)
class Trial:
    """One cell of the grid; `id` names its run folder under the sweep's `runs/`."""

    task: str
    method: Method
    seed: int

    @property
    def id(self) -> str:
        return trial_id(self.task, self.method, self.seed)


@dataclass(frozen=True)
class SweepSpec:
    """The grid and the shared options (SearchConfig field -> value, what `--set` gave); saved as `sweep.json`."""

    tasks: tuple[str, ...]
    seeds: tuple[int, ...]
    methods: tuple[Method, ...] = ("lares", "human")
    options: Mapping[str, Any] = field(default_factory=dict)
    preset: str = "demo"
    cpus_per_trial: float = 1.0
    shared_cases: bool = False

    def __post_init__(self) -> None:
        problems = []
        if not self.tasks or not self.seeds or not self.methods:
            problems.append("--tasks, --seeds and --methods each need at least one value")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            problems.append(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
        for label, values in (("--tasks", self.tasks), ("--seeds", self.seeds), ("--methods", self.methods)):
            if len(set(values)) != len(values):
                problems.append(f"{label} lists a value twice")
        if "retrain" in self.methods and not self.options.get("reward_source"):
            problems.append("method retrain trains a found reward alone: give --set reward_from=RUN[:REWARD_ID] or "
                            "--set reward_file=FILE")
        if self.options.get("reward_source") and "retrain" not in self.methods:
            problems.append("--set reward_from/reward_file is the reward of method retrain: add it to --methods")
        for key in ("setting", "shaping"):
            fixed = [m for m in self.methods if m in SEARCH_METHODS and key in _METHOD_VALUES[m]]
            if fixed and key in self.options:
                problems.append(f"method(s) {', '.join(fixed)} fix the {key}: leave out --set {key}, or use method "
                                "lares")
        if not self.cpus_per_trial > 0:
            problems.append(f"--cpus-per-trial must be positive, not {self.cpus_per_trial}")
        if problems:
            raise ConfigError("; ".join(problems))

    def trials(self) -> list[Trial]:
        """Task by task, seed by seed, method by method: a partial sweep covers whole tasks first."""
        return [Trial(t, m, s) for t in self.tasks for s in self.seeds for m in self.methods]

    def config(self, trial: Trial) -> SearchConfig:
        """The trial's run config: the preset, the shared options, then what the method fixes."""
        options = {k: v for k, v in self.options.items() if trial.method == "retrain" or k not in REWARD_KEYS}
        return preset_config(self.preset, {"cores": max(1, int(self.cpus_per_trial)), **options,
                                           **_METHOD_VALUES[trial.method], "task": trial.task, "seed": trial.seed})

    def check(self) -> dict[str, SearchConfig]:
        """Every trial's config, each checked as `lares run` checks its own (task, persona, rewards file, LLM);
        raises ConfigError / LaresError with one line naming the trial. The case store is the sweep's own
        (made with the folder), so only its opening is left out here."""
        from lares_agent.search.option_checks import converted_options, ignored_options
        from lares_agent.search.runner import check_start

        configs: dict[str, SearchConfig] = {}
        useless: dict[str, str] | None = None  # the --set options every trial so far ignores, with why
        for trial in self.trials():
            try:
                cfg = self.config(trial)
                converted = converted_options(cfg)  # as `lares run` refuses them (search/option_checks.py)
                if converted:
                    raise ConfigError("; ".join(converted))
                check_start(dataclasses.replace(cfg, retrieval=False))
            except ConfigError as exc:
                raise ConfigError(f"trial {trial.id}: {exc}") from None
            configs[trial.id] = cfg
            ignored = {k: why for k, why in ignored_options(cfg).items() if k in self.options}
            useless = ignored if useless is None else {k: why for k, why in useless.items() if k in ignored}
        if useless:  # an option one trial reads is the sweep's to set; one that no trial reads is a slip
            raise ConfigError("; ".join(f"--set {k}: {why}" for k, why in useless.items()))
        return configs

    def to_json(self) -> dict[str, Any]:
        return {"tasks": list(self.tasks), "seeds": list(self.seeds), "methods": list(self.methods),
                "options": {k: list(v) if isinstance(v, tuple) else v for k, v in self.options.items()},
                "preset": self.preset, "cpus_per_trial": self.cpus_per_trial, "shared_cases": self.shared_cases}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepSpec:
        options = {k: tuple(v) if isinstance(v, list) and is_tuple_field(k) else v
                   for k, v in dict(data.get("options") or {}).items()}
        if options.get("reward_components"):  # JSON's lists of pairs
            options["reward_components"] = tuple(tuple(p) for p in options["reward_components"])
        return cls(tasks=tuple(data["tasks"]), seeds=tuple(int(s) for s in data["seeds"]),
                   methods=tuple(data["methods"]), options=options, preset=str(data.get("preset", "demo")),
                   cpus_per_trial=float(data.get("cpus_per_trial", 1.0)),
                   shared_cases=bool(data.get("shared_cases", False)))

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(self.to_json(), indent=2))

    @classmethod
    def load(cls, path: Path) -> SweepSpec:
        try:
            return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path} is not a readable sweep spec ({exc})") from None


def parse_sets(pairs: Sequence[str], base: Path | None = None) -> dict[str, Any]:
    """`--set key=value` pairs as SearchConfig values: the key is a field name (dashes allowed), the value is
    read by the field's type (`hidden=256x256`, `ablations=no-relabel,no-thompson`, `lr=none`). Paths are made
    absolute against `base` (the folder `lares sweep` runs in): trials run in other processes. `reward_from` and
    `reward_file` (method retrain) are read here into the found reward's fields."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: write KEY=VALUE, e.g. --set budget=20000")
        if key in _GRID_KEYS:
            raise ConfigError(f"--set {key}: give it with {_GRID_KEYS[key]}")
        if key in REWARD_KEYS:
            raise ConfigError(f"--set {key}: give the reward with --set reward_from=RUN[:REWARD_ID] or "
                              "--set reward_file=FILE")
        if key in _FOUND_KEYS:
            if out.get("reward_source"):
                raise ConfigError("--set reward_from and reward_file each name the reward of method retrain: give one")
            found = (from_run(text.strip(), base) if key == "reward_from"
                     else from_file((base or Path.cwd()).joinpath(text.strip()).resolve()))
            out.update({k: v for k, v in found.overrides().items() if k in REWARD_KEYS})
            continue
        if key not in FIELDS:
            close = difflib.get_close_matches(key, sorted(FIELDS), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"--set {key}: not a run option{hint} (the fields of SearchConfig, search/config.py)")
        value = parse_field(key, text.strip(), f"--set {key}={text.strip()}")
        if key in _PATH_KEYS and value is not None:
            value = str((base or Path.cwd()).joinpath(str(value)).resolve())
        out[key] = value
    return out

