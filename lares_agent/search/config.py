"""What a reward-search run is: one frozen config, presets, and its JSON form in `config.json`."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lares_agent.errors import LaresError

SETTINGS = ("scratch", "init", "baseline")
LEARNERS = ("sac", "es")
BACKENDS = ("local", "ray")
LLM_BACKENDS = ("local", "openai", "replay")
# Ablations of LaRes' parts (issue 7); each switches one part off, default none (full LaRes).
ABLATIONS = {
    "no-relabel": "a refilled slot's old buffer rows keep their old reward values (EngineConfig.relabel=False)",
    "no-thompson": "uniform random choice of the acting learners (EngineConfig.thompson=False)",
    "no-scaling": "no rescaling of a new reward to the best elite (EngineConfig.scale_to_best=False)",
    "no-constraint": "no L2 pull toward the inherited parameters (anchor_weight=0)",
    "no-reflection": "no analyse/critique nodes: the graph goes straight to propose (GraphLimits.reflect=False)",
    "no-retrieval": "no past cases retrieved for the proposer (same as retrieval=False)",
}
ENGINE_ABLATIONS = ("no-relabel", "no-thompson", "no-scaling", "no-constraint")


@dataclass(frozen=True)
class SearchConfig:
    """Everything needed to start (and later resume) a run; saved verbatim as `config.json`."""

    task: str = "reach-v3"
    setting: str = "scratch"
    learner: str = "sac"
    backend: str = "local"
    ray_address: str | None = None
    population: int = 3
    elites: int = 1
    budget: int = 15_000  # counted env steps (warm-up excluded, as in LaRes)
    reward_period: int = 5_000
    warmup_steps: int = 1_000
    eval_every: int = 1_500
    eval_episodes: int = 5
    checkpoint_every: int = 2_000
    horizon: int | None = None  # None: the task's own horizon
    hidden: tuple[int, ...] = (128, 128)
    batch_size: int = 128
    utd: float = 1.0  # learner updates per env step, per learner
    init_alpha: float = 0.1  # SAC's initial temperature; the reference's 1.0 needs ~1e5 steps to decay on small rewards
    anchor_weight: float = 1.0
    complexity_lambda: float = 0.0
    ts_window: int = 50
    es_population: int = 16  # ES perturbations per generation (--learner es)
    selection: str = "truncation"  # or "tournament" (reward population, issue 5)
    tournament_size: int = 2
    torch_threads: int = 1  # 0: torch's default; 1 is as fast for these small networks and never oversubscribes
    seed: int = 0
    persona: str = "neutral"
    llm_backend: str = "local"
    llm_model: str | None = None
    base_url: str | None = None
    temperature: float = 0.4
    max_llm_tokens: int | None = None
    retrieval: bool = True
    max_minutes: float | None = None
    rewards_file: str | None = None
    replay_from: str | None = None
    preset: str = "demo"
    ablations: tuple[str, ...] = ()  # names from ABLATIONS; () is full LaRes
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if self.setting not in SETTINGS:
            problems.append(f"--setting must be one of {', '.join(SETTINGS)}, not {self.setting!r}")
        if self.learner not in LEARNERS:
            problems.append(f"--learner must be one of {', '.join(LEARNERS)}, not {self.learner!r}")
        if self.backend not in BACKENDS:
            problems.append(f"--backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if self.llm_backend not in LLM_BACKENDS:
            problems.append(f"--llm must be one of {', '.join(LLM_BACKENDS)}, not {self.llm_backend!r}")
        if self.selection not in ("truncation", "tournament"):
            problems.append(f"--selection must be truncation or tournament, not {self.selection!r}")
        if self.population < 1:
            problems.append("--population must be at least 1")
        if not 0 <= self.elites < max(self.population, 1) and self.setting != "baseline":
            problems.append(f"--elites must be between 0 and population-1 ({self.population - 1}), not {self.elites}")
        if self.init_alpha <= 0:
            problems.append("init_alpha must be positive")
        if self.budget <= 0 or self.reward_period <= 0:
            problems.append("--budget and --reward-period must be positive")
        if self.max_minutes is not None and self.max_minutes <= 0:
            problems.append("--max-minutes must be positive")
        unknown = [a for a in self.ablations if a not in ABLATIONS]
        if unknown:
            problems.append(f"unknown ablation(s) {', '.join(unknown)}; choose from {', '.join(ABLATIONS)}")
        if self.learner != "sac" and any(a in ENGINE_ABLATIONS for a in self.ablations):
            problems.append(f"ablations {', '.join(ENGINE_ABLATIONS)} apply to the SAC engine (--learner sac)")
        if problems:
            raise LaresError("; ".join(problems))

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["hidden"] = list(self.hidden)
        data["ablations"] = list(self.ablations)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        for key in ("hidden", "ablations"):
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)

    def save(self, path: Path) -> None:
        from lares_agent.runs import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_json(), indent=2))


# The embedded default finishes in under 10 minutes on 2 cores (see README); `paper` is the reference's setup
# (docs/lares-reference.md §10: K=5, E=3, 1e6 steps, reward period 2e5, 10k warm-up, 3x256 networks, batch 128, UTD 1).
PRESETS: dict[str, dict[str, Any]] = {
    "demo": {},
    "paper": {
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
        "ts_window": 200,
        "horizon": 150,
    },
}


def preset_config(preset: str, **overrides: Any) -> SearchConfig:
    """A preset's values, then every override that is not None."""
    if preset not in PRESETS:
        raise LaresError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
    values = dict(PRESETS[preset])
    values.update({k: v for k, v in overrides.items() if v is not None})
    return SearchConfig(preset=preset, **values)
