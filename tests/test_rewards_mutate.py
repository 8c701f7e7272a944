"""Numeric children of an elite: constants move on a log scale, the structure does not."""

from __future__ import annotations

import math

import numpy as np
import sympy
from helpers import point_task

from lares_agent.engine.tasks import get_task
from lares_agent.rewards import allowed_features, parse_expression, validate
from lares_agent.rewards.mutate import mutable_constants, numeric_children, scales_within

ELITE = {"progress": "-5*dist", "near": "2*exp(-dist/0.05)", "effort": "-0.1*action_norm**2"}


def _skeleton(expr: sympy.Basic) -> str:
    """The tree's text with every mutable constant written as `c`: equal skeletons, equal structure."""
    if isinstance(expr, sympy.Number):
        return "c" if mutable_constants(expr) else str(expr)
    if not expr.args:
        return str(expr)
    if isinstance(expr, sympy.Pow):
        return f"Pow({_skeleton(expr.base)}, {expr.exp})"
    return f"{expr.func.__name__}({', '.join(sorted(_skeleton(a) for a in expr.args))})"


def test_children_scale_constants_by_log_normal_factors_and_keep_the_structure() -> None:
    task = point_task()
    children = numeric_children(ELITE, task, 6, np.random.default_rng(0), sigma=0.5)
    assert len(children) == 6 and len({tuple(sorted(ch.items())) for ch in children}) == 6
    names = allowed_features(task)
    for child in children:
        assert set(child) == set(ELITE)
        for name, text in child.items():
            parent = parse_expression(ELITE[name], names)
            new = parse_expression(text, names)
            before, after = mutable_constants(parent), mutable_constants(new)
            assert len(before) == len(after)
            for b, a in zip(before, after, strict=True):
                assert math.copysign(1.0, a) == math.copysign(1.0, b)  # the sign survives
                assert 0.05 < a / b < 20.0  # exp(N(0, 0.5)): far inside 6 sigma
            assert "**2" in child["effort"]  # exponents are left alone
            assert _skeleton(new) == _skeleton(parent)
        verdict = validate({"components": child}, task, {"dist": np.linspace(0, 1, 64),
                                                         "action_norm": np.linspace(0, 2, 64)})
        assert verdict.accepted, verdict.reason
    moved = [float(parse_expression(ch["progress"], names).as_coeff_Mul()[0]) for ch in children]
    assert len(set(moved)) > 1 and all(m != -5.0 for m in moved)


def test_children_are_reproducible_from_the_seed_and_differ_across_seeds() -> None:
    task = point_task()
    a = numeric_children(ELITE, task, 3, np.random.default_rng(7))
    assert a == numeric_children(ELITE, task, 3, np.random.default_rng(7))
    assert a != numeric_children(ELITE, task, 3, np.random.default_rng(8))


def test_nothing_to_mutate_or_unparseable_gives_no_children() -> None:
    task = point_task()
    assert numeric_children({"p": "-dist"}, task, 3, np.random.default_rng(0)) == []  # only -1*dist
    assert numeric_children({"p": "-dist**2"}, task, 3, np.random.default_rng(0)) == []  # an exponent
    assert numeric_children({"p": "__import__('os')"}, task, 3, np.random.default_rng(0)) == []
    sqrt_child = numeric_children({"p": "-3*sqrt(dist)"}, task, 1, np.random.default_rng(0))[0]["p"]
    assert "sqrt(dist)" in sqrt_child and "-3*" not in sqrt_child


def test_children_of_a_scratch_reward_keep_the_grammars_scale_on_the_opening_terms() -> None:
    task = get_task("door-close-v3")
    keep = scales_within({"progress": "obj_to_target", "approach": "tcp_to_obj"}, allowed_features(task))
    assert keep({"progress": "exp(-2.5*obj_to_target)", "approach": "1 - tanh(5*tcp_to_obj)",
                 "near": "exp(-50*tcp_to_obj)"})  # a free component may be steep
    assert not keep({"progress": "exp(-0.0288*obj_to_target)", "approach": "-tcp_to_obj"})  # 35 m: flat
    assert not keep({"progress": "-obj_to_target", "approach": "2*exp(-20.0*tcp_to_obj)"})  # 0.05 m: zero at the start
    parent = {"progress": "exp(-1.1*obj_to_target)", "approach": "exp(-9.5*tcp_to_obj)"}  # 0.91 m and 0.105 m
    free = numeric_children(parent, task, 8, np.random.default_rng(0), sigma=1.0)
    kept = numeric_children(parent, task, 8, np.random.default_rng(0), sigma=1.0, keep=keep)
    assert any(not keep(child) for child in free) and kept and all(keep(child) for child in kept)
    door = scales_within({"progress": "obj_to_target"}, allowed_features(task),
                         bounds={"obj_to_target": (0.22, 0.97)})  # the bounds of a door 0.49 m from shut
    assert door({"progress": "exp(-2.5*obj_to_target)"}) and not door({"progress": "exp(-10*obj_to_target)"})
