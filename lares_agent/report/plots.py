"""The report's figures: one function per figure, each writes one PNG and returns its path (None: no data).

Figures are drawn with ``matplotlib.figure.Figure`` and saved through the Agg canvas directly, never through
``pyplot``: no global backend switch, no figure registry, so a report can be written from a notebook or a
worker thread without side effects. matplotlib itself is imported inside the functions (nothing at import).
Legends sit outside the axes so they never hide a curve.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lares_agent.report.influence import Influence, component_influence, gradient_influence
from lares_agent.report.summary import LineageCell, best_reward_id, lineage
from lares_agent.runs.reader import RunData

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_influence", "plot_lineage", "plot_llm_cost", "plot_return", "plot_success"]

_DPI = 110
_BASELINE_COLOR = "#c0392b"
_HUMAN_COLOR = "#1e8449"


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=_DPI, layout="constrained")


def _save(fig: Figure, out_dir: Path, name: str) -> Path:
    """Write the PNG atomically (temp file + os.replace): a reader never sees half an image."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    tmp = out_dir / f".{name}.tmp"
    fig.savefig(tmp, format="png", dpi=_DPI)
    os.replace(tmp, path)
    return path


def _outside_legend(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)


def _row_max(values: np.ndarray) -> np.ndarray:
    """Max over slots per evaluation, NaN where every slot is NaN (no warnings)."""
    finite = np.isfinite(values)
    out = np.where(finite, values, -np.inf).max(axis=1, initial=-np.inf)
    return np.where(finite.any(axis=1), out, np.nan)


