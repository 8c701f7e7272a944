"""The learner alone: success and task return against env steps, SAC vs CrossQ, on the task's own reward.

Every run trains ONE learner (a population of K = 1) with the project's engine pieces: the
task registry, `EnvPool` / `run_episodes` / `batch_features` (seeded episodes), the shared `ReplayBuffer` with
one `HumanReward` column (the baseline setting), `evaluate_members` (deterministic evaluation, success at
any step) and the batched populations. The loop is the engine's, reduced to one learner: uniform-random
warm-up steps (not counted, as in the engine), then one stochastic episode, then `utd_ratio * steps` updates,
and every `--eval-every` counted env steps `--eval-episodes` deterministic episodes. Nothing in the learners
depends on the total budget, so the 15k row of a 30k run is what a 15k run gives (`--report`).

A learner is named by a spec: `sac`, `crossq`, or either with overrides of its config,
`crossq:utd_ratio=2,critic_hidden=512x512`, `sac:critic_layer_norm=true,hidden=256x256`, `sac:obs_norm=1`.
Baselines: `sac` = the demo preset (2x128, batch 128, UTD 1, lr 3e-4), `crossq` = `CrossQConfig()`.

Each run is one process (fresh MuJoCo, torch at one thread) and writes `<out>/runs/<task>/<learner>/
s<seed>-<steps>.json`; a run whose file exists is skipped, so the grid can be resumed or spread over
sittings. `--jobs N` runs N at a time (one per core). Then it prints the table (final success mean, std and
per seed at each `--report` budget, task return, wall time, env steps/s), writes `<out>/results/summary.json`
and `<out>/results/learning.png` (success and task return against env steps, mean +- std over seeds).

    python experiments/learners/run.py --tasks reach-v3 button-press-v3 window-close-v3 drawer-open-v3 \\
        --seeds 0 1 2 --learners sac crossq --steps 30000 --report 15000 30000 --jobs 2
    python experiments/learners/run.py --tasks reach-v3 --seeds 0 --steps 3000 --out /tmp/learning-smoke

The committed record is this folder (`--out experiments/learners`, the default) and `options/` (the learners'
options on reach-v3, `--out experiments/learners/options`); docs/RESULTS.md, "SAC vs CrossQ on the task's own
reward", reports both.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lares_agent.engine.contracts import HUMAN_REWARD_FEATURE, HumanReward
from lares_agent.engine.learners.actor_critic import ActorCriticPopulation
from lares_agent.engine.learners.crossq import CrossQConfig
from lares_agent.engine.learners.sac import SACConfig
from lares_agent.engine.replay.buffer import ReplayBuffer
from lares_agent.engine.rollouts.episodes import (
    EVAL_STREAM,
    TRAIN_STREAM,
    WARMUP_STREAM,
    EnvPool,
    batch_features,
    episode_seed,
    run_episodes,
)
from lares_agent.engine.rollouts.evaluation import evaluate_members
from lares_agent.engine.tasks import get_task

DEFAULT_TASKS = ("reach-v3", "button-press-v3", "window-close-v3", "drawer-open-v3")


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run; its result file is a pure function of these fields."""

    task: str
    learner: str
    seed: int
    steps: int
    warmup: int
    eval_every: int
    eval_episodes: int

    def path(self, out: Path) -> Path:
        label = self.learner.replace(":", "+").replace(",", "+").replace("/", "_")
        return out / "runs" / self.task / label / f"s{self.seed}-{self.steps}.json"


def _value(text: str, current: Any) -> Any:
    """A config override from text, shaped like the field's current value (widths as 256x256)."""
    low = text.lower()
    if isinstance(current, bool):
        if low not in ("1", "0", "true", "false"):
            raise ValueError(f"expected a boolean, got {text!r}")
        return low in ("1", "true")
    if isinstance(current, tuple):
        parts = text.replace("x", ",").replace(";", ",").split(",") if "x" in text else [text]
        return tuple(type(current[0])(p) for p in parts) if current else tuple(int(p) for p in parts)
    if low == "none":
        return None
    if isinstance(current, int):
        return int(text)
    return float(text)


def learner_config(spec: str) -> tuple[str, Any]:
    """(kind, config) of a learner spec `kind[:key=value,...]`."""
    base: dict[str, Any] = {"sac": SACConfig(hidden=(128, 128), batch_size=128), "crossq": CrossQConfig()}
    kind, _, options = spec.partition(":")
    if kind not in base:
        raise ValueError(f"unknown learner {kind!r}; choose sac or crossq (with :key=value overrides)")
    config = base[kind]
    overrides: dict[str, Any] = {}
    for item in filter(None, options.split(",")):
        key, _, text = item.partition("=")
        if not hasattr(config, key):
            raise ValueError(f"{kind} has no option {key!r}")
        overrides[key] = _value(text, getattr(config, key))
    return kind, dataclasses.replace(config, **overrides)


