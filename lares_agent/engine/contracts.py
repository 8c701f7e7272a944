"""The engine's shared types: what it needs from a reward, and the records its parts hand each other.

The engine never imports `lares_agent.rewards` (layers point down): it relabels buffer columns with any
object that satisfies `RewardFunction`. Reward functions are vectorised over rows (one call per buffer
column, docs/lares-reference.md §12 items 19 and 23) and serialise themselves for checkpoints.

The records (`MemberEvaluation`, `Diversity`, `UpdateContext`) live here rather than in the behaviour modules that
fill them, so the loop, the rollouts and the search layer share them without importing each other. A slot's
evaluation as the run files and the proposer see it, summary and grade, is `runs.slots.SlotRecord`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np

from lares_agent.runs.slots import SlotRecord

__all__ = [
    "FITNESS_RULES",
    "GRADIENT_LEARNERS",
    "HUMAN_REWARD_FEATURE",
    "INHERIT_RULES",
    "NEXT_PREFIX",
    "SETTINGS",
    "Batch",
    "ComponentStats",
    "Diversity",
    "FitnessRule",
    "Grade",
    "GradientLearner",
    "HumanReward",
    "InheritRule",
    "LoadReward",
    "MemberEvaluation",
    "ProposeFn",
    "RewardFunction",
    "UpdateContext",
]

SETTINGS = ("scratch", "init", "baseline")
"""Run settings, one meaning for every learner (docs/lares-reference.md: the reference's from-scratch and
with_init runs, and plain RL on the human reward): see ``setup/slots.py``."""

GradientLearner = Literal["sac", "crossq"]
"""The gradient learners the LaRes engine trains on its shared replay buffer (``EngineConfig.learner``)."""
GRADIENT_LEARNERS: tuple[GradientLearner, ...] = ("sac", "crossq")

Grade = Literal["success", "progress", "approach", "return"]
"""What a reward update graded fitness on (docs/DESIGN.md, "Graded fitness"; the rule is ``setup/fitness.py``):
"return" is the task return, the grade of ``success-then-return`` before any success."""

FitnessRule = Literal["auto", "success-then-return", "success-then-progress"]
"""How a reward update grades its slots (``EngineConfig.fitness``; ``setup/fitness.py``): by success once any slot
succeeds, before that by the task (human) return, as the reference does, or by the share of the start distance
closed. "auto" is the first for a task with a human reward and the second for a task without one."""
FITNESS_RULES: tuple[FitnessRule, ...] = ("auto", "success-then-return", "success-then-progress")

InheritRule = Literal["on-success", "always"]
"""When a replaced slot's learners restart from the best learner (``EngineConfig.inherit``; the rule is
``loop/inheritance.py``)."""
INHERIT_RULES: tuple[InheritRule, ...] = ("on-success", "always")


HUMAN_REWARD_FEATURE = "human_reward"
"""Feature name under which tasks expose the environment's own reward (NaN where none exists)."""

NEXT_PREFIX = "next:"
"""A feature sample may also carry ``next:<name>``: the feature at the same episode's next step, NaN where the step
ended its episode or the next step is not stored. The proposer's offline pre-screen reads reward changes along
transitions from it (``rewards/prescreen.py``); ``:`` keeps the keys apart from feature names, which are identifiers."""


class Batch(NamedTuple):
    """Minibatches for C columns, stacked for the population update (float32 unless noted).

    obs [C, B, obs_dim], action [C, B, act_dim], reward [C, B], next_obs [C, B, obs_dim],
    terminated [C, B] (1.0 where the episode really ended; time-limit cuts are 0, §12 item 12),
    indices [C, B] (int64 buffer rows, for diagnostics).
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    indices: np.ndarray

    def column(self, i: int) -> Batch:
        """The minibatch of the i-th sampled column, with the leading C axis dropped ([B, ...])."""
        return Batch(*(x[i] for x in self))


@runtime_checkable
class RewardFunction(Protocol):
    """A vectorised reward: named feature arrays of N rows in, N rewards out.

    `id` names the reward; `key` is its identity: rewards with equal keys are the same function (diversity counts
    distinct keys); `expression` is what it is written as, for the search layer, which shows and refines it.
    """

    id: str
    key: str
    complexity: float

    @property
    def expression(self) -> Mapping[str, str] | None:
        """The reward's components as text of the reward language (name -> expression: a compiled reward's canonical
        text, the task's own reward as the task writes it); None for a reward with no expression to show or refine."""
        ...

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """Total reward per row, shape [N]."""
        ...

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each named component per row (they sum to `__call__`), for reports and feedback."""
        ...

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable description from which the owner can rebuild the function."""
        ...