def _row_mean(values: np.ndarray) -> np.ndarray:
    finite = np.isfinite(values)
    count = finite.sum(axis=1)
    total = np.where(finite, values, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _curves(run: RunData, out_dir: Path, baseline: RunData | None, metric: str, spec: dict[str, Any]) -> Path | None:
    """Per-learner curves of one metric, the population best and mean, update marks, optional baseline."""
    steps, values, slots = run.slot_matrix(metric)
    if not len(steps) or not np.isfinite(values).any():
        return None
    fig = _figure(9.0, 4.6)
    ax = fig.add_subplot()
    colors = [f"C{i % 10}" for i in range(len(slots))]
    for j, slot in enumerate(slots):
        ax.plot(steps, values[:, j], color=colors[j], lw=1.0, alpha=0.55, marker=".", ms=3, label=f"learner {slot}")
    h_steps, h_values = run.human_series(metric)
    kept = bool(np.isfinite(h_values).any())  # the init setting's learner on the task's own reward
    pop = "searched rewards'" if kept else "population"
    ax.plot(steps, _row_max(values), color="black", lw=2.2, label=f"{run.name}: {pop} best")
    ax.plot(steps, _row_mean(values), color="0.35", lw=1.4, ls="--", label=f"{run.name}: {pop} mean")
    if kept:
        ax.plot(h_steps, h_values, color=_HUMAN_COLOR, lw=2.2, ls="-.", label=f"{run.name}: task's own reward")
    if baseline is not None:
        b_steps, b_values, _ = baseline.slot_matrix(metric)
        if len(b_steps) and np.isfinite(b_values).any():
            ax.plot(b_steps, _row_max(b_values), color=_BASELINE_COLOR, lw=2.2, label=f"{baseline.name}: baseline best")
        else:
            ax.plot([], [], color=_BASELINE_COLOR, lw=2.2, label=f"{baseline.name}: baseline (no evaluations)")
    for i, u in enumerate(run.updates):
        ax.axvline(u.env_steps, color="0.6", lw=0.8, ls=":", label="reward update" if i == 0 else None)
    if run.budget:
        ax.set_xlim(0, max(run.budget, int(steps.max())))
    if spec.get("ylim"):
        ax.set_ylim(*spec["ylim"])
    ax.set_xlabel("env steps")
    ax.set_ylabel(spec["ylabel"])
    ax.set_title(f"{run.task}: {spec['title']}")
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
    _outside_legend(ax)
    return _save(fig, out_dir, spec["file"])


def plot_success(run: RunData, out_dir: Path, baseline: RunData | None = None) -> Path | None:
    """Success rate of every learner over env steps, with the population best and mean (and a baseline)."""
    spec = {
        "file": "success.png",
        "ylabel": "success rate (fraction of eval episodes)",
        "title": "success rate per learner",
        "ylim": (-0.03, 1.03),
    }
    return _curves(run, out_dir, baseline, "success", spec)


def plot_return(run: RunData, out_dir: Path, baseline: RunData | None = None) -> Path | None:
    """Task (human) return of every learner over env steps, with the population best and mean."""
    spec = {
        "file": "return.png",
        "ylabel": "task return (env reward per episode)",
        "title": "task return per learner",
    }
    return _curves(run, out_dir, baseline, "task_return", spec)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def plot_lineage(run: RunData, out_dir: Path) -> Path | None:
    """Slots x rounds grid: colour = fitness, thick frame = elite (survived), red dashed = replaced; the text gives
    what the fitness was made of (graded by success, return, progress or approach; runs before the one ranking rule
    subtracted the complexity penalty).
    When the run mixes the return grade (hundreds) with another (0 to 1), one colour scale would show only the
    return rounds, so each round's fitness is then scaled to its own range (0: the round's worst, 1: its best)."""
    from matplotlib.colors import Normalize
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    cells = lineage(run)
    if not cells:
        return None
    rounds = sorted({c.round for c in cells})
    slots = sorted({c.slot for c in cells})
    col = {r: i for i, r in enumerate(rounds)}
    row = {s: i for i, s in enumerate(slots)}
    grades = list(dict.fromkeys(c.graded_by for c in cells if c.graded_by))  # in round order
    per_round = "return" in grades and len(grades) > 1
    shade = _scaled_per_round(cells) if per_round else {(c.round, c.slot): c.fitness for c in cells}
    fits = np.array(list(shade.values()))
    finite = fits[np.isfinite(fits)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    norm = Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1.0)
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    detailed = len(rounds) <= 12  # text in cells stays readable up to about a dozen rounds
    graded = any(c.breakdown for c in cells)
    fig = _figure(min(24.0, 2.2 + 1.7 * len(rounds)), 1.4 + (0.95 if detailed and graded else 0.75) * len(slots))
    ax = fig.add_subplot()
    for c in cells:
        x, y = col[c.round], row[c.slot]
        value = shade[(c.round, c.slot)]
        face = cmap(norm(value)) if math.isfinite(value) else (0.85, 0.85, 0.85, 1.0)
        if c.elite:
            edge, lw, ls = "black", 2.4, "-"
        elif c.replaced_by is not None:
            edge, lw, ls = _BASELINE_COLOR, 2.0, "--"
        else:
            edge, lw, ls = "0.5", 0.8, "-"
        ax.add_patch(Rectangle((x - 0.46, y - 0.42), 0.92, 0.84, facecolor=face, edgecolor=edge, lw=lw, ls=ls))
        light = math.isfinite(value) and norm(value) > 0.6
        ink = "black" if light or not math.isfinite(c.fitness) else "white"
        fit = f"fit {c.fitness:.2f}" if math.isfinite(c.fitness) else "fit –"
        cx = f"cx {c.complexity:.0f}" if math.isfinite(c.complexity) else "cx –"
        text = f"{_short(c.reward_id, 12)}\n{fit}  {cx}" if detailed else f"{c.fitness:.2f}"
        if detailed and c.breakdown:
            text += f"\n({c.breakdown})"
        if detailed and c.replaced_by is not None:
            text += f"\n→ {_short(c.replaced_by, 10)}"
        if len(rounds) <= 40:  # beyond that the figure is a colour map only; the HTML table has the numbers
            ax.text(x, y, text, ha="center", va="center", fontsize=7 if detailed else 6, color=ink)
        if c.best:
            ax.plot(x + 0.38, y - 0.32, marker="*", color="gold", mec="black", ms=10, zorder=3)
    ax.set_xlim(-0.6, len(rounds) - 0.4)
    ax.set_ylim(len(slots) - 0.5, -0.5)
    ax.set_xticks(range(len(rounds)), [str(r) for r in rounds])
    ax.set_yticks(range(len(slots)), [f"slot {s}" for s in slots])
    ax.set_xlabel("reward-update round")
    how = f"fitness: {', then '.join(grades)}; cx breaks ties" if grades else "fitness, complexity, survival"
    ax.set_title(f"{run.task}: reward population per round\n({how})")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    from matplotlib.cm import ScalarMappable

    label = "fitness, scaled within each round" if per_round else "fitness"
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=label, fraction=0.05, pad=0.02)
    handles = [
        Patch(facecolor="white", edgecolor="black", lw=2.4, label="elite (kept)"),
        Patch(facecolor="white", edgecolor=_BASELINE_COLOR, lw=2.0, ls="--", label="replaced"),
        Line2D([], [], marker="*", color="gold", mec="black", ls="", ms=10, label="best"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return _save(fig, out_dir, "lineage.png")


def _scaled_per_round(cells: Sequence[LineageCell]) -> dict[tuple[int, int], float]:
    """Each cell's fitness as a share of its round's range (1 where the round's finite values are all equal)."""
    out: dict[tuple[int, int], float] = {}
    for rnd in {c.round for c in cells}:
        mine = [c for c in cells if c.round == rnd]
        values = [c.fitness for c in mine if math.isfinite(c.fitness)]
        lo, hi = (min(values), max(values)) if values else (0.0, 0.0)
        for c in mine:
            ok = math.isfinite(c.fitness)
            out[(c.round, c.slot)] = ((c.fitness - lo) / (hi - lo) if hi > lo else 1.0) if ok else math.nan
    return out


def _bars(ax: Any, inf: Influence, color: str, xlabel: str, title: str) -> None:
    order = np.argsort(inf.shares)
    names = [inf.names[i] for i in order]
    shares = np.array([inf.shares[i] for i in order])
    ax.barh(range(len(names)), shares, color=color)
    ax.set_yticks(range(len(names)), [_short(n, 24) for n in names])
    for y, v in enumerate(shares):
        ax.text(v + 0.01, y, f"{v:.0%}", va="center", fontsize=8)
    ax.set_xlim(0, min(1.15, float(shares.max()) * 1.25 + 0.05))
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)


def plot_influence(run: RunData, out_dir: Path) -> Path | None:
    """Where the best reward's value comes from: per component, and per feature when a sample was saved."""
    rid = best_reward_id(run)
    if rid is None:
        return None
    comp = component_influence(run, rid)
    feat = gradient_influence(run, rid)
    panels = [p for p in (comp, feat) if p is not None]
    if not panels:
        return None
    fig = _figure(5.0 * len(panels) + 1.0, 1.6 + 0.35 * max(len(p.names) for p in panels))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    i = 0
    if comp is not None:
        _bars(axes[i], comp, "C0", "share of |reward| (fraction)", f"per component\n({comp.source})")
        i += 1
    if feat is not None:
        _bars(axes[i], feat, "C2", "influence share (fraction)", f"per feature\n({feat.source})")
    fig.suptitle(f"{run.task}: what the best reward {_short(rid, 24)} pays for")
    return _save(fig, out_dir, "influence.png")


def plot_llm_cost(run: RunData, out_dir: Path) -> Path | None:
    """Tokens (prompt + completion) and seconds spent per graph node, summed over the run."""
    if not run.llm_calls:
        return None
    tags = sorted({c.tag for c in run.llm_calls})
    idx = {t: i for i, t in enumerate(tags)}
    which = np.array([idx[c.tag] for c in run.llm_calls])
    n = np.bincount(which, minlength=len(tags))
    prompt = np.bincount(which, weights=[c.prompt_tokens for c in run.llm_calls], minlength=len(tags))
    completion = np.bincount(which, weights=[c.completion_tokens for c in run.llm_calls], minlength=len(tags))
    secs = [c.seconds if math.isfinite(c.seconds) else 0.0 for c in run.llm_calls]
    seconds = np.bincount(which, weights=secs, minlength=len(tags))
    fig = _figure(10.0, 1.8 + 0.4 * len(tags))
    ax_tok, ax_s = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(tags))
    ax_tok.barh(y, prompt, color="C0", label="prompt tokens")
    ax_tok.barh(y, completion, left=prompt, color="C1", label="completion tokens")
    ax_tok.set_yticks(y, [f"{t} ({k} calls)" for t, k in zip(tags, n, strict=True)])
    ax_tok.set_xlabel("tokens (sum over the run)")
    ax_tok.set_title("tokens per node", fontsize=10)
    ax_tok.legend(loc="lower center", bbox_to_anchor=(0.5, 1.08), ncols=2, fontsize=8, frameon=False)
    ax_s.barh(y, seconds, color="C2")
    for yy, s, k in zip(y, seconds, n, strict=True):
        ax_s.text(s, yy, f" {s:.1f} s ({s / max(k, 1):.2f} s/call)", va="center", fontsize=8)
    ax_s.set_xlim(0, float(seconds.max()) * 1.6 + 1e-9)
    ax_s.set_xlabel("seconds (sum over the run)")
    ax_s.set_title("time per node", fontsize=10)
    for ax in (ax_tok, ax_s):
        ax.grid(axis="x", alpha=0.3)
    total = int(prompt.sum() + completion.sum())
    fig.suptitle(f"{run.task}: LLM cost per graph node ({len(run.llm_calls)} calls, {total} tokens)")
    return _save(fig, out_dir, "llm_cost.png")
