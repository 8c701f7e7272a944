"""Reward language of lares-agent: ast allow-list -> sympy -> complexity -> compiled numpy/torch (docs/DESIGN.md §3).

LLM text is parsed as data (never eval'd), checked against `Limits`, compiled once, and checked numerically
on sample states. `validate` is the one candidate pipeline (the graph, `lares reward check` and the search
layer call it) and returns a `Verdict`; `reward_key` is the one identity of a reward (`CompiledReward.key`);
`compile_record` turns an accepted record into its function.
"""

from lares_agent.rewards.candidate import (
    CandidateData,
    ParsedReward,
    RewardCandidate,
    candidate_id,
    parse_candidate,
    reward_key,
)
from lares_agent.rewards.compile import CompiledReward, FeatureError, compile_record, compile_reward, load_reward
from lares_agent.rewards.complexity import ComplexityWeights, expression_complexity, total_complexity
from lares_agent.rewards.grammar import answer_grammar, scale_bounds
from lares_agent.rewards.limits import Limits, RewardRejected
from lares_agent.rewards.numeric import NumericThresholds, check_numeric
from lares_agent.rewards.parse import CONSTANT_NAMES, FUNCTION_NAMES, feature_symbol, parse_expression
from lares_agent.rewards.sampling import synthetic_sample
from lares_agent.rewards.sign_rules import progress_monotonicity
from lares_agent.rewards.task import (
    HUMAN_EXPR_ID,
    HUMAN_REWARD_FEATURE,
    RewardTask,
    TaskFeature,
    allowed_features,
    designer_features,
    human_components,
    human_record,
    prompt_features,
)
from lares_agent.rewards.validate import CheckConfig, human_reference, record_key, validate
from lares_agent.rewards.verdict import ComponentStats, Verdict

__all__ = [
    "CONSTANT_NAMES",
    "FUNCTION_NAMES",
    "HUMAN_EXPR_ID",
    "HUMAN_REWARD_FEATURE",
    "CandidateData",
    "CheckConfig",
    "CompiledReward",
    "ComplexityWeights",
    "ComponentStats",
    "FeatureError",
    "Limits",
    "NumericThresholds",
    "ParsedReward",
    "RewardCandidate",
    "RewardRejected",
    "RewardTask",
    "TaskFeature",
    "Verdict",
    "allowed_features",
    "answer_grammar",
    "candidate_id",
    "check_numeric",
    "compile_record",
    "compile_reward",
    "designer_features",
    "expression_complexity",
    "feature_symbol",
    "human_components",
    "human_record",
    "human_reference",
    "load_reward",
    "parse_candidate",
    "parse_expression",
    "progress_monotonicity",
    "prompt_features",
    "record_key",
    "reward_key",
    "scale_bounds",
    "synthetic_sample",
    "total_complexity",
    "validate",
]
