"""How large a complexity penalty is next to the fitness it is subtracted from (the `--complexity-lambda` default).

Reads the `candidates.jsonl` of the given run folders and prints the complexity of the accepted candidates, the
complexity differences between slots judged at the same reward update, and what a lambda makes of them next to
the smallest clear success difference (one evaluation episode: 1/episodes). The default (`COMPLEXITY_LAMBDA` in
search/config.py) was chosen so that the median difference costs about a tenth of one episode in 20 and the
largest seen stays below one such episode.

Run: `python experiments/complexity_lambda/run.py RUN_DIR [RUN_DIR ...] [--lam 0.001] [--episodes 5 20]`.
docs/RESULTS.md, "The complexity penalty's size", reports what it printed.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections import defaultdict
from pathlib import Path

from lares_agent.runs import RunLog
from lares_agent.search.config import COMPLEXITY_LAMBDA


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--lam", type=float, nargs="+", default=[COMPLEXITY_LAMBDA / 10, COMPLEXITY_LAMBDA,
                                                              COMPLEXITY_LAMBDA * 10])
    ap.add_argument("--episodes", type=int, nargs="+", default=[5, 20])
    args = ap.parse_args()
    accepted: list[float] = []
    diffs: list[float] = []
    for run in args.runs:
        rows = RunLog(run).candidates.read()
        accepted += [r.complexity for r in rows if r.verdict == "accepted" and r.complexity is not None]
        judged: dict[int, list[float]] = defaultdict(list)
        for r in rows:
            if r.verdict == "evaluated" and r.complexity is not None and r.round is not None:
                judged[r.round].append(r.complexity)
        diffs += [abs(a - b) for cs in judged.values() for a, b in itertools.combinations(cs, 2)]
    if not accepted:
        raise SystemExit("no accepted candidates in these run folders")
    print(f"runs: {len(args.runs)}  accepted candidates: {len(accepted)}  same-update pairs: {len(diffs)}")
    print(f"complexity: min {min(accepted):g}  median {statistics.median(accepted):g}  max {max(accepted):g}")
    if diffs:
        print(f"difference within an update: median {statistics.median(diffs):g}  max {max(diffs):g}")
    typical = statistics.median(diffs) if diffs else statistics.median(accepted)
    largest = max(diffs) if diffs else max(accepted) - min(accepted)
    head = "".join(f"  largest / (1 ep in {n})" for n in args.episodes)
    print(f"\n{'lambda':>8}  {'median diff':>11}  {'largest':>8}{head}")
    for lam in args.lam:
        shares = "".join(f"  {lam * largest * n:>20.2f}" for n in args.episodes)
        print(f"{lam:8.4g}  {lam * typical:11.4f}  {lam * largest:8.4f}{shares}")

if __name__ == "__main__":
    main()
