"""How often the random-edit control's edits pass the one validator (rewards/edits.py, rewards/validate.py).

Run: ``python benchmarks/edit_validity.py [--tasks T1,T2] [--edits N] [--seed S]``. For each task, N structural
edits of the task's own reward and N rewards drawn from scratch, each checked by `rewards.validate` on a synthetic
sample of the task's features; prints how many of each kind passed and the commonest reasons for a rejection.
Nothing is asserted: a rejected edit is the control working (the graph tries again, as it does for an LLM answer).
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from lares_agent.engine.tasks import get_task
from lares_agent.rewards import synthetic_sample, validate
from lares_agent.rewards.edits import random_reward, structural_edit

TASKS = "door-close-v3,window-open-v3,reach-v3,hammer-v3,Reacher-v5"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| task | edits made (add/remove/swap) | accepted (add/remove/swap) | drawn from scratch accepted |"
          " commonest rejection |")
    print("|---|---|---|---|---|")
    for name in args.tasks.split(","):
        task = get_task(name)
        own = dict(task.human_components or ())
        sample = synthetic_sample(task.features, 256, np.random.default_rng(args.seed))
        rng = np.random.default_rng(args.seed)
        made, passed, reasons = Counter[str](), Counter[str](), Counter[str]()
        for _ in range(args.edits):
            edit = structural_edit(own, task, rng, sample=sample)
            verdict = validate({"components": edit.components}, task, sample)
            made[edit.kind] += 1
            passed[edit.kind] += verdict.accepted
            if not verdict.accepted:
                reasons[verdict.reason[:60]] += 1
        drawn = sum(validate({"components": random_reward(task, rng, sample=sample).components}, task,
                             sample).accepted for _ in range(args.edits))
        kinds = ("add", "remove", "swap")
        top = reasons.most_common(1)[0][0] + "..." if reasons else "none"
        print(f"| {name} | {'/'.join(str(made[k]) for k in kinds)} | {'/'.join(str(passed[k]) for k in kinds)} | "
              f"{drawn}/{args.edits} | {top} |")


if __name__ == "__main__":
    main()
