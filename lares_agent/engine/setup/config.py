"""Configuration of a LaRes run's engine: the loop's settings, and what learns (defaults: the reference's run.sh
values, docs/lares-reference.md §10).

``EngineConfig`` holds what the loop itself reads (slots, elites, budget and cadences, all in counted env steps);
its ``learners`` field says what learns: ``ReplayConfig`` (SAC or CrossQ learners on one shared replay buffer)
or ``ESPopulationConfig`` (one OpenAI-ES policy per slot). Each setting is named once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lares_agent.engine.contracts import (
    FITNESS_RULES,
    GRADIENT_LEARNERS,
    INHERIT_RULES,
    SETTINGS,
    FitnessRule,
    GradientLearner,
    InheritRule,
)
from lares_agent.engine.errors import EngineError
from lares_agent.engine.es.strategy import ESConfig
from lares_agent.engine.learners.crossq import CrossQConfig
from lares_agent.engine.learners.devices import DEVICES, is_device_name
from lares_agent.engine.learners.factory import LearnerConfig
from lares_agent.engine.learners.sac import SACConfig
from lares_agent.engine.replay.column_map import REWARD_NORMALISATIONS, RewardNormalisation
from lares_agent.engine.setup.diversity import DiversityConfig
from lares_agent.engine.setup.selection import SelectionConfig
from lares_agent.errors import ConfigError

__all__ = ["BACKENDS", "MAX_HANDOVER_EPISODES", "ESPopulationConfig", "EngineConfig", "ReplayConfig"]

MAX_HANDOVER_EPISODES = 1000
"""At most this many hand-over episodes (each replays up to a few learners; more only costs time)."""
BACKENDS = ("local", "ray")
"""Where ES policies roll out: in this process (or its worker processes), or on Ray actors."""


def _check_ranges(config: object, at_least: int, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if value < at_least:
            raise ConfigError(f"{name} must be >= {at_least}, got {value}")


@dataclass(frozen=True, kw_only=True)
class ReplayConfig:
    """SAC or CrossQ learners sharing one replay buffer whose rows carry every slot's reward (LaRes §3-9)."""

    learner: GradientLearner = "sac"
    """Which gradient learner every slot trains: 'sac' (the reference's) or 'crossq'. Only the chosen learner's
    config below is read; its ``batch_size`` and ``utd_ratio`` drive the updates."""
    sac: SACConfig = field(default_factory=SACConfig)
    crossq: CrossQConfig = field(default_factory=CrossQConfig)
    learners_per_reward: int = 1
    """N learners per reward slot, each with its own parameters, minibatches and Thompson arm, all on the slot's
    column (``setup/groups.py``; the seed text's 2.3). A slot's fitness is their mean. 1: LaRes' one
    learner per reward. The baseline trains N learners on its one reward too."""
    warmup_steps: int = 10_000
    """Uniform-random steps stored before learning (not counted; whole episodes, so possibly a few more)."""
    buffer_capacity: int = 1_000_000
    ts_window: int = 200
    """Thompson sampling window W: outcomes remembered per learner (run.sh: 20-500 per task)."""
    thompson: bool = True
    """Thompson sampling picks who acts (LaRes §8). False (ablation): each of the K draws of an iteration picks
    an open learner uniformly at random (distinct winners act), ignoring successes, with the same K draws."""
    relabel: bool = True
    """Relabel a refilled slot's column over the whole buffer with its new reward (LaRes §5). False (ablation):
    old rows keep the values the old reward gave them and only new rows use the new reward."""
    scale_to_best: bool = True
    """Match a new column's mean/std to the best elite's column (LaRes reward scaling; off for ablations)."""
    anchor_weight: float = 1.0
    """Weight of the L2 pull of a replaced learner toward the inherited parameters (reference 1.0; 0 = off)."""
    reward_normalisation: RewardNormalisation = "affine"
    """How a reward column's raw values become stored rewards (``engine/replay/column_map.py``): 'affine' is LaRes' map
    alone; 'sigmoid' / 'tanh' first squash the reward standardised by its buffer mean/std (fixed when the column
    is set), then match the reference as usual (the seed text's section 3.2: for wildly fluctuating rewards)."""
    reward_gain: float | None = None
    """Each reward the run starts with, other than the task's own, is scaled on the warm-up buffer so that it pays
    this much more at the goal than at the stored states (``engine/replay/reward_gain.py``); later rewards are
    matched to the best survivor as LaRes'. None: taken as written, as LaRes."""
    device: str = "cpu"
    """Where the learners compute (``engine/learners/devices.py``): 'cpu', 'cuda' (or 'cuda:N'), or 'auto' (cuda
    where torch sees a GPU). Kept as named, so a checkpoint of an 'auto' run resumes on a machine without a GPU;
    whether this machine has the device is checked when the population is built, not here."""

    def __post_init__(self) -> None:
        if self.learner not in GRADIENT_LEARNERS:
            raise ConfigError(f"unknown learner {self.learner!r}; choose one of {', '.join(GRADIENT_LEARNERS)}")
        if self.reward_normalisation not in REWARD_NORMALISATIONS:
            raise ConfigError(f"unknown reward normalisation {self.reward_normalisation!r}; choose one of "
                              f"{', '.join(REWARD_NORMALISATIONS)}")
        if not 1 <= self.learners_per_reward <= 16:
            raise ConfigError(f"learners_per_reward must be in 1..16, got {self.learners_per_reward}")
        if self.warmup_steps < 2:
            raise ConfigError("warmup_steps must be >= 2 (reward scaling needs stored steps)")
        _check_ranges(self, 1, ("ts_window", "buffer_capacity"))
        if self.anchor_weight < 0:
            raise ConfigError("anchor_weight must be >= 0")
        if self.reward_gain is not None and not (math.isfinite(self.reward_gain) and self.reward_gain > 0):
            raise ConfigError(f"reward_gain must be a positive number, not {self.reward_gain}")
        if not is_device_name(self.device):
            raise ConfigError(f"unknown device {self.device!r}; choose one of {', '.join(DEVICES)}")

    @property
    def kind(self) -> str:
        return self.learner

    @property
    def learner_config(self) -> LearnerConfig:
        """The chosen learner's config (``sac`` or ``crossq``)."""
        return self.crossq if self.learner == "crossq" else self.sac

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplayConfig:
        d = dict(data)
        sac, crossq = dict(d.pop("sac", {})), dict(d.pop("crossq", {}))
        return cls(**d, sac=SACConfig(**sac), crossq=CrossQConfig(**crossq))


