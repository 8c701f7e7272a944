"""The sweep table's two protocols side by side: the policy a run hands over (this project's number) and the
population's best learner at each evaluation (the number the LaRes paper reports).

The paper reports, at every evaluation, the success of the best of its learners (deterministic episodes, success
at any step: docs/lares-reference.md, "evaluation"). A user of the run never gets that number: the run hands over
one policy, ranked first before the evaluation that scores it. A population whose best learner succeeds while the
handed-over policy does not looks good by the paper's protocol and bad by ours; only the two side by side say how
much of a gap is the search's and how much is the choice of the policy handed over.

- handed over (ours): the handed-over policy replayed on fresh episodes (the per-trial file of
  experiments/sample_efficiency/final_policies.py, `lares report --sweep DIR --replay FILE`; "n/a" without it,
  since one 5-episode evaluation moves 20 points an episode) and the area under the ranked policy's success curve.
- best learner (paper): at each evaluation the highest success of any learner of the run (in the with-init
  setting the human-reward learner counts too; a baseline's only learner is its handed-over one), at the final
  evaluation and as the area under that curve (the same `success_auc` as ours, so the two areas compare).

Every difference is LaRes minus another method with a 95% bootstrap interval, each side's seeds resampled on
their own (`sweep_stats.bootstrap_difference`), as in `sweep_compare`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from lares_agent.errors import LaresError
from lares_agent.report.sweep_compare import Curve, paired, per_seed, verdict
from lares_agent.report.sweep_stats import bootstrap_difference, success_auc

__all__ = ["OURS", "PAPER", "ProtocolCurve", "protocol_comparisons", "protocol_means", "protocols_markdown",
           "read_replay"]

OURS, PAPER = "handed over (ours)", "best learner (paper)"
# protocol -> (its final-success key, its area key) in `_per_seed`
_KEYS = {OURS: ("replay", "auc"), PAPER: ("best_final", "best_auc")}


class ProtocolCurve(Curve, Protocol):
    """What this section reads of a ``sweep_table.TrialCurve`` beyond `sweep_compare.Curve`."""

    @property
    def best(self) -> tuple[float, ...]: ...
    @property
    def replay(self) -> float | None: ...


def read_replay(path: Path) -> dict[str, tuple[int, float]]:
    """Trial id -> (episodes, success) from a final_policies.py file (trial, episodes, seed, success); a trial
    measured more than once keeps its line with the most episodes (the later of equals)."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            lines = list(csv.DictReader(fh))
        out: dict[str, tuple[int, float]] = {}
        for line in lines:
            episodes, success = int(line["episodes"]), float(line["success"])
            if line["trial"] not in out or episodes >= out[line["trial"]][0]:
                out[line["trial"]] = (episodes, success)
        return out
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise LaresError(f"{path} is not a replay file (trial,episodes,seed,success): {exc}") from None


def _values(c: ProtocolCurve) -> dict[str, float | None]:
    best = c.best or c.success
    return {"replay": c.replay, "auc": success_auc(c.steps, c.success), "best_final": best[-1],
            "best_auc": success_auc(c.steps, best)}


