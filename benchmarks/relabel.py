"""Relabel a replay buffer with one reward candidate: lares-agent's API vs the reference's style.

The reference (docs/lares-reference.md §5, §12 item 19) keeps one info dict per transition and relabels with one
Python call of the LLM's `compute_reward` per transition. lares-agent stores each step's named features as
columns and evaluates a compiled candidate once over whole columns. Both sides compute the same reward
(checked below) for a reach-style candidate:

    tolerance(tcp_to_target, 0, 0.05, 0.2) - 0.01 * action_norm**2

Run: `python benchmarks/relabel.py [--rows 1000000] [--reference-rows N]`. With --reference-rows smaller
than --rows, the reference is timed on that many rows and scaled linearly (printed as such).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from lares_agent.rewards import compile_reward, parse_candidate

CANDIDATE = {"components": {"reach": "tolerance(tcp_to_target, 0, 0.05, 0.2)", "effort": "-0.01 * action_norm**2"}}
FEATURES = ("tcp_to_target", "action_norm")


# --- the reference's style: numpy on scalars, one call per stored info dict --------------------------------
def _tolerance_scalar(x: float, bounds: tuple[float, float], margin: float, value_at_margin: float = 0.1) -> float:
    """The reference's reward_utils.tolerance (dm_control port, sigmoid='gaussian') as called per step."""
    lower, upper = bounds
    in_bounds = np.logical_and(lower <= x, x <= upper)
    if margin == 0:
        value = np.where(in_bounds, 1.0, 0.0)
    else:
        d = np.where(x < lower, lower - x, x - upper) / margin
        scale = np.sqrt(-2 * np.log(value_at_margin))
        value = np.where(in_bounds, 1.0, np.exp(-0.5 * (d * scale) ** 2))
    return float(value)


def compute_reward(tcp_center: np.ndarray, target: np.ndarray, action: np.ndarray) -> tuple[float, dict[str, float]]:
    """What an LLM writes for the reference: a function of named per-step state variables."""
    tcp_to_target = np.linalg.norm(tcp_center - target)
    reach = _tolerance_scalar(tcp_to_target, bounds=(0.0, 0.05), margin=0.2)
    effort = -0.01 * float(np.square(action).sum())
    return reach + effort, {"reach": reach, "effort": effort}


def relabel_reference(infos: list[Mapping[str, Any]]) -> list[float]:
    """One Python call per transition, arguments looked up by name (reference `LaRes_*.py` L~677-762)."""
    args = ("tcp_center", "target", "action")
    return [compute_reward(*[info[name] for name in args])[0] for info in infos]


# --- data ---------------------------------------------------------------------------------------------------
def make_states(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "tcp_center": rng.uniform(-0.5, 0.5, size=(n, 3)),
        "target": rng.uniform(-0.5, 0.5, size=(n, 3)),
        "action": rng.uniform(-1.0, 1.0, size=(n, 4)),
    }


def feature_columns(states: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What lares-agent's buffer holds for the same steps: float32 feature columns (computed at collection)."""
    return {
        "tcp_to_target": np.linalg.norm(states["tcp_center"] - states["target"], axis=1).astype(np.float32),
        "action_norm": np.linalg.norm(states["action"], axis=1).astype(np.float32),
    }


def info_dicts(states: Mapping[str, np.ndarray], n: int) -> list[dict[str, np.ndarray]]:
    return [{"tcp_center": states["tcp_center"][i], "target": states["target"][i], "action": states["action"][i]}
            for i in range(n)]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--reference-rows", type=int, default=None, help="time the reference on fewer rows")
    parser.add_argument("--repeats", type=int, default=3, help="best-of for the vectorised side")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = args.rows
    ref_rows = min(args.reference_rows or rows, rows)
    rng = np.random.default_rng(args.seed)
    states = make_states(rows, rng)
    columns = feature_columns(states)

    # lares-agent: parse + compile once, then one vectorised call over the columns
    t0 = time.perf_counter()
    reward = compile_reward(parse_candidate(CANDIDATE, FEATURES))
    compile_s = time.perf_counter() - t0
    eval_s = math.inf
    for _ in range(max(args.repeats, 1)):
        t0 = time.perf_counter()
        ours = reward(columns)
        eval_s = min(eval_s, time.perf_counter() - t0)
    ours_s = compile_s + eval_s

    infos = info_dicts(states, ref_rows)
    t0 = time.perf_counter()
    theirs = relabel_reference(infos)
    ref_s = time.perf_counter() - t0
    ref_scaled = ref_s * rows / ref_rows

    check = min(ref_rows, 10_000)
    diff = float(np.max(np.abs(np.asarray(theirs[:check]) - ours[:check])))
    assert diff < 1e-5, f"the two relabels disagree (max |diff| {diff:g}); the comparison would be meaningless"

    print(f"relabel {rows:,} transitions with one candidate: {dict(reward.parsed.canonical)}")
    print(f"  lares-agent (columns, compiled):  parse+compile {compile_s * 1e3:8.1f} ms, "
          f"evaluate {eval_s * 1e3:8.1f} ms, total {ours_s * 1e3:8.1f} ms")  # fmt: skip
    label = "" if ref_rows == rows else f" (timed on {ref_rows:,} rows, scaled x{rows / ref_rows:g})"
    print(f"  reference style (per-step calls): {ref_scaled:10.2f} s{label}")
    print(f"  ratio: {ref_scaled / ours_s:,.0f}x including compile, {ref_scaled / eval_s:,.0f}x evaluation only "
          f"(target >= 500x); max |difference| on {check:,} rows: {diff:.2e}")  # fmt: skip


if __name__ == "__main__":
    main()
