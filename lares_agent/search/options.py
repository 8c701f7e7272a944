"""The values each `lares run` option may take, as types and tuples: what `SearchConfig` checks its fields against
and the CLI lists in its help. Kept apart from the config so that the option vocabulary has one home that loads
without the engine or the LLM layer."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "ABLATIONS",
    "ANALYSES",
    "BACKENDS",
    "BASELINE_REWARDS",
    "DEVICES",
    "ENGINE_ABLATIONS",
    "FITNESS_RULES",
    "INHERIT_RULES",
    "LEARNERS",
    "LLM_FREE_ABLATIONS",
    "PRESET_NAMES",
    "REWARD_NORMALISATIONS",
    "SCREENS",
    "SELECTIONS",
    "SETTINGS",
    "SHAPINGS",
    "TASK_EXAMPLES",
    "Ablation",
    "Analysis",
    "Backend",
    "BaselineReward",
    "Device",
    "Fitness",
    "Inherit",
    "Learner",
    "Preset",
    "RewardNormalisation",
    "Screen",
    "Selection",
    "Setting",
    "Shaping",
    "TaskExamples",
]

# --setting: "auto" is init where the task has a human reward, else scratch (`resolved_for_task`); the others are
# the engine's settings (engine/contracts.py SETTINGS), repeated so that this module loads without the engine.
Setting = Literal["auto", "scratch", "init", "baseline"]
Learner = Literal["sac", "crossq", "es"]
Backend = Literal["local", "ray"]
Selection = Literal["truncation", "tournament", "pareto"]
Preset = Literal["demo", "paper"]
BaselineReward = Literal["human", "success"]
BASELINE_REWARDS: tuple[BaselineReward, ...] = get_args(BaselineReward)
Analysis = Literal["facts", "llm"]  # --analysis: computed facts and defects only, or LLM-worded and fact-checked
TaskExamples = Literal["none", "other", "own"]  # --task-examples: GraphLimits.task_examples (graphs/context.py)
Screen = Literal["order", "proxy", "verifier"]  # --screen: GraphLimits.screen (graphs/context.py SCREEN_MODES)
# --reward-normalisation: LaRes' affine match alone, or a sigmoid/tanh squash before it. The engine's names
# (engine/replay/column_map.py), repeated like SETTINGS so that this module loads without the engine's imports.
RewardNormalisation = Literal["affine", "sigmoid", "tanh"]
REWARD_NORMALISATIONS: tuple[RewardNormalisation, ...] = get_args(RewardNormalisation)
# --fitness: what a reward update grades before any slot succeeds (engine/setup/fitness.py, the engine's names
# repeated as above). "auto": success-then-return where the task has a human reward (the reference's rule), else
# success-then-progress; `runner.start_run` writes the resolved rule into config.json.
Fitness = Literal["auto", "success-then-return", "success-then-progress"]
FITNESS_RULES: tuple[Fitness, ...] = get_args(Fitness)
# --device: where SAC/CrossQ learners compute (engine/learners/devices.py's names, repeated as above; "auto" kept
# as such)
Device = Literal["auto", "cpu", "cuda"]
DEVICES: tuple[Device, ...] = get_args(Device)
# --inherit: when a replaced slot's learners start from the best learner (engine/loop/inheritance.py; the engine's
# names, engine/contracts.py, repeated as above): "on-success" only once it has succeeded, "always" as the reference.
Inherit = Literal["on-success", "always"]
INHERIT_RULES: tuple[Inherit, ...] = get_args(Inherit)
# --shaping: what the LLM writes, a reward ("additive", LaRes) or a potential Phi of the state that shapes a base
# reward as gamma*Phi(s') - Phi(s) (engine/replay/potential.py, whose names these repeat as above).
Shaping = Literal["additive", "potential"]
SHAPINGS: tuple[Shaping, ...] = get_args(Shaping)
# Ablations of LaRes' parts; each switches one part off, default none (full LaRes).
Ablation = Literal["no-relabel", "no-thompson", "no-scaling", "no-constraint", "no-reflection", "no-retrieval",
                   "no-llm", "random-edit", "critique-edit"]
SETTINGS: tuple[Setting, ...] = get_args(Setting)
LEARNERS: tuple[Learner, ...] = get_args(Learner)
BACKENDS: tuple[Backend, ...] = get_args(Backend)
SELECTIONS: tuple[Selection, ...] = get_args(Selection)
PRESET_NAMES: tuple[Preset, ...] = get_args(Preset)
ANALYSES: tuple[Analysis, ...] = get_args(Analysis)
TASK_EXAMPLES: tuple[TaskExamples, ...] = get_args(TaskExamples)
SCREENS: tuple[Screen, ...] = get_args(Screen)
ABLATIONS: dict[Ablation, str] = {
    "no-relabel": "a refilled slot's old buffer rows keep their old reward values (ReplayConfig.relabel=False)",
    "no-thompson": "uniform random choice of the acting learners (ReplayConfig.thompson=False)",
    "no-scaling": "no rescaling of a new reward to the best elite (ReplayConfig.scale_to_best=False)",
    "no-constraint": "no L2 pull toward the inherited parameters (anchor_weight=0)",
    "no-reflection": "no analyse/critique nodes: the graph goes straight to propose (GraphLimits.reflect=False)",
    "no-retrieval": "no past cases retrieved for the proposer (same as retrieval=False)",
    "no-llm": "the LLM writes no reward: every free slot gets a numeric child of the elites, so in the init setting "
              "the task's own reward with its constants tuned or perturbed (GraphLimits.llm_proposals=False)",
    "random-edit": "the LLM writes no reward: every free slot gets a structural edit of an elite made at random (a "
                   "term of the language's building blocks added, removed or swapped; from scratch, 1-3 random "
                   "terms), its constants set as a numeric child's (rewards/edits.py, GraphLimits.edits)",
    "critique-edit": "the LLM writes no reward: every free slot gets an elite with the critique's computed edits made "
                     "as computed (all of them, then each alone; tools/critique_rules.py, GraphLimits.edits), so a "
                     "lead the model's answers owe to the critique's arithmetic shows here too",
}
ENGINE_ABLATIONS: tuple[Ablation, ...] = ("no-relabel", "no-thompson", "no-scaling", "no-constraint")
# The controls in which the LLM writes no reward: they need no LLM backend, and its options are refused with them.
LLM_FREE_ABLATIONS: tuple[Ablation, ...] = ("no-llm", "random-edit", "critique-edit")
