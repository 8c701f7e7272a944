"""The one place that turns a learner config into the batched population the LaRes loop trains."""

from __future__ import annotations

import torch

from lares_agent.engine.contracts import GradientLearner
from lares_agent.engine.learners.actor_critic import ActorCriticPopulation
from lares_agent.engine.learners.crossq import CrossQConfig
from lares_agent.engine.learners.sac import SACConfig
from lares_agent.engine.protocols import PopulationLearner

__all__ = ["LEARNER_NAMES", "LearnerConfig", "make_population"]

LearnerConfig = SACConfig | CrossQConfig
"""The config of one gradient learner; both have ``batch_size`` and ``utd_ratio``, which the loop reads."""

LEARNER_NAMES: dict[GradientLearner, str] = {"sac": "SAC", "crossq": "CrossQ"}
"""How events and messages name each learner."""


def make_population(config: LearnerConfig, k: int, obs_dim: int, act_dim: int, seed: int,
                    device: str | torch.device = "cpu") -> PopulationLearner:
    """K learners of the kind ``config`` configures (its type picks SAC or CrossQ), seeded from ``seed``, computing
    on ``device`` (their initial weights are drawn on the CPU, so every device starts from the same ones)."""
    return ActorCriticPopulation(k, obs_dim, act_dim, config, seed, device=device)
