"""The case store: add, update fitness, best-of-task, and BM25 search across runs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from lares_agent.memory.cases import Case, CaseStore, default_case_path, fts_query
from lares_agent.tools.retrieval import record_case, render_cases, retrieve_cases


def _case(task: str, cid: str, fitness: float | None, run: str = "run1", desc: str = "") -> Case:
    return Case(task=task, description=desc or f"{task} description", components={"a": f"-{cid}_x"},
                complexity=3.0, run_id=run, candidate_id=cid, fitness=fitness, persona="neutral")


@pytest.fixture
def store(tmp_path: Path) -> CaseStore:
    s = CaseStore(tmp_path / "cases.sqlite")
    s.add(_case("reach-v3", "c1", 0.2, desc="move the gripper to a goal position"))
    s.add(_case("reach-v3", "c2", 0.9, desc="move the gripper to a goal position"))
    s.add(_case("push-v3", "c3", 0.5, desc="push the puck to a goal on the table"))
    s.add(_case("pick-place-v3", "c4", None, desc="pick up the puck and place it at the goal"))
    return s


def test_best_orders_by_fitness_and_filters_task(store: CaseStore) -> None:
    assert [c.candidate_id for c in store.best("reach-v3")] == ["c2", "c1"]
    assert store.best("reach-v3", exclude_run="run1") == []


def test_search_ranks_text_matches(store: CaseStore) -> None:
    hits = store.search("pick the puck up and place it", k=2)
    assert hits[0].candidate_id == "c4"
    assert {c.task for c in hits} <= {"pick-place-v3", "push-v3"}
    assert store.search("!!! ()") == []


def test_search_is_safe_against_fts_syntax() -> None:
    assert fts_query('a" OR NEAR(x') == '"near" OR "or"'  # single letters dropped, every word quoted


def test_add_replaces_same_candidate_and_update_fitness(store: CaseStore) -> None:
    n = len(store)
    store.add(_case("reach-v3", "c1", 0.95))
    assert len(store) == n
    assert store.best("reach-v3")[0].candidate_id == "c1"
    assert store.update_fitness("run1", "c4", 0.7, success=0.7)
    assert not store.update_fitness("run1", "missing", 0.1)
    assert store.search("pick place")[0].fitness == pytest.approx(0.7)


def test_persists_across_connections(tmp_path: Path) -> None:
    path = tmp_path / "x" / "cases.sqlite"
    with CaseStore(path) as s:
        s.add(_case("reach-v3", "c1", 0.3))
    with CaseStore(path) as s:
        assert [c.components for c in s.best("reach-v3")] == [{"a": "-c1_x"}]


def test_default_path_honours_lares_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LARES_HOME", str(tmp_path))
    assert default_case_path() == tmp_path / "cases.sqlite"


def test_retrieval_prefers_same_task_then_similar(store: CaseStore) -> None:
    task = SimpleNamespace(name="pick-place-v3", description="pick up the puck and place it at the goal")
    found = retrieve_cases(store, task, k=3)
    assert found[0].candidate_id == "c4"
    assert len(found) == 3 and len({c.candidate_id for c in found}) == 3
    text = render_cases(found)
    assert "[pick-place-v3" in text and "do not copy" in text
    assert render_cases([]) == "none"


def test_record_case_from_a_validated_record(tmp_path: Path) -> None:
    store = CaseStore(tmp_path / "c.sqlite")
    task = SimpleNamespace(name="reach-v3", description="reach")
    record = {"id": "r1-a1-0", "components": {"d": "-tcp_to_goal"}, "complexity": 2.0, "rationale": "dense",
              "round": 1}
    record_case(store, task, record, run_id="runX", persona="neutral", fitness=0.4)
    (case,) = store.best("reach-v3")
    assert (case.candidate_id, case.rationale, case.round, case.fitness) == ("r1-a1-0", "dense", 1, 0.4)
