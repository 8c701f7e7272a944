"""The loop's counters, its run log (events, metrics, checkpoints) and the checks of a saved state.

A killed run resumes with nothing lost (docs/DESIGN.md §6). A saved state holds the learners, the buffer where
there is one, every reward as ``to_json()``, the generators and the counters as ``dataclasses.asdict``;
checkpoints are taken only at step boundaries and episode reset seeds derive from (run seed, episode counter), so
a restored engine with fresh environments plays exactly the steps the original would have played next.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from lares_agent.engine.checkpoint import save_checkpoint
from lares_agent.engine.contracts import HumanReward, LoadReward, MemberEvaluation, RewardFunction
from lares_agent.engine.errors import EngineError
from lares_agent.engine.loop.config import EngineConfig
from lares_agent.engine.protocols import Population
from lares_agent.runs import Event, MetricRow, RunLayout, RunLog, log_sizes

__all__ = [
    "STATE_VERSION",
    "Counters",
    "EngineLog",
    "check_state",
    "engine_state",
    "evaluation_row",
    "load_counters",
    "policy_state",
    "rewards_from_state",
]

STATE_VERSION = 3
"""Version of the engine state inside a checkpoint. 3: the loop's counters, generator and rewards, and the
population's own state under ``population`` (``protocols.Population.state_dict``)."""

C = TypeVar("C")


@dataclass
class Counters:
    """What the loop counts; the reward update moves ``round``, ``best_slot`` and ``last_update_steps``
    (``next_*`` None: that periodic event is off)."""

    env_steps: int = 0
    """Counted env steps of training episodes (the budget)."""
    eval_episode_counter: int = 0
    """Evaluation episodes played so far (their reset seeds come from this counter)."""
    round: int = 0
    """Reward updates done."""
    last_update_steps: int = 0
    best_slot: int = 0
    next_eval: int | None = None
    next_checkpoint: int | None = None

    def mark_update(self, round_: int, best: int, started_at: int) -> None:
        """Record a finished reward update that started at env step ``started_at``."""
        self.round, self.best_slot, self.last_update_steps = round_, best, started_at


def load_counters(cls: type[C], data: Mapping[str, Any]) -> C:
    """A counters dataclass from its ``asdict`` form; a missing or unknown field is an EngineError (the version says
    which fields to expect, so a mismatch is a corrupt checkpoint)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if set(data) != names:
        raise EngineError(f"checkpoint counters {sorted(data)} do not match {cls.__name__} fields {sorted(names)}")
    return cls(**dict(data))


def engine_state(task: str, config: EngineConfig, counters: Counters, rng: np.random.Generator,
                 rewards: Sequence[RewardFunction], population: Population,
                 handover: Mapping[str, Any]) -> dict[str, Any]:
    """The full engine state as nested dicts of arrays, tensors and scalars (``STATE_VERSION``; ``check_state`` and
    ``rewards_from_state`` read it back). ``handover``: the hand-over's own state (``loop/handover.py``)."""
    return {
        "version": STATE_VERSION,
        "learner": population.kind,
        "task": task,
        "config": config.to_json(),
        "counters": dataclasses.asdict(counters),
        "rng": rng.bit_generator.state,
        "rewards": [fn.to_json() for fn in rewards],
        "leaders": [[i] for i in population.leaders],
        "population": population.state_dict(),
        "handover": handover,
    }


def policy_state(task: str, config: EngineConfig, counters: Counters, population: Population) -> dict[str, Any]:
    """What policy files are cut from (``policy_artefact.artefact_from_state``): the engine state's fields they
    read, with the population's policies only."""
    return {"learner": population.kind, "task": task, "config": config.to_json(),
            "counters": dataclasses.asdict(counters), "population": population.policy_state()}


def check_state(state: Mapping[str, Any], learner: str, task_name: str) -> None:
    """Refuse, with one line, a state of another version, learner kind or task."""
    version = state.get("version")
    if version != STATE_VERSION:
        raise EngineError(f"checkpoint engine state version {version} cannot be loaded: this engine reads version "
                          f"{STATE_VERSION} (start the run again)")
    if state.get("learner") != learner:
        raise EngineError(f"checkpoint is a {state.get('learner')!r} engine state, not {learner!r}")
    if state.get("task") != task_name:
        raise EngineError(f"checkpoint is for task {state.get('task')!r}, not {task_name!r}")


