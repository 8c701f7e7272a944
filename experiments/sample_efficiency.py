"""Sample efficiency: LaRes reward search vs SAC on the human reward, at the same env-step budget (issue 7).

For every (task, seed) it runs two sides with identical engine settings (networks, batch, UTD, warm-up,
evaluation schedule and episodes, horizon): `lares` (from-scratch reward search with the local model) and
`baseline` (one SAC learner on the task's own reward, `setting="baseline"`). Optional ablations of LaRes run
on one task (`--ablation-task`, default the first). Each run gets its own deterministic folder under `--out`;
a finished run (its events.jsonl has `run_end` with `finished: true`) is skipped and an unfinished one is
resumed, so the experiment can be spread over several sittings. Each run executes in a fresh process (the
1.5B model and MuJoCo are freed between runs).

Then it reads every run folder and writes
- `results.csv`: one row per run (final success of the population best and of the selected policy, env steps
  to first reach 50% / 90% success, wall time, learner updates, LLM calls and tokens);
- `summary.csv`: per task and side, mean and standard deviation over seeds;
- `sample_efficiency.png`: success vs env steps, mean +- std over seeds, LaRes vs baseline per task.
- `ablations.png`: the same curves for the ablations, beside full LaRes on the same task and seeds.

"Population best" is the highest success among the learners at an evaluation (the reference's number,
docs/lares-reference.md §12 item 16); "selected" is the learner the last reward update ranked first, i.e. the
policy LaRes would hand over without looking at the evaluation it is scored on. For the baseline both are
its one learner. Retrieval reads a case store private to `--out` (`LARES_HOME=<out>/home`), so results do
not depend on the machine's earlier runs; later runs of the experiment do see earlier runs' cases.

    python experiments/sample_efficiency.py                       # 3 tasks x 3 seeds x 2 sides, 10k steps each
    python experiments/sample_efficiency.py --only lares --cpus 1 --seeds "" --ablations all --ablation-seeds 0
    python experiments/sample_efficiency.py --aggregate-only      # rebuild results.csv, summary.csv, the plot

Measured numbers and the exact setup are in docs/RESULTS.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.runs import atomic_write_text, read_jsonl
from lares_agent.search.config import ABLATIONS, SearchConfig, preset_config

# The reference's from-scratch MetaWorld set (docs/lares-reference.md §10) that this project's task list covers.
DEFAULT_TASKS = ("window-close-v3", "button-press-v3", "drawer-open-v3")
SIDES = ("baseline", "lares")
BENCH_FILE = "sample_efficiency.json"  # wall time of every sitting, written by this script


@dataclass(frozen=True)
class RunSpec:
    """One run of the experiment: its folder name is a pure function of these fields."""

    task: str
    seed: int
    side: str  # "baseline", "lares" or "lares-<ablation>"

    @property
    def run_id(self) -> str:
        return f"{self.task}-{self.side}-s{self.seed}"

    @property
    def ablation(self) -> str | None:
        return self.side.removeprefix("lares-") if self.side.startswith("lares-") else None


def make_config(args: argparse.Namespace, spec: RunSpec) -> SearchConfig:
    """The demo preset (what `lares run` uses) with the options given; the same engine settings for every
    side, only the setting and the ablation differ."""
    return preset_config(
        "demo",
        task=spec.task,
        setting="baseline" if spec.side == "baseline" else "scratch",
        population=args.population,
        elites=args.elites,
        budget=args.budget,
        reward_period=args.reward_period,
        warmup_steps=args.warmup,
        eval_every=args.eval_every,
        eval_episodes=args.eval_episodes,
        checkpoint_every=args.reward_period,
        hidden=tuple(args.hidden) if args.hidden else None,
        utd=args.utd,
        seed=spec.seed,
        llm_model=args.model,
        max_minutes=args.max_minutes,
        ablations=(spec.ablation,) if spec.ablation else (),
    )


def run_state(path: Path) -> str:
    """'new' (no config yet), 'finished' (a run_end event says so) or 'unfinished'."""
    if not (path / "config.json").is_file():
        return "new"
    ends = [e for e in read_jsonl(path / "events.jsonl") if e.get("event") == "run_end"]
    return "finished" if any(e.get("finished") for e in ends) else "unfinished"


def _execute(cfg_json: dict[str, Any], out: str, run_id: str, threads: int, cpus: int | None) -> None:
    """Child process: start or resume one run, and append this sitting's wall time to its bench file."""
    import torch

    from lares_agent.search.runner import resume_run, start_run

    if cpus is not None and hasattr(os, "sched_setaffinity"):
        # llama.cpp takes one thread per core it may use; on a machine shared with other llama processes its
        # spinning threads stall each other (calls hit the client's 120 s timeout), one thread does not.
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:cpus]))
    torch.set_num_threads(threads)
    os.environ["LARES_HOME"] = str(Path(out) / "home")  # the experiment's own case store (retrieval)
    path = Path(out) / run_id
    start = time.monotonic()
    if run_state(path) == "new":
        outcome = start_run(SearchConfig.from_json(cfg_json), Path(out), run_id=run_id)
    else:
        outcome = resume_run(path)
    bench = path / BENCH_FILE
    sittings = json.loads(bench.read_text()) if bench.is_file() else []
    sittings.append({"wall_s": time.monotonic() - start, "finished": outcome.finished, "env_steps": outcome.env_steps})
    atomic_write_text(bench, json.dumps(sittings, indent=1))


