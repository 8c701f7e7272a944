"""The engine layer: tasks, rollouts, learners (SAC, CrossQ, ES) and the LaRes loop over them (docs/ARCHITECTURE.md).

The layers above import engine things from here only. Names whose modules import torch (the engines, their
configs, checkpoints) are loaded on first use, so that `import lares_agent.engine.tasks` (what `lares tasks` and
`lares reward check` need) stays as cheap as gymnasium; the Ray backend is imported only when an ES run asks
for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from lares_agent.engine.contracts import (
    FITNESS_RULES,
    GRADIENT_LEARNERS,
    HUMAN_REWARD_FEATURE,
    NEXT_PREFIX,
    SETTINGS,
    Batch,
    ComponentStats,
    Diversity,
    FitnessRule,
    GradientLearner,
    HumanReward,
    LoadReward,
    MemberEvaluation,
    ProposeFn,
    RewardFunction,
    UpdateContext,
)
from lares_agent.engine.errors import ConstantRewardError, EngineError, NonFiniteRewardError, RewardColumnError
from lares_agent.engine.es.strategy import ESConfig
from lares_agent.engine.protocols import Population, PopulationLearner, StepInfo
from lares_agent.engine.replay.buffer import Affine, ReplayBuffer
from lares_agent.engine.replay.column_map import REWARD_NORMALISATIONS, ColumnMap, RewardNormalisation
from lares_agent.engine.replay.potential import PotentialReward, is_potential
from lares_agent.engine.rollouts.episodes import EnvPool, batch_features, run_episodes
from lares_agent.engine.rollouts.sampling import random_feature_sample, uniform_actions
from lares_agent.engine.setup.diversity import DiversityConfig, distinct_fraction
from lares_agent.engine.setup.selection import SelectionConfig
from lares_agent.engine.tasks import Feature, TaskSpec, get_task, list_tasks

if TYPE_CHECKING:
    from lares_agent.engine.learners.crossq import CrossQConfig
    from lares_agent.engine.learners.sac import SACConfig
    from lares_agent.engine.loop.engine import LaResEngine
    from lares_agent.engine.policies.policy_artefact import (
        PolicyArtefact,
        artefact_from_state,
        save_artefact,
        slot_member,
    )
    from lares_agent.engine.policies.policy_eval import evaluate_policy
    from lares_agent.engine.policies.video import Video, VideoError, record_video
    from lares_agent.engine.populations import make_engine, restore_engine
    from lares_agent.engine.setup.config import EngineConfig, ESPopulationConfig, ReplayConfig
    from lares_agent.engine.state.checkpoint import (
        CheckpointError,
        checkpoint_meta,
        latest_checkpoint,
        load_checkpoint,
        newest_loadable,
        remove_stale,
        save_checkpoint,
        verify_checkpoint,
    )

# name -> module, for the names that import torch (see the module docstring); the TYPE_CHECKING block above
# lists the same names for type checkers.
_LAZY = {
    "CheckpointError": "lares_agent.engine.state.checkpoint",
    "latest_checkpoint": "lares_agent.engine.state.checkpoint",
    "checkpoint_meta": "lares_agent.engine.state.checkpoint",
    "newest_loadable": "lares_agent.engine.state.checkpoint",
    "remove_stale": "lares_agent.engine.state.checkpoint",
    "verify_checkpoint": "lares_agent.engine.state.checkpoint",
    "load_checkpoint": "lares_agent.engine.state.checkpoint",
    "save_checkpoint": "lares_agent.engine.state.checkpoint",
    "CrossQConfig": "lares_agent.engine.learners.crossq",
    "SACConfig": "lares_agent.engine.learners.sac",
    "EngineConfig": "lares_agent.engine.setup.config",
    "ESPopulationConfig": "lares_agent.engine.setup.config",
    "ReplayConfig": "lares_agent.engine.setup.config",
    "LaResEngine": "lares_agent.engine.loop.engine",
    "make_engine": "lares_agent.engine.populations",
    "restore_engine": "lares_agent.engine.populations",
    "PolicyArtefact": "lares_agent.engine.policies.policy_artefact",
    "artefact_from_state": "lares_agent.engine.policies.policy_artefact",
    "save_artefact": "lares_agent.engine.policies.policy_artefact",
    "slot_member": "lares_agent.engine.policies.policy_artefact",
    "evaluate_policy": "lares_agent.engine.policies.policy_eval",
    "Video": "lares_agent.engine.policies.video",
    "VideoError": "lares_agent.engine.policies.video",
    "record_video": "lares_agent.engine.policies.video",
}

__all__ = [
    "FITNESS_RULES",
    "GRADIENT_LEARNERS",
    "HUMAN_REWARD_FEATURE",
    "NEXT_PREFIX",
    "REWARD_NORMALISATIONS",
    "SETTINGS",
    "Affine",
    "Batch",
    "CheckpointError",
    "ColumnMap",
    "ComponentStats",
    "ConstantRewardError",
    "CrossQConfig",
    "Diversity",
    "DiversityConfig",
    "ESConfig",
    "ESPopulationConfig",
    "EngineConfig",
    "EngineError",
    "EnvPool",
    "Feature",
    "FitnessRule",
    "GradientLearner",
    "HumanReward",
    "LaResEngine",
    "LoadReward",
    "MemberEvaluation",
    "NonFiniteRewardError",
    "PolicyArtefact",
    "Population",
    "PopulationLearner",
    "PotentialReward",
    "ProposeFn",
    "ReplayBuffer",
    "ReplayConfig",
    "RewardColumnError",
    "RewardFunction",
    "RewardNormalisation",
    "SACConfig",
    "SelectionConfig",
    "StepInfo",
    "TaskSpec",
    "UpdateContext",
    "Video",
    "VideoError",
    "artefact_from_state",
    "batch_features",
    "checkpoint_meta",
    "distinct_fraction",
    "evaluate_policy",
    "get_task",
    "is_potential",
    "latest_checkpoint",
    "list_tasks",
    "load_checkpoint",
    "make_engine",
    "newest_loadable",
    "random_feature_sample",
    "record_video",
    "remove_stale",
    "restore_engine",
    "run_episodes",
    "save_artefact",
    "save_checkpoint",
    "slot_member",
    "uniform_actions",
    "verify_checkpoint",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
