"""Where every file of a run lives: the one place that knows the run folder's names (docs/ARCHITECTURE.md,
"Run directory").

A run folder holds ``config.json`` (the search config, written first), ``metrics.jsonl`` (evaluations),
``events.jsonl`` (reward updates, quarantines, checkpoints, ...), ``candidates.jsonl`` (every proposal and its
verdict), ``feedback.jsonl`` (the user's notes to the next round, `lares feedback`), ``llm_calls.jsonl`` (every
LLM call, what a replay answers from), ``trace.sqlite`` (the graph's checkpoints), ``checkpoints/`` (engine
state), ``report/`` (the HTML report) and, with ``--tensorboard``, ``tensorboard/`` (TensorBoard scalars mirrored
from the records).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from lares_agent.errors import LaresError
from lares_agent.runs.oserrors import run_file_error

__all__ = [
    "CANDIDATES_NAME",
    "CHECKPOINTS_NAME",
    "CONFIG_NAME",
    "EVENTS_NAME",
    "FEATURE_SAMPLE_NAME",
    "FEEDBACK_NAME",
    "FINAL_POLICY",
    "LLM_CALLS_NAME",
    "METRICS_NAME",
    "POLICIES_NAME",
    "REPORT_NAME",
    "RUN_FILE_NAMES",
    "RUN_MARKERS",
    "TENSORBOARD_NAME",
    "TRACE_NAME",
    "NotARunError",
    "RunLayout",
]

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.jsonl"
EVENTS_NAME = "events.jsonl"
CANDIDATES_NAME = "candidates.jsonl"
FEEDBACK_NAME = "feedback.jsonl"  # the user's notes, read at each round's start (runs/feedback.py)
LLM_CALLS_NAME = "llm_calls.jsonl"
TRACE_NAME = "trace.sqlite"
CHECKPOINTS_NAME = "checkpoints"
REPORT_NAME = "report"
# the selected policy at each reward update and at the end (engine/policies/policy_artefact.py)
POLICIES_NAME = "policies"
POLICY_SUFFIX = ".pt"
FINAL_POLICY = "final"
SLOT_POLICY_PREFIX = "slot-"  # every slot's policy at the end: policies/slot-2.pt
TENSORBOARD_NAME = "tensorboard"  # `lares run --tensorboard`: the scalars of the records (runs/tensorboard.py)
FEATURE_SAMPLE_NAME = "feature_sample.npz"  # inside checkpoints/: buffer features for the report's influence

RUN_FILE_NAMES: tuple[str, ...] = (
    CONFIG_NAME, METRICS_NAME, EVENTS_NAME, CANDIDATES_NAME, LLM_CALLS_NAME, TRACE_NAME, CHECKPOINTS_NAME,
    REPORT_NAME, FEATURE_SAMPLE_NAME, POLICIES_NAME, FEEDBACK_NAME,
)
# Files whose presence marks a run folder (config.json alone is enough: a run killed before its first
# evaluation still deserves a report that says so).
RUN_MARKERS: tuple[str, ...] = (CONFIG_NAME, METRICS_NAME, EVENTS_NAME)


class NotARunError(LaresError, ValueError):
    """The given path is not a run folder; ``reason`` is one line fit for the CLI."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run folder (nothing is created or read by building one)."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def metrics(self) -> Path:
        return self.root / METRICS_NAME

    @property
    def events(self) -> Path:
        return self.root / EVENTS_NAME

    @property
    def candidates(self) -> Path:
        return self.root / CANDIDATES_NAME

    @property
    def feedback(self) -> Path:
        return self.root / FEEDBACK_NAME

    @property
    def llm_calls(self) -> Path:
        return self.root / LLM_CALLS_NAME

    @property
    def trace(self) -> Path:
        return self.root / TRACE_NAME

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS_NAME

    @property
    def feature_sample(self) -> Path:
        return self.checkpoints / FEATURE_SAMPLE_NAME

    @property
    def policies(self) -> Path:
        return self.root / POLICIES_NAME

    def policy(self, name: str) -> Path:
        """The policy file ``name`` (``round-0003``, ``final``, ``slot-2``) in ``policies/``."""
        return self.policies / f"{name}{POLICY_SUFFIX}"

    def slot_policy(self, slot: int) -> Path:
        """Slot ``slot``'s policy at the end of the run (``policies/slot-<slot>.pt``)."""
        return self.policy(f"{SLOT_POLICY_PREFIX}{int(slot)}")

    @property
    def report(self) -> Path:
        return self.root / REPORT_NAME

    @property
    def tensorboard(self) -> Path:
        return self.root / TENSORBOARD_NAME

    def is_run(self) -> bool:
        """True when the folder holds at least one run marker (config, metrics or events)."""
        return self.root.is_dir() and any((self.root / m).is_file() for m in RUN_MARKERS)

    @classmethod
    def create(cls, base: Path, task: str, run_id: str | None = None) -> RunLayout:
        """A new, empty run folder ``base/<task>-<timestamp>`` (or ``base/run_id``; a suffix when it is taken).

        A timestamp name is claimed with an exclusive mkdir: two runs started in the same second (by hand, one per
        core) used to both find the folder empty and write into one. An empty ``run_id`` folder is reused (a
        sweep trial whose start was cut short)."""
        name = run_id or f"{task}-{time.strftime('%Y%m%d-%H%M%S')}"
        root = base / name
        suffix = 1
        try:
            base.mkdir(parents=True, exist_ok=True)
            while True:
                try:
                    root.mkdir()
                    break
                except FileExistsError:
                    if run_id is not None and root.is_dir() and not any(root.iterdir()):
                        break
                root = base / f"{name}-{suffix}"
                suffix += 1
        except OSError as exc:
            raise run_file_error("create the run folder", root, exc, "; pass --run-dir FOLDER") from None
        return cls(root)

    @staticmethod
    def prepare_base(base: Path) -> None:
        """Make the folder that receives run folders; one line naming it and the cause when it cannot be made
        (`--run-dir` under /proc, below a file, read-only). Called before a progress display exists."""
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise run_file_error("create the run folder", base, exc, "; pass --run-dir FOLDER") from None

    @classmethod
    def open(cls, path: Path) -> RunLayout:
        """An existing run; a folder without ``config.json`` is not a run and says so."""
        run = cls(Path(path))
        if not run.config.is_file():
            raise NotARunError(
                f"{path} is not a lares run directory (no {CONFIG_NAME}); pass the folder `lares run` printed"
            )
        return run
