"""`lares report --sweep DIR`: the comparison of a sweep's methods per task, as Markdown, CSV and a figure.

Read from the trials' run folders (the record), never from Ray Tune's tables. Per task and method, over the
finished seeds: final success (mean, std, 95% bootstrap interval), env steps to 50% and 90% success, area under
the success curve per env step, the task's own return, wall time split into learning, simulation and waiting
for the LLM where the run's `run_end` event has the split (`learn_s`, `sim_s`, `llm_wait_s`; "n/a" otherwise),
and LLM tokens. "Success" is that of the policy the run ranks first at each evaluation (what it hands over;
docs/lares-reference.md §12 item 16), the human and sparse baselines' only learner. Below the table: LaRes
against each other method with the seeds' noise (`report/sweep_compare.py`), the handed-over policy beside the
population's best learner, the paper's number (`report/sweep_protocols.py`, with the replays of ``--replay``),
how far a partial sweep is, which commit each trial ran in each session (its `run_start` events), and, where the
sweep folder holds an experiment's
``targets.json``, those targets counted and where the search fell short of them (`report/sweep_why.py`). Another
sweep's trials on the same tasks may join (`--with-sweep`).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.errors import LaresError
from lares_agent.report.sweep_compare import Target, comparison_markdown, comparisons, load_targets
from lares_agent.report.sweep_protocols import protocols_markdown, read_replay
from lares_agent.report.sweep_stats import bootstrap_interval, mean_std, steps_to_threshold, success_auc
from lares_agent.report.sweep_why import why_markdown
from lares_agent.runs import (
    Event,
    MetricRow,
    RunLayout,
    RunLog,
    atomic_write_text,
    read_marked_config,
    recorded_outcome,
    spent_wall_s,
)
from lares_agent.runs.provenance import short_revision
from lares_agent.runs.sweep_layout import SweepLayout

__all__ = ["SPLIT_KEYS", "TrialCurve", "code_markdown", "progress_markdown", "read_sweep", "success_figure",
           "summarise", "write_sweep_report"]

SPLIT_KEYS = ("learn_s", "sim_s", "llm_wait_s")  # run_end fields of the wall-time split, where a run has them
TABLE_MD, TABLE_CSV, FIGURE = "table.md", "table.csv", "success.png"


@dataclass(frozen=True)
class TrialCurve:
    """One trial's run, reduced to what the table needs."""

    task: str
    method: str
    seed: int
    finished: bool
    steps: tuple[int, ...]
    success: tuple[float, ...]
    task_return: float  # the ranked slot's at the last evaluation (NaN: none)
    wall_s: float
    split: dict[str, float]  # SPLIT_KEYS present in the last run_end
    llm_tokens: int
    run: Path  # the trial's run folder
    code: tuple[str, ...] = ()  # each session's commit (its run_start's source), in order, repeats dropped
    budget: int | None = None  # the run's env-step budget (config.json)
    best: tuple[float, ...] = ()  # each evaluation's best learner's success (the paper's number), as ``success``
    replay: float | None = None  # the handed-over policy's success on fresh episodes (``--replay``), if given


def _ranked(row: MetricRow) -> tuple[float, float]:
    """(success, task return) of the slot the row ranks first (its only slot in a baseline)."""
    slot = next((s for s in row.slots if s.slot == row.best_slot), row.slots[0] if row.slots else None)
    success = row.success_best_slot if row.success_best_slot is not None else (slot.success if slot else math.nan)
    return float(success), float(slot.task_return) if slot else math.nan


def _population_best(row: MetricRow) -> float:
    """The best success of any learner the row evaluated: every slot and each learner of a slot that has more
    than one, the with-init human-reward learner (``extra``, which ``success_max`` leaves out) and the ranked one
    (NaN: none). The paper reports this max."""
    extra = row.extra.get("success") if row.extra is not None else None
    values = [row.success_max, row.success_best_slot, extra, *(s.success for s in row.slots),
              *(v for s in row.slots for v in s.learner_success or ())]
    finite = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return max(finite) if finite else math.nan


def _budget(run: RunLayout) -> int | None:
    try:
        budget = read_marked_config(run).get("budget")
    except LaresError:
        return None
    return int(budget) if isinstance(budget, (int, float)) else None


