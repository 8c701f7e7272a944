"""How often the grid's reward updates could not tell their slots apart, and whether the task return would have.

Offline, from the committed records (no training): every ``reward_update`` event of the LaRes trials
(``runs/*-lares-*/events.jsonl``) lists each slot's fitness, what it was graded on (``graded_by``: success, or the
share of the start distance closed), its complexity penalty and its task return (the sum of MetaWorld's own
reward per evaluation episode, mean over the episodes). The grid ran success-then-progress; success-then-return
(the reference's rule, ``engine/setup/fitness.py``) grades the same updates on the task return when no slot
succeeded.

An update is a *tie* when the values its slots were graded on (``SlotRecord.graded``, quarantined slots left
out) lie within ``--tie`` of each other: the complexity penalty alone then ranked the slots
(docs/results-archive.md, "Sample efficiency on five MetaWorld tasks": "equal in every slot"). It *still ties by
return* when the slots' task returns lie within ``--return-tie`` of the update's largest |return| (a relative
tolerance: returns run from about 7 to about 1,000 across these tasks). Under success-then-return a success-graded
tie stays graded on success, so the table counts those apart from the progress-graded ties, which the return grade
would rank.

    python experiments/sample_efficiency/fitness_ties.py                      # the committed grid
    python experiments/sample_efficiency/fitness_ties.py RUNS --tie 0.01      # another folder, the approach threshold
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lares_agent.runs import RewardUpdateRecord, RunLayout, RunLog, SlotRecord

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Update:
    """One reward update of one trial: what graded it and how far apart its slots were."""

    trial: str
    round: int
    grade: str  # "success", "progress" (or "approach", "return" in later runs); "/"-joined if mixed
    graded_spread: float  # max - min of the graded values of the healthy slots
    return_spread: float  # max - min of their task returns
    return_scale: float  # the largest |task return| among them

    def tied(self, tol: float) -> bool:
        return self.graded_spread <= tol

    def tied_by_return(self, rel: float) -> bool:
        return self.return_spread <= rel * self.return_scale


def _healthy(slots: Sequence[SlotRecord]) -> list[SlotRecord]:
    return [s for s in slots if not s.quarantined and math.isfinite(s.fitness) and math.isfinite(s.task_return)]


def _spread(values: Sequence[float]) -> float:
    return max(values) - min(values) if values else math.nan


def updates(trial: Path) -> list[Update]:
    """Every reward update of a trial folder with at least two healthy slots."""
    out = []
    for event in RunLog(RunLayout(trial)).events.read():
        if event.event != "reward_update":
            continue
        rec = RewardUpdateRecord.from_event(event)
        slots = _healthy(rec.slots)
        if len(slots) < 2:
            continue
        graded = [s.graded for s in slots]  # from the record's fields, whichever rule made its fitness
        returns = [s.task_return for s in slots]
        out.append(Update(trial.name, rec.round, "/".join(sorted({s.graded_by or "success" for s in slots})),
                          _spread(graded), _spread(returns), max(abs(r) for r in returns)))
    return out


def table(found: Sequence[Update], tol: float, rel: float) -> str:
    """Markdown: per trial and in total, updates, ties (by grade) and ties that the task return would keep."""
    lines = [f"ties: graded values within {tol:g}; still tied by return: returns within {rel:g} of the largest "
             "|return|",
             "",
             "| trial | updates | ties | of them success-graded | progress-graded | still tied by return | "
             "smallest return spread of a tie (relative) |",
             "|---|---:|---:|---:|---:|---:|---|"]
    trials = sorted({u.trial for u in found})

    def row(name: str, mine: Sequence[Update]) -> str:
        ties = [u for u in mine if u.tied(tol)]
        success = sum(1 for u in ties if u.grade == "success")
        still = sum(1 for u in ties if u.tied_by_return(rel))
        closest = min(ties, key=lambda u: u.return_spread / max(u.return_scale, 1e-12), default=None)
        near = ("–" if closest is None else
                f"{closest.return_spread:.2f} of {closest.return_scale:.1f} "
                f"({closest.return_spread / max(closest.return_scale, 1e-12):.1%}, round {closest.round})")
        return (f"| {name} | {len(mine)} | {len(ties)} | {success} | {len(ties) - success} | {still} | {near} |")

    lines += [row(t, [u for u in found if u.trial == t]) for t in trials]
    lines.append(row("**all**", found))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=Path, default=HERE / "runs", help="folder of trial folders")
    parser.add_argument("--pattern", default="*-lares-*", help="trial folders to read (a glob)")
    parser.add_argument("--tie", type=float, default=1e-3, help="graded values this close are equal")
    parser.add_argument("--return-tie", type=float, default=0.01,
                        help="task returns this close, relative to the largest |return|, are equal")
    args = parser.parse_args(argv)
    trials = sorted(p for p in args.runs.glob(args.pattern) if (p / "events.jsonl").is_file())
    if not trials:
        print(f"no trial folder matching {args.pattern!r} with an events.jsonl under {args.runs}", file=sys.stderr)
        return 1
    found = [u for t in trials for u in updates(t)]
    print(table(found, args.tie, args.return_tie))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
