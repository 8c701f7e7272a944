"""The whole LaRes loop's cost: one learner on the task's own reward vs a LaRes population, side by side.

LaRes trains one learner per reward candidate, so its price is the population's wall time over the same env steps
as one learner's. Both runs here are the engine `lares run` builds (the demo preset's networks and cadences, through
`search.config.engine_config`), on the same task, seed and env-step budget:

  * single: `--setting baseline`, one learner on the task's own (human) reward, as `lares baseline`;
  * LaRes: `--setting scratch`, K learners on fixed candidates: the task's own reward expression (compiled by the
    reward language, as an LLM candidate would be) and numeric variants of it (its terms times a constant). At each
    reward update (every `--reward-period` steps; 0: none) a fixed hook refills the free slots with the next
    variants, so the update's evaluation, relabelling and inheritance are timed; no LLM is called.

Warm-up (random episodes, not counted in the budget) is timed apart from training. Printed per run: wall seconds,
the share of training time in episodes (env stepping and acting, evaluation included) and in learner updates,
learner updates per second (one learner's update counts one; a batched update of K learners counts K), and the
ratio population / single of the training wall time. Usage:

    python benchmarks/population_loop.py                       # reach-v3, 3,000 env steps, CrossQ, K=3, CPU
    python benchmarks/population_loop.py --steps 20000 --task window-open-v3 --k 5 --device cuda
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lares_agent.engine import EngineConfig, LaResEngine, RewardFunction, StepInfo, UpdateContext, make_engine
from lares_agent.engine.learners.devices import device_problem
from lares_agent.engine.tasks import TaskSpec, get_task
from lares_agent.rewards import compile_record, human_record
from lares_agent.search.config import engine_config
from lares_agent.search.presets import preset_config

WEIGHTS = (1.0, 0.5, 2.0, 0.25, 4.0, 0.75, 1.5)
"""The constants the variants multiply the task's own reward by (cycled)."""


@dataclass
class Measured:
    """One run's timings (seconds) and counts."""

    name: str
    learners: int
    warmup_s: float
    train_s: float
    sim_s: float  # episodes: env steps, acting, evaluation (the population's own timing)
    learn_s: float  # batched learner updates
    learner_updates: int
    env_steps: int
    rounds: int
    device: str

    def row(self) -> str:
        share = 100.0 / self.train_s if self.train_s > 0 else 0.0
        other = max(self.train_s - self.sim_s - self.learn_s, 0.0)
        per_learn = self.learner_updates / self.learn_s if self.learn_s > 0 else 0.0
        return (f"{self.name:<18} {self.learners:>8} {self.warmup_s:>8.1f} {self.train_s:>8.1f} "
                f"{self.sim_s * share:>6.0f}% {self.learn_s * share:>6.0f}% {other * share:>6.0f}% "
                f"{per_learn:>10.0f} {self.learner_updates / self.train_s:>10.0f}")


HEADER = (f"{'run':<18} {'learners':>8} {'warm-up':>8} {'train':>8} {'env':>7} {'learn':>7} {'other':>7} "
          f"{'upd/learn-s':>10} {'upd/wall-s':>10}")


def candidates(task: TaskSpec, count: int, start: int, label: str) -> list[RewardFunction]:
    """``count`` compiled rewards: the task's own expression times WEIGHTS[start], WEIGHTS[start + 1], ..."""
    record = human_record(task)
    if record is None:
        raise SystemExit(f"task {task.name} has no written reward expression to vary; pick a MetaWorld task")
    out: list[RewardFunction] = []
    for i in range(start, start + count):
        w = WEIGHTS[i % len(WEIGHTS)]
        components = {name: f"{w:g} * ({text})" for name, text in record["components"].items()}
        out.append(compile_record({"id": f"{label}-{i}", "components": components, "rationale": ""}, task))
    return out


class FixedProposals:
    """The reward-update hook without an LLM: the next variants, one per free slot."""

    def __init__(self, task: TaskSpec, k: int) -> None:
        self.task, self.next = task, k

    def __call__(self, ctx: UpdateContext) -> Sequence[RewardFunction]:
        out = candidates(self.task, len(ctx.refill), self.next, f"round{ctx.round}")
        self.next += len(ctx.refill)
        return out


