"""runs/: every run-file name in one module, atomic writes, and one schema per record kind shared by the
writers and the readers."""

from __future__ import annotations

import ast
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest

from lares_agent.report.summary import summarize
from lares_agent.runs import (
    RUN_FILE_NAMES,
    CandidateRow,
    Event,
    LLMCallRow,
    MetricRow,
    NotARunError,
    RewardUpdateRecord,
    RunLayout,
    RunLog,
    SlotRecord,
    atomic_write_text,
    read_jsonl,
)
from lares_agent.runs.reader import read_run
from lares_agent.search.config import SearchConfig

PACKAGE = Path(__file__).resolve().parents[1] / "lares_agent"

# Literal run-file names still written outside runs/: the engine's writers, which switch to RunLog /
# RunLayout when the engine restructuring is merged. Shrink this list as they do; it must not grow.
ENGINE_ALLOW_LIST: frozenset[tuple[str, str]] = frozenset()  # the engine writes through runs/ too


def _literal_names(tree: ast.AST) -> set[str]:
    """Run-file names used as string literals: any file name (``x.jsonl``, ``x/x.npz``) anywhere, and folder
    names (``checkpoints``, ``report``) where they join a path (``root / "report"``). Prose in docstrings
    never equals a bare name, so it is not caught."""
    files = {n for n in RUN_FILE_NAMES if "." in n}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= {n for n in files if node.value == n or node.value.endswith("/" + n)}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                if isinstance(side, ast.Constant) and side.value in RUN_FILE_NAMES:
                    found.add(str(side.value))
    return found


