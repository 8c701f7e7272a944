"""What each handed-over reward paid for the task where it trained: its gain from random-action states to the goal
(progress and approach distances 0, success 1; `lares_agent.engine.replay.reward_gain`), times the scale its buffer
column had in the run (1 for a starting reward, the best survivor's match for a later one), beside the trial's success.

    python experiments/scratch_bounded/scale/gains.py experiments/evidence/runs --pattern '*-lares-scratch-*' \\
        --replay experiments/evidence/results/final_policies.csv
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lares_agent.engine import get_task
from lares_agent.engine.replay.reward_gain import goal_gain
from lares_agent.engine.rollouts.sampling import random_feature_sample
from lares_agent.engine.tasks.human_rewards import METAWORLD_HUMAN
from lares_agent.errors import ConfigError
from lares_agent.rewards import load_reward
from lares_agent.runs import RunLayout, read_jsonl
from lares_agent.search.found_reward import from_run

SAMPLE_STEPS, SAMPLE_SEED = 2000, 0


def column_scale(run: Path, reward_id: str) -> float:
    """The scale the run's column map gave `reward_id` when it was installed (1: a starting reward)."""
    return next((float(e["scale"]) for e in read_jsonl(RunLayout(run).events)
                 if e.get("event") == "candidate_accepted" and e.get("reward_id") == reward_id), 1.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("runs", type=Path, help="a folder of run folders (a sweep's runs/ or its archive)")
    parser.add_argument("--pattern", default="*-lares-*")
    parser.add_argument("--replay", type=Path, help="final_policies.py --csv: each trial's success, 30 episodes")
    args = parser.parse_args(argv)
    success = {}
    if args.replay:
        with args.replay.open() as fh:
            success = {row["trial"]: float(row["success"]) for row in csv.DictReader(fh)
                       if int(row["episodes"]) == 30}
    samples: dict[str, tuple[dict[str, np.ndarray], float]] = {}  # per task: its sample, its own reward's gain
    print("| trial | handed over | gain as written | column scale | gain trained | the task's own reward's gain | "
          "success (30 episodes) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for run in sorted(p for p in args.runs.iterdir() if fnmatch.fnmatch(p.name, args.pattern)):
        try:
            found = from_run(str(run))
        except ConfigError:  # a trial stopped before it held a reward (an archive keeps unfinished trials too)
            continue
        if found.task is None:
            continue
        task = get_task(found.task)
        if found.task not in samples:
            sample = random_feature_sample(task, SAMPLE_STEPS, SAMPLE_SEED)
            human = load_reward({"id": "human", "components": dict(METAWORLD_HUMAN[found.task])}, list(sample))
            samples[found.task] = sample, goal_gain(human, sample, task)
        sample, own = samples[found.task]
        if found.is_human:
            print(f"| {run.name} | the task's own | {own:.2f} | 1 | {own:.2f} | {own:.2f} | "
                  f"{success.get(run.name, float('nan')):.0%} |")
            continue
        reward = load_reward({"id": found.reward_id, "components": dict(found.components)}, list(sample))
        gain, scale = goal_gain(reward, sample, task), column_scale(run, found.reward_id)
        print(f"| {run.name} | {found.reward_id} | {gain:.2f} | {scale:.2f} | {gain * scale:.2f} | {own:.2f} | "
              f"{success.get(run.name, float('nan')):.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