class HumanReward:
    """The task's own (human-designed) reward, read from the `human_reward` feature.

    Used for the "with human reward" setting and as a baseline; it is never shown to the LLM in the
    from-scratch setting (docs/ARCHITECTURE.md, engine/tasks). ``complexity`` is that of the task's own reward
    expression (``TaskSpec.human_components``, measured by the search layer, which parses rewards), so the init
    setting's learner on it is ranked by the rule every slot is (``setup/fitness.py``); 0 where the task's reward
    has no written expression (nothing to measure). ``expression`` is that expression (``TaskSpec.human_components``)
    where the search shows it to the LLM, the init setting, whose learner on it is an elite to refine like any
    other; None elsewhere: from scratch the LLM never sees it. The search layer passes both, as the engine parses
    no rewards; neither changes the values, which are the environment's.
    """

    id: str = "human"
    key: str = "human"
    complexity: float
    expression: Mapping[str, str] | None = None

    def __init__(self, complexity: float = 0.0, expression: Mapping[str, str] | None = None) -> None:
        self.complexity = float(complexity)
        self.expression = dict(expression) if expression is not None else None

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """Return `features["human_reward"]` as float64 (a copy, so callers cannot alias buffer memory)."""
        if HUMAN_REWARD_FEATURE not in features:
            raise KeyError(f"feature {HUMAN_REWARD_FEATURE!r} is missing: the task exposes no human reward")
        return np.array(features[HUMAN_REWARD_FEATURE], dtype=np.float64)

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One component, the reward itself."""
        return {HUMAN_REWARD_FEATURE: self(features)}

    def to_json(self) -> dict[str, Any]:
        """Serialise as a tag; `load_reward` implementations recognise `{"id": "human"}`. The expression is not
        kept: it is the task's, which the search layer passes again at a resume (``restore_engine``)."""
        return {"id": self.id, "kind": "human", "complexity": self.complexity}

    def __repr__(self) -> str:
        return f"HumanReward(complexity={self.complexity:g})" if self.complexity else "HumanReward()"


LoadReward = Callable[[Mapping[str, Any]], RewardFunction]
"""Rebuilds a reward from its ``to_json()`` (the search layer's loader; the human reward needs none)."""


# ---------------------------------------------------------------------------------------------- evaluations
@dataclass(frozen=True)
class ComponentStats:
    """Statistics of one reward component over evaluation steps; ``share`` = its part of the total |r|."""

    mean: float
    std: float
    share: float

    def to_json(self) -> dict[str, float]:
        return {"mean": self.mean, "std": self.std, "share": self.share}