@dataclass(frozen=True, kw_only=True)
class ESPopulationConfig:
    """One OpenAI-ES policy per reward slot (``--learner es``); every policy updates every generation."""

    es: ESConfig = field(default_factory=ESConfig)
    hidden: tuple[int, ...] = ()
    """Hidden layers of each ES policy (empty: linear)."""
    episodes_per_member: int = 1
    asynchronous_envs: bool = False
    """Gymnasium AsyncVectorEnv for training rollouts (a message per sub-env and step)."""
    rollout_workers: int = 0
    """>= 2: each slot's rollouts run in that many worker processes, whole episodes per message."""
    diversity: DiversityConfig = field(default_factory=DiversityConfig)
    """When the population is judged too alike (the proposer is then told to explore)."""
    backend: str = "local"
    ray_address: str | None = None
    """Ray cluster address (None: a local Ray instance)."""
    ray_num_cpus: int | None = 2
    """CPUs of a local Ray instance (ignored when ``ray_address`` is set)."""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        _check_ranges(self, 0, ("rollout_workers",))
        _check_ranges(self, 1, ("episodes_per_member",))

    @property
    def kind(self) -> str:
        return "es"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ESPopulationConfig:
        d = dict(data)
        es, diversity = ESConfig(**dict(d.pop("es", {}))), DiversityConfig(**dict(d.pop("diversity", {})))
        return cls(**{**d, "hidden": tuple(d.get("hidden", ()))}, es=es, diversity=diversity)


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """Everything the LaRes loop needs besides the task and the reward candidates.

    Step counts are *counted* env steps of training episodes. Warm-up steps and evaluation episodes are not
    counted toward ``total_steps``, as in the reference (its 1e6 budget excludes the 1e4 warm-up steps).
    """

    setting: str = "scratch"
    """'scratch': every candidate is proposed; 'init': the K candidates refine the human reward, and an extra
    learner trains on the human reward throughout (acting every step outside TS, ranked with the slots, never
    replaced); 'baseline': the chosen learner alone on the human reward with the same code (one slot, no reward
    updates)."""
    population: int = 5
    """K reward candidates, one slot each (ignored by 'baseline', which has one)."""
    elites: int = 3
    """E candidates kept at each reward update; the other K - E slots are refilled."""
    total_steps: int = 1_000_000
    """Counted env-step budget."""
    reward_period: int = 200_000
    """Env steps between reward-population updates (checked at step boundaries)."""
    max_rounds: int | None = None
    """Stop proposing after this many reward updates (None: as many as the budget allows)."""
    eval_every: int = 10_000
    """Env steps between evaluations logged to metrics.jsonl (0: only at reward updates)."""
    eval_episodes: int = 20
    """Deterministic episodes per learner at each periodic evaluation (run.sh: 20)."""
    eval_at_updates: bool = True
    """False: a periodic evaluation is left out where a reward update's evaluation follows at the same env step (its
    ``update`` row, after the install of a proposal in flight, is the curves' point there); later evaluations then
    play other seeds."""
    update_eval_episodes: int = 20
    """Deterministic episodes per learner at a reward update (fitness)."""
    handover_episodes: int = 0
    """Fresh episodes on which the top learners by fitness are replayed before a policy file is written (each
    round's and the final one); the best there is handed over (``loop/handover.py``). 0: the ranked-first slot's
    policy, as the reference (a checkpoint from before this field reads back so)."""
    handover_rounds: bool = True
    """Whether each round's policy file is chosen on fresh episodes too; False: only the run's final policy is, and
    a round's file is its ranked-first slot's. Nothing the learners do depends on it, nor the final choice: it saves
    the round hand-overs' replays (the top learners' ``handover_episodes`` episodes at every reward update)."""
    checkpoint_every: int = 0
    """Env steps between periodic checkpoints (0: only at reward updates); needs a run directory."""
    complexity_lambda: float = 0.0
    """The complexity penalty, complexity_lambda * complexity: it orders slots equal in fitness (the graded value:
    success rate, or before any success the task return or a start distance closed) and tie-break, so any value
    > 0 lets the simpler reward win an exact tie (``setup/fitness.py``); 0 here as in the reference, which ranks
    without complexity."""
    fitness: FitnessRule = "auto"
    """What a reward update grades before any slot succeeds (``setup/fitness.py``): 'success-then-return' the task
    (human) return, as the reference; 'success-then-progress' the share of the start distance closed; 'auto' the
    first on a task with a human reward, the second on one without (``fitness.fitness_rule``, resolved by the
    engine against its task). A checkpoint from before this field ran success-then-progress and reads back so."""
    inherit: InheritRule = "on-success"
    """When a replaced slot's learners copy, and are pulled toward, the best learner (``loop/inheritance.py``):
    'on-success' only while it has succeeded in the update's evaluation (otherwise they keep their own weights),
    'always' as the reference. A broken slot restarts from it under both. A checkpoint from before this field
    inherited always and reads back so."""
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    """How elites are chosen: truncation (LaRes: the top ``elites``), pareto (non-dominated over fitness, smooth
    actions and simple rewards, ``loop/pareto.py``) or, for ES, tournament."""
    rollout_slots: int = 2
    """How many of the best slots' evaluation rollouts go to the proposal hook."""
    rollouts_kept: int = 2
    """Episodes kept per such slot (feature arrays per step, for the trajectory encoder)."""
    feature_sample: int = 4096
    """Stored or recent steps sampled for the hook's numeric validation of new candidates."""
    propose_in_background: bool = False
    """Run the ``propose`` hook on a worker thread while the learners keep training on their current rewards
    (``loop/proposals.py``); its proposals are installed at the first step boundary after it returns. False: the
    learners wait for it, as in the reference (``lares run --sync-llm``)."""
    horizon: int | None = None
    """Episode length override (None: the task's horizon); shorter horizons keep tests fast."""
    seed: int = 0
    learners: ReplayConfig | ESPopulationConfig = field(default_factory=ReplayConfig)
    """What learns: SAC/CrossQ on a shared replay buffer, or ES policies."""

    def __post_init__(self) -> None:
        if self.setting not in SETTINGS:
            raise ConfigError(f"unknown setting {self.setting!r}; choose one of {', '.join(SETTINGS)}")
        if self.setting != "baseline":
            if self.population < 1:
                raise ConfigError(f"population must be >= 1, got {self.population}")
            if not 1 <= self.elites <= self.population:
                raise ConfigError(f"elites must be in 1..{self.population}, got {self.elites}")
        _check_ranges(self, 0, ("total_steps", "reward_period", "eval_every", "checkpoint_every", "feature_sample",
                                "rollout_slots", "rollouts_kept"))
        _check_ranges(self, 1, ("eval_episodes", "update_eval_episodes"))
        if isinstance(self.handover_episodes, bool) or not isinstance(self.handover_episodes, int) \
                or not 0 <= self.handover_episodes <= MAX_HANDOVER_EPISODES:
            raise ConfigError(f"handover_episodes must be a whole number in 0..{MAX_HANDOVER_EPISODES}, got "
                              f"{self.handover_episodes!r}")
        if self.horizon is not None and self.horizon < 1:
            raise ConfigError(f"horizon must be >= 1, got {self.horizon}")
        if self.selection.method == "tournament" and not isinstance(self.learners, ESPopulationConfig):
            raise ConfigError("tournament selection runs with ES learners; the replay-buffer learners select by "
                              "truncation or pareto")
        if self.complexity_lambda < 0:
            raise ConfigError("complexity_lambda must be >= 0")
        if self.fitness not in FITNESS_RULES:
            raise ConfigError(f"unknown fitness rule {self.fitness!r}; choose one of {', '.join(FITNESS_RULES)}")
        if self.inherit not in INHERIT_RULES:
            raise ConfigError(f"unknown inherit rule {self.inherit!r}; choose one of {', '.join(INHERIT_RULES)}")

    @property
    def num_slots(self) -> int:
        """Replaceable reward slots (K; 1 in the baseline)."""
        return 1 if self.setting == "baseline" else self.population

    @property
    def learner(self) -> str:
        """The learner kind: 'sac', 'crossq' or 'es'."""
        return self.learners.kind

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (checkpoints); ``learners`` carries its ``kind``."""
        return {**dataclasses.asdict(self), "learners": {"kind": self.learner, **dataclasses.asdict(self.learners)}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EngineConfig:
        """Inverse of :meth:`to_json`; unknown keys are an error, not silently dropped. A config without
        ``fitness`` (a checkpoint from before the field) ran success-then-progress, so it resumes with that rule;
        one without ``inherit`` let every replaced slot inherit, and resumes so;
        one without ``handover_episodes`` handed over the ranked-first slot's policy, and resumes so."""
        d = dict(data)
        d.setdefault("fitness", "success-then-progress")
        d.setdefault("inherit", "always")  # before the inherit rule every replaced slot inherited (the reference)
        d.setdefault("handover_episodes", 0)  # before the hand-over on fresh episodes: the ranked-first slot's policy
        learners = dict(d.pop("learners", {}))
        kind = learners.pop("kind", "sac")
        selection = SelectionConfig(**dict(d.pop("selection", {})))
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise EngineError(f"unknown engine config keys: {sorted(unknown)}")
        try:
            chosen = ESPopulationConfig.from_json(learners) if kind == "es" else ReplayConfig.from_json(learners)
        except TypeError as exc:
            raise EngineError(f"unreadable {kind} learner config: {exc}") from None
        return cls(**d, selection=selection, learners=chosen)