def _tokens(log: RunLog, ends: Sequence[Event]) -> int:
    """The LLM tokens of every call; a trial restored from its archive has no llm_calls.jsonl (the prompts are
    not archived), so there each session's run_end usage counts (the same sum: live_run.py logs the client's)."""
    if log.layout.llm_calls.is_file():
        return sum(c.prompt_tokens + c.completion_tokens for c in log.llm_calls.read())
    usage = [e.get("llm") for e in ends]
    return sum(int(u.get("total_tokens", 0) or 0) for u in usage if isinstance(u, dict))


def read_trial(path: Path, task: str, method: str, seed: int) -> TrialCurve | None:
    """None when the trial never started (no run folder)."""
    run = RunLayout(path)
    if not run.config.is_file():
        return None
    log = RunLog(run)
    by_step: dict[int, MetricRow] = {}
    for row in log.metrics.read():
        by_step[row.env_steps] = row  # a row repeated after a resume: the later one
    rows = [by_step[s] for s in sorted(by_step)]
    ranked = [_ranked(r) for r in rows]
    done = recorded_outcome(log)
    events = list(log.events.read())
    ends = [e for e in events if e.event == "run_end"]
    code = tuple(dict.fromkeys(short_revision(e.get("source")) for e in events if e.event == "run_start"))
    # Each session's run_end holds that session's split: a resumed trial's is their sum.
    split = {k: sum(float(e.get(k)) for e in ends if e.get(k) is not None) for k in SPLIT_KEYS
             if any(e.get(k) is not None for e in ends)}
    tokens = _tokens(log, ends)
    return TrialCurve(task, method, seed, done.finished, tuple(r.env_steps for r in rows),
                      tuple(s for s, _ in ranked), ranked[-1][1] if ranked else math.nan,
                      done.wall_s if done.finished else spent_wall_s(log), split, tokens, path, code,
                      _budget(run), tuple(_population_best(r) for r in rows))


def read_sweep(root: Path, also: Sequence[Path] = ()) -> tuple[SweepLayout, list[TrialCurve], list[str]]:
    """The sweep's trials, then those of the ``also`` sweeps on this sweep's tasks that it does not have itself
    (the main grid's LaRes trials beside an ablation sweep, run once for both); and the ids of the trials of
    either that have not started."""
    from lares_agent.search.sweep_spec import SweepSpec

    layout = SweepLayout.open(root)
    spec = SweepSpec.load(layout.spec)
    trials = [(layout, t) for t in spec.trials()]
    for other in also:
        other_layout = SweepLayout.open(other)
        have = {(t.task, t.method, t.seed) for _, t in trials}
        trials += [(other_layout, t) for t in SweepSpec.load(other_layout.spec).trials()
                   if t.task in spec.tasks and (t.task, t.method, t.seed) not in have]
    curves = [(t.id, read_trial(where.run(t.id), t.task, t.method, t.seed)) for where, t in trials]
    return layout, [c for _, c in curves if c is not None], [i for i, c in curves if c is None]


def progress_markdown(curves: Sequence[TrialCurve], not_started: Sequence[str]) -> str:
    """How far the sweep is: trials finished, those started and not finished (their env steps), not started."""
    total = len(curves) + len(not_started)
    going = [f"{c.run.name} ({c.steps[-1] if c.steps else 0:,} of {_fmt(c.budget, 'int')} steps)"
             for c in curves if not c.finished]
    done = sum(c.finished for c in curves)
    if done == total:
        return ""
    lines = ["", "## Progress", "", f"{done} of {total} trials finished."]
    if going:
        lines.append(f"Started, not finished: {', '.join(going)}.")
    if not_started:
        lines.append(f"Not started: {len(not_started)}.")
    return "\n".join(lines) + "\n"