def execute(args: argparse.Namespace, spec: RunSpec) -> str:
    """Run (or resume, or skip) one run in a fresh process; returns what happened."""
    path = args.out / spec.run_id
    state = run_state(path)
    if state == "finished":
        return "skipped (finished)"
    if state == "new" and path.exists() and any(path.iterdir()):
        return f"skipped: {path} holds files but no config.json; move it away to rerun"
    cfg = make_config(args, spec)
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_execute, args=(cfg.to_json(), str(args.out), spec.run_id, args.threads, args.cpus))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        return f"failed (exit code {proc.exitcode}); rerun to resume"
    return f"{'resumed' if state == 'unfinished' else 'ran'} -> {run_state(path)}"


# ------------------------------------------------------------------------------------------------ reading
def first_reaching(steps: Sequence[int], values: Sequence[float], level: float) -> int | None:
    """Env steps of the first evaluation at or above `level` (None: never)."""
    for s, v in zip(steps, values, strict=True):
        if v is not None and v >= level - 1e-9:
            return int(s)
    return None


def read_result(path: Path) -> dict[str, Any] | None:
    """One results.csv row (plus the curve, for the plot) from a run folder; None if it is not a run."""
    if not (path / "config.json").is_file():
        return None
    cfg = json.loads((path / "config.json").read_text())
    evals = [m for m in read_jsonl(path / "metrics.jsonl") if m.get("kind") == "eval"]
    evals.sort(key=lambda m: m["env_steps"])
    steps = [int(m["env_steps"]) for m in evals]
    best = [m.get("success_max") for m in evals]
    selected = [m.get("success_best_slot") for m in evals]
    events = read_jsonl(path / "events.jsonl")
    ends = [e for e in events if e.get("event") == "run_end"]
    bench = path / BENCH_FILE
    sittings = json.loads(bench.read_text()) if bench.is_file() else []
    wall = sum(s["wall_s"] for s in sittings) if sittings else sum(float(e.get("wall_s", 0.0)) for e in ends)
    calls = read_jsonl(path / "llm_calls.jsonl")
    env_steps = max([int(e.get("env_steps", 0)) for e in ends] + steps + [0])
    learners = 1 if cfg["setting"] == "baseline" else int(cfg["population"])
    side = "baseline" if cfg["setting"] == "baseline" else "-".join(["lares", *cfg.get("ablations", [])])
    return {
        "task": cfg["task"],
        "side": side,
        "seed": int(cfg["seed"]),
        "finished": any(e.get("finished") for e in ends),
        "env_steps": env_steps,
        "final_success_best": best[-1] if best else None,
        "final_success_selected": selected[-1] if selected else None,
        "max_success_best": max((b for b in best if b is not None), default=None),
        # Secondary measures where success stays at 0: the task's own return (human reward, higher is better)
        # and the progress feature at the episode's end (e.g. obj_to_target, lower is better).
        "final_return_best": _slot_pick(evals, "task_return", max),
        "final_return_selected": _slot_pick(evals, "task_return", None),
        "final_progress_best": _slot_pick(evals, "final_progress", min),
        "final_progress_selected": _slot_pick(evals, "final_progress", None),
        "steps_to_50_best": first_reaching(steps, best, 0.5),
        "steps_to_90_best": first_reaching(steps, best, 0.9),
        "steps_to_50_selected": first_reaching(steps, selected, 0.5),
        "steps_to_90_selected": first_reaching(steps, selected, 0.9),
        "wall_s": round(wall, 1),
        "sittings": len(sittings),
        # Every iteration runs round(utd * steps) population updates, each one SAC step for every learner.
        "learner_updates": round(float(cfg["utd"]) * env_steps) * learners,
        "learners": learners,
        "reward_updates": sum(1 for e in events if e.get("event") == "reward_update"),
        "fallback_rewards": sum(1 for e in events if e.get("event") == "fallback"),
        "llm_calls": len(calls),
        "llm_failed_calls": sum(1 for c in calls if c.get("ok") is False),  # timeouts and errors
        "llm_tokens": sum(int(c.get("prompt_tokens") or 0) + int(c.get("completion_tokens") or 0) for c in calls),
        "llm_seconds": round(sum(float(c.get("seconds") or 0.0) for c in calls), 1),
        "run": path.name,
        "_curve": (steps, best, selected, [_slot_value(m, "task_return", max) for m in evals],
                   [_slot_value(m, "task_return", None) for m in evals]),
    }


