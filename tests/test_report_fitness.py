"""`lares report` on what each reward update was graded on: the graded fitness in the lineage and the page, the
grade that ranked each update under the return rule, and the pre-screen's proxy beside the fitness it predicted.
Run directories are synthesised as in test_report.py, and every expected number is computed from them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_report import _write_jsonl

from lares_agent.report import plots
from lares_agent.report.html import write_report
from lares_agent.report.summary import final_population, lineage, summarize
from lares_agent.runs.reader import read_run


def test_lineage_and_page_show_what_the_graded_fitness_was_made_of(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With no success yet every cell once read "fit 0.00"; now a cell says how its fitness was graded."""
    run = tmp_path / "graded"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task": "reach-v3"}))
    _write_jsonl(run / "metrics.jsonl", [
        {"kind": "update", "env_steps": 100, "round": 0, "slots": [
            {"slot": 0, "reward_id": "a", "success": 0.0}, {"slot": 1, "reward_id": "b", "success": 0.0}]},
        {"kind": "update", "env_steps": 200, "round": 1, "slots": [
            {"slot": 0, "reward_id": "a", "success": 0.5}, {"slot": 1, "reward_id": "c", "success": 0.0}]},
    ])

    def slot(i: int, rid: str, fit: float, how: str, success: float, closed: float, pen: float) -> dict[str, Any]:
        return {"slot": i, "reward_id": rid, "fitness": fit, "complexity": pen * 1000, "success": success,
                "graded_by": how, "progress_closed": closed, "complexity_penalty": pen, "action_jerk": 0.1}

    _write_jsonl(run / "events.jsonl", [
        {"event": "reward_update", "round": 1, "env_steps": 100, "fitness": {"0": 0.34, "1": 0.1}, "elites": [0],
         "best": 0, "replaced": {"1": "c"},
         "slots": [slot(0, "a", 0.34, "progress", 0.0, 0.37, 0.03), slot(1, "b", 0.1, "progress", 0.0, 0.11, 0.01)]},
        {"event": "reward_update", "round": 2, "env_steps": 200, "fitness": {"0": 0.47, "1": -0.02}, "elites": [0],
         "best": 0, "replaced": {},
         "slots": [slot(0, "a", 0.47, "success", 0.5, 0.9, 0.03), slot(1, "c", -0.02, "success", 0.0, 0.4, 0.02)]},
    ])
    _write_jsonl(run / "candidates.jsonl", [
        {"id": "a", "round": 2, "slot": 0, "verdict": "evaluated", "fitness": 0.47, "graded_by": "success",
         "progress_closed": 0.9, "complexity_penalty": 0.03}])
    data = read_run(run)
    cells = {(c.round, c.slot): c for c in lineage(data)}
    assert cells[(1, 0)].breakdown == "progress 0.37 - 0.03 cx"
    assert cells[(1, 1)].fitness != cells[(1, 0)].fitness  # graded values separate the slots before any success
    assert cells[(2, 1)].breakdown == "success 0.00 - 0.02 cx"
    assert {m.slot: m.breakdown for m in final_population(data)}[0] == "success 0.50 - 0.03 cx"
    texts: list[str] = []
    real_save = plots._save

    def spy(fig: Any, out_dir: Path, name: str) -> Path:
        if name == "lineage.png":
            texts.extend(t.get_text() for ax in fig.axes for t in ax.texts)
            texts.extend(ax.get_title() for ax in fig.axes)
        return real_save(fig, out_dir, name)

    monkeypatch.setattr(plots, "_save", spy)
    page = write_report(run).read_text()
    assert any("fit 0.34" in t and "(progress 0.37 - 0.03 cx)" in t for t in texts)
    assert any("progress, then success" in t for t in texts)
    assert "(success 0.50 - 0.03 cx)" in page


