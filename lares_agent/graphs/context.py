"""The run context the graph's nodes read (LangGraph's `context_schema`), its bounds, and the task it needs.

Kept out of the state on purpose: the state is checkpointed after every node (trace.sqlite), and clients,
buffers and compiled functions do not belong in a checkpoint (docs/DESIGN.md §2: the state holds ids, expressions,
verdicts and summaries). The context is frozen: the search layer builds one per run and, for each round, a copy
holding that round's validation sample and rollouts (`for_round`), passed to `graph.invoke(..., context=...)`.
One field is written during a round: `compiled`, where validate leaves the functions it checked for the search layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, get_args

import numpy as np

from lares_agent.engine.replay.potential import SHAPINGS, Shaping
from lares_agent.errors import ConfigError
from lares_agent.llm.client import LLMClient
from lares_agent.memory.cases import CaseStore
from lares_agent.prompts.loader import DEFAULT_PERSONA, Persona, load_persona
from lares_agent.rewards import CheckConfig, CompiledReward, RewardTask, TaskFeature, allowed_features, prompt_features
from lares_agent.rewards.shaping import CAGING_FEATURES
from lares_agent.rewards.task import offstage_features
from lares_agent.rewards.tuning import Measured
from lares_agent.tools.trajectory import Rollout

__all__ = ["ANALYSIS_MODES", "SCREEN_MODES", "SLOT_EDITS", "TASK_EXAMPLE_MODES", "AnalysisMode", "DescribedFeature",
           "GraphLimits", "GraphTask", "RunContext", "ScreenMode", "SlotEdits", "TaskExampleMode"]

AnalysisMode = Literal["facts", "llm"]
ANALYSIS_MODES: tuple[AnalysisMode, ...] = get_args(AnalysisMode)
# Which example answers the system prompt shows: "none" (runs' default), the building blocks only, as the
# reference shows no answer; "other": also one answer for a different task; "own": also two for the run's task. The
# 1.5B model copies whichever example it is shown (docs/results-archive.md, "Sample efficiency on five MetaWorld
# tasks (50k steps)"; experiments/proposals/README.md, "Proposals without own-task examples, under the grammar"), and
# a result that depends on an example we wrote is not a result of the search.
TaskExampleMode = Literal["none", "other", "own"]
TASK_EXAMPLE_MODES: tuple[TaskExampleMode, ...] = get_args(TaskExampleMode)
# Which valid candidates fill a round's free slots when there are more than slots: "order", the first ones (proposal
# order); "proxy", the best by the offline pre-screen on single transitions (rewards/prescreen.py); "verifier", the
# best by the verifier's order tau on the update's evaluation episodes (rewards/verifier.py; round 0 has none, so it
# keeps proposal order there). Every score is logged whichever decides (docs/RESULTS.md, "The pre-screen's signal").
ScreenMode = Literal["order", "proxy", "verifier"]
SCREEN_MODES: tuple[ScreenMode, ...] = get_args(ScreenMode)
SlotEdits = Literal["none", "random", "critique"]  # GraphLimits.edits
SLOT_EDITS: tuple[SlotEdits, ...] = get_args(SlotEdits)


class DescribedFeature(TaskFeature, Protocol):
    """A feature as the prompts show it: name, unit and a one-line meaning."""

    @property
    def meaning(self) -> str: ...


class GraphTask(RewardTask, Protocol):
    """The task as the graph needs it: what the validator reads, plus the text the prompts show."""

    @property
    def description(self) -> str: ...

    @property
    def horizon(self) -> int: ...

    @property
    def features(self) -> Sequence[DescribedFeature]: ...


@dataclass(frozen=True)
class GraphLimits:
    """Bounds and sampling settings of one round."""

    retry_budget: int = 3  # extra propose passes after the first; bounds LLM cost (docs/lares-reference.md §12 item 28)
    per_call: int = 1  # candidates asked for in one LLM call (1 is the most reliable for 0.5B/1.5B models)
    max_calls_per_pass: int = 8  # cap on LLM calls in one propose pass
    temperature: float = 0.4  # the seed's 0.3-0.5
    explore_temperature: float = 0.8  # when the population has lost diversity
    temperature_step: float = 0.15  # added per proposal already made this round (at T=0.4 the 1.5B repeats itself)
    max_temperature: float = 1.0  # the ramp's cap (Eureka samples at 1.0; at 0.8 the 1.5B under the grammar
    # kept repeating one answer: docs/RESULTS.md, "The evidence grid")
    analyse_max_tokens: int = 200
    critique_max_tokens: int = 220
    grammar: bool = True  # the local model decodes proposals under the language's grammar (rewards/grammar.py)
    propose_max_tokens: int = 384  # a refinement restates the task's own reward (init): 256 cut one in six
    trajectory_tokens: int = 512  # the seed's "limit trajectory descriptions to 512 tokens"
    retrieve_k: int = 3
    section_chars: int = 1200  # cap on each variable prompt section, keeps prompts well under n_ctx 4096
    reflect: bool = True  # analyse + critique before propose; False routes START straight to propose (ablation)
    checks: CheckConfig = field(default_factory=CheckConfig)
    # Many cheap candidates: the LLM is asked for `oversample` candidates per free slot, each elite
    # gets numeric children, and validate keeps as many valid ones as there are free slots.
    oversample: float = 1.0  # LLM candidates asked per free slot (SearchConfig.candidates_per_slot sets runs')
    numeric_children: int = 0  # numeric children of the elites per propose pass (rewards/mutate.py)
    llm_proposals: bool = True  # False (ablation): no LLM call; the elites' numeric children fill every free slot
    # With llm_proposals False, what takes the LLM's place beside the numeric children (SLOT_EDITS): "random",
    # structural edits of the elites made at random (rewards/edits.py, the random-edit control); "critique", the
    # critique's computed edits made as computed (tools/critique_rules.py, the critique-edit control)
    edits: SlotEdits = "none"
    mutation_sigma: float = 0.5  # children's constants times exp(N(0, sigma))
    # which valid candidates fill the free slots (SCREEN_MODES); "verifier" (default): the best verifier tau, the one
    # score whose order of a round's candidates a measure over real runs found signal in (docs/DESIGN.md §3); round 0
    # has no score and keeps proposal order, as "order" always does
    screen: ScreenMode = "verifier"
    seed: int = 0  # the children's randomness (with the round and attempt)
    # "facts": analyse states the computed facts and critique the computed defects, no LLM call; "llm": the model
    # summarises the facts (checked against them) and each critic may add defects
    analysis: AnalysisMode = "facts"
    task_examples: TaskExampleMode = "none"  # which answers the system prompt shows (TASK_EXAMPLE_MODES)
    # From scratch, also offer the features made to write the task's own reward (`TaskSpec.designer_features`);
    # False (default): every task's scratch setting holds its generic features only (docs/scratch-features.md).
    # The init setting always offers them: the reward it refines reads them.
    designer_features: bool = False
    # "potential" (`--shaping potential`): the LLM writes a potential Phi of the state (its own system prompt, no
    # action features offered or accepted) that shapes a base reward (engine/replay/potential.py)
    shaping: Shaping = "additive"

    def __post_init__(self) -> None:
        if self.retry_budget < 0 or self.per_call < 1 or self.max_calls_per_pass < 1:
            raise ConfigError("GraphLimits: retry_budget >= 0, per_call >= 1 and max_calls_per_pass >= 1 required")
        if not (self.oversample >= 1.0 and self.numeric_children >= 0 and self.mutation_sigma > 0):
            raise ConfigError("GraphLimits: oversample >= 1, numeric_children >= 0 and mutation_sigma > 0 required")
        if self.edits not in SLOT_EDITS:
            raise ConfigError(f"GraphLimits: edits must be one of {', '.join(SLOT_EDITS)}, not {self.edits!r}")
        if self.edits != "none" and self.llm_proposals:
            raise ConfigError("GraphLimits: edits take the LLM's place, so they need llm_proposals=False")
        if self.edits == "critique" and not self.reflect:
            raise ConfigError("GraphLimits: the critique's edits need its defects, so they need reflect=True")
        if self.analysis not in ANALYSIS_MODES:
            raise ConfigError(f"GraphLimits: analysis must be one of {', '.join(ANALYSIS_MODES)}, "
                              f"not {self.analysis!r}")
        if self.shaping not in SHAPINGS:
            raise ConfigError(f"GraphLimits: shaping must be one of {', '.join(SHAPINGS)}, not {self.shaping!r}")
        if self.screen not in SCREEN_MODES:
            raise ConfigError(f"GraphLimits: screen must be one of {', '.join(SCREEN_MODES)}, not {self.screen!r}")
        if self.task_examples not in TASK_EXAMPLE_MODES:
            raise ConfigError(f"GraphLimits: task_examples must be one of {', '.join(TASK_EXAMPLE_MODES)}, "
                              f"not {self.task_examples!r}")


def _default_persona() -> Persona:
    return load_persona(DEFAULT_PERSONA)


@dataclass(frozen=True)
class RunContext:
    """Everything nodes read that is not state; read-only (a round gets its own copy, `for_round`) but for
    `compiled`, which validate fills."""

    llm: LLMClient
    task: GraphTask
    sample: Mapping[str, np.ndarray] = field(default_factory=dict)  # this round's validation states
    rollouts: Mapping[str, Rollout] = field(default_factory=dict)  # this round's rollouts, by id
    episodes: tuple[Mapping[str, np.ndarray], ...] = ()
    """The update's evaluation episodes (`UpdateContext.episodes`): the verifier scores valid candidates on them
    (rewards/verifier.py); never shown to the LLM. (): round 0, nothing to score on."""
    persona: Persona = field(default_factory=_default_persona)
    cases: CaseStore | None = None  # None: retrieval off (--no-retrieval)
    limits: GraphLimits = field(default_factory=GraphLimits)
    run_id: str = ""
    id_prefix: str = ""
    critics: tuple[Persona, ...] = ()  # the critic ensemble (--personas); () : `persona` critiques alone
    measured: tuple[Measured, ...] = ()
    """(components, fitness) of every reward the run has measured: the constant tuner's trials (rewards/tuning.py)."""
    human_reward: Mapping[str, str] | None = None
    """The task's own reward as components of the reward language, in the init setting: the system prompt shows
    it as the starting point, round 0 refines it, and it is the elite whenever the human-reward learner ranks
    among the elites (docs/lares-reference.md §2.1). None: from scratch, the LLM never sees it."""
    compiled: dict[str, CompiledReward] = field(default_factory=dict, compare=False, repr=False)
    """validate's compiled reward of each candidate it found valid, by record id: the round hands them to the search
    layer (`RoundResult.compiled`), which installs them rather than compiling the records again. A function, so
    never in the state; `run_round` gives each round an empty one."""

    @property
    def offers_designer_features(self) -> bool:
        """Whether the LLM is offered the designer's features: in the init setting, or where the run asks."""
        return self.human_reward is not None or self.limits.designer_features

    def offered_features(self) -> tuple[str, ...]:
        """The features the prompts list and the grammar lets an answer name (`rewards.prompt_features`)."""
        return prompt_features(self.task, designer=self.offers_designer_features,
                               state_only=self.limits.shaping == "potential")

    def hidden_names(self) -> frozenset[str]:
        """The names an answer may not use because they are the designer's: the task's designer features where
        they are not offered, and `gripper_caging` where the features it reads are not."""
        offered = set(self.offered_features())
        hidden = set(allowed_features(self.task)) - offered - offstage_features(self.task)
        return frozenset(hidden | ({"gripper_caging"} if hidden and not set(CAGING_FEATURES) <= offered else set()))

    @property
    def checks(self) -> CheckConfig:
        """The validator's settings for this run's candidates: `limits.checks`, refusing the designer's features
        where they are not offered and the action's features in a potential."""
        return replace(self.limits.checks, designer_features=self.offers_designer_features,
                       state_only=self.limits.shaping == "potential")

    @property
    def critic_personas(self) -> tuple[Persona, ...]:
        """Who critiques: the ensemble, or the run's persona."""
        return self.critics or (self.persona,)

    def for_round(
        self, sample: Mapping[str, np.ndarray], rollouts: Mapping[str, Rollout] | None = None,
        measured: Sequence[Measured] = (), episodes: Sequence[Mapping[str, np.ndarray]] = (),
    ) -> RunContext:
        """The context of one round: this run's settings with that round's sample, rollouts, episodes and the
        rewards measured so far."""
        return replace(self, sample=dict(sample), rollouts=dict(rollouts or {}), measured=tuple(measured),
                       episodes=tuple(episodes))
