"""Complexity of a reward: weighted operation count plus depth.

It breaks exact ties of the ranking (``lambda * complexity``, engine/setup/fitness.py; docs/DESIGN.md §1) so that,
between two candidates that train equally well, the simpler one survives; it is reported for every candidate. The
task's own reward expression is measured the same way (``validate.human_reference``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import BooleanFunction

from lares_agent.rewards import functions as fn

__all__ = ["ComplexityWeights", "expression_complexity", "total_complexity"]


@dataclass(frozen=True)
class ComplexityWeights:
    """Cost of each kind of node. Arithmetic is cheap, transcendental and piecewise shapes cost more."""

    arithmetic: float = 1.0  # per extra operand of + and *
    power: float = 2.0
    transcendental: float = 2.0  # exp, log, tanh, sigmoid
    nonsmooth: float = 1.5  # Abs, and per extra operand of Min/Max
    branch: float = 2.0  # per where (a Piecewise of n branches is n - 1 of them)
    comparison: float = 1.0  # relations and and/or/not
    tolerance: float = 3.0
    hamacher: float = 3.0
    caging: float = 8.0  # gripper_caging: six tolerances and four Hamacher products in one call
    depth: float = 0.5  # per level of the deepest path
    component: float = 1.0  # per component after the first (the + that joins them)


def _node_cost(node: sympy.Basic, w: ComplexityWeights) -> float:
    nargs = len(node.args)
    if isinstance(node, (sympy.Add, sympy.Mul)):
        return w.arithmetic * (nargs - 1)
    if isinstance(node, sympy.Pow):
        return w.power
    if isinstance(node, (sympy.exp, sympy.log, sympy.tanh, fn.sigmoid)):
        return w.transcendental
    if isinstance(node, sympy.Abs):
        return w.nonsmooth
    if isinstance(node, (fn.Min, fn.Max, sympy.Min, sympy.Max)):
        return w.nonsmooth * (nargs - 1)
    if isinstance(node, fn.where):
        return w.branch
    if isinstance(node, sympy.Piecewise):
        return w.branch * (nargs - 1)
    if isinstance(node, (Relational, BooleanFunction)):
        return w.comparison
    if isinstance(node, fn.tolerance):
        return w.tolerance
    if isinstance(node, fn.hamacher):
        return w.hamacher
    if isinstance(node, fn.gripper_caging):
        return w.caging
    if isinstance(node, fn.rect_prism):
        return w.tolerance
    return 0.0  # symbols, numbers, True/False, ExprCondPair (its parts are counted)


def _structural_children(node: sympy.Basic) -> tuple[sympy.Basic, ...]:
    if isinstance(node, fn.tolerance):
        margin = node.args[3]
        return (node.args[0], margin) if margin.free_symbols else node.args[:1]
    if isinstance(node, fn.gripper_caging):
        return ()  # its inputs are implied by the call, not written
    if isinstance(node, fn.rect_prism):
        return tuple(node.args[:3])  # the corners are parameters
    return tuple(node.args)


def expression_complexity(expr: sympy.Basic, weights: ComplexityWeights = ComplexityWeights()) -> float:
    """Weighted op count + weights.depth * depth of one component.

    Constant arguments of tolerance (bounds, margin) and gripper_caging's parameters are parameters, not
    structure, so they add no depth; a margin written as an expression of the features is structure.
    """
    total = 0.0
    max_depth = 0
    stack: list[tuple[sympy.Basic, int]] = [(expr, 0)]
    while stack:
        node, depth = stack.pop()
        total += _node_cost(node, weights)
        max_depth = max(max_depth, depth)
        children = _structural_children(node)
        stack.extend((child, depth + 1) for child in children)
    return round(total + weights.depth * max_depth, 6)


def total_complexity(components: Iterable[sympy.Basic], weights: ComplexityWeights = ComplexityWeights()) -> float:
    """Sum over the components, plus the joins between them."""
    parts = [expression_complexity(c, weights) for c in components]
    return round(sum(parts) + weights.component * max(len(parts) - 1, 0), 6)
