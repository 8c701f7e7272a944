"""LaRes against each other method of a sweep, with the seeds' noise shown, and an experiment's targets counted.

The table's means say who is ahead; with 2 or 3 seeds a side they cannot say by how much it could be chance.
For every task and every method beside a search method (``lares``, or the ``lares-init`` and ``lares-scratch``
arms of one sweep) with finished trials on it, this section gives that search's final success and area under the
success curve minus that method's, each with a 95% bootstrap interval (each side's seeds resampled on their own),
and a word: "ahead" or "behind" when the interval lies wholly on one side of 0, "level" when it is the point 0,
"within noise" otherwise.

What counts as good enough belongs to the experiment, not to the report: a sweep folder may hold
``targets.json`` (`load_targets`; experiments/sample_efficiency/targets.json is one). Its targets are counted by
the means, the count says how many of the misses the intervals would settle, and `sweep_why.shortfalls`
explains each miss from the runs. Without the file the comparison stands alone: no target is counted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from lares_agent.errors import LaresError
from lares_agent.report.sweep_stats import bootstrap_difference, success_auc

__all__ = [
    "LABELS", "Curve", "Target", "comparison_markdown", "comparisons", "load_targets", "paired", "per_seed", "verdict",
]

METRICS = (("final_success", "final success"), ("auc", "area under the success curve"))
LABELS = dict(METRICS)


class Curve(Protocol):
    """What this section reads of a ``sweep_table.TrialCurve``."""

    @property
    def task(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def finished(self) -> bool: ...
    @property
    def steps(self) -> tuple[int, ...]: ...
    @property
    def success(self) -> tuple[float, ...]: ...


@dataclass(frozen=True)
class Target:
    """A search method's mean of `metric` against `other`'s: at least as high, or (`strict`) higher."""

    other: str
    metric: str  # a METRICS key
    strict: bool
    method: str = "lares"  # the search method the target asks it of

    def met(self, mine: float, theirs: float) -> bool:
        return mine > theirs if self.strict else mine >= theirs

    def ruled_out(self, high: float) -> bool:
        """The difference's interval lies wholly where the target fails (``high``: its upper end)."""
        return math.isfinite(high) and (high <= 0 if self.strict else high < 0)


def _target(item: Any) -> Target:
    if not (isinstance(item, dict) and isinstance(item.get("other"), str) and item.get("metric") in LABELS
            and isinstance(item.get("strict"), bool) and isinstance(item.get("method", "lares"), str)):
        raise ValueError(f"a target is {{other: a method, metric: one of {', '.join(LABELS)}, strict: true or "
                         f"false, method: the search it is asked of (default lares)}}, not {item!r}")
    return Target(item["other"], item["metric"], item["strict"], item.get("method", "lares"))


def load_targets(path: Path) -> tuple[Target, ...]:
    """An experiment's targets: ``{"about": "...", "targets": [{"other": "human", "metric": "auc", "strict":
    false}, ...]}`` (``metric``: a METRICS key; ``method``, default ``lares``: the search it is asked of;
    ``about`` is for the reader). A missing file has none."""
    if not path.is_file():
        return ()
    try:
        items = json.loads(path.read_text(encoding="utf-8"))["targets"]
        return tuple(_target(item) for item in items)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise LaresError(f"{path} is not a targets file: {exc}") from None


C = TypeVar("C", bound=Curve)