def rewards_from_state(state: Mapping[str, Any], load_reward: LoadReward | None,
                       human_expression: Mapping[str, str] | None = None) -> list[RewardFunction]:
    """Every learner's reward from a saved state: the human reward is rebuilt here (with its saved complexity and
    ``human_expression``, which the state does not keep), others by ``load_reward``."""
    out: list[RewardFunction] = []
    for data in state["rewards"]:
        if data.get("kind") == "human":
            complexity = data.get("complexity")
            out.append(HumanReward(float(complexity) if isinstance(complexity, (int, float)) else 0.0,
                                   human_expression))
        elif load_reward is None:
            raise EngineError(f"checkpoint holds reward {data.get('id')!r} but no load_reward was given")
        else:
            out.append(load_reward(data))
    return out


class EngineLog:
    """Events (kept in ``events`` and appended to the run's events file), metrics rows and atomic checkpoints.

    The files and their record schemas belong to ``lares_agent.runs``: a row the schema does not know is a bug
    here, so it raises instead of being written. Without a run directory nothing is written: events are only
    kept in memory and checkpoints are skipped.
    """

    def __init__(self, run_dir: str | Path | None) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.events: list[dict[str, Any]] = []
        self._files = RunLog(RunLayout(self.run_dir)) if self.run_dir is not None else None

    def event(self, record: dict[str, Any]) -> None:
        """Keep and write one event."""
        self.events.append(record)
        if self._files is not None:
            self._files.events.append(_typed(Event.from_json(record), record))

    def metrics(self, record: dict[str, Any]) -> None:
        """Write one metrics row."""
        if self._files is not None:
            self._files.metrics.append(_typed(MetricRow.from_json(record), record))

    def checkpoint(self, state: Callable[[], dict[str, Any]], name: str | None, counters: Counters) -> Path | None:
        """Atomically save ``state()`` in the run's checkpoints folder and log a ``checkpoint`` event.

        Default name ``step-<env_steps>`` (only the newest periodic one is kept); reward updates use
        ``round-<n>`` names, which are kept.
        """
        if self._files is None:
            return None
        periodic = name is None
        name = name or f"step-{counters.env_steps:09d}"
        # the event goes first, so the sizes a resume cuts the logs back to keep it (a resume from this checkpoint
        # still says it was taken); a kill before the save leaves it past an older checkpoint's sizes, cut then
        self.event({"event": "checkpoint", "name": name, "env_steps": counters.env_steps, "round": counters.round})
        return save_checkpoint(
            self._files.layout.checkpoints, state(), name, prune_prefix="step-" if periodic else None,
            meta={"log_bytes": log_sizes(self._files.layout)},  # what a resume truncates the logs back to
        )

    def close(self) -> None:
        """Nothing stays open: every record is appended and flushed on its own (kept for the engine's close)."""


def evaluation_row(
    kind: str,
    counters: Counters,
    slot_evals: Sequence[MemberEvaluation],
    reward_ids: Sequence[str],
    wall_time: float,
    extra: MemberEvaluation | None = None,
    slot_fields: Callable[[int], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The loop's part of a metrics row: every slot's evaluation (``slot_fields`` adds the population's own
    per-slot fields) and the success summaries; the population adds its own fields to the returned dict."""
    succ = [e.success_rate for e in slot_evals]
    record: dict[str, Any] = {
        "kind": kind,
        "env_steps": counters.env_steps,
        "round": counters.round,
        "slots": [{**e.summary(), "slot": e.member, "reward_id": reward_ids[e.member],
                   **(slot_fields(e.member) if slot_fields is not None else {})} for e in slot_evals],
        # §12 item 16: report the max (the reference's number) AND the mean and the selected policy.
        "success_max": max(succ) if succ else None,
        "success_mean": float(np.mean(succ)) if succ else None,
        # the ranked-first policy: a slot's, or the init setting's human-reward learner's (member K)
        "success_best_slot": next((e.success_rate for e in [*slot_evals, *([extra] if extra else [])]
                                   if e.member == counters.best_slot), None),
        "best_slot": counters.best_slot,
        "wall_time": wall_time,
    }
    if extra is not None:
        record["extra"] = extra.summary()
    return record


T = TypeVar("T")


def _typed(record: T | None, raw: Mapping[str, Any]) -> T:
    if record is None:
        raise EngineError(f"the engine wrote a row its record schema does not know: {sorted(raw)}")
    return record
