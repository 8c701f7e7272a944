"""The checks a `SearchConfig` runs as it is made (`SearchConfig.__post_init__`, search/config.py): one line per
option that cannot run, the flag named as the user types it, so that every problem of a command line is refused
at once, before a run folder exists. The engine and LLM configs the search config maps onto check their own
fields again after these pass (`engine_config`, `llm_config`).

`cfg` is a `SearchConfig`; this module does not import it, since search/config.py calls it as the config is
made (the same arrangement as search/option_ranges.py).
"""

from __future__ import annotations

import math
from typing import Any

from lares_agent.llm.config import LLM_BACKENDS
from lares_agent.search.option_ranges import range_problems
from lares_agent.search.options import (
    ABLATIONS,
    ANALYSES,
    BACKENDS,
    BASELINE_REWARDS,
    DEVICES,
    ENGINE_ABLATIONS,
    FITNESS_RULES,
    INHERIT_RULES,
    LEARNERS,
    LLM_FREE_ABLATIONS,
    PRESET_NAMES,
    REWARD_NORMALISATIONS,
    SCREENS,
    SELECTIONS,
    SETTINGS,
    SHAPINGS,
    TASK_EXAMPLES,
)

__all__ = ["config_problems", "scratch_problem"]

_GRADIENT_NAMES = {"sac": "SAC", "crossq": "CrossQ"}

# The controls that start from the task's own reward: from scratch round 0 has no reward to change.
_NEED_OWN_REWARD = {"no-llm": "perturbs the constants of the task's own reward",
                    "critique-edit": "makes the critique's edits on the task's own reward and its descendants"}


def scratch_problem(ablations: tuple[str, ...]) -> str | None:
    """Why `ablations` cannot run from scratch, or None."""
    name = next((a for a in ablations if a in _NEED_OWN_REWARD), None)
    if name is None:
        return None
    return f"--ablations {name} {_NEED_OWN_REWARD[name]}, and from scratch there is none: use --setting init"


def _choice(flag: str, value: object, allowed: tuple[str, ...]) -> list[str]:
    return [] if value in allowed else [f"{flag} must be one of {', '.join(allowed)}, not {value!r}"]