@dataclass(frozen=True)
class MemberEvaluation:
    """Outcome of one member's deterministic evaluation episodes (means over episodes)."""

    member: int
    episodes: int
    success_rate: float
    task_return: float
    own_return: float
    mean_progress: float
    final_progress: float
    episode_length: float
    component_stats: Mapping[str, ComponentStats] = field(default_factory=dict)
    rollouts: tuple[Mapping[str, np.ndarray], ...] = ()
    nonfinite: bool = False
    start_progress: float = float("nan")
    """Mean progress feature at the first step (features exist only after a step; one step barely moves)."""
    progress_closed: float = float("nan")
    """Mean over episodes of (start - final) / |start| of the progress feature, clipped to [-1, 1]: the share of
    the start distance closed (graded fitness before any success, docs/DESIGN.md "Graded fitness")."""
    approach_closed: float = float("nan")
    """The same share for the task's approach feature (NaN for a task without one): the graded fitness when no
    slot succeeds and the progress shares do not separate the slots (``setup/fitness.py``)."""
    action_jerk: float = float("nan")
    """Mean over episodes of the mean squared change of the policy-space action per step, ||a_t - a_{t-1}||^2
    (lower is smoother; an objective of Pareto selection)."""
    learner_success: tuple[float, ...] = ()
    """A slot with several learners (``--learners-per-reward``, ``setup/groups.py``): each learner's success rate,
    in learner order; the fields above are then their means. Empty for one learner."""

    def record(self, reward_id: str) -> SlotRecord:
        """This evaluation as its slot's record (slot = member), before any grade (``setup/fitness.py`` adds it)."""
        return SlotRecord(
            slot=self.member, reward_id=reward_id, member=self.member, success=self.success_rate,
            task_return=self.task_return, own_return=self.own_return, final_progress=self.final_progress,
            episode_length=self.episode_length, nonfinite=self.nonfinite, progress_closed=self.progress_closed,
            approach_closed=self.approach_closed, action_jerk=self.action_jerk, learner_success=self.learner_success,
            components={name: st.to_json() for name, st in self.component_stats.items()})


@dataclass(frozen=True)
class Diversity:
    """One diversity measurement of the reward population (logged every reward update)."""

    distinct: int
    distinct_fraction: float
    behaviour_distance: float
    explore: bool

    def to_json(self) -> dict[str, Any]:
        return {"distinct": self.distinct, "distinct_fraction": self.distinct_fraction,
                "behaviour_distance": self.behaviour_distance, "explore": self.explore}


# ---------------------------------------------------------------------------------------------- the hook
@dataclass(frozen=True)
class UpdateContext:
    """What the reward-proposal hook sees at a reward update (docs/ARCHITECTURE.md: search, graphs).

    The hook returns at most ``len(refill)`` reward functions, assigned to ``refill`` in order; returning
    fewer leaves the remaining slots with their current reward and learner.
    """

    round: int
    """Index of this reward update (1 for the first update after the initial population)."""
    env_steps: int
    setting: str
    slots: tuple[SlotRecord, ...]
    """Every slot, graded, in slot order."""
    ranking: tuple[int, ...]
    """Slots from best to worst."""
    elites: tuple[int, ...]
    refill: tuple[int, ...]
    """Slots whose reward will be replaced, ascending (reference order)."""
    rewards: tuple[RewardFunction, ...]
    """Current reward function of every slot."""
    rollouts: Mapping[int, tuple[Mapping[str, np.ndarray], ...]]
    """For the best slots: a few deterministic episodes as feature arrays per step (name -> [T])."""
    feature_sample: Mapping[str, np.ndarray]
    """Stored or recent steps of every feature (name -> [n]) for numeric validation of new candidates."""
    diversity: Diversity | None = None
    """The population's diversity where the engine measures it (the ES engine), else None."""
    explore: bool | None = None
    """True when the reward texts or the policies' behaviours became too alike: the proposer should write new
    structures instead of refining the elites. None: the engine did not judge (the proposer may)."""
    episodes: tuple[Mapping[str, np.ndarray], ...] = ()
    """Every episode of the update's evaluation, of every ranked learner, ranked first's first (name -> [T]): what
    the verifier scores candidates on (rewards/verifier.py). Never shown to the LLM; () in round 0."""

    @property
    def best(self) -> int:
        """The best slot (its policy is what new slots inherit)."""
        return self.ranking[0]

    def slot(self, index: int) -> SlotRecord:
        """The evaluation of slot ``index``."""
        return self.slots[index]


ProposeFn = Callable[[UpdateContext], Sequence[RewardFunction]]
"""The reward-proposal hook (the LLM graph, wired in by the search layer); the engine treats it as opaque."""
