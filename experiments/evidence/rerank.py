"""The grid's with-init reward updates ranked again under the one ranking rule (engine/setup/fitness.py).

Offline, from the committed records (no training). Each ``reward_update`` event lists every slot's graded value
(its ``graded_by`` and the measured fields), task return, final progress, complexity and quarantine; the extra
learner on the task's own reward is the last slot (member K, reward id "human"). As run, the fitness was the
graded value minus ``complexity_lambda * complexity``, and the human learner's complexity was 0, so at equal
success it ranked first whatever its return. Under the one rule the fitness is the graded value, then the task
return breaks ties (the init setting's tie-break), then the complexity penalty, then the slot index; the human
learner carries its expression's own complexity (``rewards.human_reference``). The slots are rebuilt as the
engine's ``SlotRecord`` records and ranked by the engine's own ``rank_slots``, so the rule has one place.

Prints, per trial and in total: updates, how many change their first place, how often the human learner was
first before and after, and whether the last update's first place (the policy the grid handed over) changes.

    python experiments/evidence/rerank.py                                   # the grid's 15 with-init trials
    python experiments/evidence/rerank.py experiments/evidence/no_llm/*/runs/*-no-llm-s*
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from lares_agent.engine.setup.fitness import rank_slots
from lares_agent.engine.tasks import get_task
from lares_agent.rewards import human_reference
from lares_agent.runs import RewardUpdateRecord, RunLayout, RunLog, SlotRecord

HERE = Path(__file__).resolve().parent
HUMAN = "human"


@dataclass(frozen=True)
class Update:
    """One reward update of one trial: its first place as run and under the one rule."""

    trial: str
    round: int
    human: int | None  # the human learner's slot
    before: int
    after: int
    reproduced: bool  # the rule as run, recomputed from the record, gives the recorded first place


@cache
def human_complexity(task: str) -> float:
    """The complexity of the task's own reward expression (0 where it has none), as a run now measures it."""
    reference = human_reference(get_task(task))
    return reference[1] if reference is not None else 0.0


def as_ranked(slot: SlotRecord, lam: float, human_cx: float) -> SlotRecord:
    """The record as the engine grades it under the one rule (``fitness.slot_evaluation``)."""
    bad = slot.quarantined or not math.isfinite(slot.fitness)
    complexity = human_cx if slot.reward_id == HUMAN else (slot.complexity if math.isfinite(slot.complexity) else 0.0)
    graded = slot.success if slot.graded_by is None else slot.graded  # no grade: a run before graded fitness
    graded = graded if math.isfinite(graded) else -math.inf
    return replace(slot, complexity=complexity, fitness=-math.inf if bad else graded, quarantined=bad,
                   complexity_penalty=lam * complexity)


def as_run_first(slots: Sequence[SlotRecord], lam: float) -> int:
    """The first place under the rule the grid ran: graded value - lambda x complexity (the human learner's 0),
    then the task return, then the lower complexity, then the slot index."""
    def key(s: SlotRecord) -> tuple[float, float, float, int]:
        cx = s.complexity if math.isfinite(s.complexity) else 0.0
        graded = s.success if s.graded_by is None else s.graded
        bad = s.quarantined or not math.isfinite(s.fitness) or not math.isfinite(graded)
        tie = s.task_return if math.isfinite(s.task_return) else -math.inf
        return (math.inf if bad else -(graded - lam * cx), math.inf if bad else -tie, cx, s.slot)
    return min(slots, key=key).slot


def updates(trial: Path) -> list[Update]:
    """Every reward update of a with-init trial folder (none for another setting)."""
    config = json.loads((trial / "config.json").read_text())
    if config.get("setting") != "init":
        return []
    lam = float(config.get("complexity_lambda", 0.0))
    human_cx = human_complexity(str(config["task"]))
    out = []
    for event in RunLog(RunLayout(trial)).events.read():
        if event.event != "reward_update":
            continue
        rec = RewardUpdateRecord.from_event(event)
        if not rec.slots or not rec.ranking:
            continue
        ranked = rank_slots([as_ranked(s, lam, human_cx) for s in rec.slots], True)
        human = next((s.slot for s in rec.slots if s.reward_id == HUMAN), None)
        out.append(Update(trial.name, rec.round, human, rec.ranking[0], ranked[0],
                          as_run_first(rec.slots, lam) == rec.ranking[0]))
    return out


def table(found: dict[str, list[Update]]) -> str:
    """Markdown: per trial and in total."""
    lines = ["| trial | updates | first place changes | human first, as run | human first, one rule | "
             "last update's first changes |", "|---|---:|---:|---:|---:|---|"]

    def row(name: str, mine: Sequence[Update], last: str) -> str:
        changed = sum(u.before != u.after for u in mine)
        before = sum(u.before == u.human for u in mine)
        after = sum(u.after == u.human for u in mine)
        return f"| {name} | {len(mine)} | {changed} | {before} | {after} | {last} |"

    def last_change(mine: Sequence[Update]) -> str:
        if not mine:
            return "-"
        u = mine[-1]
        return f"slot {u.before} -> {u.after}" if u.before != u.after else "no"

    for name, mine in sorted(found.items()):
        lines.append(row(name, mine, last_change(mine)))
    every = [u for mine in found.values() for u in mine]
    lasts = sum(1 for mine in found.values() if mine and mine[-1].before != mine[-1].after)
    lines.append(row(f"all {len(found)} trials", every, f"{lasts} of {len(found)}"))
    same = sum(u.reproduced for u in every)
    lines += ["", f"The rule as run, recomputed from the records, gives the recorded first place at {same} of "
              f"{len(every)} updates."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("trials", nargs="*", type=Path,
                        help="trial folders (default: the grid's with-init trials under experiments/evidence/runs)")
    args = parser.parse_args(argv)
    trials = args.trials or sorted((HERE / "runs").glob("*-lares-init-s*"))
    found = {t.name: u for t in trials if (u := updates(t))}
    if not found:
        print("no with-init trial with a reward update among the folders given")
        return 1
    print(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
