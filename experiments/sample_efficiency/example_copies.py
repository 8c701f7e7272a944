"""How much of a sweep's LaRes rewards is the prompt's own example (docs/results-archive.md,
"Sample efficiency on five MetaWorld tasks (50k steps)").

The system prompt shows two answers for the task itself (`graphs/prompting.task_examples`); the first is
`approach: -<approach>, progress: -5*<progress>, bonus: 5*success`. A result that depends on an example in a prompt
has to say so, so this reads every LaRes-style trial of a sweep (each method but `human` and `sparse`) and sorts
its installed rewards by shape (`graphs/example_shapes.py`: numbers masked, the same terms as example 1 or 2, an
example's terms plus others, or neither). A child (`origin: child`) is an elite's constants perturbed, not an LLM
answer.

    python experiments/sample_efficiency/example_copies.py runs/sample_efficiency [more sweep folders]
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from lares_agent.engine import get_task
from lares_agent.graphs.example_shapes import KINDS, example_kind, example_shapes
from lares_agent.runs import CandidateRow, RunLayout, RunLog, read_marked_config
from lares_agent.runs.sweep_layout import SweepLayout
from lares_agent.search.sweep_spec import SweepSpec

BASELINES = ("human", "sparse")


def trial_rows(sweep: Path) -> list[dict[str, object]]:
    layout = SweepLayout.open(sweep)
    rows = []
    for trial in SweepSpec.load(layout.spec).trials():
        run = RunLayout(layout.run(trial.id))
        if trial.method in BASELINES or not run.config.is_file():
            continue
        examples = example_shapes(get_task(str(read_marked_config(run)["task"])))
        log = RunLog(run)
        installed: dict[str, CandidateRow] = {}
        for c in log.candidates.read():
            if c.verdict == "accepted" and c.components:
                installed.setdefault(c.id, c)
        kinds = Counter(example_kind(dict(c.components or {}), examples) for c in installed.values())
        children = sum(c.origin == "child" for c in installed.values())
        metrics = list(log.metrics.read())
        handed = "n/a"
        if metrics:
            last = metrics[-1]
            rid = next((s.reward_id for s in last.slots if s.slot == last.best_slot), None)
            chosen = installed.get(rid) if rid else None
            if chosen is not None:
                origin = "child" if chosen.origin == "child" else "LLM"
                handed = f"{example_kind(dict(chosen.components or {}), examples)} ({origin}, round {chosen.round})"
        rows.append({"trial": trial.id, "steps": metrics[-1].env_steps if metrics else 0,
                     "installed": len(installed), "children": children, "kinds": kinds, "handed": handed})
    return rows


def main(argv: Sequence[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    kinds = KINDS
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
