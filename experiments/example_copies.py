"""How much of a sweep's LaRes rewards is the prompt's own example (docs/RESULTS.md, issue 14).

The system prompt shows two answers for the task itself (`graphs/prompting.task_examples`); the first is
`approach: -<approach>, progress: -5*<progress>, bonus: 5*success`. A result that depends on an example in a prompt
has to say so, so this reads every LaRes-style trial of a sweep (each method but `human` and `sparse`) and sorts
its installed rewards by shape: the same terms as example 1 or 2 with any weights ("example 1"), an example's
terms plus others ("example 1 + terms"), or neither example's full set of terms ("other, 2+ example terms" when it has
two or more of one example's terms, else "other"). Numbers are masked, so `-3.39*obj_to_target`
has the shape of `-5*obj_to_target`; the examples are canonicalised by the reward parser first, as the
candidates were. A child (`origin: child`) is an elite's constants perturbed, not an LLM answer.

    python experiments/example_copies.py runs/sample_efficiency [more sweep folders]
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from lares_agent.engine import get_task
from lares_agent.graphs.prompting import task_examples
from lares_agent.rewards import allowed_features, parse_candidate
from lares_agent.runs import CandidateRow, RunLayout, RunLog, read_marked_config
from lares_agent.runs.sweep_layout import SweepLayout
from lares_agent.search.sweep_spec import SweepSpec

_NUMBER = re.compile(r"(?<![A-Za-z_\d.])\d+(\.\d*)?([eE][-+]?\d+)?")
BASELINES = ("human", "sparse")


def shape(components: dict[str, str]) -> frozenset[str]:
    """A reward's terms with their numbers masked (component names ignored)."""
    return frozenset(_NUMBER.sub("N", text.replace(" ", "")) for text in components.values())


def example_shapes(task_name: str) -> list[frozenset[str]]:
    """The shapes of the prompt's two examples for the task, canonicalised as candidates are."""
    task = get_task(task_name)
    names = allowed_features(task)
    approach = task.approach_feature if task.approach_feature in names else None
    lines = task_examples(task.progress_feature, approach).splitlines()
    return [shape(dict(parse_candidate(json.loads(line), names).canonical)) for line in lines]


def classify(components: dict[str, str], examples: Sequence[frozenset[str]]) -> str:
    mine = shape(components)
    for i, ex in enumerate(examples, 1):
        if mine == ex:
            return f"example {i}"
    for i, ex in enumerate(examples, 1):
        if ex <= mine:
            return f"example {i} + terms"
    return "other, 2+ example terms" if any(len(mine & ex) >= 2 for ex in examples) else "other"


def trial_rows(sweep: Path) -> list[dict[str, object]]:
    layout = SweepLayout.open(sweep)
    rows = []
    for trial in SweepSpec.load(layout.spec).trials():
        run = RunLayout(layout.run(trial.id))
        if trial.method in BASELINES or not run.config.is_file():
            continue
        examples = example_shapes(str(read_marked_config(run)["task"]))
        log = RunLog(run)
        installed: dict[str, CandidateRow] = {}
        for c in log.candidates.read():
            if c.verdict == "accepted" and c.components:
                installed.setdefault(c.id, c)
        kinds = Counter(classify(dict(c.components or {}), examples) for c in installed.values())
        children = sum(c.origin == "child" for c in installed.values())
        metrics = list(log.metrics.read())
        handed = "n/a"
        if metrics:
            last = metrics[-1]
            rid = next((s.reward_id for s in last.slots if s.slot == last.best_slot), None)
            chosen = installed.get(rid) if rid else None
            if chosen is not None:
                origin = "child" if chosen.origin == "child" else "LLM"
                handed = f"{classify(dict(chosen.components or {}), examples)} ({origin}, round {chosen.round})"
        rows.append({"trial": trial.id, "steps": metrics[-1].env_steps if metrics else 0,
                     "installed": len(installed), "children": children, "kinds": kinds, "handed": handed})
    return rows


def main(argv: Sequence[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    kinds = ("example 1", "example 1 + terms", "example 2", "example 2 + terms", "other, 2+ example terms", "other")
    print("| trial | env steps | installed (children) | " + " | ".join(kinds) + " | handed over |")
    print("|---" * (4 + len(kinds)) + "|")
    total: Counter[str] = Counter()
    for sweep in argv:
        for r in trial_rows(Path(sweep)):
            counts = r["kinds"]
            assert isinstance(counts, Counter)
            total.update(counts)
            cells = [str(counts.get(k, 0)) for k in kinds]
            print(f"| {r['trial']} | {r['steps']:,} | {r['installed']} ({r['children']}) | " + " | ".join(cells)
                  + f" | {r['handed']} |")
    n = sum(total.values())
    if n:
        print("\nall installed rewards: " + ", ".join(f"{k} {total.get(k, 0) / n:.0%}" for k in kinds) + f" of {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
