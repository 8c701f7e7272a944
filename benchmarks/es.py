"""ES throughput on Reacher-v5: vectorised vs sequential perturbation rollouts, and local vs Ray backend.

Run: ``python benchmarks/es.py [--generations N] [--population P] [--skip-ray]``. Prints side-by-side tables;
nothing is asserted (speed claims live here, not in tests). Target: vectorised >= 3x sequential.

* vectorised: one SyncVectorEnv of P sub-envs, one batched policy call per step for all P perturbations,
  features and rewards computed once per generation over the whole [T * P] block (``engine.vec_rollout``).
* sequential (reference style): one env, the perturbations one after another, a policy call and a feature +
  reward call per step (the reference computed rewards per step in Python, docs/lares-reference.md §12 items 19, 23).
* sequential, features per episode: the same loop with features batched per episode (a fairer baseline).
* backend: ES engine generations with the in-process backend vs the Ray backend (local Ray, 2 CPUs).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from lares_agent.engine import EngineConfig, ESPopulationConfig, HumanReward, get_task, make_engine
from lares_agent.engine.es import strategy as es
from lares_agent.engine.es.policies import PolicyBatch, PolicySpec, act, num_params
from lares_agent.engine.es.workers import RolloutWorkers
from lares_agent.engine.rollouts.episodes import to_env_action
from lares_agent.engine.rollouts.vector import make_vector_env, rollout

TASK = "Reacher-v5"
HORIZON = 50


def _population(spec: PolicySpec, p: int, rng: np.random.Generator) -> np.ndarray:
    cfg = es.ESConfig(population_size=p, sigma=0.1)
    pop, _ = es.ask(cfg, es.init(cfg, np.zeros(num_params(spec))), rng)
    return pop


def vectorised(task: Any, spec: PolicySpec, p: int, generations: int, workers: int = 0) -> float:
    """Env steps per second of batched rollouts (rewards included); ``workers`` >= 2 uses rollout workers."""
    venv: Any = RolloutWorkers(task, p, workers, seed=0) if workers >= 2 else make_vector_env(task, p, seed=0)
    reward = HumanReward()
    rng = np.random.default_rng(0)

    def play(pop: np.ndarray, horizon: int, seeds: list[int]) -> Any:
        policy = PolicyBatch(spec, pop)
        if isinstance(venv, RolloutWorkers):
            return venv.rollout(policy, horizon, seeds)
        return rollout(venv, task, policy, horizon, seeds=seeds)

    steps = 0
    try:
        play(np.zeros((p, num_params(spec))), 2, list(range(p)))  # warm-up: first resets, imports
        start = time.perf_counter()
        for g in range(generations):
            ro = play(_population(spec, p, rng), HORIZON, [1000 * g + i % (p // 2) for i in range(p)])
            ro.returns(reward)
            steps += ro.steps
        return steps / (time.perf_counter() - start)
    finally:
        venv.close()


def sequential(task: Any, spec: PolicySpec, p: int, generations: int, per_step_features: bool) -> float:
    """Env steps per second with one env and one perturbation at a time."""
    env = task.make_env(0)
    reward = HumanReward()
    rng = np.random.default_rng(0)
    steps = 0
    start = time.perf_counter()
    for g in range(generations):
        pop = _population(spec, p, rng)
        for i in range(p):
            obs, _ = env.reset(seed=1000 * g + i % (p // 2))
            raws, acts, total = [], [], 0.0
            for _ in range(HORIZON):
                a = act(spec, pop[i : i + 1], np.asarray(obs, np.float64)[None, None])[0, 0]
                ea = to_env_action(a, env.action_space)
                obs, _, term, trunc, info = env.step(ea.astype(env.action_space.dtype))
                raw = task.raw_state(env, obs, info)
                steps += 1
                if per_step_features:
                    total += float(reward(task.features(raw[None], ea[None]))[0])
                else:
                    raws.append(raw)
                    acts.append(ea)
                if term or trunc:
                    break
            if not per_step_features:
                total = float(reward(task.features(np.stack(raws), np.stack(acts))).sum())
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def backend_seconds(backend: str, generations: int, p: int) -> tuple[float, float]:
    """(seconds to build the engine, seconds per generation) for an ES engine with 2 reward slots."""
    # scratch with two human rewards: two learners (`init` would add its extra human-reward learner)
    cfg = EngineConfig(setting="scratch", population=2, elites=1, reward_period=0, eval_every=0, horizon=HORIZON,
                       total_steps=10**9, learners=ESPopulationConfig(backend=backend, ray_num_cpus=2,
                                                                      es=es.ESConfig(population_size=p)))
    t0 = time.perf_counter()
    engine = make_engine(get_task(TASK), cfg, [HumanReward(), HumanReward()])
    try:
        engine.step()  # warm-up (Ray: actors start and build their envs)
        t1 = time.perf_counter()
        for _ in range(generations):
            engine.step()
        t2 = time.perf_counter()
    finally:
        engine.close()
    return t1 - t0, (t2 - t1) / generations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=5)
    parser.add_argument("--population", type=int, default=32)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    task = get_task(TASK)
    spec = PolicySpec(obs_dim=task.obs_dim, act_dim=task.act_dim)
    p, g = args.population, args.generations
    print(f"ES rollouts on {TASK}: {p} linear-policy perturbations x {g} generations, horizon {HORIZON}, "
          f"{os.cpu_count()} CPUs")
    vec = vectorised(task, spec, p, g)
    vec2 = vectorised(task, spec, p, g, workers=2)
    seq_step = sequential(task, spec, p, g, per_step_features=True)
    seq_ep = sequential(task, spec, p, g, per_step_features=False)
    print(f"{'mode':<44}{'env steps/s':>14}{'vs sequential':>16}")
    print(f"{'vectorised, 2 rollout worker processes':<44}{vec2:>14,.0f}{vec2 / seq_step:>15.2f}x")
    print(f"{'vectorised (SyncVectorEnv, batched)':<44}{vec:>14,.0f}{vec / seq_step:>15.2f}x")
    print(f"{'sequential, per-step features (reference)':<44}{seq_step:>14,.0f}{1.0:>15.2f}x")
    print(f"{'sequential, features per episode':<44}{seq_ep:>14,.0f}{seq_ep / seq_step:>15.2f}x")
    print(f"vectorised / sequential-per-episode: {vec / seq_ep:.2f}x (2 workers: {vec2 / seq_ep:.2f}x)")
    if args.skip_ray:
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        print("Ray not installed: pip install 'lares-agent[ray]' to compare backends")
        return
    print(f"\nBackend overhead, ES engine with 2 reward slots, population {p}, 2 CPUs:")
    print(f"{'backend':<10}{'start-up s':>12}{'s / generation':>16}{'env steps/s':>14}")
    steps = 2 * p * HORIZON
    for name in ("local", "ray"):
        setup, per_gen = backend_seconds(name, g, p)
        print(f"{name:<10}{setup:>12.2f}{per_gen:>16.3f}{steps / per_gen:>14,.0f}")


if __name__ == "__main__":
    main()
