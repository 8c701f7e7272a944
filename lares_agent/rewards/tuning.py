"""Numeric children whose constants a TPE optimiser (Optuna) draws from the fitness measured for rewards of the
same structure, instead of blind log-normal perturbations (`mutate.numeric_children`).

The LLM proposes structures and the optimiser their constants (URDP, ERFSL: docs/research notes on small models).
A structure is a reward's form with its constants left out (`validate.structure_key`); every reward of that form
the run has measured is one finished trial, its parameters the log-ratios of its constants to the elite's. With
fewer trials than the sampler's start-up count, TPE draws at random within the same range as the perturbations;
with more, it draws where the measured fitness was high. Seeded, so a resumed round draws the same children.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence

import sympy

from lares_agent.rewards.candidate import canonical_text
from lares_agent.rewards.limits import Limits, RewardRejected
from lares_agent.rewards.mutate import distinct_draws, mutable_constants, replace_constants
from lares_agent.rewards.parse import parse_expression
from lares_agent.rewards.task import RewardTask, allowed_features
from lares_agent.rewards.validate import structure_key_of

__all__ = ["STARTUP_TRIALS", "Measured", "constants_label", "tuned_children"]

Measured = tuple[Mapping[str, str], float]
"""A measured reward: its components (name -> expression) and its fitness."""

STARTUP_TRIALS = 4  # TPE's random draws before it models the measured fitness (a run measures few per structure)


def constants_label(trials: int, spread: float = 1.0) -> str:
    """How `tuned_children` drew a child's constants, for its rationale: "by TPE" only once the sampler had its
    start-up trials of the structure measured; before that its draws are uniform at random, and say so."""
    if trials >= STARTUP_TRIALS:
        return f"constants by TPE over {trials} measured reward(s) of its structure"
    return (f"constants drawn at random within exp(+-{spread:g}) of its own ({trials} of the {STARTUP_TRIALS} "
            "measured rewards of its structure TPE needs to model them)")


def _parsed(components: Mapping[str, str], task: RewardTask, limits: Limits) -> dict[str, sympy.Expr] | None:
    try:
        return {name: parse_expression(text, allowed_features(task), limits) for name, text in components.items()}
    except (RewardRejected, ValueError, TypeError):
        return None


def _constants(exprs: Mapping[str, sympy.Expr]) -> list[float]:
    return [c for name in sorted(exprs) for c in mutable_constants(exprs[name])]


def _log_ratios(values: Sequence[float], base: Sequence[float], spread: float) -> list[float] | None:
    """log(value / base) per constant; None when a sign differs or a ratio falls outside +-spread."""
    if len(values) != len(base):
        return None
    out = []
    for value, ref in zip(values, base, strict=True):
        if value * ref <= 0:
            return None
        ratio = math.log(value / ref)
        if abs(ratio) > spread:
            return None
        out.append(ratio)
    return out


def tuned_children(
    components: Mapping[str, str],
    task: RewardTask,
    n: int,
    measured: Sequence[Measured],
    seed: int,
    *,
    spread: float = 1.0,
    limits: Limits = Limits(),
    keep: Callable[[Mapping[str, str]], bool] | None = None,
) -> tuple[list[dict[str, str]], int]:
    """Up to `n` children of an elite's components and the number of measured rewards of its structure the
    optimiser learned from; ([], 0) when the components do not parse or hold no constant to tune. Each child's
    constants are the elite's times exp(x), x in [-spread, spread] per constant, rounded to 3 significant digits;
    a draw `keep` refuses is drawn again."""
    import optuna

    exprs = _parsed(components, task, limits)
    if exprs is None or n <= 0:
        return [], 0
    base = _constants(exprs)
    if not base:
        return [], 0
    key = structure_key_of({name: canonical_text(e) for name, e in exprs.items()})
    names = [f"c{i}" for i in range(len(base))]
    space: dict[str, optuna.distributions.BaseDistribution] = {
        name: optuna.distributions.FloatDistribution(-spread, spread) for name in names}
    trials = []
    for comps, fitness in measured:
        other = _parsed(comps, task, limits) if math.isfinite(fitness) else None
        if other is None or structure_key_of({k: canonical_text(e) for k, e in other.items()}) != key:
            continue
        ratios = _log_ratios(_constants(other), base, spread)
        if ratios is not None:
            trials.append(optuna.trial.create_trial(params=dict(zip(names, ratios, strict=True)),
                                                    distributions=space, value=fitness))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna's experimental-feature notes
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=STARTUP_TRIALS, constant_liar=True)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        study.add_trials(trials)

        def draw() -> dict[str, str]:
            params = study.ask(space).params
            values = iter(float(f"{b * math.exp(params[c]):.3g}") for b, c in zip(base, names, strict=True))
            return {name: canonical_text(replace_constants(exprs[name], values)) for name in sorted(exprs)}

        return distinct_draws(exprs, draw, n, 4, keep), len(trials)
