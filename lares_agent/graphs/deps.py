"""What the graph's nodes need that is not state: the LLM, the task, the persona, data sources, limits.

Kept out of the state on purpose: the state is checkpointed after every node (trace.sqlite), and clients,
buffers and compiled functions do not belong in a checkpoint (docs/DESIGN.md §2: the state holds ids, expressions,
verdicts and summaries). The search layer owns one `GraphDeps` per run and refreshes `sample` and
`rollouts` before each round; compiled rewards of accepted candidates land in `registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lares_agent.errors import ConfigError
from lares_agent.llm.client import LLMClient
from lares_agent.memory.cases import CaseStore
from lares_agent.prompts.loader import DEFAULT_PERSONA, Persona, load_persona
from lares_agent.rewards import CompiledReward
from lares_agent.tools.checks import CheckConfig
from lares_agent.tools.trajectory import Rollout

__all__ = ["GraphLimits", "GraphDeps"]

Sample = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class GraphLimits:
    """Bounds and sampling settings of one round."""

    retry_budget: int = 3  # extra propose passes after the first; bounds LLM cost (docs/lares-reference.md §12 item 28)
    per_call: int = 1  # candidates asked for in one LLM call (1 is the most reliable for 0.5B/1.5B models)
    max_calls_per_pass: int = 8  # cap on LLM calls in one propose pass
    temperature: float = 0.4  # the seed's 0.3-0.5
    explore_temperature: float = 0.8  # when the population has lost diversity
    temperature_step: float = 0.15  # added per proposal already made this round (at T=0.4 the 1.5B repeats itself)
    analyse_max_tokens: int = 200
    critique_max_tokens: int = 220
    propose_max_tokens: int = 256
    trajectory_tokens: int = 512  # the seed's "limit trajectory descriptions to 512 tokens"
    retrieve_k: int = 3
    section_chars: int = 1200  # cap on each variable prompt section, keeps prompts well under n_ctx 4096
    reflect: bool = True  # analyse + critique before propose; False routes START straight to propose (ablation)
    checks: CheckConfig = field(default_factory=CheckConfig)

    def __post_init__(self) -> None:
        if self.retry_budget < 0 or self.per_call < 1 or self.max_calls_per_pass < 1:
            raise ConfigError("GraphLimits: retry_budget >= 0, per_call >= 1 and max_calls_per_pass >= 1 required")


@dataclass
class GraphDeps:
    """Everything nodes call. Mutable on purpose: the search layer swaps `sample`/`rollouts` per round."""

    llm: LLMClient
    task: Any  # engine.tasks.TaskSpec
    sample: Sample | Callable[[], Sample]
    persona: Persona = field(default_factory=lambda: load_persona(DEFAULT_PERSONA))
    cases: CaseStore | None = None  # None: retrieval off (--no-retrieval)
    rollouts: dict[str, Rollout] = field(default_factory=dict)
    limits: GraphLimits = field(default_factory=GraphLimits)
    run_id: str = ""
    id_prefix: str = ""
    registry: dict[str, CompiledReward] = field(default_factory=dict)

    def get_sample(self) -> Sample:
        """The validation sample (calls the source when it is a callable)."""
        return self.sample() if callable(self.sample) else self.sample