def config_problems(cfg: Any) -> list[str]:
    """One line per option of `cfg` (a `SearchConfig`) that cannot run, or per pair of options that contradict
    each other, in a fixed order; empty when the options pass (the engine's own checks come after)."""
    problems = [
        *_choice("--setting", cfg.setting, SETTINGS),
        *_choice("--learner", cfg.learner, LEARNERS),
        *_choice("--backend", cfg.backend, BACKENDS),
        *_choice("--llm-backend", cfg.llm_backend, LLM_BACKENDS),
        *_choice("--selection", cfg.selection, SELECTIONS),
        *_choice("--preset", cfg.preset, PRESET_NAMES),
        *_choice("--reward", cfg.baseline_reward, BASELINE_REWARDS),
        *_choice("--analysis", cfg.analysis, ANALYSES),
        *_choice("--task-examples", cfg.task_examples, TASK_EXAMPLES),
        *_choice("--screen", cfg.screen, SCREENS),
        *_choice("--reward-normalisation", cfg.reward_normalisation, REWARD_NORMALISATIONS),
        *_choice("--fitness", cfg.fitness, FITNESS_RULES),
        *_choice("--inherit", cfg.inherit, INHERIT_RULES),
        *_choice("--device", cfg.device, DEVICES),
        *_choice("--shaping", cfg.shaping, SHAPINGS),
    ]
    if cfg.baseline_reward != "human" and cfg.setting != "baseline":
        problems.append(f"--reward {cfg.baseline_reward} is the baseline's reward (`lares baseline`)")
    if (cfg.reward_components or cfg.reward_source) and cfg.setting != "baseline":
        problems.append("a found reward (--reward-from, --reward-file) is trained alone by `lares baseline`")
    if cfg.reward_components and cfg.baseline_reward != "human":
        problems.append(f"--reward {cfg.baseline_reward} and --reward-from/--reward-file each choose the "
                        "baseline's reward: give one")
    # The flags a user types, checked here to name them as typed; the engine config checks the same ranges.
    if any(not str(p).strip() for p in cfg.personas) or len(set(cfg.personas)) != len(cfg.personas):
        problems.append("--personas must be distinct, non-empty names or files separated by commas")
    problems += range_problems(cfg)  # nan, and the sizes that take memory (search/option_ranges.py)
    if cfg.population < 1:
        problems.append("--population must be at least 1")
    elif not 1 <= cfg.elites <= cfg.population and cfg.setting != "baseline":
        problems.append(f"--elites must be between 1 and --population ({cfg.population}), not {cfg.elites}: "
                        "a reward update keeps at least the best candidate, whose learner refilled slots inherit")
    if not 0 <= cfg.seed < 2**32:  # numpy's and gymnasium's seeds are unsigned 32-bit
        problems.append(f"--seed must be between 0 and {2**32 - 1}, not {cfg.seed}")
    if cfg.budget <= 0 or cfg.reward_period <= 0:
        problems.append("--budget and --reward-period must be positive")
    if cfg.max_minutes is not None and not (math.isfinite(cfg.max_minutes) and cfg.max_minutes > 0):
        problems.append(f"--max-minutes must be positive and finite, not {cfg.max_minutes} "
                        "(leave it out for no limit)")
    if cfg.llm_timeout is not None and not (math.isfinite(cfg.llm_timeout) and cfg.llm_timeout > 0):
        problems.append(f"--llm-timeout must be a positive number of seconds, not {cfg.llm_timeout}")
    if cfg.llm_context is not None and not 1024 <= cfg.llm_context <= 1 << 20:
        problems.append(f"--llm-context must be between 1024 and {1 << 20} tokens, not {cfg.llm_context}")
    if cfg.init_alpha <= 0:
        problems.append("init_alpha must be positive")
    if cfg.lr is not None and not (math.isfinite(cfg.lr) and cfg.lr > 0):
        problems.append(f"--lr must be a positive number, not {cfg.lr}")
    if not (math.isfinite(cfg.complexity_lambda) and cfg.complexity_lambda >= 0):
        problems.append(f"--complexity-lambda must be a number >= 0, not {cfg.complexity_lambda}")
    if cfg.lr is not None and cfg.learner == "es":
        problems.append("--lr sets the Adam rate of --learner sac or crossq (ES follows its own schedule)")
    if not (math.isfinite(cfg.candidates_per_slot) and 1.0 <= cfg.candidates_per_slot <= 10.0):
        problems.append(f"--candidates-per-slot must be between 1 and 10, not {cfg.candidates_per_slot}")
    if cfg.cores < 0:
        problems.append(f"--cores must be 0 (every core) or more, not {cfg.cores}")
    # (its upper bound is the engine's, EngineConfig checks it)
    if isinstance(cfg.handover_episodes, bool) or not isinstance(cfg.handover_episodes, int) \
            or cfg.handover_episodes < 0:
        problems.append("--handover-episodes must be a whole number of episodes, 0 (off: the policy ranked "
                        f"first is handed over) or more, not {cfg.handover_episodes!r}")
    elif cfg.handover_episodes == 0 and not cfg.handover_rounds:
        problems.append("--no-handover-rounds leaves out the rounds' replays on fresh episodes, and "
                        "--handover-episodes 0 makes none: drop one of them")
    if not 0 <= cfg.numeric_children <= 16:
        problems.append(f"--numeric-children must be between 0 and 16, not {cfg.numeric_children}")
    unknown = [a for a in cfg.ablations if a not in ABLATIONS]
    if unknown:
        problems.append(f"unknown ablation(s) {', '.join(unknown)}; choose from {', '.join(ABLATIONS)}")
    scratch = scratch_problem(cfg.ablations) if cfg.setting == "scratch" else None
    if scratch:
        problems.append(scratch)
    free = [a for a in cfg.ablations if a in LLM_FREE_ABLATIONS]
    if len(free) > 1:
        problems.append(f"--ablations {' and '.join(free)} each say what fills the slots without the LLM "
                        "(numeric children, structural edits made at random, or the critique's edits): give one")
    if "critique-edit" in cfg.ablations and "no-reflection" in cfg.ablations:
        problems.append("--ablations critique-edit makes the edits the critique computes, and no-reflection "
                        "removes the critique: give one")
    name = _GRADIENT_NAMES.get(cfg.learner)
    if name is not None:
        if cfg.selection == "tournament":
            problems.append(f"--selection tournament applies to the ES learner (--learner es); the {name} "
                            "engine selects by truncation or pareto")
        if cfg.backend != "local":
            problems.append(f"--backend {cfg.backend} runs the ES learner (--learner es); {name} learners "
                            "train as one batched in-process computation, use --backend local")
    elif any(a in ENGINE_ABLATIONS for a in cfg.ablations):
        problems.append(f"ablations {', '.join(ENGINE_ABLATIONS)} apply to the replay-buffer engine "
                        "(--learner sac or crossq)")
    if cfg.critic_hidden is not None and cfg.learner != "crossq":
        problems.append("--critic-hidden sets CrossQ's critics (--learner crossq); SAC's critics use --hidden")
    if cfg.critic_layer_norm and cfg.learner != "sac":
        problems.append("--critic-layer-norm applies to SAC's critics (--learner sac)")
    if cfg.reward_normalisation != "affine" and cfg.learner == "es":
        # ES has no buffer whose statistics could fix a squash per column (populations/es.py swaps rewards only)
        problems.append(f"--reward-normalisation {cfg.reward_normalisation} applies to the replay-buffer "
                        "engine (--learner sac or crossq)")
    if cfg.reward_gain is not None and not (math.isfinite(cfg.reward_gain) and cfg.reward_gain > 0):
        problems.append(f"--reward-gain must be a positive number, not {cfg.reward_gain}")
    elif cfg.reward_gain is not None and cfg.learner == "es":
        problems.append("--reward-gain scales the replay buffer's reward columns (--learner sac or crossq)")
    if not 1 <= cfg.learners_per_reward <= 16:
        problems.append(f"--learners-per-reward must be between 1 and 16, not {cfg.learners_per_reward}")
    elif cfg.learners_per_reward > 1 and cfg.learner == "es":
        # each ES slot is one ES learner with its own perturbation population (populations/es.py)
        problems.append("--learners-per-reward applies to the replay-buffer engine (--learner sac or crossq)")
    problems += _shaping_problems(cfg)
    if cfg.obs_norm and cfg.learner == "es":
        problems.append("--obs-norm applies to --learner sac or crossq (ES keeps its own observation statistics)")
    return problems


def _shaping_problems(cfg: Any) -> list[str]:
    """Where `--shaping potential` makes no sense: it shapes the search's rewards on the replay buffer, whose stored
    transitions give Phi(s) and Phi(s'), through a map that only scales and shifts the shaped reward."""
    if cfg.shaping != "potential":
        return []
    out: list[str] = []
    if cfg.setting == "baseline":
        out.append("--shaping potential shapes the rewards a search writes; a baseline trains on one reward as it is")
    if cfg.learner == "es":
        out.append("--shaping potential shapes the rewards of the replay-buffer engine (--learner sac or crossq): "
                   "ES sums undiscounted episode returns, in which gamma*Phi(s') - Phi(s) telescopes to an end bonus")
    if cfg.reward_normalisation != "affine":
        out.append(f"--reward-normalisation {cfg.reward_normalisation} squashes the reward, and a squashed "
                   "base + gamma*Phi(s') - Phi(s) is no longer shaped by a potential: use affine with --shaping "
                   "potential")
    if cfg.reward_gain is not None:
        out.append("--reward-gain scales a reward by what it pays at the goal; a potential is standardised on the "
                   "buffer instead (engine/replay/potential.py): leave it out with --shaping potential")
    return out
