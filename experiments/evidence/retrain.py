"""Found rewards retrained on fresh seeds: for each task and search arm of the evidence grid, the reward the best
seed handed over, trained alone (`lares sweep --methods retrain`) on seeds the grid did not use.

Eureka-style papers retrain a found reward to tell a good reward from a lucky seed. The best seed is the one whose
handed-over policy succeeded most on the grid's replay episodes (`final_policies.py --csv`; ties: the lower
seed). The retrained reward counts as reproduced when its fresh seeds' mean success lies within or above the
source run's 95% Wilson interval over those episodes. Where the best seed handed over the learner on the task's
own reward (the init arm keeps one), its retraining is the task's own reward on the fresh seeds: `run` trains that
once per task (`human-fresh`, a `human` sweep over the plan's tasks), and `table` shows it beside every found reward
of the task, so each is compared with the expert's reward on the same seeds.

    # 1. which reward each (task, arm) retrains, from the grid and its replay
    python experiments/evidence/retrain.py plan runs/evidence-C \\
        --replay experiments/evidence/results/final_policies.csv --out experiments/evidence/retrain.json
    # (or some of its tasks: --tasks button-press-topdown-v3; the fresh seeds follow the grid's highest)
    # 2. one sweep per found reward, all on one local Ray cluster (run again to continue: each sweep resumes)
    python experiments/evidence/retrain.py run experiments/evidence/retrain.json --out runs/retrain-C
    # 3. each retrained policy replayed as the grid's were, against the run that found the reward
    python experiments/evidence/retrain.py table experiments/evidence/retrain.json runs/retrain-C \\
        --csv experiments/evidence/results/retrain_policies.csv

Run steps 2 and 3 with the grid's commit on PYTHONPATH (its worktree), as the grid itself ran, and from outside
the checkout (`cd runs`, paths adjusted): on a commit before Ray started in the sweep's folder, Ray's workers import
the lares_agent of the driver's working directory first.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from lares_agent.engine.tasks import get_task
from lares_agent.report.sweep_stats import bootstrap_interval, success_auc
from lares_agent.report.sweep_table import read_trial
from lares_agent.rewards.validate import record_key
from lares_agent.runs import atomic_write_text
from lares_agent.runs.sweep_layout import SweepLayout
from lares_agent.search.found_reward import FoundReward, from_run
from lares_agent.search.option_checks import ignored_options
from lares_agent.search.presets import preset_config
from lares_agent.search.sweep_spec import SEARCH_METHODS, SweepSpec

FRESH = 3  # fresh seeds: the three after the grid's highest (the evidence grid ran 0-2: 3, 4, 5)
_SEARCH_SHAPE = ("setting", "population", "elites")  # what method retrain fixes for a learner alone
_REPLAY = Path(__file__).resolve().parents[1] / "sample_efficiency" / "final_policies.py"
HUMAN = "human-fresh"
"""The task's own reward on the fresh seeds (a `human` sweep; folders named ``human-fresh*`` are all read)."""


