"""Does a run hand over a reward term that pays the same on every step it took?

A term whose features never move on the robot's runs adds nothing to learning: a reach-v3 run once handed over
``bonus = grasped*(...)`` with ``grasped`` 0 on every step (docs/RESULTS.md, "Proposals with building blocks only
(no example answer)"). This reads a finished run folder: the reward it hands over
(`runs.selected.selected_reward`, as `lares export` picks it) and the replay buffer of its newest checkpoint, every step
the run took (up to the buffer's capacity). For each component it prints its spread over those steps and that of
each feature it reads; a component is *constant on the run* when its values lie within ``--tol`` of each other.
Exit status 1 when one is. Pure reading, no training:

    lares run --setting scratch --run-dir runs/scratch-reach
    python experiments/proposals/constant_terms.py runs/scratch-reach/<the run folder>
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.engine.state.checkpoint import latest_checkpoint, load_checkpoint
from lares_agent.rewards import load_reward
from lares_agent.runs import RunLayout
from lares_agent.runs.reader import read_run
from lares_agent.runs.selected import selected_reward


def buffer_features(run: Path) -> dict[str, np.ndarray]:
    """Feature name -> its value on every step in the newest checkpoint's replay buffer."""
    path = latest_checkpoint(RunLayout(run).checkpoints)
    if path is None:
        raise SystemExit(f"{run} has no checkpoint")
    state = load_checkpoint(path)
    buffers = [v["buffer"] for v in _walk(state) if isinstance(v.get("buffer"), dict) and "features" in v["buffer"]]
    if not buffers:
        raise SystemExit(f"{path} holds no replay buffer")
    buffer = buffers[0]
    table = np.asarray(buffer["features"])
    return {name: table[:, i] for i, name in enumerate(buffer["feature_names"])}


def _walk(tree: object) -> list[dict[str, Any]]:
    """Every dict in a nested state (the buffer sits at a depth that depends on the population's kind)."""
    if isinstance(tree, dict):
        return [tree, *(d for v in tree.values() for d in _walk(v))]
    if isinstance(tree, (list, tuple)):
        return [d for v in tree for d in _walk(v)]
    return []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder")
    parser.add_argument("--tol", type=float, default=1e-9, help="spread (max - min) at or below which a term is "
                                                                "constant on the run")
    args = parser.parse_args(argv)
    data = read_run(args.run)
    chosen = selected_reward(args.run, data)
    candidate = data.candidate(chosen.reward_id) if chosen is not None else None
    if candidate is None or not candidate.components:
        print(f"{args.run}: hands over {chosen.reward_id if chosen else 'nothing'}, not an LLM reward: no terms "
              "to check")
        return 0
    features = buffer_features(args.run)
    steps = len(next(iter(features.values())))
    print(f"{args.run}: hands over {candidate.id} ({chosen.why if chosen else ''}); {steps:,} steps in its buffer")
    constant = []
    for name, expr in candidate.components.items():
        term = load_reward({"components": {name: expr}}, list(features))
        values = np.asarray(term.evaluate(features)[0], np.float64)
        spread = float(values.max() - values.min())
        reads = ", ".join(f"{f} spread {float(np.ptp(features[f])):.3g}" for f in term.feature_names)
        flag = spread <= args.tol
        constant += [name] if flag else []
        print(f"- {name} = {expr}: spread {spread:.3g}{' (CONSTANT on the run)' if flag else ''}; reads {reads}")
    print(f"{len(constant)} of {len(candidate.components)} terms constant on the run"
          + (f": {', '.join(constant)}" if constant else ""))
    return 1 if constant else 0


if __name__ == "__main__":
    sys.exit(main())
