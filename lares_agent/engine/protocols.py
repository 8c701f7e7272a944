"""What the LaRes loop needs of whatever learns: ``Population`` (driven by ``loop/engine.py``, implemented in
``populations/``), the ``StepInfo`` it returns, and ``PopulationLearner`` (K batched gradient learners, what the replay
population trains). Kept apart from ``contracts.py``, which holds the records the layers hand each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from lares_agent.engine.contracts import Batch, Diversity, MemberEvaluation, RewardFunction
from lares_agent.engine.setup.groups import LearnerGroups

if TYPE_CHECKING:  # annotations only: importing this module must not load torch (engine/__init__.py)
    import torch

__all__ = ["Population", "PopulationLearner", "StepInfo"]


class PopulationLearner(Protocol):
    """K gradient learners trained as one computation on the shared buffer, what the LaRes loop needs of them
    (``learners.actor_critic.ActorCriticPopulation``, of SAC or CrossQ learners).

    Members are independent (own seed, optimiser states, temperature); each update gets one minibatch per
    listed member from its own reward column (docs/lares-reference.md §12 item 13).
    """

    k: int

    def observe(self, obs: np.ndarray) -> None:
        """Add collected observations [N, obs_dim] to the running normalisation (a no-op without one)."""
        ...

    def act(self, obs: np.ndarray, members: np.ndarray, deterministic: bool,
            generator: torch.Generator) -> np.ndarray:
        """Actions in [-1, 1] for observations [M, obs_dim], row i acted by member ``members[i]``."""
        ...

    def update(self, batch: Batch, members: Sequence[int] | None = None) -> dict[str, np.ndarray]:
        """One step of every listed member on its column of ``batch``; per-member metrics [K] (NaN: not updated),
        at least ``q_loss``, ``actor_loss``, ``alpha_loss``, ``alpha`` and ``anchor_loss``."""
        ...

    def inherit(self, dst: Sequence[int], src: int, anchor_weight: float) -> None:
        """Make every dst member a full copy of src and pull it toward the copy with an L2 anchor (LaRes §7)."""
        ...

    def release_anchor(self, members: Sequence[int]) -> None:
        """Free the listed members of the L2 pull."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything an exact resume needs (parameters, statistics, optimiser states, generators)."""
        ...

    def load_state_dict(self, d: dict[str, Any]) -> None:
        """Restore from ``state_dict()``."""
        ...


@dataclass(frozen=True)
class StepInfo:
    """What one step of the loop did (one interaction + learning iteration, or one ES generation), for progress
    callbacks. The population fills what it did; the engine adds ``env_steps`` and ``round`` after the step."""

    steps: int
    """Counted env steps this step played."""
    acted: tuple[int, ...] = ()
    """Learners that played an episode (every learner for ES)."""
    successes: tuple[bool, ...] = ()
    """Each acting learner's any-step success (empty for ES)."""
    updates: int = 0
    """Learner updates done (ES: one per generation)."""
    env_steps: int = 0
    """Counted env steps after the step (set by the engine)."""
    round: int = 0
    """Reward updates done (set by the engine)."""


