"""Configuration of the LaRes engine (defaults: the reference's run.sh values, docs/lares-reference.md §10)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lares_agent.engine.column_map import REWARD_NORMALISATIONS, RewardNormalisation
from lares_agent.engine.contracts import GRADIENT_LEARNERS, SETTINGS, GradientLearner
from lares_agent.engine.errors import EngineError
from lares_agent.engine.learners.crossq import CrossQConfig
from lares_agent.engine.learners.factory import LearnerConfig
from lares_agent.engine.learners.sac import SACConfig
from lares_agent.engine.loop.selection import SelectionConfig
from lares_agent.errors import ConfigError

__all__ = ["EngineConfig"]


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """Everything the LaRes loop needs besides the task and the reward candidates.

    Step counts are *counted* env steps of training episodes. Warm-up steps and evaluation episodes are not
    counted toward ``total_steps``, as in the reference (its 1e6 budget excludes the 1e4 warm-up steps).
    """

    setting: str = "scratch"
    """'scratch': every candidate is proposed; 'init': the human reward seeds slot 0 (replaceable like any slot)
    and an extra learner trains on it throughout (acting once per iteration outside TS, never replaced);
    'baseline': the chosen learner alone on the human reward with the same code (one slot, no reward updates)."""
    population_size: int = 5
    """K reward candidates (ignored by 'baseline', which has one)."""
    learners_per_reward: int = 1
    """N learners per reward slot, each with its own parameters, minibatches and Thompson arm, all on the slot's
    column (``loop/groups.py``; the seed text's 2.3). A slot's fitness is their mean. 1: LaRes' one learner per
    reward. The baseline trains N learners on its one reward too."""
    elites: int = 3
    """E candidates kept at each reward update; the other K - E slots are refilled."""
    total_steps: int = 1_000_000
    """Counted env-step budget."""
    warmup_steps: int = 10_000
    """Uniform-random steps stored before learning (not counted; whole episodes, so possibly a few more)."""
    reward_period: int = 200_000
    """Env steps between reward-population updates (checked at iteration boundaries)."""
    max_rounds: int | None = None
    """Stop proposing after this many reward updates (None: as many as the budget allows)."""
    eval_every: int = 10_000
    """Env steps between evaluations logged to metrics.jsonl (0: only at reward updates)."""
    eval_episodes: int = 20
    """Deterministic episodes per learner at each periodic evaluation (run.sh: 20)."""
    update_eval_episodes: int = 20
    """Deterministic episodes per learner at a reward update (fitness)."""
    ts_window: int = 200
    """Thompson sampling window W: outcomes remembered per learner (run.sh: 20-500 per task)."""
    anchor_weight: float = 1.0
    """Weight of the L2 pull of a replaced learner toward the inherited parameters (reference 1.0; 0 = off)."""
    scale_to_best: bool = True
    """Match a new column's mean/std to the best elite's column (LaRes reward scaling; off for ablations)."""
    relabel: bool = True
    """Relabel a refilled slot's column over the whole buffer with its new reward (LaRes §5). False (ablation):
    old rows keep the values the old reward gave them and only new rows use the new reward."""
    thompson: bool = True
    """Thompson sampling picks who acts (LaRes §8). False (ablation): each of the K draws of an iteration picks
    an open learner uniformly at random (distinct winners act), ignoring successes, with the same K draws."""
    complexity_lambda: float = 0.0
    """Fitness = graded value (success rate, or a start distance closed before any success) - complexity_lambda *
    complexity (``loop/fitness.py``); 0 here as in the reference, the search's default is measured
    (``SearchConfig.complexity_lambda``)."""
    buffer_capacity: int = 1_000_000
    horizon: int | None = None
    """Episode length override (None: the task's horizon); shorter horizons keep tests fast."""
    learner: GradientLearner = "sac"
    """Which gradient learner every slot trains: 'sac' (the reference's) or 'crossq' (issue 12). Only the chosen
    learner's config below is read; its ``batch_size`` and ``utd_ratio`` drive the loop's updates."""
    sac: SACConfig = field(default_factory=SACConfig)
    crossq: CrossQConfig = field(default_factory=CrossQConfig)
    seed: int = 0
    checkpoint_every: int = 0
    """Env steps between periodic checkpoints (0: only at reward updates); needs a run directory."""
    rollout_slots: int = 2
    """How many of the best slots' evaluation rollouts go to the proposal hook."""
    rollouts_kept: int = 2
    """Episodes kept per such slot (feature arrays per step, for the trajectory encoder)."""
    feature_sample: int = 4096
    """Buffer rows sampled for the hook's numeric validation of new candidates."""
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    """How elites are chosen: truncation (LaRes: the top ``elites``) or pareto (non-dominated over fitness,
    smooth actions and simple rewards, ``loop/pareto.py``). Tournament selection is the ES engine's."""
    propose_in_background: bool = False
    """Run the ``propose`` hook on a worker thread while the learners keep training on their current rewards;
    its proposals are installed at the first iteration boundary after it returns (issue 13 item 8, ``loop/
    background.py``). False: the learners wait for it, as in the reference (``lares run --sync-llm``)."""
    reward_normalisation: RewardNormalisation = "affine"
    """How a reward column's raw values become stored rewards (``engine/column_map.py``): 'affine' is LaRes' map
    alone; 'sigmoid' / 'tanh' first squash the reward standardised by its buffer mean/std (fixed when the column
    is set), then match the reference as usual (the seed text's section 3.2: for wildly fluctuating rewards)."""

    def __post_init__(self) -> None:
        if self.reward_normalisation not in REWARD_NORMALISATIONS:
            raise ConfigError(f"unknown reward normalisation {self.reward_normalisation!r}; choose one of "
                              f"{', '.join(REWARD_NORMALISATIONS)}")
        if self.learner not in GRADIENT_LEARNERS:
            raise ConfigError(f"unknown learner {self.learner!r}; choose one of {', '.join(GRADIENT_LEARNERS)}")
        if self.setting not in SETTINGS:
            raise ConfigError(f"unknown setting {self.setting!r}; choose one of {', '.join(SETTINGS)}")
        if self.setting != "baseline":
            if self.population_size < 1:
                raise ConfigError(f"population_size must be >= 1, got {self.population_size}")
            if not 1 <= self.elites <= self.population_size:
                raise ConfigError(f"elites must be in 1..{self.population_size}, got {self.elites}")
            if self.setting == "init" and self.population_size < 2:
                raise ConfigError("setting 'init' needs population_size >= 2 (slot 0 is the human reward)")
        if not 1 <= self.learners_per_reward <= 16:
            raise ConfigError(f"learners_per_reward must be in 1..16, got {self.learners_per_reward}")
        for name in ("total_steps", "warmup_steps", "reward_period", "eval_every", "checkpoint_every",
                     "feature_sample", "rollout_slots", "rollouts_kept"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.warmup_steps < 2:
            raise ConfigError("warmup_steps must be >= 2 (reward scaling needs stored steps)")
        for name in ("eval_episodes", "update_eval_episodes", "ts_window", "buffer_capacity"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.horizon is not None and self.horizon < 1:
            raise ConfigError(f"horizon must be >= 1, got {self.horizon}")
        if self.selection.method == "tournament":
            raise ConfigError("tournament selection runs in the ES engine; the replay-buffer engine selects by "
                              "truncation or pareto")
        if self.anchor_weight < 0 or self.complexity_lambda < 0:
            raise ConfigError("anchor_weight and complexity_lambda must be >= 0")

    @property
    def num_slots(self) -> int:
        """Replaceable reward slots (K; 1 in the baseline)."""
        return 1 if self.setting == "baseline" else self.population_size

    @property
    def learner_config(self) -> LearnerConfig:
        """The chosen learner's config (``sac`` or ``crossq``)."""
        return self.crossq if self.learner == "crossq" else self.sac

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (config.json, checkpoints)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EngineConfig:
        """Inverse of :meth:`to_json` (the learner configs turn JSON lists back into tuples themselves); a
        config written before CrossQ existed has neither ``learner`` nor ``crossq`` and loads as SAC; one written before
        ``reward_normalisation`` loads as 'affine' (the field's default)."""
        d = dict(data)
        sac, crossq = dict(d.pop("sac", {})), dict(d.pop("crossq", {}))
        selection = SelectionConfig(**dict(d.pop("selection", {})))  # absent before Pareto selection: truncation
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise EngineError(f"unknown engine config keys: {sorted(unknown)}")
        return cls(**d, sac=SACConfig(**sac), crossq=CrossQConfig(**crossq), selection=selection)
