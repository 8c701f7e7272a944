"""One slot at one evaluation, the record every run file that speaks of a slot holds: ``SlotRecord``.

A slot's evaluation is written to three files, each a named view of the one record (``VIEWS``):

- ``events`` (a ``reward_update``'s ``slots``): the summary and the grade;
- ``metrics`` (a metrics line's ``slots``): the summary with the episode length, the learner index and the
  population's own per-slot fields;
- ``candidates`` (an ``evaluated`` line): what the fitness was made of, under the candidate's id and slot.

The JSON of each view is made from the dataclass fields (each field names the views it belongs to), and read back
with the tolerant readers of ``runs/coerce.py``, so a field is declared once and an older line, missing fields it
did not yet have, reads with their defaults (NaN for numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from lares_agent.runs.coerce import as_float, as_float_list, as_int, as_opt_float, as_opt_str, as_stats, as_str

__all__ = ["VIEWS", "SlotRecord", "SlotView", "fitness_breakdown"]

SlotView = Literal["events", "metrics", "candidates"]
VIEWS: tuple[SlotView, ...] = get_args(SlotView)

_EVENTS: tuple[SlotView, ...] = ("events",)
_METRICS: tuple[SlotView, ...] = ("metrics",)
_SUMMARY: tuple[SlotView, ...] = ("events", "metrics")
_GRADE: tuple[SlotView, ...] = ("events", "candidates")
_ALL: tuple[SlotView, ...] = VIEWS


def _bool(value: Any) -> bool:
    return bool(value) if value is not None else False


def _of(default: Any, read: Callable[[Any], Any], views: tuple[SlotView, ...], *, graded: bool = False,
        keys: Mapping[str, str] | None = None) -> Any:
    """A record field: its default, how a JSON value is read, the views that write it, whether the events view
    leaves it out of a record without a grade (``graded``), and its key in a view where it is named otherwise."""
    meta = {"read": read, "views": views, "graded": graded, "keys": dict(keys or {})}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class SlotRecord:
    """One slot at one evaluation: how its policy did (the summary) and, at a reward update, how it was graded.

    With several learners per slot (``--learners-per-reward``) the summary is their mean and ``learner_success``
    lists each one's success rate. The grade (``graded_by`` .. ``fitness``) is set at reward updates only; the rule
    that sets it is the engine's (``engine/setup/fitness.py``, docs/DESIGN.md "Graded fitness").
    """

    slot: int = _of(0, as_int, _SUMMARY)
    reward_id: str = _of("?", lambda v: as_str(v, "?"), _SUMMARY)
    member: int | None = _of(None, as_int, _METRICS)
    """The engine's learner index (equal to the slot) on metrics lines."""
    # ----------------------------------------------------------------- the summary
    success: float = _of(math.nan, as_float, _ALL)
    """Success rate over the evaluation's episodes."""
    task_return: float = _of(math.nan, as_float, _ALL)
    """Mean sum of the task's own (human) reward per episode (NaN where the task has none)."""
    own_return: float = _of(math.nan, as_float, _SUMMARY)
    """Mean sum of the slot's own raw reward per episode."""
    final_progress: float = _of(math.nan, as_float, _SUMMARY)
    """Mean progress feature at the last step (lower is better)."""
    episode_length: float = _of(math.nan, as_float, _METRICS)
    nonfinite: bool = _of(False, _bool, _METRICS)
    """The policy or its reward went non-finite in the evaluation."""
    progress_closed: float = _of(math.nan, as_float, _GRADE, graded=True)
    """Mean share of the start distance of the progress feature closed, in [-1, 1]."""
    approach_closed: float = _of(math.nan, as_float, _GRADE, graded=True)
    """The same share for the task's approach feature (NaN for a task without one)."""
    action_jerk: float = _of(math.nan, as_float, _GRADE, graded=True)
    """Mean squared change of the action per step (lower is smoother; Pareto selection's objective)."""
    learner_success: tuple[float, ...] = _of((), as_float_list, _ALL)
    """Each learner's success rate when the slot has several (empty for one)."""
    components: Mapping[str, Mapping[str, float]] = _of({}, as_stats, _GRADE, keys={"candidates": "component_stats"})
    """Each reward component's mean, std and share of the total |r| over the evaluation's steps."""
    # ----------------------------------------------------------------- the grade (reward updates)
    graded_by: str | None = _of(None, as_opt_str, _GRADE)
    """What the fitness was graded on: "success", "progress", "approach" or "return" (one per update); None on a
    line from before graded fitness."""
    complexity: float = _of(math.nan, as_float, _EVENTS)
    """The reward's complexity (a candidate line carries its own, ``CandidateRow.complexity``)."""
    complexity_penalty: float = _of(math.nan, as_float, _GRADE, graded=True)
    """complexity_lambda * complexity: orders slots equal in fitness and tie-break."""
    fitness: float = _of(math.nan, as_float, _GRADE)
    """The graded value (-inf, logged as null, for a quarantined slot). Runs before the one ranking rule logged
    graded value - complexity_penalty."""
    quarantined: bool = _of(False, _bool, _EVENTS)
    """Its policy or reward went non-finite: it ranks below every other slot."""
    # ----------------------------------------------------------------- the population's own (metrics lines)
    es_fitness: float | None = _of(None, as_opt_float, _METRICS)
    """ES: the mean fitness of the slot's perturbations since the last metrics line."""
    lr: float | None = _of(None, as_opt_float, _METRICS)
    """ES: the slot's mean learning rate since the last metrics line."""

    @staticmethod
    def value_graded(grade: str | None, success: float, progress_closed: float, approach_closed: float,
                     task_return: float = math.nan) -> float:
        """The value a fitness is graded on (docs/DESIGN.md, "Graded fitness"): the success rate, the share of the
        start distance closed of the progress or of the approach feature, or the task return ("return"). No grade
        (a record from before graded fitness): the success rate."""
        if grade == "progress":
            return progress_closed
        if grade == "return":
            return task_return
        return approach_closed if grade == "approach" else success

    @property
    def graded(self) -> float:
        """The value this record's fitness was graded on; NaN for a record without a grade."""
        if self.graded_by is None:
            return math.nan
        return self.value_graded(self.graded_by, self.success, self.progress_closed, self.approach_closed,
                                 self.task_return)

    @property
    def breakdown(self) -> str:
        """What the fitness was made of (``fitness_breakdown``; "" for a record without a grade)."""
        return fitness_breakdown(self.graded_by, self.graded, self.complexity_penalty, self.learner_success,
                                 self.fitness)

    def to_json(self, view: SlotView) -> dict[str, Any]:
        """The record as ``view``'s JSON object. Every view leaves out an empty ``learner_success``; ``events``
        leaves out the grade's details of a record without a grade; ``metrics`` leaves out what is None;
        ``candidates`` leaves out what is None or not finite (a line says only what was measured)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            meta = f.metadata
            if view not in meta["views"]:
                continue
            value = getattr(self, f.name)
            if value is None and view != "events":
                continue
            if isinstance(value, tuple):
                if not value:
                    continue
                value = list(value)
            elif isinstance(value, Mapping):
                value = {k: dict(v) for k, v in value.items()}
            elif view == "candidates" and isinstance(value, float) and not math.isfinite(value):
                continue
            if view == "events" and meta["graded"] and self.graded_by is None:
                continue
            out[meta["keys"].get(view, f.name)] = value
        if view == "events" and self.graded_by is None:
            out.pop("graded_by", None)
        return out

    @classmethod
    def keys(cls, view: SlotView) -> frozenset[str]:
        """The JSON keys ``view`` may write."""
        return frozenset(f.metadata["keys"].get(view, f.name) for f in fields(cls) if view in f.metadata["views"])

    @classmethod
    def from_json(cls, row: Mapping[str, Any], view: SlotView, **given: Any) -> SlotRecord:
        """Read ``view``'s JSON object (missing or mistyped fields read as their defaults); ``given`` sets fields
        the line holds elsewhere (a candidate line's slot and id)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = f.metadata["keys"].get(view, f.name)
            if f.name not in given and key in row:
                values[f.name] = f.metadata["read"](row[key])
        return cls(**values, **given)


def fitness_breakdown(graded_by: str | None, graded: float, penalty: float,
                      learner_success: tuple[float, ...] = (), fitness: float = math.nan) -> str:
    """What a slot's fitness was made of (docs/DESIGN.md, "Graded fitness"): "<graded_by> <value>", with the
    learners' success spread when a slot has several, e.g. "success 0.60 [0.20-1.00 over 3]" or "return 412.3"; ""
    without a grade. The fitness is the graded value; a record of a run before the one ranking rule, whose
    ``fitness`` lies a complexity penalty below it, says so: "success 0.60 - 0.01 cx". Shared by the report and
    `lares trace`, so both say it in the same words. A return is shown to one decimal: it runs to the hundreds,
    rates and shares to 1."""
    if graded_by is None or not math.isfinite(graded):
        return ""
    charged = math.isfinite(penalty) and penalty > 0 and math.isfinite(fitness) and graded - fitness > penalty / 2
    cx = f" - {penalty:.2f} cx" if charged else ""
    values = [v for v in learner_success if math.isfinite(v)]
    spread = f" [{min(values):.2f}-{max(values):.2f} over {len(values)}]" if len(values) > 1 else ""
    value = f"{graded:.1f}" if graded_by == "return" else f"{graded:.2f}"
    return f"{graded_by} {value}{spread}{cx}"