def _per_seed(curves: Sequence[ProtocolCurve]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(task, method) -> key -> one value per finished trial (``replay``: only the trials that have one)."""
    return per_seed(curves, [k for pair in _KEYS.values() for k in pair], _values)


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def protocol_means(curves: Sequence[ProtocolCurve]) -> list[dict[str, Any]]:
    """Per (task, method) with finished trials, in the grid's order: the finished and replayed seed counts and
    the mean of each protocol's final success and area."""
    seeds = _per_seed(curves)
    rows = []
    for task, method in dict.fromkeys((c.task, c.method) for c in curves):
        values = seeds.get((task, method))
        if values is None:
            continue
        rows.append({"task": task, "method": method, "runs": len(values["auc"]), "replayed": len(values["replay"]),
                     **{f"{k}_mean": _mean(v) for k, v in values.items()}})
    return rows


def protocol_comparisons(curves: Sequence[ProtocolCurve], rng: np.random.Generator,
                         method: str = "lares") -> list[dict[str, Any]]:
    """One row per (task, other method, protocol) where both sides finished trials: ``final``/``auc`` difference
    of means, its interval and word (NaN and "n/a" for a side without a value, e.g. no replay)."""
    rows: list[dict[str, Any]] = []
    for task, other, mine, theirs in paired(curves, _per_seed(curves), method):
        for protocol, (final_key, auc_key) in _KEYS.items():
            row: dict[str, Any] = {"task": task, "other": other, "protocol": protocol,
                                   "seeds": f"{len(mine[final_key])} vs {len(theirs[final_key])}"}
            for name, key in (("final", final_key), ("auc", auc_key)):
                low, high = bootstrap_difference(mine[key], theirs[key], rng)
                row[f"{name}_diff"] = _mean(mine[key]) - _mean(theirs[key])
                row[f"{name}_low"], row[f"{name}_high"], row[f"{name}_word"] = low, high, verdict(low, high)
            rows.append(row)
    return rows


def _pct(value: float) -> str:
    return f"{value:.0%}" if math.isfinite(value) else "n/a"


def _share(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else "n/a"


def _signed(value: float, name: str) -> str:
    if not math.isfinite(value):
        return "n/a"
    return f"{value * 100:+.0f} pts" if name == "final" else f"{value:+.3f}"


def protocols_markdown(curves: Sequence[ProtocolCurve], rng: np.random.Generator, methods: Sequence[str] = ("lares",),
                       episodes: Sequence[int] = ()) -> str:
    """The section for ``table.md`` ("" without a finished trial), with one comparison table per search method
    of ``methods``; ``episodes``: the replays' episode counts."""
    means = protocol_means(curves)
    if not means:
        return ""
    played = "/".join(str(e) for e in sorted(set(episodes))) or "no"
    replay_head = f"{OURS}: success on {played} fresh episodes" if episodes else f"{OURS}: replayed success"
    head = ["task", "method", "runs", replay_head, f"{OURS}: AUC", f"{PAPER}: final success", f"{PAPER}: AUC"]
    lines = ["", "## Both protocols: the policy handed over and the population's best learner", "",
             f"\"{OURS}\": the one policy the run hands over, replayed on fresh episodes"
             + ("" if episodes else " (none given: `--replay FILE`)")
             + ", and the area under its success curve. "
             f"\"{PAPER}\": at each evaluation the best success of any learner of the run (the LaRes paper's number: "
             "deterministic episodes, success at any step), at the final evaluation and its area.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in means:
        replayed = _pct(r["replay_mean"]) + ("" if r["replayed"] in (0, r["runs"]) else f" ({r['replayed']} seeds)")
        lines.append("| " + " | ".join([r["task"], r["method"], str(r["runs"]), replayed, _share(r["auc_mean"]),
                                        _pct(r["best_final_mean"]), _share(r["best_auc_mean"])]) + " |")
    for method in methods:
        lines += _comparison_lines(protocol_comparisons(curves, rng, method), method)
    return "\n".join(lines) + "\n"


def _comparison_lines(rows: Sequence[dict[str, Any]], method: str) -> list[str]:
    if not rows:
        return []
    head = ["task", f"{method} against", "protocol", "seeds", "success: difference", "95% CI", "",
            "AUC: difference", "95% CI", ""]
    lines = ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["task"], r["other"], r["protocol"], r["seeds"]]
        for name in ("final", "auc"):
            cells += [_signed(r[f"{name}_diff"], name),
                      f"[{_signed(r[f'{name}_low'], name)}, {_signed(r[f'{name}_high'], name)}]", r[f"{name}_word"]]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, "", f"(Success: the replayed one for \"{OURS}\", the final evaluation's for \"{PAPER}\". "
            "95% percentile bootstrap interval of the difference of means, each side's seeds resampled on their "
            "own.)"]