def _fmt(value: Any, kind: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if kind == "%":
        return f"{value:.0%}"
    if kind == "int":
        return f"{round(value):,}"
    if kind == "share":
        return f"{value:.3f}"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def summarise(curves: Sequence[TrialCurve], rng: np.random.Generator) -> list[dict[str, Any]]:
    """One row per (task, method) over its finished trials (in the grid's order)."""
    out: list[dict[str, Any]] = []
    groups = list(dict.fromkeys((c.task, c.method) for c in curves))
    for task, method in groups:
        every = [c for c in curves if c.task == task and c.method == method]
        done = [c for c in every if c.finished and c.steps]
        final = [c.success[-1] for c in done]
        low, high = bootstrap_interval(final, rng)
        mean, std = mean_std(final)
        row: dict[str, Any] = {"task": task, "method": method, "runs": f"{len(done)}/{len(every)}",
                               "final_success_mean": mean, "final_success_std": std,
                               "final_success_ci_low": low, "final_success_ci_high": high}
        for level in (0.5, 0.9):
            reached = [s for s in (steps_to_threshold(c.steps, c.success, level) for c in done) if s is not None]
            name = f"steps_to_{round(level * 100)}"
            row[f"{name}_mean"] = float(np.mean(reached)) if reached else None
            row[f"{name}_reached"] = f"{len(reached)}/{len(done)}"
        row["auc_mean"], row["auc_std"] = mean_std([success_auc(c.steps, c.success) for c in done])
        row["replay_success_mean"] = mean_std([c.replay for c in done if c.replay is not None])[0]
        row["best_final_success_mean"] = mean_std([(c.best or c.success)[-1] for c in done])[0]
        row["best_auc_mean"] = mean_std([success_auc(c.steps, c.best or c.success) for c in done])[0]
        row["task_return_mean"] = mean_std([c.task_return for c in done])[0]
        row["wall_s_mean"] = mean_std([c.wall_s for c in done])[0]
        for key in SPLIT_KEYS:
            have = [c.split[key] for c in done if key in c.split]
            row[f"{key}_mean"] = mean_std(have)[0] if have and len(have) == len(done) else None
        row["llm_tokens_mean"] = mean_std([float(c.llm_tokens) for c in done])[0]
        out.append(row)
    return out


def to_markdown(rows: Sequence[dict[str, Any]]) -> str:
    head = ["task", "method", "runs", "final success", "95% CI", "steps to 50%", "steps to 90%", "AUC",
            "task return", "wall s", "learn s", "sim s", "LLM wait s", "LLM tokens"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            r["task"], r["method"], r["runs"],
            f"{_fmt(r['final_success_mean'], '%')} ± {_fmt(r['final_success_std'], '%')}",
            f"[{_fmt(r['final_success_ci_low'], '%')}, {_fmt(r['final_success_ci_high'], '%')}]",
            f"{_fmt(r['steps_to_50_mean'], 'int')} ({r['steps_to_50_reached']})",
            f"{_fmt(r['steps_to_90_mean'], 'int')} ({r['steps_to_90_reached']})",
            f"{_fmt(r['auc_mean'], 'share')} ± {_fmt(r['auc_std'], 'share')}",
            _fmt(r["task_return_mean"]), _fmt(r["wall_s_mean"], "int"),
            *(_fmt(r[f"{k}_mean"], "int") for k in SPLIT_KEYS), _fmt(r["llm_tokens_mean"], "int"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def code_markdown(curves: Sequence[TrialCurve]) -> str:
    """Which code each trial ran (every session's commit, from its run_start events), grouped by commit list."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for c in curves:
        groups.setdefault(c.code or ("unknown",), []).append(c.run.name)
    if not groups:
        return ""
    lines = ["", "## Which code ran", ""]
    for code, names in groups.items():
        label = " then ".join(f"`{c}`" for c in code) + (" (resumed on other code)" if len(code) > 1 else "")
        lines.append(f"- {label}: {', '.join(names)}")
    return "\n".join(lines) + "\n"


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return ""
    sink = io.StringIO()
    writer = csv.DictWriter(sink, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
    return sink.getvalue()


def _aligned(runs: Sequence[TrialCurve]) -> tuple[np.ndarray, np.ndarray]:
    """The runs' success on the union of their evaluation steps, each run at its newest evaluation at or before a
    step, from the step every run has an evaluation to the step the first run ended. Seeds evaluate at other steps
    (whole episodes, updates at iteration boundaries), so the steps all of them share were few and stopped early:
    the figure once ended door-close-v3's LaRes curve at 38k of 50k steps."""
    steps = [np.asarray(c.steps, dtype=np.int64) for c in runs]  # ascending: read_trial sorts them
    start, end = max(int(s[0]) for s in steps), min(int(s[-1]) for s in steps)
    grid = np.unique(np.concatenate(steps))
    grid = grid[(grid >= start) & (grid <= end)]
    values = np.array([np.asarray(c.success, dtype=np.float64)[np.searchsorted(s, grid, side="right") - 1]
                       for c, s in zip(runs, steps, strict=True)])
    return grid, values


def success_figure(curves: Sequence[TrialCurve]) -> Any:
    """The matplotlib Figure of `plot_sweep` (None without a finished trial). A method keeps its colour in every
    panel and each panel has its own legend (its seed counts differ from task to task)."""
    from matplotlib.figure import Figure

    done = [c for c in curves if c.finished and c.steps]
    tasks = list(dict.fromkeys(c.task for c in done))
    if not tasks:
        return None
    colour = {m: f"C{k}" for k, m in enumerate(dict.fromkeys(c.method for c in done))}
    fig = Figure(figsize=(4.0 * len(tasks), 3.4), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(tasks), squeeze=False)[0]
    for ax, task in zip(axes, tasks, strict=True):
        for method in dict.fromkeys(c.method for c in done if c.task == task):
            runs = [c for c in done if c.task == task and c.method == method]
            grid, values = _aligned(runs)
            if not grid.size:
                continue
            mean, std = values.mean(axis=0), values.std(axis=0)
            ax.plot(grid, mean, color=colour[method], label=f"{method} (n={len(runs)})")
            ax.fill_between(grid, np.clip(mean - std, 0, 1), np.clip(mean + std, 0, 1), color=colour[method],
                            alpha=0.2)
        ax.set_title(task)
        ax.set_xlabel("env steps")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=7, frameon=False)
    axes[0].set_ylabel("success (ranked policy)")
    return fig


def plot_sweep(curves: Sequence[TrialCurve], path: Path) -> Path | None:
    """Success vs env steps per task: each method's mean over its finished seeds, with a band of ± one std
    (each seed at its newest evaluation: `_aligned`)."""
    fig = success_figure(curves)
    if fig is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png")
    os.replace(tmp, path)
    return path


def write_sweep_report(root: Path, seed: int = 0, also: Sequence[Path] = (),
                       targets: Sequence[Target] | None = None, replay: Path | None = None) -> list[Path]:
    """DIR/report/table.md (the table and its sections), table.csv and success.png, with the trials of the
    ``also`` sweeps on DIR's tasks; returns the paths written. ``targets`` None: DIR/targets.json's, if any.
    ``replay``: a final_policies.py file of the handed-over policies' success on fresh episodes, by trial id."""
    layout, curves, not_started = read_sweep(root, also)
    replays = read_replay(replay) if replay is not None else {}
    curves = [replace(c, replay=replays[c.run.name][1]) if c.run.name in replays else c for c in curves]
    episodes = sorted({replays[c.run.name][0] for c in curves if c.run.name in replays})
    if targets is None:
        targets = load_targets(layout.targets)
    rows = summarise(curves, np.random.default_rng(seed))
    layout.report.mkdir(parents=True, exist_ok=True)
    from lares_agent.search.sweep_spec import SEARCH_METHODS

    searches = [m for m in dict.fromkeys(c.method for c in curves) if m in SEARCH_METHODS]
    searched: dict[tuple[str, str], list[Path]] = {}
    for c in curves:
        if c.method in searches:
            searched.setdefault((c.task, c.method), []).append(c.run)
    written = []
    rng = np.random.default_rng([seed, 1])
    versus = "".join(comparison_markdown(comparisons(curves, rng, m), m, targets) for m in searches)
    both = protocols_markdown(curves, np.random.default_rng([seed, 2]), searches, episodes=episodes)
    sections = (versus, both, progress_markdown(curves, not_started), code_markdown(curves),
                why_markdown(rows, searched, targets))
    table = to_markdown(rows) + "".join(sections)
    for name, text in ((TABLE_MD, table), (TABLE_CSV, to_csv(rows))):
        atomic_write_text(layout.report / name, text)
        written.append(layout.report / name)
    figure = plot_sweep(curves, layout.report / FIGURE)
    return [*written, *([figure] if figure else [])]
