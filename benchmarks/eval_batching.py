"""Evaluation episodes one round at a time against all together (engine/rollouts/evaluation.py), on a real task.

`evaluate_members` plays each member's episodes on envs of that member's construction seed; ``max_envs`` says how
many envs step in lock step. With ``max_envs`` = the member count it plays one episode of every member at a time
(the evaluation before episodes were stepped together); with more, several episodes of each member at once, one act
call a step over all of them. Both give the same numbers (tests/test_eval_batching.py); this prints their wall
times side by side, for the population's evaluation (its learners, ``--episodes`` each, one batched policy) and the
hand-over's replay (``--candidates`` policy files on ``--handover-episodes``), and what building the extra envs
costs once (they are kept for the rest of a run).

    python benchmarks/eval_batching.py                        # reach-v3, 4 learners x 5 episodes, 4 x 20
    python benchmarks/eval_batching.py --task hammer-v3 --max-envs 40
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

from lares_agent.engine import SACConfig
from lares_agent.engine.learners.factory import make_population
from lares_agent.engine.rollouts.episodes import EnvPool
from lares_agent.engine.rollouts.evaluation import MAX_EVAL_ENVS, evaluate_members
from lares_agent.engine.tasks import TaskSpec, get_task

Act = Callable[[np.ndarray, np.ndarray], np.ndarray]


def timed(task: TaskSpec, pool: EnvPool, act: Act, members: int, episodes: int, max_envs: int) -> float:
    seeds = list(range(episodes))
    began = time.monotonic()
    evaluate_members(pool, act, task.raw_state, task.features, list(range(members)), [None] * members, episodes,
                     task.horizon, seeds, task.progress_feature, max_envs=max_envs)
    return time.monotonic() - began


def compare(name: str, task: TaskSpec, act: Act, members: int, episodes: int, max_envs: int, repeats: int) -> None:
    pool = EnvPool(task.make_env, 0)
    try:
        pool.get(members)
        began = time.monotonic()
        together = max(1, min(episodes, max_envs // members))
        pool.copies(members, together)
        build = time.monotonic() - began
        extra = members * (together - 1)
        one, many = [], []
        for _ in range(repeats):  # alternated, so a change of machine load falls on both
            one.append(timed(task, pool, act, members, episodes, members))
            many.append(timed(task, pool, act, members, episodes, max_envs))
        a, b = float(np.median(one)), float(np.median(many))
        print(f"{name:<30} {members:>3} x {episodes:<3} {a:>9.2f} {b:>9.2f} {b / a:>7.2f}x "
              f"{extra:>6} {build:>8.1f} {build / max(a - b, 1e-9):>9.1f}")
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="reach-v3")
    parser.add_argument("--learners", type=int, default=4, help="the population's (K=3 + the human learner)")
    parser.add_argument("--episodes", type=int, default=5, help="per learner at an evaluation (the demo's)")
    parser.add_argument("--candidates", type=int, default=4, help="policies the hand-over replays")
    parser.add_argument("--handover-episodes", type=int, default=20)
    parser.add_argument("--max-envs", type=int, default=MAX_EVAL_ENVS)
    parser.add_argument("--hidden", type=int, default=256, help="the policies' layer width (two layers)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = get_task(args.task)
    gen = torch.Generator()
    population = make_population(SACConfig(hidden=(args.hidden, args.hidden)), args.learners, task.obs_dim,
                                 task.act_dim, 0, device="cpu")
    singles = [make_population(SACConfig(hidden=(args.hidden, args.hidden)), 1, task.obs_dim, task.act_dim, i,
                               device="cpu") for i in range(args.candidates)]

    def batched(obs: np.ndarray, members: np.ndarray) -> np.ndarray:
        return population.act(obs, members, True, gen)

    def per_policy(obs: np.ndarray, members: np.ndarray) -> np.ndarray:  # as the hand-over's policy files act
        out = np.empty((len(members), task.act_dim))
        for m in np.unique(members):
            rows = members == m
            out[rows] = singles[int(m)].act(obs[rows], np.zeros(int(rows.sum()), np.int64), True, gen)
        return out

    print(f"{task.name}, horizon {task.horizon}, max_envs {args.max_envs}; median of {args.repeats}, seconds")
    print(f"{'evaluation':<30} {'members x eps':>13} {'one round':>9} {'together':>9} {'ratio':>8} "
          f"{'+envs':>6} {'build s':>8} {'break-even':>9}")
    compare("population (one batched net)", task, batched, args.learners, args.episodes, args.max_envs, args.repeats)
    compare("hand-over (a net per policy)", task, per_policy, args.candidates, args.handover_episodes, args.max_envs,
            args.repeats)
    print("break-even: evaluations after which building the extra envs has paid for itself")


if __name__ == "__main__":
    main()
