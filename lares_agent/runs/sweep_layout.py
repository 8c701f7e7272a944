"""Where every file of a sweep folder lives (`lares sweep --out DIR`): the one place that knows its names, as
`RunLayout` is for a run folder.

A sweep folder holds ``sweep.json`` (the grid and the options, written before any trial starts), ``runs/`` (one
ordinary run folder per trial, named ``<task>-<method>-s<seed>``), ``tune/`` (Ray Tune's experiment state, what
`lares sweep --resume` restores), ``cases/`` (the trials' case stores) and ``report/`` (`lares report --sweep`).
An experiment may put ``targets.json`` beside ``sweep.json``: what it asks of LaRes against the other methods,
which the report then counts and explains (`report/sweep_compare.py`); `lares sweep` itself never writes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lares_agent.runs.layout import NotARunError

__all__ = ["SWEEP_SPEC_NAME", "SWEEP_TARGETS_NAME", "NotASweepError", "SweepLayout", "trial_id"]

SWEEP_SPEC_NAME = "sweep.json"
SWEEP_TARGETS_NAME = "targets.json"
_RUNS, _TUNE, _CASES, _REPORT, _SHARED = "runs", "tune", "cases", "report", "shared"


class NotASweepError(NotARunError):
    """The given path is not a sweep folder (no ``sweep.json``)."""


def trial_id(task: str, method: str, seed: int) -> str:
    """A trial's run-folder name; a task given as ``package.module:function`` keeps only name characters."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", task).strip("_") or "task"
    return f"{safe}-{method}-s{int(seed)}"


@dataclass(frozen=True)
class SweepLayout:
    """The paths of one sweep folder (nothing is created or read by building one)."""

    root: Path

    @property
    def spec(self) -> Path:
        return self.root / SWEEP_SPEC_NAME

    @property
    def targets(self) -> Path:
        """The experiment's targets (optional: a sweep without them gets no verdict in its report)."""
        return self.root / SWEEP_TARGETS_NAME

    @property
    def runs(self) -> Path:
        """The folder that receives every trial's run folder."""
        return self.root / _RUNS

    def run(self, trial: str) -> Path:
        return self.runs / trial

    @property
    def tune_name(self) -> str:
        """Ray Tune's experiment name: its state lies in ``root/tune_name`` (RunConfig(storage_path=root))."""
        return _TUNE

    @property
    def tune(self) -> Path:
        return self.root / _TUNE

    def case_home(self, trial: str, shared: bool) -> Path:
        """The `LARES_HOME` of a trial: its own case store, or the one all trials of the sweep share."""
        return self.root / _CASES / (_SHARED if shared else trial)

    @property
    def report(self) -> Path:
        return self.root / _REPORT

    def is_sweep(self) -> bool:
        return self.spec.is_file()

    @classmethod
    def open(cls, path: Path) -> SweepLayout:
        """An existing sweep; a folder without ``sweep.json`` says so in one line."""
        layout = cls(Path(path))
        if not layout.is_sweep():
            raise NotASweepError(f"{path} is not a lares sweep folder (no {SWEEP_SPEC_NAME}); pass the --out DIR "
                                 "of `lares sweep`")
        return layout
