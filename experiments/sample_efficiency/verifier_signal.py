"""Does the verifier's order tau predict the fitness a candidate later earns? Measured on real runs.

The verifier (`rewards/verifier.py`) scores every valid candidate of rounds >= 1 on the last update's evaluation
episodes and is logged in candidates.jsonl (`verifier_tau`); it decides nothing. It may decide only once this
measure says it carries signal: the same statistic as the pre-screen's (`prescreen_signal.py`, whose functions this
reuses): Kendall's tau over the untied pairs of candidates installed in the same round of the same run, verifier
tau against later fitness, with a 95% bootstrap interval over rounds; the verifier earns its vote only where the
interval's lower end is above 0. Runs from before the verifier was logged have no `verifier_tau` and add nothing.

Run: `python experiments/sample_efficiency/verifier_signal.py RUN_DIR ...` (default: this study's LaRes trials,
`experiments/sample_efficiency/runs/*-lares-*`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

SCORE = "verifier_tau"  # the run reader's `Candidate` field


def _prescreen_signal() -> ModuleType:
    """prescreen_signal.py beside this script (experiments/ is no package)."""
    path = Path(__file__).resolve().parent / "prescreen_signal.py"
    spec = importlib.util.spec_from_file_location("prescreen_signal", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None) -> tuple[float, float, float]:
    """Print the runs' numbers for the verifier's tau; returns the within-round tau and its 95% interval."""
    result: tuple[float, float, float] = _prescreen_signal().main(argv, score=SCORE)
    return result


if __name__ == "__main__":
    main()