def run(spec: RunSpec, out: Path) -> dict[str, Any]:
    """Train and evaluate one learner; writes and returns the result (in a fresh process, one thread)."""
    torch.set_num_threads(1)
    kind, config = learner_config(spec.learner)
    task = get_task(spec.task)
    seeds = np.random.SeedSequence([spec.seed, 12]).spawn(3)
    rng = np.random.default_rng(seeds[0])
    torch_gen = torch.Generator().manual_seed(int(seeds[1].generate_state(1)[0]))
    pool = EnvPool(task.make_env, spec.seed)
    env = pool.get(1)[0]
    obs_dim, act_dim = int(np.prod(env.observation_space.shape)), int(np.prod(env.action_space.shape))
    names = tuple(dict.fromkeys([f.name for f in task.features] + ["success", HUMAN_REWARD_FEATURE]))
    buffer = ReplayBuffer(spec.steps + spec.warmup + 2 * task.horizon, obs_dim, act_dim, names, 1)
    pop_seed = int(seeds[2].generate_state(1)[0] >> 1)
    population = ActorCriticPopulation(1, obs_dim, act_dim, config, pop_seed)
    member = np.zeros(1, np.int64)
    reward = HumanReward()

    def store(batch: Any) -> None:
        feats, _ = batch_features(task.features, batch)
        n = int(batch.lengths[0])
        buffer.add(batch.obs[0, :n], batch.action[0, :n], batch.next_obs[0, :n], batch.terminated[0, :n],
                   batch.truncated[0, :n], {k: feats[k] for k in names if k in feats})
        population.observe(batch.obs[0, :n])

    start = time.monotonic()
    stored, counter = 0, 0
    while stored < spec.warmup:  # uniform-random warm-up, not counted (as the engine)
        batch = run_episodes([env], lambda o: rng.uniform(-1.0, 1.0, (o.shape[0], act_dim)), task.raw_state,
                             task.horizon, [episode_seed(spec.seed, WARMUP_STREAM, counter)])
        store(batch)
        stored, counter = stored + int(batch.lengths.sum()), counter + 1
    buffer.set_column(0, reward, reference=None)
    env_steps, episodes, updates, next_eval = 0, 0, 0, spec.eval_every
    update_time, curve, diverged = 0.0, [], None
    while env_steps < spec.steps and diverged is None:
        batch = run_episodes([env], lambda o: population.act(o, member, False, torch_gen), task.raw_state,
                             task.horizon, [episode_seed(spec.seed, TRAIN_STREAM, episodes)])
        episodes += 1
        store(batch)
        steps = int(batch.lengths.sum())
        env_steps += steps
        t0 = time.monotonic()
        for _ in range(round(config.utd_ratio * steps)):
            stats = population.update(buffer.sample(config.batch_size, [0], rng))
            updates += 1
            if not np.isfinite(stats["q_loss"][0] + stats["actor_loss"][0]):
                diverged = env_steps
                break
        update_time += time.monotonic() - t0
        while env_steps >= next_eval:
            seeds_e = [episode_seed(spec.seed, EVAL_STREAM, e) for e in range(spec.eval_episodes)]
            ev = evaluate_members(pool, lambda o, m: population.act(o, m, True, torch_gen), task.raw_state,
                                  task.features, [0], [reward], spec.eval_episodes, task.horizon, seeds_e,
                                  task.progress_feature)[0]
            curve.append({"env_steps": next_eval, "success": ev.success_rate, "task_return": ev.task_return,
                          "wall_s": time.monotonic() - start})
            next_eval += spec.eval_every
    wall = time.monotonic() - start
    pool.close()
    result = {
        "spec": dataclasses.asdict(spec), "kind": kind, "config": dataclasses.asdict(config),
        "curve": curve, "final_success": curve[-1]["success"] if curve else None,
        "wall_s": wall, "env_steps": env_steps, "env_steps_per_s": env_steps / wall, "updates": updates,
        "update_s": update_time, "diverged_at": diverged, "torch": torch.__version__,
    }
    path = spec.path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(path)  # atomic: a file that exists is a finished run
    return result


def _at(result: dict[str, Any], budget: int) -> dict[str, Any] | None:
    return next((p for p in result["curve"] if p["env_steps"] == budget), None)