def per_seed(curves: Sequence[C], keys: Sequence[str],
             values: Callable[[C], Mapping[str, float | None]]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(task, method) -> key -> one value per finished trial, as `values` reads them from its curve (a None is
    left out: that trial has no such value)."""
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for c in curves:
        if not (c.finished and c.steps):
            continue
        cell = out.setdefault((c.task, c.method), {key: [] for key in keys})
        for key, value in values(c).items():
            if value is not None:
                cell[key].append(float(value))
    return out


def paired(curves: Sequence[C], seeds: Mapping[tuple[str, str], dict[str, list[float]]], method: str
           ) -> Iterator[tuple[str, str, dict[str, list[float]], dict[str, list[float]]]]:
    """(task, other method, `method`'s per-seed values, the other's) for each pair where both finished trials, in
    the grid's order (`per_seed` gives `seeds`)."""
    for task, other in dict.fromkeys((c.task, c.method) for c in curves):
        mine, theirs = seeds.get((task, method)), seeds.get((task, other))
        if other != method and mine is not None and theirs is not None:
            yield task, other, mine, theirs


def _per_seed(curves: Sequence[Curve]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(task, method) -> metric -> one value per finished trial."""
    return per_seed(curves, [key for key, _ in METRICS],
                    lambda c: {"final_success": c.success[-1], "auc": success_auc(c.steps, c.success)})


def verdict(low: float, high: float) -> str:
    """The word for a difference's interval: "ahead"/"behind" when it excludes 0, "level" at the point 0."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "n/a"
    if low == high == 0:
        return "level"
    return "ahead" if low > 0 else "behind" if high < 0 else "within noise"


def comparisons(curves: Sequence[Curve], rng: np.random.Generator, method: str = "lares") -> list[dict[str, Any]]:
    """One row per (task, other method) with finished trials of both, in the grid's order."""
    rows: list[dict[str, Any]] = []
    for task, other, mine, theirs in paired(curves, _per_seed(curves), method):
        row: dict[str, Any] = {"task": task, "other": other, "seeds": f"{len(mine['auc'])} vs {len(theirs['auc'])}"}
        for key, _ in METRICS:
            low, high = bootstrap_difference(mine[key], theirs[key], rng)
            row[f"{key}_mean"], row[f"{key}_other_mean"] = float(np.mean(mine[key])), float(np.mean(theirs[key]))
            row[f"{key}_diff"] = row[f"{key}_mean"] - row[f"{key}_other_mean"]
            row[f"{key}_low"], row[f"{key}_high"], row[f"{key}_word"] = low, high, verdict(low, high)
        rows.append(row)
    return rows


def _signed(value: float, kind: str) -> str:
    return f"{value * 100:+.0f} pts" if kind == "final_success" else f"{value:+.3f}"


def _targets_lines(rows: Sequence[dict[str, Any]], targets: Sequence[Target]) -> list[str]:
    lines = []
    for other in dict.fromkeys(t.other for t in targets):
        rules = [t for t in targets if t.other == other]
        mine = [r for r in rows if r["other"] == other]
        if not mine:
            continue
        met = [r["task"] for r in mine if all(t.met(r[f"{t.metric}_mean"], r[f"{t.metric}_other_mean"]) for t in rules)]
        settled = [r["task"] for r in mine if r["task"] not in met and any(t.ruled_out(r[f"{t.metric}_high"])
                                                                          for t in rules)]
        what = " and ".join(("above" if t.strict else "at least") + f" {other}'s {LABELS[t.metric]}"
                            for t in rules)
        missed = len(mine) - len(met)
        line = (f"- {what[0].upper()}{what[1:]}, by the means: {len(met)} of {len(mine)} tasks "
                f"({', '.join(met) or 'none'}).")
        if missed:
            line += (f" Of the {missed} missed, the interval rules the target out on {len(settled)} "
                     f"({', '.join(settled) or 'none'})"
                     + ("; the others could be chance at these seeds." if missed > len(settled) else "."))
        lines.append(line)
    return lines


def comparison_markdown(rows: Sequence[dict[str, Any]], method: str = "lares", targets: Sequence[Target] = ()) -> str:
    """The section for ``table.md`` ("" without a task where both sides finished), with ``targets`` counted."""
    if not rows:
        return ""
    head = ["task", f"{method} against", "seeds", "final success: difference", "95% CI", "",
            "AUC: difference", "95% CI", ""]
    lines = ["", f"## {method} against each method", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["task"], r["other"], r["seeds"]]
        for key, _ in METRICS:
            cells += [_signed(r[f"{key}_diff"], key),
                      f"[{_signed(r[f'{key}_low'], key)}, {_signed(r[f'{key}_high'], key)}]", r[f"{key}_word"]]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "(Difference of means over finished seeds; 95% percentile bootstrap interval, each side's seeds "
              "resampled on their own; \"ahead\"/\"behind\": the interval excludes 0.)", ""]
    counted = _targets_lines(rows, [t for t in targets if t.method == method])
    if counted:
        lines += ["The experiment's targets (`targets.json`):", "", *counted, ""]
    return "\n".join(lines)