class Population(Protocol):
    """Whatever learns in a LaRes loop: the learners of the K reward slots (slot s's learners first, in slot
    order), then the ``init`` setting's extra human-reward learner. ``loop/engine.py`` drives one through these
    methods and nothing else; ``populations/replay.py`` (SAC or CrossQ on one shared replay buffer) and
    ``populations/es.py`` (one OpenAI-ES policy per slot) implement it.

    ``evaluate`` returns every learner's evaluation; the loop grades and ranks them once (``setup/fitness.py``
    ``rank``: each slot's learners, then the slots) and tells the population each slot's leader (``lead``).
    """

    kind: str
    """The learner kind ('sac', 'crossq' or 'es'): checkpoints and policy files say it."""

    @property
    def groups(self) -> LearnerGroups:
        """Which learners belong to which reward slot (one each for ES)."""
        ...

    @property
    def ranked(self) -> Sequence[Sequence[int]]:
        """Every column's learners, best first at the last reward update (before one: in order)."""
        ...

    def prepare(self, rewards: list[RewardFunction]) -> None:
        """Called before every step. The replay population fills its buffer with warm-up episodes once and labels
        every column; a candidate the buffer refuses is replaced in ``rewards`` (in place) by a usable slot's."""
        ...

    def step(self, env_steps: int) -> StepInfo:
        """One step of acting and learning at ``env_steps`` counted steps; returns what it did."""
        ...

    def evaluate(self, rewards: Sequence[RewardFunction], seeds: Sequence[int], env_steps: int, *,
                 keep_rollouts: int = 0) -> list[MemberEvaluation]:
        """Deterministic episodes of every learner on the given reset seeds (not counted in the budget), one row
        per learner in learner order; a learner whose policy or reward goes non-finite is quarantined."""
        ...

    def lead(self, ranked: Sequence[Sequence[int]]) -> None:
        """Every column's learners, best first, as a reward update ranked them (``ranked``): each slot's first is
        the policy it hands over and the one ``inherit`` copies."""
        ...

    def feature_sample(self, n: int) -> dict[str, np.ndarray]:
        """Up to ``n`` stored or recent steps of every feature, for the proposer's checks of new candidates."""
        ...

    def install(self, slot: int, fn: RewardFunction, best: int) -> Mapping[str, float]:
        """Make the slot's learners train on ``fn`` from now on (relabel and rescale to slot ``best``, or swap);
        returns extra fields of the ``candidate_accepted`` event. Raises RewardColumnError to refuse ``fn``."""
        ...

    def reward_nonfinite(self, slot: int, evaluation: MemberEvaluation) -> bool:
        """Whether the slot's current reward went NaN/inf on new steps (``evaluation``: its update evaluation)."""
        ...

    def inherit(self, slots: Sequence[int], best: int) -> None:
        """The learners of ``slots`` restart from the best slot's leader (called at every update, maybe empty)."""
        ...

    def quarantined(self, slot: int) -> bool:
        """Whether every learner of the slot is out (its policy, reward or loss went non-finite)."""
        ...

    def learner_quarantined(self, learner: int) -> bool:
        """Whether the learner is out (its policy, reward or loss went non-finite)."""
        ...

    def diversity(self, evals: Sequence[MemberEvaluation], rewards: Sequence[RewardFunction]) -> Diversity | None:
        """The population's diversity at an update (None: not measured here; the proposer judges)."""
        ...

    def slot_fields(self, slot: int) -> dict[str, Any]:
        """The population's own per-slot fields of a metrics row."""
        ...

    def metrics_fields(self) -> dict[str, Any]:
        """The population's own fields of a metrics row, averaged since the previous call (which they restart)."""
        ...

    def event_fields(self) -> dict[str, Any]:
        """The population's own fields of a ``reward_update`` event."""
        ...

    @property
    def leaders(self) -> list[int]:
        """The learner that stands for each slot (its policy is handed over)."""
        ...

    @property
    def timing(self) -> dict[str, float]:
        """Wall seconds this session by activity (not checkpointed), for the run's ``run_end`` event."""
        ...

    def action_box(self) -> tuple[np.ndarray, np.ndarray]:
        """The env's action bounds (low, high), for policy files."""
        ...

    def policy_state(self) -> dict[str, Any]:
        """What a policy file is cut from (``policies/policy_artefact.py``): ``{"learners": ...}``."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything an exact resume needs."""
        ...

    def load_state_dict(self, state: Mapping[str, Any], rewards: Sequence[RewardFunction]) -> None:
        """Restore from ``state_dict()``; ``rewards``: every learner's reward as saved with it."""
        ...

    def close(self) -> None:
        """Close environments and workers."""
        ...
