"""Structural edits of a reward made without an LLM: the `random-edit` control (search/options.py ABLATIONS).

A win of the search can come from the LLM's structures or from search alone (new terms tried, constants tuned,
the best kept). The `no-llm` control changes constants only; this one also changes structure, at random: an edit
adds a term, removes one or swaps one for another, each new term drawn from the reward language's building blocks
over one of the task's features. With it, a sweep tells what the LLM adds beyond structural search of the same
size (`lares sweep --methods lares-init,no-llm,random-edit,human`).

The building blocks are the shapes the language's grammar writes and the tasks' own rewards use
(`grammar.py`): over a feature d, ``-w*d``, ``w*exp(-d/s)``, ``w*(1 - tanh(d/s))`` and
``w*tolerance(d, 0, r, s)``, each larger as d falls, and ``w*flag`` for a 0/1 feature (a success or grasp bonus).
A feature the sample shows negative (a coordinate, a velocity) enters as ``abs(d)``, or ``exp(-d/s)`` would overflow
there. The scale s is drawn within `grammar.scale_bounds` of the feature's sampled values, the zone r under 0.1 and
the weight w log-uniformly in [0.1, 10]; those are placeholders: the graph then sets every constant of the edited
reward as it sets a numeric child's (`tuning.tuned_children`). A term is a summand at the top level of a
component, so removing or swapping one leaves the rest of its component, and removing a component's only term
removes the component.

From scratch, with no reward to edit, a reward is drawn whole: 1 to 3 terms, opening as the grammar makes the
LLM's from-scratch answers open (one random shape over the progress distance, and one over the approach distance
where the task names one), the rest over random features. An edit is only a proposal: the graph checks it with the
one validator, like an LLM answer, and a rejected edit keeps the validator's reason.

All randomness comes from the generator passed in: the same seed makes the same edits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import sympy

from lares_agent.rewards.candidate import canonical_text
from lares_agent.rewards.grammar import scale_bounds
from lares_agent.rewards.limits import Limits, RewardRejected
from lares_agent.rewards.parse import parse_expression
from lares_agent.rewards.sampling import feature_range
from lares_agent.rewards.task import RewardTask, allowed_features, prompt_features

__all__ = ["EDIT_KINDS", "SHAPES", "Edit", "random_reward", "random_term", "structural_edit"]

EDIT_KINDS = ("add", "remove", "swap")
SHAPES = ("linear", "exp", "tanh", "tolerance")  # a 0/1 feature has one shape, the bonus
_BOOL_UNITS = frozenset({"bool", "0/1", "{0,1}", "flag"})  # as rewards/sampling.py reads a unit
_WEIGHTS = (0.1, 10.0)  # the log-uniform range of a new term's weight
_ZONES = (0.01, 0.1)  # a tolerance term's zone r, under the grammar's 0.1 m
MAX_TERMS = 3  # a reward drawn from scratch has 1 to 3 terms


@dataclass(frozen=True)
class Edit:
    """A reward made by a structural edit (or drawn whole: ``kind`` "draw"), its components canonical, and what
    was done in words (the candidate's rationale)."""

    components: dict[str, str]
    kind: str  # "add", "remove", "swap" or "draw"
    what: str


def _sig(value: float, digits: int = 3) -> float:
    return float(f"{value:.{digits}g}")


def _is_flag(task: RewardTask, name: str) -> bool:
    unit = next((str(getattr(f, "unit", "")) for f in task.features if f.name == name), "")
    return unit.strip().lower() in _BOOL_UNITS


def _signed(task: RewardTask, name: str, sample: Mapping[str, np.ndarray] | None) -> bool:
    """Whether the feature takes negative values: on the sample where it has one, else by its declared range."""
    values = None if sample is None else sample.get(name)
    if values is not None and np.size(values):
        finite = np.asarray(values, np.float64)
        finite = finite[np.isfinite(finite)]
        return bool(finite.size) and float(finite.min()) < 0
    feature = next((f for f in task.features if f.name == name), name)
    return feature_range(feature)[0] < 0


def random_term(task: RewardTask, rng: np.random.Generator, sample: Mapping[str, np.ndarray] | None = None, *,
                feature: str | None = None, shape: str | None = None,
                features: Sequence[str] | None = None) -> tuple[str, str]:
    """(component name, expression) of one building block over `feature` (default: one of `features` at random,
    the features the LLM is offered; default the task's prompt features) in `shape` (default: one of `SHAPES` at
    random; a 0/1 feature's is its bonus)."""
    names = tuple(features) if features else prompt_features(task)
    name = feature if feature is not None else str(names[int(rng.integers(len(names)))])
    weight = _sig(math.exp(rng.uniform(math.log(_WEIGHTS[0]), math.log(_WEIGHTS[1]))))
    if _is_flag(task, name):
        return f"bonus_{name}", f"{weight}*{name}"
    kind = shape if shape is not None else SHAPES[int(rng.integers(len(SHAPES)))]
    d = f"Abs({name})" if _signed(task, name, sample) else name
    values = None if sample is None else sample.get(name)
    low, high = scale_bounds(None if values is None else np.abs(np.asarray(values, np.float64)))
    scale = _sig(rng.uniform(low, high), 2)
    if kind == "linear":
        text = f"-{weight}*{d}"
    elif kind == "exp":
        text = f"{weight}*exp(-{d}/{scale})"
    elif kind == "tanh":
        text = f"{weight}*(1 - tanh({d}/{scale}))"
    elif kind == "tolerance":
        text = f"{weight}*tolerance({d}, 0, {_sig(rng.uniform(*_ZONES), 2)}, {scale})"
    else:
        raise ValueError(f"unknown shape {kind!r}; choose from {', '.join(SHAPES)}")
    return f"{kind}_{name}", text


def _fresh(name: str, taken: Mapping[str, object]) -> str:
    """`name`, or `name_2`, `name_3`, ... where a component already has it."""
    out, k = name, 2
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    return out


def _terms(exprs: Mapping[str, sympy.Expr]) -> list[tuple[str, int]]:
    """(component, index) of every top-level summand, in the components' order."""
    return [(name, i) for name, e in exprs.items() for i in range(len(sympy.Add.make_args(e)))]


def _without(expr: sympy.Expr, index: int, new: sympy.Expr | None = None) -> sympy.Expr | None:
    """`expr` with its `index`-th summand dropped (or replaced by `new`); None when nothing is left."""
    parts = list(sympy.Add.make_args(expr))
    parts[index:index + 1] = [] if new is None else [new]
    return sympy.Add(*parts) if parts else None


def _parse(text: str, task: RewardTask, limits: Limits) -> sympy.Expr:
    return parse_expression(text, allowed_features(task), limits)


def structural_edit(components: Mapping[str, str], task: RewardTask, rng: np.random.Generator, *,
                    sample: Mapping[str, np.ndarray] | None = None, limits: Limits = Limits(),
                    kind: str | None = None, features: Sequence[str] | None = None) -> Edit:
    """One edit of a reward's components (name -> expression): a term added (a new component while there is room
    under `limits.max_components`, else a summand of a random one), removed (where there are two terms or more)
    or swapped for a new one; `kind` picks which, else one that applies is drawn. A new term reads one of
    `features` (default: the task's prompt features, what the LLM is shown). Raises `RewardRejected` with the
    reason where the components do not parse or `kind` cannot apply."""
    try:
        exprs = {name: _parse(text, task, limits) for name, text in components.items()}
    except (RewardRejected, ValueError, TypeError) as exc:
        raise RewardRejected(f"no edit of a reward that does not parse: {exc}") from None
    terms = _terms(exprs)
    possible = [k for k in EDIT_KINDS if k != "remove" or len(terms) >= 2] if terms else ["add"]
    if kind is not None and kind not in possible:
        raise RewardRejected(f"edit {kind!r} does not apply to a reward of {len(terms)} term(s); "
                             f"choose from {', '.join(possible)}")
    chosen = kind if kind is not None else possible[int(rng.integers(len(possible)))]
    out: dict[str, sympy.Expr] = dict(exprs)
    if chosen == "remove":
        name, index = terms[int(rng.integers(len(terms)))]
        gone = sympy.Add.make_args(exprs[name])[index]
        rest = _without(exprs[name], index)
        if rest is None:
            del out[name]
            what = f"removed component {name} = {canonical_text(gone)}"
        else:
            out[name] = rest
            what = f"removed the term {canonical_text(gone)} of component {name}"
    else:
        new_name, text = random_term(task, rng, sample, features=features)
        term = _parse(text, task, limits)
        if chosen == "add" and len(out) < limits.max_components:
            new_name = _fresh(new_name, out)
            out[new_name] = term
            what = f"added component {new_name} = {canonical_text(term)}"
        elif chosen == "add":
            name = list(out)[int(rng.integers(len(out)))]
            out[name] = out[name] + term
            what = f"added the term {canonical_text(term)} to component {name}"
        else:
            name, index = terms[int(rng.integers(len(terms)))]
            old = sympy.Add.make_args(exprs[name])[index]
            if len(sympy.Add.make_args(exprs[name])) == 1:  # the component's only term: it gets the new one's name
                del out[name]
                new_name = _fresh(new_name, out)
                out[new_name] = term
                what = f"swapped component {name} = {canonical_text(old)} for {new_name} = {canonical_text(term)}"
            else:
                out[name] = _without(exprs[name], index, term) or term
                what = f"swapped the term {canonical_text(old)} of component {name} for {canonical_text(term)}"
    return Edit({name: canonical_text(e) for name, e in out.items()}, chosen, what)


def random_reward(task: RewardTask, rng: np.random.Generator, *, sample: Mapping[str, np.ndarray] | None = None,
                  limits: Limits = Limits(), opening: Sequence[tuple[str, str]] | None = None,
                  features: Sequence[str] | None = None) -> Edit:
    """A reward drawn whole, for a search from scratch: 1 to `MAX_TERMS` components, opening with one random
    shape over each `opening` feature (component name, feature; default: "progress" over the task's progress
    distance and "approach" over its approach distance where it names one; the grammar's opening shapes are these
    blocks), the rest random terms over `features` (default: the task's prompt features)."""
    offered = tuple(features) if features else prompt_features(task)
    if opening is None:
        opening = [(n, f) for n, f in (("progress", task.progress_feature), ("approach", task.approach_feature))
                   if f and f in offered]
    count = int(rng.integers(max(len(opening), 1), MAX_TERMS + 1))
    count = min(count, limits.max_components)
    out: dict[str, str] = {}
    for name, feature in opening[:count]:
        out[name] = canonical_text(_parse(random_term(task, rng, sample, feature=feature)[1], task, limits))
    while len(out) < count:
        name, text = random_term(task, rng, sample, features=offered)
        out[_fresh(name, out)] = canonical_text(_parse(text, task, limits))
    shown = "; ".join(f"{n} = {e}" for n, e in out.items())
    return Edit(out, "draw", f"drew {len(out)} random term(s): {shown}")