def summarise(results: list[dict[str, Any]], budgets: list[int], out: Path) -> list[dict[str, Any]]:
    """Print the table and write summary.json: one row per (task, learner, budget)."""
    rows = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["spec"]["task"], r["spec"]["learner"]), []).append(r)
    print(f"\n{'task':18} {'learner':34} {'steps':>6} {'success':>13} {'per seed':>20} {'task return':>14} "
          f"{'wall s':>7} {'steps/s':>8}")
    for (task, learner), runs in sorted(groups.items()):
        runs.sort(key=lambda r: r["spec"]["seed"])
        for budget in budgets:
            points = [(r, _at(r, budget)) for r in runs]
            points = [(r, p) for r, p in points if p is not None]
            if not points:
                continue
            succ = np.array([p["success"] for _, p in points])
            ret = np.array([p["task_return"] for _, p in points])
            wall = np.mean([p["wall_s"] for _, p in points])
            sps = np.mean([r["env_steps_per_s"] for r, _ in points])
            row = {"task": task, "learner": learner, "steps": budget, "seeds": [r["spec"]["seed"] for r, _ in points],
                   "success_mean": float(succ.mean()), "success_std": float(succ.std()),
                   "success_per_seed": succ.tolist(), "task_return_mean": float(ret.mean()),
                   "task_return_std": float(ret.std()), "wall_s_mean": float(wall), "env_steps_per_s": float(sps)}
            rows.append(row)
            per_seed = "/".join(f"{s:.1f}" for s in succ)
            print(f"{task:18} {learner:34} {budget:6d} {succ.mean():6.2f} +- {succ.std():4.2f} {per_seed:>20} "
                  f"{ret.mean():14.1f} {wall:7.0f} {sps:8.1f}")
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / "results" / "summary.json").write_text(json.dumps(rows, indent=1))
    return rows


def plot(results: list[dict[str, Any]], out: Path) -> Path | None:
    """Success and task return against env steps, one column per task, mean +- std over seeds."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return None
    tasks = sorted({r["spec"]["task"] for r in results})
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.2 * len(tasks), 6.5), squeeze=False)
    for col, task in enumerate(tasks):
        learners = sorted({r["spec"]["learner"] for r in results if r["spec"]["task"] == task})
        for learner in learners:
            runs = [r for r in results if r["spec"]["task"] == task and r["spec"]["learner"] == learner]
            length = min(len(r["curve"]) for r in runs)
            if length == 0:
                continue
            x = [p["env_steps"] for p in runs[0]["curve"][:length]]
            for row, key in enumerate(("success", "task_return")):
                y = np.array([[p[key] for p in r["curve"][:length]] for r in runs])
                ax = axes[row][col]
                ax.plot(x, y.mean(0), marker="o", label=f"{learner} ({len(runs)} seeds)")
                ax.fill_between(x, y.mean(0) - y.std(0), y.mean(0) + y.std(0), alpha=0.2)
        axes[0][col].set_title(task)
        axes[0][col].set_ylim(-0.05, 1.05)
        axes[0][col].set_ylabel("success (10 deterministic episodes)")
        axes[1][col].set_ylabel("task return")
        axes[1][col].set_xlabel("env steps")
        axes[0][col].legend(fontsize=7)
    fig.tight_layout()
    path = out / "results" / "learning.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--learners", nargs="+", default=["sac", "crossq"], help="specs: kind[:key=value,...]")
    parser.add_argument("--steps", type=int, default=30_000, help="counted env steps per run")
    parser.add_argument("--report", nargs="+", type=int, default=None,
                        help="budgets in the table (evaluation points; default 15000 and --steps)")
    parser.add_argument("--warmup", type=int, default=1_000, help="uniform-random steps first (demo preset)")
    parser.add_argument("--eval-every", type=int, default=3_000)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time, each in its own process")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    for learner in args.learners:
        learner_config(learner)  # fail on a bad spec before anything runs
    report = args.report or sorted({b for b in (15_000, args.steps) if b <= args.steps})
    specs = [RunSpec(t, learner, s, args.steps, args.warmup, args.eval_every, args.eval_episodes)
             for t in args.tasks for learner in args.learners for s in args.seeds]
    todo = [s for s in specs if not s.path(args.out).exists()]
    print(f"{len(specs)} runs, {len(specs) - len(todo)} already finished under {args.out}; "
          f"{len(todo)} to run, {args.jobs} at a time")
    if todo:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=context, max_tasks_per_child=1) as executor:
            futures = {executor.submit(run, spec, args.out): spec for spec in todo}
            for future, spec in futures.items():
                r = future.result()
                print(f"done {spec.task} {spec.learner} seed {spec.seed}: final success {r['final_success']}, "
                      f"{r['wall_s']:.0f} s, {r['env_steps_per_s']:.1f} env steps/s"
                      + (f", DIVERGED at {r['diverged_at']}" if r["diverged_at"] is not None else ""), flush=True)
    results = [json.loads(s.path(args.out).read_text()) for s in specs]
    summarise(results, report, args.out)
    path = plot(results, args.out)
    if path is not None:
        print(f"plot: {path}")


if __name__ == "__main__":
    main()