def test_the_report_says_which_grade_ranked_each_update_under_the_return_rule(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before any success the return rule grades on the task return: the cells and the final population say so
    with the return, the summary names the rule and the grade of each round, and the lineage colours each round on
    its own scale (returns in the hundreds would leave the success rounds one colour)."""
    run = tmp_path / "returned"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task": "reach-v3", "setting": "scratch",
                                                 "fitness": "success-then-return"}))

    def slot(i: int, rid: str, how: str, success: float, ret: float, pen: float) -> dict[str, Any]:
        fit = (ret if how == "return" else success) - pen
        return {"slot": i, "reward_id": rid, "fitness": fit, "complexity": pen * 1000, "success": success,
                "task_return": ret, "graded_by": how, "progress_closed": 0.132, "complexity_penalty": pen}

    updates = [(1, "return", (0.0, 0.0), (412.3, 96.5)), (2, "return", (0.0, 0.0), (530.0, 101.0)),
               (3, "success", (0.6, 0.2), (1200.0, 640.0))]
    _write_jsonl(run / "events.jsonl", [
        {"event": "reward_update", "round": r, "env_steps": 100 * r, "elites": [0], "best": 0, "replaced": {},
         "fitness": {str(i): slot(i, "ab"[i], how, succ[i], ret[i], 0.01)["fitness"] for i in range(2)},
         "slots": [slot(i, "ab"[i], how, succ[i], ret[i], 0.01) for i in range(2)]}
        for r, how, succ, ret in updates])
    data = read_run(run)
    cells = {(c.round, c.slot): c for c in lineage(data)}
    assert cells[(1, 0)].breakdown == "return 412.3 - 0.01 cx" and cells[(1, 1)].graded == 96.5
    assert cells[(3, 0)].breakdown == "success 0.60 - 0.01 cx"
    summary = summarize(data)
    assert summary.fitness_rule == "success-then-return"
    assert summary.grades == ((1, "return"), (2, "return"), (3, "success"))
    texts: list[str] = []
    real_save = plots._save

    def spy(fig: Any, out_dir: Path, name: str) -> Path:
        if name == "lineage.png":
            texts.extend(t.get_text() for ax in fig.axes for t in ax.texts)
            texts.extend([ax.get_title() for ax in fig.axes] + [ax.get_ylabel() for ax in fig.axes])
        return real_save(fig, out_dir, name)

    monkeypatch.setattr(plots, "_save", spy)
    page = write_report(run).read_text()
    assert "success-then-return: return at rounds 1-2, success at round 3" in page
    assert any("(return 412.3 - 0.01 cx)" in t for t in texts)
    assert any("return, then success" in t for t in texts)
    assert "fitness, scaled within each round" in texts
    # a run from before the option ranked by success, then progress: that is what it says
    (run / "config.json").write_text(json.dumps({"task": "reach-v3", "setting": "scratch"}))
    assert summarize(read_run(run)).fitness_rule == "success-then-progress"


def test_the_proxy_table_sets_each_candidates_proxy_against_its_later_fitness(tmp_path: Path) -> None:
    from lares_agent.report.proxy import proxy_rows, spearman
    from lares_agent.runs import CandidateRow, SlotRecord

    run = tmp_path / "screened"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task": "reach-v3", "setting": "scratch"}))
    rows = [CandidateRow(id=f"c{i}", round=0, slot=i, verdict="accepted", components={"a": "-d"}, proxy=p)
            for i, p in enumerate((0.9, 0.5, 0.1))]
    rows.append(CandidateRow(id="c3", round=0, verdict="rejected", reason="screened out: proxy 0.05 < 0.10",
                             components={"a": "exp(-100*d)"}, proxy=0.05))
    rows += [CandidateRow(id=f"c{i}", round=1, slot=i, verdict="evaluated", evaluated=SlotRecord(fitness=f))
             for i, f in enumerate((0.8, 0.6, 0.2))]
    assert CandidateRow.from_json(rows[0].to_json()) == rows[0]  # the schema keeps the score
    _write_jsonl(run / "candidates.jsonl", [r.to_json() for r in rows])
    table = proxy_rows(read_run(run))
    assert sorted((r.id, r.proxy, r.fitness) for r in table) == [
        ("c0", 0.9, 0.8), ("c1", 0.5, 0.6), ("c2", 0.1, 0.2), ("c3", 0.05, None)]
    assert spearman(table) == (1.0, 3)
    text = write_report(run).read_text()
    assert "Spearman correlation of proxy and fitness over 3 evaluated candidates: 1.00" in text
    assert re.search(r"<td>c3</td><td class=num>0</td><td class=num>0.05</td><td class=num>–</td>", text)
