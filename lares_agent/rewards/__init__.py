"""Reward language of lares-agent: ast allow-list -> sympy -> complexity -> compiled numpy/torch (docs/DESIGN.md §3).

LLM text is parsed as data (never eval'd), checked against `Limits`, compiled once, and checked numerically
on sample states; `validate` does all of it and returns a `Verdict`.
"""

from lares_agent.rewards.candidate import ParsedReward, RewardCandidate, candidate_id, parse_candidate
from lares_agent.rewards.checks import (
    ComponentStats,
    NumericThresholds,
    Verdict,
    check_numeric,
    feature_names_of,
    validate,
)
from lares_agent.rewards.compile import CompiledReward, FeatureError, compile_reward, load_reward
from lares_agent.rewards.complexity import ComplexityWeights, expression_complexity, total_complexity
from lares_agent.rewards.limits import Limits, RewardRejected
from lares_agent.rewards.parse import CONSTANT_NAMES, FUNCTION_NAMES, feature_symbol, parse_expression
from lares_agent.rewards.sampling import synthetic_sample

__all__ = [
    "CONSTANT_NAMES",
    "FUNCTION_NAMES",
    "CompiledReward",
    "ComplexityWeights",
    "ComponentStats",
    "FeatureError",
    "Limits",
    "NumericThresholds",
    "ParsedReward",
    "RewardCandidate",
    "RewardRejected",
    "Verdict",
    "candidate_id",
    "check_numeric",
    "compile_reward",
    "expression_complexity",
    "feature_names_of",
    "feature_symbol",
    "load_reward",
    "parse_candidate",
    "parse_expression",
    "synthetic_sample",
    "total_complexity",
    "validate",
]
