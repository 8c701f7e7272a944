"""Does the offline pre-screen's proxy predict the fitness a candidate later earns? Measured on real runs.

The pre-screen (`rewards/prescreen.py`) decides which valid candidates of a round get the free slots. It earns that
role only if, among the candidates of one round, a higher proxy goes with a higher fitness once trained. Only
installed candidates are ever trained, so the test is over them: every pair of candidates installed in the same
round of the same run is concordant (proxy and fitness agree on the order), discordant, or tied in fitness (the
grade could not tell them apart). The statistic is Kendall's tau over the untied pairs, with a 95% bootstrap
interval that resamples whole rounds; the pooled Spearman over all candidates (rounds, tasks and grades mixed) is
printed beside it, and each run's own.

Run: `python experiments/raw.py unpack sample_efficiency`, then
`python experiments/sample_efficiency/prescreen_signal.py [RUN_DIR ...]` (default: this study's LaRes trials,
`experiments/sample_efficiency/runs/*-lares-*`).
"""

from __future__ import annotations

import argparse
import itertools
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.report.proxy import ProxyRow, proxy_rows, spearman
from lares_agent.runs.reader import read_run

DEFAULT_RUNS = Path(__file__).resolve().parent / "runs"
BOOTSTRAP = 10_000


def _pairs(group: list[ProxyRow]) -> tuple[int, int, int]:
    """(concordant, discordant, tied) pairs of one round's trained candidates."""
    agree = disagree = tied = 0
    for a, b in itertools.combinations(group, 2):
        assert a.fitness is not None and b.fitness is not None
        sign = (a.proxy - b.proxy) * (a.fitness - b.fitness)
        if a.fitness == b.fitness or a.proxy == b.proxy:
            tied += 1
        elif sign > 0:
            agree += 1
        else:
            disagree += 1
    return agree, disagree, tied


def _tau(counts: np.ndarray) -> float:
    agree, disagree = counts[..., 0], counts[..., 1]
    total = agree + disagree
    return np.where(total > 0, (agree - disagree) / np.maximum(total, 1), np.nan)


def within_rounds(rounds: Mapping[Any, list[ProxyRow]], seed: int) -> tuple[np.ndarray, float, float, float]:
    """The per-round (concordant, discordant, tied) counts of the rounds with 2+ trained candidates, the pooled
    Kendall tau over their untied pairs and its 95% bootstrap interval over rounds (NaN: no untied pair)."""
    counts = np.array([_pairs(g) for g in rounds.values() if len(g) >= 2], dtype=np.int64).reshape(-1, 3)
    tau = float(_tau(counts.sum(axis=0)))
    if len(counts) == 0:
        return counts, tau, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = counts[rng.integers(0, len(counts), size=(BOOTSTRAP, len(counts)))].sum(axis=1)
    with warnings.catch_warnings():  # every draw without an untied pair: the interval is NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(_tau(draws), [2.5, 97.5])
    return counts, tau, float(low), float(high)


def main(argv: Sequence[str] | None = None, score: str = "proxy") -> tuple[float, float, float]:
    """Print the runs' numbers for ``score`` (a run reader `Candidate` field: the proxy, or the verifier's
    ``verifier_tau``); returns the within-round tau and its interval."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    runs = args.runs or sorted(DEFAULT_RUNS.glob("*-lares-*"))
    if not runs:
        raise SystemExit(f"no run folders in {DEFAULT_RUNS} (`python experiments/raw.py unpack sample_efficiency`)")

    pooled: list[ProxyRow] = []
    rounds: dict[tuple[str, int | None], list[ProxyRow]] = defaultdict(list)
    print(f"{'run':<34} {'scored':>6} {'trained':>7} {'spearman':>8}")
    for run in runs:
        scored = proxy_rows(read_run(run), score)
        rows = [r for r in scored if r.fitness is not None]
        rho, n = spearman(rows)
        print(f"{run.name:<34} {len(scored):>6} {n:>7} {'-' if rho is None else f'{rho:+.2f}':>8}")
        pooled += rows
        for r in rows:
            rounds[(str(run), r.round)].append(r)

    counts, tau, low, high = within_rounds(rounds, args.seed)
    agree, disagree, tied = (int(v) for v in counts.sum(axis=0))
    rho, n = spearman(pooled)
    print(f"\npooled Spearman({score}, later fitness): {rho if rho is None else f'{rho:+.3f}'} over {n} candidates "
          f"of {len(runs)} runs (rounds, tasks and grades mixed)")
    print(f"within a round: {len(counts)} rounds with 2+ trained candidates, {agree} concordant, {disagree} "
          f"discordant, {tied} tied pairs; Kendall tau {tau:+.3f}, 95% interval [{low:+.3f}, {high:+.3f}]")
    verdict = "carries signal" if low > 0 else "carries no signal the runs can show"
    print(f"the {score} {verdict} about the order of a round's candidates")
    return tau, low, high


if __name__ == "__main__":
    main()
