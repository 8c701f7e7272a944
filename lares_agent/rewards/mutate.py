"""Numeric children of an elite: its structure kept, its constants perturbed on a log scale.

The small LLM proposes structures well and numbers poorly, and often returns an elite unchanged; R*-style search
takes the structure from the LLM and the coefficients from evolution. A child multiplies each mutable constant of
the elite's canonical components by exp(N(0, sigma)): the sign and zeros survive, and the scale moves by factors
(0.05 -> 0.03 or 0.08), which is what reward weights and length scales need. Left alone: exponents (`x**2`,
`sqrt`), +-1 (signs and indicator values: `-x` is `-1*x`, `where(c, 1, 0)`), and a tolerance's sigmoid (stored
as an index, not a number to tune). A child is only a proposal: the graph validates it with the one validator and
dedupes it by `reward_key` like an LLM candidate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import sympy

from lares_agent.rewards import functions as fn
from lares_agent.rewards.candidate import canonical_text
from lares_agent.rewards.grammar import SCALE_BOUNDS
from lares_agent.rewards.limits import Limits, RewardRejected
from lares_agent.rewards.parse import parse_expression
from lares_agent.rewards.task import RewardTask, allowed_features

__all__ = ["distinct_draws", "mutable_constants", "numeric_children", "perturb_constants", "replace_constants"]


def _mutable(node: sympy.Basic) -> bool:
    if not isinstance(node, (sympy.Float, sympy.Rational)):  # Integer is a Rational
        return False
    value = float(node)
    return math.isfinite(value) and value != 0.0 and abs(value) != 1.0


def _tuned(expr: sympy.Basic) -> int:
    """How many leading arguments of `expr` hold numbers to tune (the rest are structure, such as a sigmoid)."""
    return 5 if isinstance(expr, fn.tolerance) else len(expr.args)


def mutable_constants(expr: sympy.Basic) -> list[float]:
    """The constants `perturb_constants` would change, in traversal order (exponents skipped)."""
    if isinstance(expr, sympy.Number):
        return [float(expr)] if _mutable(expr) else []
    if isinstance(expr, sympy.Pow):
        return mutable_constants(expr.base)
    return [c for arg in expr.args[: _tuned(expr)] for c in mutable_constants(arg)]


def perturb_constants(expr: sympy.Basic, rng: np.random.Generator, sigma: float, digits: int = 3) -> sympy.Basic:
    """`expr` with every mutable constant times exp(N(0, sigma)), rounded to `digits` significant digits (prompts
    show them; `0.0523` reads better than `0.05234789123`). Deterministic for a given tree and generator state:
    the tree's argument order is sympy's canonical one."""
    if isinstance(expr, sympy.Number):
        if not _mutable(expr):
            return expr
        value = float(expr) * math.exp(float(rng.normal(0.0, sigma)))
        return sympy.Float(float(f"{value:.{digits}g}"))
    if not expr.args:
        return expr
    if isinstance(expr, sympy.Pow):
        return sympy.Pow(perturb_constants(expr.base, rng, sigma, digits), expr.exp)
    tuned = _tuned(expr)
    return expr.func(*(perturb_constants(a, rng, sigma, digits) if i < tuned else a for i, a in enumerate(expr.args)))


def replace_constants(expr: sympy.Basic, values: Iterator[float]) -> sympy.Basic:
    """`expr` with its mutable constants (in `mutable_constants` order) replaced by the next `values`."""
    if isinstance(expr, sympy.Number):
        return sympy.Float(next(values)) if _mutable(expr) else expr
    if not expr.args:
        return expr
    if isinstance(expr, sympy.Pow):
        return sympy.Pow(replace_constants(expr.base, values), expr.exp)
    tuned = _tuned(expr)
    return expr.func(*(replace_constants(a, values) if i < tuned else a for i, a in enumerate(expr.args)))


def numeric_children(
    components: Mapping[str, str],
    task: RewardTask,
    n: int,
    rng: np.random.Generator,
    *,
    sigma: float = 0.5,
    limits: Limits = Limits(),
    max_tries: int = 4,
    keep: Callable[[Mapping[str, str]], bool] | None = None,
) -> list[dict[str, str]]:
    """Up to `n` children of an elite's canonical components (name -> expression), each differing from the parent
    and from the others in text (and passing `keep`); [] when the components do not parse or hold no mutable
    constant."""
    try:
        exprs = {name: parse_expression(text, allowed_features(task), limits) for name, text in components.items()}
    except (RewardRejected, ValueError, TypeError):
        return []
    if n <= 0 or not any(mutable_constants(e) for e in exprs.values()):
        return []
    return distinct_draws(exprs, lambda: {name: canonical_text(perturb_constants(e, rng, sigma))
                                          for name, e in exprs.items()}, n, max_tries, keep)


def scales_within(opening: Mapping[str, str], features: Sequence[str], limits: Limits = Limits(),
                  bounds: Mapping[str, tuple[float, float]] | None = None) -> Callable[[Mapping[str, str]], bool]:
    """A test of a child's components: whether each opening component (name -> its distance feature, the scratch
    grammar's progress and approach terms) keeps every `exp(-d/s)` and `tanh(d/s)` of its distance at a scale s
    within the grammar's bounds for that feature (``bounds``, `grammar.scale_bounds`; `grammar.SCALE_BOUNDS` where
    none is given). A child's constants are its parent's times up to e, so a parent the grammar bounded can have
    children that are flat over the episode again (docs/RESULTS.md, "The evidence grid")."""

    def ok(components: Mapping[str, str]) -> bool:
        for name, feature in opening.items():
            if name not in components:
                continue
            low, high = (bounds or {}).get(feature, SCALE_BOUNDS)
            try:
                expr = parse_expression(components[name], features, limits)
            except (RewardRejected, ValueError, TypeError):
                return False
            for node in sympy.preorder_traversal(expr):
                if isinstance(node, (sympy.exp, sympy.tanh)):
                    rate, rest = node.args[0].as_coeff_Mul()
                    if str(rest) == feature and rate != 0 and not low <= 1 / abs(float(rate)) <= high:
                        return False
        return True

    return ok


def distinct_draws(parent: Mapping[str, sympy.Basic], draw: Callable[[], dict[str, str]], n: int,
                   tries: int, keep: Callable[[Mapping[str, str]], bool] | None = None) -> list[dict[str, str]]:
    """Up to `n` children from `draw`, each differing in text from the parent and the others (and passing `keep`),
    in `n * tries` draws at most; a draw sympy refuses to rebuild is skipped."""
    seen = {tuple(sorted((k, canonical_text(e)) for k, e in parent.items()))}
    out: list[dict[str, str]] = []
    for _ in range(n * tries):
        if len(out) >= n:
            break
        try:
            child = draw()
        except (TypeError, ValueError, ArithmeticError):  # sympy refusing a rebuilt node
            continue
        key = tuple(sorted(child.items()))
        if key not in seen and (keep is None or keep(child)):
            seen.add(key)
            out.append(child)
    return out