def test_run_file_names_are_written_only_in_runs() -> None:
    found = {
        (path.relative_to(PACKAGE).as_posix(), name)
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "runs"
        for name in _literal_names(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert not found - ENGINE_ALLOW_LIST, "use lares_agent.runs.RunLayout instead of: " + repr(
        sorted(found - ENGINE_ALLOW_LIST))
    assert not ENGINE_ALLOW_LIST - found, "switched to runs/: remove from ENGINE_ALLOW_LIST: " + repr(
        sorted(ENGINE_ALLOW_LIST - found))


def test_the_name_scan_sees_a_literal() -> None:
    tree = ast.parse('p = root / "checkpoints"\nq = root / "metrics.jsonl"\nr = "checkpoints/feature_sample.npz"\n')
    assert _literal_names(tree) == {"checkpoints", "metrics.jsonl", "feature_sample.npz"}
    assert _literal_names(ast.parse('"""Writes metrics.jsonl and report/."""\nx = "report"\n')) == set()


def test_layout_names_every_file_under_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = RunLayout(tmp_path)
    paths = [run.config, run.metrics, run.events, run.candidates, run.llm_calls, run.trace, run.checkpoints,
             run.report, run.policies, run.feedback]
    assert [p.name for p in paths] == [n for n in RUN_FILE_NAMES if n != "feature_sample.npz"]
    assert all(p.parent == tmp_path for p in paths) and run.feature_sample.parent == run.checkpoints
    assert not run.is_run()
    with pytest.raises(NotARunError, match="not a lares run directory"):
        RunLayout.open(tmp_path)
    made = RunLayout.create(tmp_path, "reach-v3", "r1")
    (made.root / "x").write_text("")
    assert RunLayout.create(tmp_path, "reach-v3", "r1").root.name == "r1-1"  # a taken folder is not reused
    assert RunLayout.create(tmp_path, "reach-v3", "r2").root == RunLayout.create(tmp_path, "reach-v3", "r2").root
    # Two runs started in the same second get two folders, even before either has written a file.
    monkeypatch.setattr(time, "strftime", lambda *_: "same")
    first, second = (RunLayout.create(tmp_path / "hand", "reach-v3") for _ in range(2))
    assert (first.root.name, second.root.name) == ("reach-v3-same", "reach-v3-same-1")


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.json"
    atomic_write_text(path, "old")

    def broken(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write_text(path, "new")
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


# ----------------------------------------------------------------------------- schemas: what is written today
# Lines shaped exactly as the writers have always written them (field names and nesting), finite numbers so
# that equality is exact.
SAC_METRIC = {
    "kind": "eval", "env_steps": 300, "round": 1,
    "slots": [{"member": 0, "success": 0.4, "task_return": 12.0, "own_return": -3.0, "final_progress": 0.1,
               "episode_length": 50.0, "nonfinite": False, "slot": 0, "reward_id": "r-a"},
              {"member": 1, "success": 0.0, "task_return": 2.0, "own_return": -9.0, "final_progress": 0.5,
               "episode_length": 50.0, "nonfinite": False, "slot": 1, "reward_id": "r-b"}],
    "success_max": 0.4, "success_mean": 0.2, "success_best_slot": 0.4, "best_slot": 0,
    "acted": [3, 2], "losses": {"q_loss": [0.5, 0.7], "actor_loss": [-1.0, -2.0]}, "alpha": [0.2, 0.3],
    "quarantined": [1], "wall_time": 12.5,
    "extra": {"member": 2, "success": 0.1, "task_return": 1.0, "own_return": 1.0, "final_progress": 0.3,
              "episode_length": 50.0, "nonfinite": False},
}
ES_METRIC = {
    "kind": "update", "learner": "es", "env_steps": 900, "round": 2, "generation": 7,
    "slots": [{"member": 0, "success": 1.0, "task_return": 5.0, "own_return": 4.0, "final_progress": 0.0,
               "episode_length": 20.0, "nonfinite": False, "slot": 0, "reward_id": "e-a", "es_fitness": 3.5,
               "lr": 0.01}],
    "success_max": 1.0, "success_mean": 1.0, "success_best_slot": 1.0, "best_slot": 0,
    "diversity": {"distinct": 1, "distinct_fraction": 1.0, "behaviour_distance": 0.2, "explore": False},
    "wall_time": 40.0,
}
STATS = {"near": {"mean": -1.0, "std": 0.2, "share": 0.75}, "slow": {"mean": -0.1, "std": 0.1, "share": 0.25}}
SAC_UPDATE = {
    "event": "reward_update", "round": 1, "env_steps": 300, "fitness": {"0": 0.4, "1": 0.0}, "ranking": [0, 1],
    "elites": [0], "best": 0, "replaced": {"1": "r-c"}, "inherited": [1],
    "slots": [{"slot": 0, "reward_id": "r-a", "success": 0.4, "task_return": 12.0, "own_return": -3.0,
               "final_progress": 0.1, "complexity": 5.0, "fitness": 0.4, "quarantined": False, "components": STATS},
              {"slot": 1, "reward_id": "r-b", "success": 0.0, "task_return": 2.0, "own_return": -9.0,
               "final_progress": 0.5, "complexity": 9.0, "fitness": 0.0, "quarantined": False, "components": {}}],
}
ES_UPDATE = {**SAC_UPDATE, "learner": "es", "generation": 7, "selection": "truncation",
             "diversity": {"distinct": 2, "distinct_fraction": 1.0, "behaviour_distance": 0.3, "explore": False}}
EVENTS = [
    {"event": "warmup", "steps": 60, "rewards": ["r-a", "r-b"]},
    {"event": "candidate_rejected", "round": 1, "slot": 1, "reward_id": "r-x", "reason": "NaN on the buffer"},
    {"event": "candidate_accepted", "round": 1, "slot": 1, "reward_id": "r-c", "scale": 1.5, "shift": 0.1},
    {"event": "reward_shared", "round": 1, "slot": 2, "reward_id": "r-a", "reason": "its reward was NaN/inf"},
    {"event": "quarantine", "learner": 2, "reason": "non-finite SAC loss", "env_steps": 250},
    {"event": "checkpoint", "name": "round-0001", "env_steps": 300, "round": 1},
    {"event": "resumed", "env_steps": 300, "round": 1},
    {"event": "run_start", "time": 1.7e9, "env_steps": 0, "round": 0},
    {"event": "fallback", "time": 1.7e9, "round": 0, "slot": 1, "reward_id": "fallback-r0-s1", "reason": "no LLM"},
    {"event": "run_end", "time": 1.7e9, "env_steps": 300, "finished": True, "wall_s": 33.0, "best_success": 0.4,
     "llm": {"calls": 3}},
    {"event": "llm_fault", "call": 0, "kind": "timeout", "reason": "injected", "key": "k", "time": 1.7e9},
]
CANDIDATES = [
    {"id": "r-a", "round": 0, "slot": 0, "components": {"near": "-tcp_to_obj"}, "rationale": "reach",
     "verdict": "accepted", "reason": "", "complexity": 5.0, "parent_id": "r-0", "critique_id": "c-1", "attempt": 1},
    {"id": "r-x", "round": 1, "components": {"x": "1"}, "rationale": "", "verdict": "rejected",
     "reason": "constant", "complexity": 1.0, "attempt": 0},
    {"id": "r-a", "round": 1, "slot": 0, "verdict": "evaluated", "fitness": 0.4, "success": 0.4, "complexity": 5.0,
     "component_stats": STATS},
    {"id": "fallback-r0-s1", "round": 0, "slot": 1, "components": {"progress": "-tcp_to_obj"}, "verdict": "accepted",
     "reason": "fallback", "complexity": 2.0, "rationale": "fallback: no valid LLM candidate"},
]
LLM_CALL = {
    "call": 4, "tag": "propose", "round": 1, "meta": {"node": "propose", "round": 1, "attempt": 0, "persona": "p"},
    "key": "abc", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
    "schema": {"type": "object"}, "answer": '{"candidates": []}', "ok": True, "error": None, "prompt_tokens": 120,
    "completion_tokens": 30, "seconds": 1.25, "attempt": 1, "backend": "replay", "time": "2025-01-01T00:00:00+00:00",
}


def _same_json(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return json.loads(json.dumps(a, sort_keys=True)) == json.loads(json.dumps(b, sort_keys=True))


@pytest.mark.parametrize("row", [SAC_METRIC, ES_METRIC], ids=["sac", "es"])
def test_metric_row_reads_and_writes_todays_line(row: dict[str, Any]) -> None:
    rec = MetricRow.from_json(row)
    assert rec is not None and _same_json(rec.to_json(), row)
    assert rec.slots[0].reward_id == row["slots"][0]["reward_id"] and rec.kind == row["kind"]


def test_event_lines_read_and_write_unchanged() -> None:
    for row in [*EVENTS, SAC_UPDATE, ES_UPDATE]:
        ev = Event.from_json(row)
        assert ev is not None and _same_json(ev.to_json(), row), row["event"]
    assert Event.from_json({"event": "no_such_kind"}) is None
    ev = Event.of("quarantine", learner=1, reason="r", env_steps=5)
    assert (ev.env_steps, ev.round, ev.fields) == (5, None, {"learner": 1, "reason": "r"})


@pytest.mark.parametrize("row", [SAC_UPDATE, ES_UPDATE], ids=["sac", "es"])
def test_reward_update_record_round_trip(row: dict[str, Any]) -> None:
    rec = RewardUpdateRecord.from_json(row)
    assert rec is not None
    assert rec.best == 0 and rec.replaced == {1: "r-c"} and rec.fitness == {0: 0.4, 1: 0.0}
    assert rec.slots[0].components["near"]["share"] == 0.75
    assert _same_json(rec.to_json(), row)
    assert RewardUpdateRecord.from_json(EVENTS[0]) is None  # not an update


def test_candidate_and_llm_call_round_trip() -> None:
    for row in CANDIDATES:
        rec = CandidateRow.from_json(row)
        assert rec is not None and _same_json(rec.to_json(), row)
    assert CandidateRow.from_json({"verdict": "accepted"}) is None  # no id, no candidate
    call = LLMCallRow.from_json(LLM_CALL)
    assert _same_json(call.to_json(), LLM_CALL) and call.node == "propose"
    assert "fault" not in call.to_json()


def test_candidate_rows_carry_the_verifier_and_old_rows_read_without_it() -> None:
    # rewards/verifier.py's numbers: optional fields, left out of the JSON where absent
    row = {"id": "c", "round": 2, "verdict": "accepted", "slot": 1, "proxy": 0.5, "verifier_tau": -0.25,
           "verifier_progress": 0.5, "verifier_flooding": 0.1}
    rec = CandidateRow.from_json(row)
    assert rec is not None and rec.verifier_tau == -0.25 and rec.verifier_flooding == 0.1
    assert _same_json(rec.to_json(), row)
    old = CandidateRow.from_json({"id": "c", "round": 0, "verdict": "accepted"})
    assert old is not None and old.verifier_tau is None and "verifier_tau" not in old.to_json()


def test_record_files_round_trip_and_skip_torn_lines(tmp_path: Path) -> None:
    log = RunLog(tmp_path)
    metric = MetricRow("eval", 100, 0, (SlotRecord(0, "a", success=0.5, task_return=1.0, own_return=2.0),),
                       wall_time=3.0, acted=(1,))
    update = RewardUpdateRecord(round=1, env_steps=100, fitness={0: 0.5}, best=0, elites=(0,),
                                slots=(SlotRecord(0, "a", fitness=0.5, complexity=3.0),))
    cand = CandidateRow(id="a", round=0, slot=0, verdict="accepted", components={"x": "-d"}, complexity=3.0)
    call = LLMCallRow(call=0, tag="propose", answer="{}", meta={"node": "propose"}, fault="timeout")
    log.metrics.append(metric)
    log.events.append(update.to_event())
    with log.layout.events.open("a") as fh:
        fh.write('{"event": "checkpoint", "na')  # a writer killed mid-line
    stamped = RunLog(tmp_path, clock=lambda: 7.0).event("run_end", env_steps=100, wall_s=1.0)
    log.candidates.extend([cand, cand])
    log.llm_calls.append(call)
    assert log.metrics.read() == [metric]
    events = log.events.read()
    assert [e.event for e in events] == ["reward_update", "run_end"] and events[1] == stamped
    assert stamped.time == 7.0 and RewardUpdateRecord.from_event(events[0]) == update
    assert log.candidates.read() == [cand, cand] and log.llm_calls.read() == [call]
    assert all(isinstance(r, dict) for r in read_jsonl(log.layout.events))


def test_non_finite_numbers_are_written_as_null_and_read_as_nan(tmp_path: Path) -> None:
    log = RunLog(tmp_path)
    log.metrics.append(MetricRow("eval", 10, 0, (SlotRecord(0, "a", success=0.0, task_return=math.nan),)))
    assert read_jsonl(tmp_path / "metrics.jsonl")[0]["slots"][0]["task_return"] is None
    assert math.isnan(log.metrics.read()[0].slots[0].task_return)


def test_the_report_reads_a_run_the_writers_wrote(tmp_path: Path) -> None:
    run = RunLayout.create(tmp_path, "reach-v3", "written")
    SearchConfig(task="reach-v3", budget=600).save(run.config)
    log = RunLog(run)
    log.event("run_start", env_steps=0, round=0)
    for step, succ in ((200, (0.1, 0.3)), (400, (0.5, 0.2))):
        log.metrics.append(MetricRow(
            "eval", step, step // 400,
            tuple(SlotRecord(s, f"r{s}", success=v, task_return=10 * v) for s, v in enumerate(succ)),
            success_max=max(succ), wall_time=step / 10, acted=(1, 1), losses={"q_loss": (0.5, 0.9)}, alpha=(0.1, 0.2),
        ))
    log.events.append(RewardUpdateRecord(
        round=1, env_steps=400, fitness={0: 0.5, 1: 0.2}, best=0, elites=(0,), replaced={1: "r2"},
        slots=(SlotRecord(0, "r0", fitness=0.5, complexity=4.0,
                          components={"near": {"mean": -1.0, "std": 0.1, "share": 1.0}}),
               SlotRecord(1, "r1", fitness=0.2, complexity=6.0)),
    ).to_event())
    log.event("run_end", env_steps=600, finished=True, wall_s=99.0)
    for rid, slot in (("r0", 0), ("r1", 1)):
        log.candidates.append(CandidateRow(id=rid, round=0, slot=slot, verdict="accepted", complexity=4.0 + 2 * slot,
                                           components={"near": "-tcp_to_obj"}))
    log.candidates.append(CandidateRow(id="r2", round=1, slot=1, verdict="accepted", parent_id="r0"))
    log.candidates.append(CandidateRow(id="r0", round=1, slot=0, verdict="evaluated",
                                       evaluated=SlotRecord(0, "r0", fitness=0.5)))
    log.llm_calls.append(LLMCallRow(call=0, tag="propose", answer="{}", round=1, prompt_tokens=100,
                                    completion_tokens=20, seconds=2.0))

    data = read_run(run.root)
    assert (data.task, data.budget) == ("reach-v3", 600)
    assert [e.env_steps for e in data.evaluations] == [200, 400]
    assert data.evaluations[1].slots[1].q_loss == 0.9 and data.evaluations[0].slots[1].alpha == 0.2
    u = data.updates[0]
    assert (u.best_slot, u.replaced, u.judged, u.complexity) == (0, {1: "r2"}, {0: "r0", 1: "r1"}, {0: 4.0, 1: 6.0})
    r0 = data.candidate("r0")
    assert r0 is not None and r0.fitness == 0.5 and r0.verdict == "evaluated" and r0.complexity == 4.0
    s = summarize(data)
    assert s.best_success == 0.5 and s.wall_s == 99.0 and s.llm_calls == 1 and s.prompt_tokens == 100
    assert s.n_accepted == 2  # r1 and r2 (r0's last line is its evaluation)


def test_a_run_records_which_code_ran() -> None:
    import re

    from lares_agent.runs.provenance import source_revision

    source = source_revision()
    assert isinstance(source["version"], str) and source["version"]
    if "commit" in source:  # a git checkout (the test suite runs in one; an installed wheel has none)
        assert re.fullmatch(r"[0-9a-f]{40}", str(source["commit"])) and isinstance(source["dirty"], bool)