def _slot_value(record: dict[str, Any], key: str, pick: Any) -> float | None:
    """`key` of one evaluation: `pick` (max/min) over the learners, or the selected slot's when None."""
    slots = [s for s in record.get("slots", []) if s.get(key) is not None]
    if pick is None:
        slots = [s for s in slots if s.get("slot") == record.get("best_slot")]
        return round(float(slots[0][key]), 4) if slots else None
    return round(float(pick(s[key] for s in slots)), 4) if slots else None


def _slot_pick(evals: Sequence[dict[str, Any]], key: str, pick: Any) -> float | None:
    """`key` at the last evaluation (see `_slot_value`)."""
    return _slot_value(evals[-1], key, pick) if evals else None


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None, None
    return float(np.mean(xs)), float(np.std(xs))


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (task, side), over its finished runs: mean and std, and how many runs reached each level."""
    out = []
    groups = sorted({(r["task"], r["side"]) for r in rows if r["finished"]})
    for task, side in groups:
        rs = [r for r in rows if r["finished"] and r["task"] == task and r["side"] == side]
        seeds = " ".join(str(r["seed"]) for r in rs)
        row: dict[str, Any] = {"task": task, "side": side, "runs": len(rs), "seeds": seeds}
        for key in ("final_success_best", "final_success_selected", "max_success_best", "final_return_best",
                    "final_return_selected", "final_progress_best", "final_progress_selected", "wall_s",
                    "learner_updates", "llm_tokens", "llm_calls", "llm_failed_calls", "fallback_rewards"):
            mean, std = _mean_std([r[key] for r in rs])
            row[f"{key}_mean"], row[f"{key}_std"] = _round(mean), _round(std)
        for key in ("steps_to_50_best", "steps_to_90_best", "steps_to_50_selected", "steps_to_90_selected"):
            reached = [r[key] for r in rs if r[key] is not None]
            row[f"{key}_reached"] = f"{len(reached)}/{len(rs)}"
            row[f"{key}_mean"] = _round(float(np.mean(reached))) if reached else None
        out.append(row)
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    fields = [k for k in rows[0] if not k.startswith("_")]
    lines: list[str] = []

    class _Sink:
        def write(self, s: str) -> None:
            lines.append(s)

    writer = csv.DictWriter(_Sink(), fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, "".join(lines))


def plot(rows: Sequence[dict[str, Any]], path: Path, eval_every: int) -> Path | None:
    """Per task: success (top row) and the task's own return (bottom row) vs env steps, mean +- std over
    seeds of each side (finished runs only). The return row shows progress while success is still 0."""
    from matplotlib.figure import Figure

    done = [r for r in rows if r["finished"] and r["_curve"][0]]
    tasks = sorted({r["task"] for r in done})
    if not tasks:
        return None
    fig = Figure(figsize=(4.2 * len(tasks) + 1.8, 6.4), dpi=100, layout="constrained")
    axes = fig.subplots(2, len(tasks), squeeze=False)
    styles = {"baseline": ("#c0392b", [1]), "lares": ("#2471a3", [1, 2])}
    for col, task in enumerate(tasks):
        sides = sorted({r["side"] for r in done if r["task"] == task}, key=lambda s: (s != "baseline", s))
        for k, side in enumerate(sides):
            rs = [r for r in done if r["task"] == task and r["side"] == side]
            color, which = styles.get(side, (f"C{k + 2}", [1]))
            for row, offset in ((0, 0), (1, 2)):
                ax = axes[row][col]
                for idx in which:
                    # An evaluation runs right after the env-step count first passes a multiple of eval_every.
                    series = [{s // eval_every * eval_every: v
                               for s, v in zip(r["_curve"][0], r["_curve"][idx + offset], strict=True)
                               if v is not None} for r in rs]
                    grid = sorted(set.intersection(*(set(s) for s in series)))
                    if not grid:
                        continue
                    vals = np.array([[s[g] for g in grid] for s in series], float)
                    mean, std = vals.mean(0), vals.std(0)
                    low, high = mean - std, mean + std
                    if row == 0:  # a success rate stays in [0, 1]
                        low, high = np.clip(low, 0, 1), np.clip(high, 0, 1)
                    name = side if side == "baseline" else f"{side} ({'best' if idx == 1 else 'selected'})"
                    ax.plot(grid, mean, color=color, ls="-" if idx == 1 else "--", label=f"{name}, n={len(rs)}")
                    ax.fill_between(grid, low, high, color=color, alpha=0.15)
        axes[0][col].set_title(task)
        axes[0][col].set_ylim(-0.03, 1.03)
        for row in (0, 1):
            axes[row][col].set_xlabel("env steps")
            axes[row][col].grid(alpha=0.3)
    axes[0][0].set_ylabel("success rate (eval episodes)")
    axes[1][0].set_ylabel("task return (human reward)")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    os.replace(tmp, path)
    return path


def aggregate(out: Path, eval_every: int) -> list[dict[str, Any]]:
    rows = [r for r in (read_result(p) for p in sorted(out.iterdir()) if p.is_dir()) if r is not None]
    rows.sort(key=lambda r: (r["task"], r["side"], r["seed"]))
    write_csv(out / "results.csv", rows)
    summary = summarise(rows)
    write_csv(out / "summary.csv", summary)
    plot([r for r in rows if r["side"] in SIDES], out / "sample_efficiency.png", eval_every)
    ablated = [r for r in rows if r["side"] not in SIDES and r["finished"]]
    if ablated:  # full LaRes on the same task and seeds beside each ablation, in a figure of their own
        task, seeds = ablated[0]["task"], {r["seed"] for r in ablated}
        full = [r for r in rows if r["task"] == task and r["side"] == "lares" and r["seed"] in seeds]
        plot(full + [r for r in ablated if r["task"] == task], out / "ablations.png", eval_every)
    return summary


# ------------------------------------------------------------------------------------------------ main
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="comma-separated MetaWorld v3 tasks")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument("--budget", type=int, default=10_000, help="counted env steps per run (warm-up excluded)")
    p.add_argument("--reward-period", type=int, default=4_000, help="env steps between reward updates")
    p.add_argument("--warmup", type=int, default=None, help="default: the demo preset's")
    p.add_argument("--eval-every", type=int, default=1_000)
    p.add_argument("--eval-episodes", type=int, default=None)
    p.add_argument("--population", type=int, default=None)
    p.add_argument("--elites", type=int, default=None)
    p.add_argument("--hidden", type=int, nargs="+", default=None)
    p.add_argument("--utd", type=float, default=None)
    p.add_argument("--model", default=None, help="GGUF model name or path (default: the embedded 1.5B)")
    p.add_argument("--out", type=Path, default=Path("runs/sample_efficiency"))
    p.add_argument("--only", choices=SIDES, default=None, help="run one side only")
    p.add_argument("--ablations", default="", help=f"comma-separated, or 'all': {', '.join(ABLATIONS)}")
    p.add_argument("--ablation-task", default=None, help="task of the ablations (default: the first task)")
    p.add_argument("--ablation-seeds", default="0")
    p.add_argument("--max-minutes", type=float, default=None, help="per run and sitting; stops resumably")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--cpus", type=int, default=None, help="pin each run to this many cores (llama.cpp threads)")
    p.add_argument("--aggregate-only", action="store_true", help="only rebuild the CSVs and the plot")
    args = p.parse_args(argv)
    args.tasks = [t for t in args.tasks.split(",") if t]
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    args.ablation_seeds = [int(s) for s in args.ablation_seeds.split(",") if s]
    names = list(ABLATIONS) if args.ablations == "all" else [a for a in args.ablations.split(",") if a]
    unknown = [a for a in names if a not in ABLATIONS]
    if unknown:
        p.error(f"unknown ablation(s) {', '.join(unknown)}; choose from {', '.join(ABLATIONS)}")
    args.ablations = names
    return args


def plan(args: argparse.Namespace) -> list[RunSpec]:
    """Task by task, seed by seed (so a partial experiment covers whole tasks), then the ablations."""
    sides = [args.only] if args.only else list(SIDES)
    specs = [RunSpec(t, s, side) for t in args.tasks for s in args.seeds for side in sides]
    task = args.ablation_task or args.tasks[0]
    specs += [RunSpec(task, s, f"lares-{a}") for a in args.ablations for s in args.ablation_seeds]
    return specs


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.aggregate_only:
        specs = plan(args)
        for i, spec in enumerate(specs, 1):
            start = time.monotonic()
            what = execute(args, spec)
            print(f"[{i}/{len(specs)}] {spec.run_id}: {what} ({time.monotonic() - start:.0f} s)", flush=True)
    summary = aggregate(args.out, args.eval_every)
    for row in summary:
        print(
            f"{row['task']:<18} {row['side']:<22} n={row['runs']} "
            f"final best {row['final_success_best_mean']} +- {row['final_success_best_std']}  "
            f"selected {row['final_success_selected_mean']} +- {row['final_success_selected_std']}  "
            f"50%: {row['steps_to_50_best_reached']} at {row['steps_to_50_best_mean']}  "
            f"90%: {row['steps_to_90_best_reached']} at {row['steps_to_90_best_mean']}  "
            f"wall {row['wall_s_mean']} s  updates {row['learner_updates_mean']}  tokens {row['llm_tokens_mean']}"
        )
    print(f"results: {args.out / 'results.csv'}, {args.out / 'summary.csv'}, {args.out / 'sample_efficiency.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
