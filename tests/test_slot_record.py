"""`runs.slots.SlotRecord`: one slot at one evaluation, written to events, metrics and candidates as named views
of the same fields, and read back from lines older runs wrote."""

from __future__ import annotations

import json
import math
from dataclasses import fields

import pytest

from lares_agent.engine.contracts import ComponentStats, MemberEvaluation
from lares_agent.engine.setup.fitness import slot_evaluations
from lares_agent.runs import VIEWS, CandidateRow, MetricRow, RewardUpdateRecord, SlotRecord
from lares_agent.runs.jsonl import dumps_line

GRADED = SlotRecord(slot=1, reward_id="r1", success=0.4, task_return=-7.5, own_return=3.0, final_progress=0.2,
                    progress_closed=0.6, approach_closed=math.nan, action_jerk=0.03, learner_success=(0.2, 0.6),
                    components={"near": {"mean": -0.5, "std": 0.1, "share": 1.0}}, graded_by="success",
                    complexity=4.0, complexity_penalty=0.04, fitness=0.4)


def _through_a_file(data: dict[str, object]) -> dict[str, object]:
    return json.loads(dumps_line(data))  # as a run file holds it: non-finite numbers are null


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_reads_back_what_it_wrote(view: str) -> None:
    js = _through_a_file(GRADED.to_json(view))  # type: ignore[arg-type]
    given = {"slot": 1, "reward_id": "r1"} if view == "candidates" else {}  # the line's own fields there
    back = SlotRecord.from_json(js, view, **given)  # type: ignore[arg-type]
    assert _through_a_file(back.to_json(view)) == js  # type: ignore[arg-type]
    assert set(js) <= SlotRecord.keys(view)  # type: ignore[arg-type]
    if view == "events":  # it holds every field but the metrics line's own
        assert back == GRADED


def test_the_views_write_the_fields_each_file_always_held() -> None:
    assert set(GRADED.to_json("events")) == {
        "slot", "reward_id", "success", "task_return", "own_return", "final_progress", "complexity", "fitness",
        "quarantined", "components", "graded_by", "progress_closed", "approach_closed", "complexity_penalty",
        "action_jerk", "learner_success"}
    assert set(GRADED.to_json("metrics")) == {
        "slot", "reward_id", "success", "task_return", "own_return", "final_progress", "episode_length", "nonfinite",
        "learner_success"}  # no learner index, ES fields or grade where none was set
    cand = GRADED.to_json("candidates")
    assert set(cand) == {"success", "task_return", "fitness", "graded_by", "progress_closed", "action_jerk",
                         "complexity_penalty", "component_stats", "learner_success"}  # NaN approach: left out
    assert cand["component_stats"] == {"near": {"mean": -0.5, "std": 0.1, "share": 1.0}}
    # every field belongs to at least one view, so nothing is kept that no file holds
    assert all(f.metadata["views"] for f in fields(SlotRecord))


def test_the_engine_writes_its_evaluations_as_records() -> None:
    ev = MemberEvaluation(member=0, episodes=2, success_rate=0.5, task_return=-3.0, own_return=1.0, mean_progress=0.3,
                          final_progress=0.1, episode_length=50.0, progress_closed=0.4, action_jerk=0.2,
                          component_stats={"a": ComponentStats(-1.0, 0.5, 1.0)})
    rid = type("R", (), {"id": "r0", "complexity": 10.0})()
    (graded,) = slot_evaluations([ev], [rid], 0.002, [False], "success-then-return")
    assert (graded.graded_by, graded.graded, graded.fitness) == ("success", 0.5, 0.5)
    assert graded.complexity_penalty == pytest.approx(0.02) and graded.components["a"]["std"] == 0.5
    metrics = ev.record("r0").to_json("metrics")
    assert metrics["member"] == 0 and metrics["episode_length"] == 50.0 and "graded_by" not in metrics


def test_the_record_files_hold_records_and_read_older_lines() -> None:
    # an update line from before graded fitness: no grade, no shares; it reads, and writes back as it was
    old_slot = {"slot": 0, "reward_id": "x", "success": 0.3, "task_return": 7.0, "own_return": 1.0,
                "final_progress": 0.2, "complexity": 2.0, "fitness": 0.28, "quarantined": False, "components": {}}
    rec = RewardUpdateRecord.from_json({"event": "reward_update", "round": 1, "env_steps": 10,
                                        "fitness": {"0": 0.28}, "slots": [old_slot, {"reward_id": "no slot"}]})
    assert rec is not None and len(rec.slots) == 1  # a slot without a number is dropped
    assert rec.slots[0].graded_by is None and math.isnan(rec.slots[0].graded) and rec.slots[0].breakdown == ""
    assert rec.slots[0].to_json("events") == old_slot
    # a metrics line of an ES run: the population's own per-slot fields stay with the slot
    es_slot = {"member": 0, "success": 0.2, "task_return": -9.0, "own_return": -14.0, "final_progress": 0.1,
               "episode_length": 50.0, "nonfinite": False, "slot": 0, "reward_id": "r", "es_fitness": -20.0, "lr": 0.03}
    row = MetricRow.from_json({"kind": "eval", "env_steps": 100, "round": 0, "slots": [es_slot]})
    assert row is not None and row.slots[0].es_fitness == -20.0 and row.slots[0].to_json("metrics") == es_slot
    # a candidate line: its measurement is a record; a proposal's line has none
    line = {"id": "c", "round": 2, "slot": 1, "verdict": "evaluated", "fitness": 0.5, "success": 0.5,
            "complexity": 3.0, "component_stats": {}, "graded_by": "success", "complexity_penalty": 0.0}
    cand = CandidateRow.from_json(line)
    assert cand is not None and cand.evaluated is not None
    assert (cand.evaluated.slot, cand.evaluated.reward_id, cand.evaluated.fitness) == (1, "c", 0.5)
    assert cand.to_json() == line
    proposal = CandidateRow.from_json({"id": "p", "round": 1, "verdict": "accepted", "components": {"a": "-d"}})
    assert proposal is not None and proposal.evaluated is None and "fitness" not in proposal.to_json()