def _replay_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("final_policies", _REPLAY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a success rate from n episodes (n = 0: the whole range)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def reproduced(fresh: Sequence[float], source: float, episodes: int) -> bool:
    """The fresh seeds' mean success is within or above the source run's interval over its `episodes`."""
    return float(np.mean(fresh)) >= wilson(source * episodes, episodes)[0] - 1e-9


def best_seeds(spec: SweepSpec, success: Mapping[str, float],
               own: Mapping[str, bool] | None = None) -> list[dict[str, Any]]:
    """For each task and search arm of the grid, its trial with the highest replayed success (ties: one that
    handed over another reward before one that handed over the task's own (`own`, `is_own`), which `human` trains
    already; then the lower seed); a (task, arm) with no replayed trial is left out."""
    own = own or {}
    out: list[dict[str, Any]] = []
    for task in spec.tasks:
        for method in (m for m in spec.methods if m in SEARCH_METHODS):
            scored = [(success[t.id], not own.get(t.id, False), -t.seed, t.id) for t in spec.trials()
                      if t.task == task and t.method == method and t.id in success]
            if scored:
                value, *_, trial = max(scored)
                out.append({"task": task, "method": method, "trial": trial, "success": value})
    return out


def plan(grid: Path, replay: Path, episodes: int, seed: int, tasks: Sequence[str] = ()) -> dict[str, Any]:
    """The retrain plan: the grid (as given: the plan is committed, so no machine's path), its options a learner
    alone reads, the fresh seeds, and per (task, arm) the reward to retrain (the grid's tasks, or `tasks`)."""
    layout = SweepLayout.open(grid.resolve())
    spec = SweepSpec.load(layout.spec)
    unknown = sorted(set(tasks) - set(spec.tasks))
    if unknown:
        raise SystemExit(f"{grid}: no task {', '.join(unknown)} in its sweep ({', '.join(spec.tasks)})")
    if tasks:
        spec = dataclasses.replace(spec, tasks=tuple(tasks))
    kept = [row for row in _replay_module().read_kept(replay)
            if (int(row["episodes"]), int(row["seed"])) == (episodes, seed)]
    success = {row["trial"]: float(row["success"]) for row in kept}
    trials = {t.id: t for t in spec.trials() if t.method in SEARCH_METHODS and t.id in success}
    found = {k: from_run(str(layout.run(k))) for k in trials}
    own = {k: is_own(found[k], trials[k].task) for k in trials}
    entries = best_seeds(spec, success, own)
    for entry in entries:
        reward = found[entry["trial"]]
        entry.update(reward_id=reward.reward_id, components=dict(reward.components), own_reward=own[entry["trial"]])
    return {"grid": str(grid), "preset": spec.preset, "options": alone_options(spec),
            "episodes": episodes, "replay_seed": seed, "seeds": fresh_seeds(spec), "rewards": entries}


def is_own(found: FoundReward, task: str) -> bool:
    """Whether a handed-over reward is the task's own: its learner, or a candidate with its `reward_key` (an LLM
    answer that restated it), which `human` trains already."""
    if found.is_human:
        return True
    spec = get_task(task)
    own = dict(spec.human_components or ())
    return bool(own) and record_key({"components": dict(found.components)}, spec) == record_key({"components": own},
                                                                                                spec)


def fresh_seeds(spec: SweepSpec) -> list[int]:
    """Seeds the grid did not use: the `FRESH` after its highest."""
    return list(range(max(spec.seeds) + 1, max(spec.seeds) + 1 + FRESH))


def alone_options(spec: SweepSpec) -> dict[str, Any]:
    """The grid's options a learner trained alone reads (a sweep refuses an option no trial reads)."""
    options = {k: v for k, v in spec.options.items() if k not in _SEARCH_SHAPE}
    cfg = preset_config(spec.preset, {**options, "task": spec.tasks[0], "setting": "baseline", "population": 1,
                                      "elites": 1})
    ignored = ignored_options(cfg)
    return {k: v for k, v in options.items() if k not in ignored}


def sweep_args(entry: Mapping[str, Any] | None, retrain_plan: Mapping[str, Any], folder: Path) -> list[str]:
    """`lares sweep` arguments that retrain one entry's reward in `folder` (or continue it there); entry None: the
    task's own reward on every task of the plan (`HUMAN`)."""
    if SweepLayout(folder).is_sweep():
        return ["sweep", "--resume", str(folder)]
    sets = [f"{k}={v}" for k, v in retrain_plan["options"].items()]
    if entry is None:
        tasks, method = list(dict.fromkeys(e["task"] for e in retrain_plan["rewards"])), "human"
    else:
        tasks, method = [entry["task"]], "retrain"
        sets.append(f"reward_from={Path(retrain_plan['grid']) / 'runs' / entry['trial']}")
    return ["sweep", "--tasks", ",".join(tasks), "--seeds", ",".join(str(s) for s in retrain_plan["seeds"]),
            "--methods", method, "--preset", retrain_plan["preset"], *(x for s in sets for x in ("--set", s)),
            "--out", str(folder)]


def folder_of(out: Path, entry: Mapping[str, Any]) -> Path:
    return out / f"{entry['task']}-{entry['method']}"


def run(retrain_plan: Mapping[str, Any], out: Path, cpus: int, port: int = 6390) -> int:
    """Every entry's sweep at once on one local Ray cluster of `cpus` CPUs (Ray queues the trials). The cluster is
    a `ray start --block` this function owns: terminating it stops that cluster's processes only (`ray stop`
    would stop every Ray process of the machine, a grid running beside it included)."""
    lares = shutil.which("lares") or str(Path(sys.executable).with_name("lares"))
    ray = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    out.mkdir(parents=True, exist_ok=True)
    address = f"127.0.0.1:{port}"
    env = cluster_env()
    temp = tempfile.mkdtemp(prefix="ray-")
    head = subprocess.Popen(ray_head(ray, port, cpus, temp), stdout=(out / "ray-head.log").open("a", encoding="utf-8"),
                            stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for_cluster(ray, address, head, env)
        procs = []
        jobs = [(folder_of(out, e), e) for e in retrain_plan["rewards"] if not e["own_reward"]]
        human = [(out / HUMAN, None)] if retrain_plan["rewards"] else []
        for folder, entry in [*human, *jobs]:
            log = (out / f"{folder.name}.log").open("a", encoding="utf-8")
            procs.append(subprocess.Popen([lares, *sweep_args(entry, retrain_plan, folder), "--ray-address",
                                           address], stdout=log, stderr=subprocess.STDOUT, env=env))
        return max((p.wait() for p in procs), default=0)
    finally:
        head.terminate()  # SIGTERM: the blocked `ray start` shuts its own node down
        head.wait(timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def cluster_env() -> dict[str, str]:
    """The environment of one cluster's processes (its head, and every client and trial of it): token
    authentication with a token made here for this cluster, passed by environment (Ray reads `RAY_AUTH_TOKEN`
    before any file). Ray's default token file lives in the home folder, which a new machine lacks (`ray start`
    then exits), and the head listens on every interface, so no authentication is not an option."""
    return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def ray_head(ray: str, port: int, cpus: int, temp: str) -> list[str]:
    """`ray start` of a head this process owns. Its own temp folder (short: Ray's socket paths live in it) keeps
    its address out of the machine's /tmp/ray/ray_current_cluster, which a later `ray.init()` without an address
    would try to join."""
    return [ray, "start", "--head", "--block", f"--port={port}", f"--num-cpus={cpus}", "--include-dashboard=false",
            f"--temp-dir={temp}"]


def _wait_for_cluster(ray: str, address: str, head: subprocess.Popen[bytes], env: Mapping[str, str],
                      timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while subprocess.run([ray, "status", f"--address={address}"], capture_output=True, env=env).returncode != 0:
        if head.poll() is not None:
            raise RuntimeError(f"ray start exited ({head.returncode}): see ray-head.log")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no Ray cluster at {address} after {timeout_s:.0f} s")
        time.sleep(2)


def seed_of(trial: str) -> int:
    """A sweep trial id's seed (``<task>-<method>-s<seed>``)."""
    return int(trial.rsplit("-s", 1)[1])


def area(folder: Path, trial: str) -> float | None:
    """The area of a finished trial's success curve over its periodic evaluations (the grids' area: the lead a
    found reward had in its population may be in learning sooner, not in the last success); None without records."""
    curve = read_trial(SweepLayout(folder).run(trial), "", "", 0)
    return success_auc(curve.steps, curve.success) if curve is not None and curve.finished and curve.steps else None


def areas_shown(values: Mapping[int, float | None], seeds: Sequence[int]) -> str:
    """Each seed's area in the plan's order ("-" where none) and their mean over the seeds that have one."""
    have = [v for s in seeds if (v := values.get(s)) is not None]
    each = ", ".join("-" if values.get(s) is None else f"{values[s]:.3f}" for s in seeds)
    return f"{each} ({np.mean(have):.3f})" if have else "-"


def table(retrain_plan: Mapping[str, Any], out: Path, csv_path: Path | None) -> str:
    """Each found reward: the source run's replayed success and interval beside its fresh seeds' (replayed on
    the same episodes), whether they reproduce it, and the areas of their success curves beside the task's own
    reward's on the same seeds."""
    replay = _replay_module()
    episodes, seed = int(retrain_plan["episodes"]), int(retrain_plan["replay_seed"])
    lines = replay.read_kept(csv_path)
    kept = {row["trial"]: float(row["success"]) for row in lines
            if (int(row["episodes"]), int(row["seed"])) == (episodes, seed)}
    rows: list[tuple[str, str, str, float]] = []
    areas: dict[tuple[str, str], dict[int, float | None]] = {}  # (sweep folder, task): each seed's area

    def replayed(folder: Path) -> list[tuple[str, str, str, float]]:
        prefix = f"{folder.name}/"
        mine = {k[len(prefix):]: v for k, v in kept.items() if k.startswith(prefix)}
        done = replay.rows_of(folder, episodes, seed, mine) if SweepLayout(folder).is_sweep() else []
        rows.extend((t, m, prefix + trial, s) for t, m, trial, s in done)
        for task, _, trial, _ in done:
            areas.setdefault((folder.name, task), {})[seed_of(trial)] = area(folder, trial)
        return done

    def by_seed(done: Sequence[tuple[str, str, str, float]]) -> dict[int, float]:
        return {seed_of(trial): success for *_, trial, success in done}

    def shown_by_seed(values: Mapping[int, float]) -> str:  # the plan's seeds in order, "-" where none yet
        return ", ".join(f"{values[s]:.0%}" if s in values else "-" for s in retrain_plan["seeds"]) if values else "-"

    own: dict[str, dict[int, float]] = {}
    own_area: dict[str, dict[int, float | None]] = {}
    for folder in sorted(out.glob(f"{HUMAN}*")):
        for done in replayed(folder):
            own.setdefault(done[0], {}).update(by_seed([done]))
            own_area.setdefault(done[0], {}).update(areas[(folder.name, done[0])])
    rng = np.random.default_rng(0)
    md = ["| task | arm | source trial (its reward) | source success [95% interval] | fresh seeds | mean "
          "[bootstrap 95%] | reproduced | the task's own reward, same seeds | area, each seed (mean) | the task's "
          "own reward's area |", "|---|---|---|---|---|---|---|---|---|---|"]
    for entry in retrain_plan["rewards"]:
        task_areas = own_area.get(entry["task"], {})
        if entry["own_reward"]:
            fresh_seeds, fresh_areas = own.get(entry["task"], {}), task_areas
        else:
            fresh_seeds = by_seed(replayed(folder_of(out, entry)))
            fresh_areas = areas.get((folder_of(out, entry).name, entry["task"]), {})
        values = list(fresh_seeds.values())
        lo, hi = wilson(entry["success"] * episodes, episodes)
        reward = "the task's own" if entry["own_reward"] else entry["reward_id"]
        if values:
            mean = float(np.mean(values))
            blo, bhi = bootstrap_interval(values, rng)
            verdict = "yes" if reproduced(values, entry["success"], episodes) else "no"
            if len(values) < len(retrain_plan["seeds"]):
                verdict += f" so far ({len(values)} of {len(retrain_plan['seeds'])} seeds)"
            shown = f"{mean:.0%} [{blo:.0%}, {bhi:.0%}]"
        else:
            verdict, shown = "not run", "-"
        md.append(f"| {entry['task']} | {entry['method']} | {entry['trial']} ({reward}) | {entry['success']:.0%} "
                  f"[{lo:.0%}, {hi:.0%}] | {shown_by_seed(fresh_seeds)} | {shown} | {verdict} | "
                  f"{shown_by_seed(own.get(entry['task'], {}))} | {areas_shown(fresh_areas, retrain_plan['seeds'])} | "
                  f"{areas_shown(task_areas, retrain_plan['seeds'])} |")
    if csv_path is not None:
        replay.write_kept(csv_path, lines, rows, episodes, seed)
    return "\n".join(md) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("plan", help="pick each (task, arm)'s best seed and its reward")
    p.add_argument("grid", type=Path)
    p.add_argument("--replay", type=Path, required=True, help="final_policies.py --csv of the grid")
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=2000, help="the replay's resets (as final_policies.py)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tasks", default="", help="comma-separated: only these of the grid's tasks")
    r = sub.add_parser("run", help="the retrain sweeps, on one local Ray cluster")
    r.add_argument("plan", type=Path)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--cpus", type=int, default=len(os.sched_getaffinity(0)))
    t = sub.add_parser("table", help="replay the retrained policies and compare")
    t.add_argument("plan", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--csv", type=Path, help="per-trial numbers: read (not replayed again) and rewritten")
    args = parser.parse_args(argv)
    if args.step == "plan":
        made = plan(args.grid, args.replay, args.episodes, args.seed, [t for t in args.tasks.split(",") if t])
        atomic_write_text(args.out, json.dumps(made, indent=2) + "\n")
        for e in made["rewards"]:
            print(f"{e['task']} {e['method']}: {e['trial']} ({e['success']:.0%}), reward {e['reward_id']}")
        return 0
    loaded = json.loads(args.plan.read_text(encoding="utf-8"))
    if args.step == "run":
        return run(loaded, args.out, args.cpus)
    print(table(loaded, args.out, args.csv), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
