"""Whether a sweep's reward-search runs handed over their best policy (issue 14: in 3 of the first 9 LaRes trials,
another slot of the same run scored 40 to 80 points more at the final evaluation).

A run hands over the slot ranked first at its last reward update (docs/lares-reference.md §12 item 16: the
reference reported the best slot of each evaluation instead, chosen on the numbers it is scored by). This
section shows, for each finished run with several slots, how old that ranking was at the final evaluation,
the handed-over slot's success there against every slot's, and over the last `WINDOW` evaluations the ranked
slot's mean against the mean of all slots: a ranking that carries information beats the mean. Pure reading of
`metrics.jsonl`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lares_agent.runs import MetricRow, RunLayout, RunLog

__all__ = ["WINDOW", "HandOver", "hand_over", "handover_markdown"]

WINDOW = 5  # evaluations averaged at the end of a run


@dataclass(frozen=True)
class HandOver:
    run: str
    ranked_at: int  # env steps of the evaluation behind the final ranking (the last update row before the end)
    final_steps: int
    handed: float  # the ranked slot's success at the final evaluation
    slots: tuple[float, ...]  # every slot's success there
    ranked_mean: float  # the ranked slot's success over the last WINDOW evaluations
    slots_mean: float  # the mean over all slots, same evaluations

    @property
    def missed(self) -> bool:
        """Another slot did better at the final evaluation."""
        return max(self.slots) > self.handed


def _rows(path: Path) -> list[MetricRow]:
    """Metric rows in step order, one per (steps, kind): a row repeated after a resume counts once (the later)."""
    keyed: dict[tuple[int, str], MetricRow] = {}
    for row in RunLog(RunLayout(path)).metrics.read():
        keyed[(row.env_steps, row.kind)] = row
    return [keyed[k] for k in sorted(keyed, key=lambda k: (k[0], k[1] != "update"))]


def hand_over(path: Path, window: int = WINDOW) -> HandOver | None:
    """None for a run with one slot, no evaluation, or no reward update before its last evaluation."""
    rows = _rows(path)
    evals = [r for r in rows if r.kind == "eval" and r.slots and r.success_best_slot is not None]
    if not evals or len(evals[-1].slots) < 2:
        return None
    last = evals[-1]
    ranked = [r for r in rows if r.kind == "update" and r.env_steps <= last.env_steps]
    if not ranked:
        return None
    tail = evals[-window:]
    return HandOver(
        run=path.name, ranked_at=ranked[-1].env_steps, final_steps=last.env_steps,
        handed=float(last.success_best_slot or 0.0), slots=tuple(s.success for s in last.slots),
        ranked_mean=sum(float(r.success_best_slot or 0.0) for r in tail) / len(tail),
        slots_mean=sum(sum(s.success for s in r.slots) / len(r.slots) for r in tail) / len(tail),
    )


def handover_markdown(paths: Sequence[Path]) -> str:
    """The "Hand-over" section of ``table.md`` for these finished runs ("" when none has several slots)."""
    found = [h for h in (hand_over(p) for p in paths) if h is not None]
    if not found:
        return ""
    lines = ["", "## Hand-over", "",
             "| trial | ranked at (steps) | final evaluation (steps) | handed over | every slot | "
             f"ranked slot, last {WINDOW} | all slots, last {WINDOW} |", "|" + "---|" * 7]
    for h in found:
        lines.append(f"| {h.run} | {h.ranked_at:,} | {h.final_steps:,} | {h.handed:.0%} | "
                     f"{', '.join(f'{s:.0%}' for s in h.slots)} | {h.ranked_mean:.0%} | {h.slots_mean:.0%} |")
    missed = [h.run for h in found if h.missed]
    lines += ["", f"Another slot beat the one handed over at the final evaluation in {len(missed)} of {len(found)} "
              f"runs{': ' + ', '.join(missed) if missed else ''}. (Picking that slot instead would be chosen on the "
              "numbers it is scored by.)", ""]
    return "\n".join(lines)
