"""Learner throughput: K batched SAC (and CrossQ) learners vs K separate ones vs K library learners.

Side by side in one run, with the reference's sizes (obs 39, act 4, 3x256 MLPs, batch 128):
  * learner-updates/s of `ActorCriticPopulation` (K learners as one batched computation, ours),
  * K separate `SACLearner`s of our own (the same maths, one learner at a time),
  * K Stable-Baselines3 SAC learners with the same sizes (skipped when SB3 is not installed),
  * the fraction of this CPU's measured matmul FLOP/s that each reaches (matmul FLOPs actually executed),
  * env steps/s of a whole LaRes-style loop on MetaWorld reach-v3 (episode, add with K reward columns,
    one update per env step per learner);
  * the same side-by-side table for CrossQ at K = 3 and 5 (`--crossq-k`), with the sizes of
    `CrossQConfig()` (actor 2x128, critic 2x256, batch 256, policy delay 3): `ActorCriticPopulation`, K separate
    `CrossQLearner`s, K sb3-contrib CrossQ learners (skipped when sb3-contrib is not installed). A CrossQ
    update's FLOPs count the actor step once per `policy_delay` updates (its average cost).
Each timing is the best of several blocks, because the CPU may be shared. Usage:

    python benchmarks/learners.py [--threads 2] [--k 5] [--block-seconds 2] [--blocks 3] [--loop-steps 300]
    python benchmarks/learners.py --threads 1 --clock thread   # on a machine shared with other jobs
    python benchmarks/learners.py --learners crossq --crossq-k 3 5 --loop-steps 0
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lares_agent.engine.learners.actor_critic import ActorCriticPopulation
from lares_agent.engine.learners.crossq import CrossQConfig, CrossQLearner
from lares_agent.engine.learners.nets import layer_sizes, reuse_freed_memory
from lares_agent.engine.learners.sac import SACConfig, SACLearner
from lares_agent.engine.replay.buffer import ReplayBuffer

OBS, ACT = 39, 4


Clock = Callable[[], float]


def best_time(fn: Callable[[], object], block_seconds: float, blocks: int, clock: Clock) -> float:
    """Seconds per call: best over `blocks` blocks of about `block_seconds` each (after a warm-up)."""
    fn()
    start, calls = clock(), 0
    while clock() - start < 0.3 * block_seconds or calls < 2:
        fn()
        calls += 1
    per_call = (clock() - start) / calls
    reps = max(1, int(block_seconds / per_call))
    best = float("inf")
    for _ in range(blocks):
        t0 = clock()
        for _ in range(reps):
            fn()
        best = min(best, (clock() - t0) / reps)
    return best


def matmul_peak(block_seconds: float, blocks: int, clock: Clock) -> float:
    """FLOP/s of a large float32 matmul (sgemm) at the current thread count."""
    n = 2048
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    out = torch.empty(n, n)
    return 2 * n**3 / best_time(lambda: torch.mm(a, b, out=out), block_seconds, blocks, clock)


def update_flops(hidden: tuple[int, ...], batch: int) -> float:
    """Matmul FLOPs one SAC learner update executes (what both our implementations compute).

    forward 2*B*in*out per layer; backward adds the weight gradient (same) and the input gradient
    (same; skipped for the first layer when its input is data). Critic target: actor + 2 target critics
    forward. Critic step: 2 critics forward + full backward. Actor step: actor forward + full backward,
    2 critics forward + input gradients only (their weights are not trained there).
    """
    actor = layer_sizes(OBS, hidden, 2 * ACT)
    critic = layer_sizes(OBS + ACT, hidden, 1)

    def fwd(layers: list[tuple[int, int]]) -> float:
        return sum(2.0 * batch * i * o for i, o in layers)

    def input_grads(layers: list[tuple[int, int]], first: bool) -> float:
        return fwd(layers if first else layers[1:])

    target = fwd(actor) + 2 * fwd(critic)
    critic_step = 2 * (2 * fwd(critic) + input_grads(critic, first=False))
    actor_step = 2 * fwd(actor) + input_grads(actor, first=False) + 2 * (fwd(critic) + input_grads(critic, True))
    return target + critic_step + actor_step


def convention_flops(hidden: tuple[int, ...], batch: int) -> float:
    """The usual estimate: trained networks cost 3x their forward, targets 1x (critics also in the actor step)."""
    actor = sum(2.0 * batch * i * o for i, o in layer_sizes(OBS, hidden, 2 * ACT))
    critic = sum(2.0 * batch * i * o for i, o in layer_sizes(OBS + ACT, hidden, 1))
    return actor * (1 + 3) + critic * (2 + 2 * 3 + 2 * 3)


def random_buffer(k: int, rows: int, seed: int) -> ReplayBuffer:
    """A buffer of random transitions with k labelled reward columns."""
    rng = np.random.default_rng(seed)
    buf = ReplayBuffer(rows, OBS, ACT, [f"f{j}" for j in range(k)], k)
    buf.add(rng.normal(size=(rows, OBS)), rng.uniform(-1, 1, (rows, ACT)), rng.normal(size=(rows, OBS)),
            np.zeros(rows, bool), np.zeros(rows, bool), {f"f{j}": rng.normal(size=rows) for j in range(k)})
    for j in range(k):
        buf.set_column(j, _FeatureReward(f"f{j}"), reference=None)
    return buf


class _FeatureReward:
    """Reward = one named feature (enough to fill reward columns for timing)."""

    expression = None  # nothing written to show the LLM (RewardFunction.expression)

    def __init__(self, name: str) -> None:
        self.id, self.key, self.complexity, self.name = name, name, 1.0, name

    def __call__(self, features):  # type: ignore[no-untyped-def]
        return np.asarray(features[self.name], np.float64)

    def components(self, features):  # type: ignore[no-untyped-def]
        return {self.name: self(features)}

    def to_json(self) -> dict[str, object]:
        return {"id": self.id}


def sb3_models(k: int, make: Callable[[object, int], Any]) -> list[Any]:
    """k SB3-style models built by ``make(env, seed)``, each with 2,000 random transitions in its replay buffer."""
    import gymnasium
    from stable_baselines3.common.logger import configure

    class Dummy(gymnasium.Env):  # only the spaces matter: training reads the replay buffer
        observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (ACT,), np.float32)

    rng = np.random.default_rng(0)
    models = []
    for seed in range(k):
        model = make(Dummy(), seed)
        model.set_logger(configure(None, []))
        for _ in range(2000):
            model.replay_buffer.add(rng.normal(size=(1, OBS)), rng.normal(size=(1, OBS)),
                                    rng.uniform(-1, 1, (1, ACT)), rng.normal(size=1), np.zeros(1), [{}])
        models.append(model)
    return models


def train_each(models: list[Any], batch_size: int) -> Callable[[], None]:
    """One gradient step of every model in turn (SB3 has no batched population)."""

    def step() -> None:
        for model in models:
            model.train(gradient_steps=1, batch_size=batch_size)

    return step


def sb3_update_time(k: int, cfg: SACConfig, block_seconds: float, blocks: int, clock: Clock) -> float | None:
    """Seconds for one update of each of k SB3 SAC learners (None when SB3 is not installed)."""
    try:
        from stable_baselines3 import SAC
    except ImportError:
        return None
    models = sb3_models(k, lambda env, seed: SAC(
        "MlpPolicy", env, learning_rate=cfg.lr, buffer_size=10_000, learning_starts=0, batch_size=cfg.batch_size,
        tau=cfg.tau, gamma=cfg.gamma, device="cpu", seed=seed, policy_kwargs={"net_arch": list(cfg.hidden)}))
    return best_time(train_each(models, cfg.batch_size), block_seconds, blocks, clock)


def loop_steps_per_second(k: int, cfg: SACConfig, steps: int, seed: int, clock: Clock) -> dict[str, float] | None:
    """Env steps/s of episodes on reach-v3 + buffer adds with k columns + one population update per step."""
    try:
        from lares_agent.engine.tasks import get_task
        task = get_task("reach-v3")
        env = task.make_env(seed)
    except Exception as exc:  # MetaWorld missing or broken: report and skip this column
        print(f"loop benchmark skipped: {exc}")
        return None
    names = [f.name for f in task.features]
    pop = ActorCriticPopulation(k, OBS, ACT, cfg, seed)
    buf = ReplayBuffer(max(10_000, 2 * steps), OBS, ACT, names, k)
    rng, gen = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    timers = dict.fromkeys(("env", "act", "add", "sample", "update"), 0.0)

    def episode(member: int | None) -> int:
        obs, info = env.reset(seed=int(rng.integers(1 << 30)))
        rows: dict[str, list[np.ndarray]] = {key: [] for key in ("obs", "act", "next", "term", "trunc", "raw")}
        for _ in range(task.horizon):
            t0 = clock()
            if member is None:
                action = rng.uniform(-1, 1, ACT).astype(np.float32)
            else:
                action = pop.act(obs[None], np.array([member]), False, gen)[0]
            t1 = clock()
            next_obs, _, terminated, truncated, info = env.step(action)
            rows["raw"].append(task.raw_state(env, next_obs, info))
            timers["env"] += clock() - t1
            timers["act"] += t1 - t0
            for key, value in [("obs", obs), ("act", action), ("next", next_obs), ("term", terminated),
                               ("trunc", truncated)]:
                rows[key].append(value)
            obs = next_obs
            if terminated or truncated:
                break
        t0 = clock()
        actions = np.asarray(rows["act"])
        feats = task.features(np.asarray(rows["raw"]), actions)
        buf.add(np.asarray(rows["obs"]), actions, np.asarray(rows["next"]), np.asarray(rows["term"]),
                np.asarray(rows["trunc"]), feats)
        timers["add"] += clock() - t0
        return len(actions)

    episode(None)  # random warm-up episode, then label the columns
    for j in range(k):
        buf.set_column(j, _FeatureReward(names[j]), reference=None)
    start, done, member = clock(), 0, 0
    while done < steps:
        n = episode(member)
        member, done = (member + 1) % k, done + n
        for _ in range(round(cfg.utd_ratio * n)):
            t0 = clock()
            batch = buf.sample(cfg.batch_size, range(k), rng)
            t1 = clock()
            pop.update(batch)
            timers["sample"] += t1 - t0
            timers["update"] += clock() - t1
    total = clock() - start
    env.close()
    return {"steps_per_s": done / total, **{key: value / total for key, value in timers.items()}}


def crossq_update_flops(cfg: CrossQConfig) -> float:
    """Average matmul FLOPs of one CrossQ update (both our implementations compute the same).

    Every update: next actions (actor forward, B rows), the critic step on the joint batch (2 critics
    forward on 2B rows, weight gradients and input gradients but the first layer's). Every `policy_delay`-th
    update: the actor forward and full backward (B rows), 2 critics forward plus input gradients of every
    layer (the action is an input) on B rows.
    """
    b = cfg.batch_size

    def fwd(layers: list[tuple[int, int]], rows: int) -> float:
        return sum(2.0 * rows * i * o for i, o in layers)

    actor = layer_sizes(OBS, cfg.actor_hidden, 2 * ACT)
    critic = layer_sizes(OBS + ACT, cfg.critic_hidden, 1)
    critic_step = fwd(actor, b) + 2 * (2 * fwd(critic, 2 * b) + fwd(critic[1:], 2 * b))
    actor_step = 2 * fwd(actor, b) + fwd(actor[1:], b) + 2 * 2 * fwd(critic, b)
    return critic_step + actor_step / cfg.policy_delay


def sb3_crossq_update_time(k: int, cfg: CrossQConfig, block_seconds: float, blocks: int,
                           clock: Clock) -> float | None:
    """Seconds for one update of each of k sb3-contrib CrossQ learners (None when sb3-contrib is missing)."""
    try:
        from sb3_contrib import CrossQ
    except ImportError:
        return None
    models = sb3_models(k, lambda env, seed: CrossQ(
        "MlpPolicy", env, learning_rate=cfg.lr, buffer_size=10_000, learning_starts=0, batch_size=cfg.batch_size,
        gamma=cfg.gamma, policy_delay=cfg.policy_delay, device="cpu", seed=seed,
        policy_kwargs={"net_arch": {"pi": list(cfg.actor_hidden), "qf": list(cfg.critic_hidden)}}))
    step = train_each(models, cfg.batch_size)
    # Whole policy-delay cycles, so every column averages the same mix of critic and actor steps.
    return best_time(lambda: [step() for _ in range(cfg.policy_delay)], block_seconds, blocks, clock) / cfg.policy_delay


def crossq_table(k: int, peak: float, timing: tuple[float, int, Clock]) -> None:
    """CrossQ side by side at population size k: batched, separate ours, sb3-contrib."""
    cfg = CrossQConfig()
    buf = random_buffer(k, 20_000, seed=0)
    rng = np.random.default_rng(1)
    pop = ActorCriticPopulation(k, OBS, ACT, cfg, seed=0)
    pop.inherit(list(range(1, k // 2 + 1)), 0, anchor_weight=1.0)  # as after a reward update: some anchored
    learners = [CrossQLearner(OBS, ACT, cfg, seed) for seed in range(k)]
    delay = cfg.policy_delay

    def batched() -> None:  # whole policy-delay cycles (see sb3_crossq_update_time)
        for _ in range(delay):
            pop.update(buf.sample(cfg.batch_size, range(k), rng))

    def separate() -> None:
        for _ in range(delay):
            for j, learner in enumerate(learners):
                learner.update(buf.sample(cfg.batch_size, [j], rng).column(0))

    rows = {f"{k} batched CrossQ learners (ours)": best_time(batched, *timing) / delay,
            f"{k} separate CrossQLearners (ours)": best_time(separate, *timing) / delay}
    sb3 = sb3_crossq_update_time(k, cfg, *timing)
    sb3_name = f"{k} sb3-contrib CrossQ learners"
    if sb3 is not None:
        rows[sb3_name] = sb3
    flops = k * crossq_update_flops(cfg)
    print(f"\nCrossQ K={k}: actor {cfg.actor_hidden}, critic {cfg.critic_hidden}, batch {cfg.batch_size} "
          f"(joint critic batch {2 * cfg.batch_size}), policy delay {delay}; one update of all {k} learners "
          f"executes {flops / 1e9:.2f} GFLOP of matmuls on average")
    print(f"{'':42} {'learner-upd/s':>14} {'ms per K upd':>13} {'GFLOP/s':>9} {'% of peak':>10}")
    for name, seconds in rows.items():
        print(f"{name:42} {k / seconds:14.1f} {1e3 * seconds:13.2f} {flops / seconds / 1e9:9.1f} "
              f"{100 * flops / seconds / peak:9.1f}%")
    names = list(rows)
    print(f"batched vs separate (ours): {rows[names[1]] / rows[names[0]]:.2f}x")
    if sb3 is None:
        print(f"{sb3_name}: skipped (sb3_contrib not installed; `pip install sb3-contrib`)")
    else:
        print(f"batched vs sb3-contrib CrossQ: {sb3 / rows[names[0]]:.2f}x (target: >= 2x)")


def sac_table(args: argparse.Namespace, k: int, peak: float, timing: tuple[float, int, Clock], clock: Clock) -> None:
    """SAC side by side at population size k (and the whole loop on reach-v3)."""
    cfg = SACConfig()
    buf = random_buffer(k, 20_000, seed=0)
    rng = np.random.default_rng(1)
    pop = ActorCriticPopulation(k, OBS, ACT, cfg, seed=0)
    pop.inherit(list(range(1, k // 2 + 1)), 0, anchor_weight=1.0)  # as after a reward update: some anchored

    def batched() -> None:
        pop.update(buf.sample(cfg.batch_size, range(k), rng))

    learners = [SACLearner(OBS, ACT, cfg, seed) for seed in range(k)]

    def separate() -> None:
        for j, learner in enumerate(learners):
            learner.update(buf.sample(cfg.batch_size, [j], rng).column(0))

    rows = {f"{k} batched SAC learners (ours)": best_time(batched, *timing),
            f"{k} separate SACLearners (ours)": best_time(separate, *timing)}
    sb3 = sb3_update_time(k, cfg, *timing)
    sb3_name = f"{k} Stable-Baselines3 SAC learners"
    if sb3 is not None:
        rows[sb3_name] = sb3
    flops = k * update_flops(cfg.hidden, cfg.batch_size)

    print(f"\nSAC K={k}: hidden {cfg.hidden}, batch {cfg.batch_size}; one update of all {k} learners executes "
          f"{flops / 1e9:.2f} GFLOP of matmuls ({k * convention_flops(cfg.hidden, cfg.batch_size) / 1e9:.2f} "
          "by the 3x-forward convention)")
    print(f"{'':38} {'learner-upd/s':>14} {'ms per K upd':>13} {'GFLOP/s':>9} {'% of peak':>10}")
    for name, seconds in rows.items():
        print(f"{name:38} {k / seconds:14.1f} {1e3 * seconds:13.2f} {flops / seconds / 1e9:9.1f} "
              f"{100 * flops / seconds / peak:9.1f}%")
    if sb3 is None:
        print(f"{sb3_name}: skipped (stable_baselines3 not installed; `pip install -e .[bench]`)")
    names = list(rows)
    print(f"\nbatched vs separate (ours): {rows[names[1]] / rows[names[0]]:.2f}x (target: beat 1.25x)")
    if sb3 is not None:
        print(f"batched vs Stable-Baselines3: {sb3 / rows[names[0]]:.2f}x (target: >= 2x)")
    print(f"batched update reaches {100 * flops / rows[names[0]] / peak:.1f}% of the matmul peak "
          "(target: >= 65%)")
    if args.loop_steps > 0:
        loop = loop_steps_per_second(k, cfg, args.loop_steps, 0, clock)
        if loop is not None:
            shares = ", ".join(f"{key} {100 * v:.0f}%" for key, v in loop.items() if key != "steps_per_s")
            print(f"whole loop on reach-v3 (UTD {cfg.utd_ratio}, {k} learners): "
                  f"{loop['steps_per_s']:.1f} env steps/s; time shares: {shares}")



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--block-seconds", type=float, default=2.0)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--loop-steps", type=int, default=300, help="0 skips the whole-loop measurement")
    parser.add_argument("--learners", nargs="+", choices=("sac", "crossq"), default=["sac", "crossq"])
    parser.add_argument("--crossq-k", nargs="+", type=int, default=[3, 5], help="CrossQ population sizes")
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall",
                        help="thread: CPU time of this thread (needs --threads 1); robust on a busy machine")
    args = parser.parse_args()
    if args.clock == "thread" and args.threads != 1:
        parser.error("--clock thread measures one thread's CPU time: use it with --threads 1")
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    torch.set_num_threads(args.threads)
    reuse_freed_memory()  # helps every column alike (fewer page faults on fresh activations)
    k = args.k
    timing = (args.block_seconds, args.blocks, clock)

    peak = matmul_peak(*timing)
    load = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {args.threads} threads, {args.clock} clock; obs {OBS}, act {ACT}; "
          f"load average {load:.1f} on {os.cpu_count()} CPUs"
          f"{' (busy machine: wall times are pessimistic)' if load > 1 else ''}")
    print(f"matmul peak (2048^3 sgemm): {peak / 1e9:.1f} GFLOP/s")
    if "sac" in args.learners:
        sac_table(args, k, peak, timing, clock)
    if "crossq" in args.learners:
        for crossq_k in args.crossq_k:
            crossq_table(crossq_k, peak, timing)

if __name__ == "__main__":
    main()