def configs(args: argparse.Namespace) -> tuple[EngineConfig, EngineConfig]:
    """The engine configs `lares baseline` and `lares run --setting scratch` would build (no checkpoints)."""
    common: dict[str, Any] = {"task": args.task, "budget": args.steps, "learner": args.learner, "seed": args.seed,
                              "device": args.device, "sync_llm": True, "torch_threads": args.threads}
    if args.eval_every is not None:
        common["eval_every"] = args.eval_every
    period = args.reward_period if args.reward_period > 0 else args.steps + 1
    single = preset_config("demo", {**common, "setting": "baseline", "population": 1, "elites": 1})
    population = preset_config("demo", {**common, "setting": "scratch", "population": args.k, "elites": 1,
                                        "reward_period": period})
    return (dataclasses.replace(engine_config(single), checkpoint_every=0),
            dataclasses.replace(engine_config(population), checkpoint_every=0))


def measure(name: str, engine: LaResEngine) -> Measured:
    """Warm-up, then training to the budget; the engine is closed."""
    updates = [0]
    population: Any = engine.population
    learners = int(population.num_learners)

    def count(info: StepInfo) -> None:
        updates[0] += info.updates * (learners - len(population.quarantined_learners))

    try:
        t0 = time.perf_counter()
        population.prepare(engine.rewards)  # what the first step would do: random episodes, columns labelled
        t1 = time.perf_counter()
        before = dict(population.timing)
        engine.run(progress=count)
        t2 = time.perf_counter()
        after = population.timing
        return Measured(name, learners, t1 - t0, t2 - t1, after["sim_s"] - before["sim_s"],
                        after["learn_s"] - before["learn_s"], updates[0], engine.env_steps, engine.round,
                        str(population.device))
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="reach-v3")
    parser.add_argument("--steps", type=int, default=3_000, help="counted env steps of each run")
    parser.add_argument("--k", type=int, default=3, help="LaRes population: reward candidates, one learner each")
    parser.add_argument("--learner", choices=("sac", "crossq"), default="crossq")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    parser.add_argument("--reward-period", type=int, default=None,
                        help="env steps between reward updates (default: half the steps, one update; 0: none)")
    parser.add_argument("--eval-every", type=int, default=None, help="default: the demo preset's")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (lares run's default: 1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.reward_period is None:
        args.reward_period = args.steps // 2
    problem = device_problem(args.device)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        raise SystemExit(2)
    torch.set_num_threads(args.threads)
    task = get_task(args.task)
    single_cfg, population_cfg = configs(args)
    print(f"population loop: {task.name}, {args.steps:,} env steps each, {args.learner}, device {args.device}, "
          f"torch threads {args.threads}, reward period {args.reward_period or 'none'}, eval every "
          f"{population_cfg.eval_every}")
    single = measure("single (human)", make_engine(task, single_cfg))
    lares = measure(f"LaRes K={args.k}", make_engine(task, population_cfg, candidates(task, args.k, 0, "given"),
                                                   FixedProposals(task, args.k)))
    print(HEADER)
    for m in (single, lares):
        print(m.row())
    print(f"device: {lares.device}; env steps: single {single.env_steps:,}, LaRes {lares.env_steps:,}; "
          f"LaRes reward updates: {lares.rounds}")
    per_step = (lares.train_s / lares.env_steps) / (single.train_s / single.env_steps)
    print(f"wall-time ratio population / single: training {lares.train_s / single.train_s:.2f}x ({per_step:.2f}x per "
          f"env step: K learners end their episodes together, past the budget), with warm-up "
          f"{(lares.train_s + lares.warmup_s) / (single.train_s + single.warmup_s):.2f}x (target: at most 2.0x at K=3)")
    learn_ratio = lares.learn_s / single.learn_s if single.learn_s > 0 else float("nan")
    print(f"learning time ratio {learn_ratio:.2f}x for {lares.learner_updates / max(single.learner_updates, 1):.2f}x "
          f"the learner updates; episode time ratio {lares.sim_s / single.sim_s:.2f}x")


if __name__ == "__main__":
    main()
