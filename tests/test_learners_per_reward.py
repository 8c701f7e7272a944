"""--learners-per-reward N: N learners per reward slot on the slot's one column, fitness the mean over
them, the best slot's best learner inherited, the grouping kept through checkpoints, metrics, events and policies."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_checkpoint import assert_same_state
from test_lares_engine import Proposer, load_reward, scratch_rewards, tiny_config, tiny_task

from lares_agent.engine import MemberEvaluation, PolicyArtefact, make_engine, restore_engine
from lares_agent.engine.setup.fitness import leaders, rank, slot_evaluations, slot_view
from lares_agent.engine.setup.groups import LearnerGroups
from lares_agent.errors import ConfigError
from lares_agent.report.summary import lineage
from lares_agent.runs import RunLayout
from lares_agent.runs.jsonl import read_jsonl
from lares_agent.runs.reader import read_run
from lares_agent.search.config import SearchConfig, engine_config

torch.set_num_threads(1)


def _eval(member: int, success: float, closed: float = float("nan"), jerk: float = 1.0) -> MemberEvaluation:
    return MemberEvaluation(member=member, episodes=2, success_rate=success, task_return=10.0 * success,
                            own_return=-1.0, mean_progress=0.5, final_progress=1.0 - success, episode_length=15,
                            progress_closed=closed, action_jerk=jerk)


def test_groups_map_learners_to_columns() -> None:
    g = LearnerGroups(num_slots=3, per_reward=2, extra=True)
    assert g.num_learners == 7 and g.slot_learners == 6 and g.extra_learner == 6
    assert g.column_of.tolist() == [0, 0, 1, 1, 2, 2, 3]
    assert g.learners(1) == [2, 3] and g.learners(3) == [6]
    with pytest.raises(IndexError):
        g.learners(4)


def test_slot_fitness_is_the_mean_over_its_healthy_learners() -> None:
    g = LearnerGroups(num_slots=2, per_reward=3)
    evals = [_eval(0, 0.2), _eval(1, 1.0), _eval(2, 0.6), _eval(3, 0.0), _eval(4, 0.4), _eval(5, 0.9)]
    rewards = [type("R", (), {"id": f"r{s}", "complexity": 1.0})() for s in range(2)]
    ranked = leaders(g, evals, rewards, 0.0, True, lambda i: i == 5)  # learner 5 is quarantined
    assert ranked == [[1, 2, 0], [4, 3, 5]]  # best first, the quarantined learner last
    view = slot_view(g, evals, ranked, lambda i: i == 5)
    assert [v.member for v in view] == [0, 1]
    assert view[0].success_rate == pytest.approx(0.6) and view[0].learner_success == (0.2, 1.0, 0.6)
    assert view[1].success_rate == pytest.approx(0.2)  # 0.0 and 0.4: the quarantined learner's 0.9 is left out
    assert view[1].learner_success == (0.0, 0.4, 0.9) and view[0].task_return == pytest.approx(6.0)
    slots = slot_evaluations(view, rewards, 0.0, [False, False])
    assert [s.fitness for s in slots] == pytest.approx([0.6, 0.2])
    assert slots[0].to_json("events")["learner_success"] == [0.2, 1.0, 0.6]
    # One learner per reward is LaRes: the evaluations pass through unchanged, with no spread field.
    one = LearnerGroups(num_slots=2)
    assert slot_view(one, evals[:2], [[0], [1]], lambda i: False) == evals[:2]
    assert "learner_success" not in slot_evaluations(evals[:2], rewards, 0.0, [False, False])[0].to_json("events")


def test_one_pass_ranks_each_slots_learners_then_the_slots() -> None:
    """``fitness.rank``: the leaders by the run's grading, the slots' means led by them, the slots graded and ranked
    by the same grading; the init setting's extra learner is its own column and is ranked with the slots."""
    g = LearnerGroups(num_slots=2, per_reward=2, extra=True)
    evals = [_eval(0, 0.2), _eval(1, 0.6), _eval(2, 1.0), _eval(3, 0.8), _eval(4, 0.5)]
    rewards = [type("R", (), {"id": rid, "complexity": 1.0})() for rid in ("r0", "r1", "human")]
    ranked = rank(evals, g, rewards, 0.0, (True, "success-then-return"), lambda i: i == 3)  # learner 3 is out
    assert ranked.leaders == ((1, 0), (2, 3), (4,))  # best first, the quarantined learner last
    assert [e.member for e in ranked.evals] == [0, 1, 2]
    assert [e.success_rate for e in ranked.evals] == pytest.approx([0.4, 1.0, 0.5])  # slot 1: learner 3 left out
    assert [s.slot for s in ranked.slots] == [0, 1, 2] and ranked.slots[0].learner_success == (0.2, 0.6)
    assert {s.graded_by for s in ranked.slots} == {"success"} and ranked.order == (1, 2, 0)
    # every learner of a slot out: the slot is out and ranks last
    broken = rank(evals, g, rewards, 0.0, (True, "success-then-return"), lambda i: i in (2, 3))
    assert broken.slots[1].quarantined and broken.order[-1] == 1


def test_a_slot_whose_learners_all_diverged_grades_as_broken() -> None:
    g = LearnerGroups(num_slots=1, per_reward=2)
    evals = [dataclasses.replace(_eval(0, 0.5), nonfinite=True), _eval(1, 0.5)]
    view = slot_view(g, evals, [[1, 0]], lambda i: i == 1)
    assert view[0].nonfinite  # no healthy learner left: the mean of both, marked broken
    assert slot_evaluations(view, [type("R", (), {"id": "r", "complexity": 1.0})()], 0.0,
                            [False])[0].quarantined


def test_scratch_run_with_two_learners_per_reward(tmp_path: Path) -> None:
    cfg = tiny_config(learners_per_reward=2, max_rounds=1, total_steps=120, inherit="always")  # the reference's
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), Proposer(), run_dir=tmp_path)
    try:
        pop = engine.population
        assert pop.learners.k == 6 and pop.buffer.num_columns == 3 and pop.ts.num_arms == 6
        engine.run(until_steps=120)
        before = [p.detach().clone() for p in engine.population.learners.actor]
        ctx = engine.reward_update()
        best, leader = ctx.best, engine.population.leaders[ctx.best]
        assert leader in engine.population.groups.learners(best)
        pop = engine.population.learners
        for slot in ctx.refill:  # every learner of a replaced slot starts from the best slot's best learner
            for i in engine.population.groups.learners(slot):
                assert all(torch.equal(p[i], p[leader]) for p in pop.actor) and pop.anchor_weight[i].item() == 1.0
        for slot in ctx.elites:  # elites keep all their learners
            for i in engine.population.groups.learners(slot):
                assert all(torch.equal(p[i], b[i]) for p, b in zip(pop.actor, before, strict=True))
        for s in ctx.slots:
            assert len(s.learner_success) == 2
            assert s.success == pytest.approx(float(np.mean(s.learner_success)))
        engine.step()  # every learner acts through its own TS arm, on its slot's column
        engine.save_policy("round-0001", every_slot=True)
    finally:
        engine.close()
    update = next(e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "reward_update")
    assert all(len(s["learner_success"]) == 2 for s in update["slots"])
    row = [m for m in read_jsonl(tmp_path / "metrics.jsonl") if m["kind"] == "update"][-1]
    assert [len(s["learner_success"]) for s in row["slots"]] == [2, 2, 2] and len(row["acted"]) == 6
    assert row["success_best_slot"] == pytest.approx(np.mean(row["slots"][best]["learner_success"]))
    # The policy a slot hands over is its leader's.
    layout = RunLayout(tmp_path)
    obs = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    chosen = PolicyArtefact.load(layout.policy("round-0001"))
    want = engine.population.learners.act(obs, np.full(8, leader), True, torch.Generator())
    assert chosen.data["slot"] == best and np.allclose(chosen.act(obs), want, atol=1e-5)
    # The report shows each slot's spread over its learners next to the fitness.
    cells = lineage(read_run(tmp_path))
    assert cells and all(len(c.learner_success) == 2 for c in cells)
    assert all("over 2]" in c.breakdown for c in cells) and all(c.graded_by for c in cells)
    # Its alpha and losses are the means over the slot's learners, not its first learner's.
    last = read_run(tmp_path).evaluations[-1]
    for ev in last.slots:
        pair = row_of(tmp_path)["alpha"][2 * ev.slot:2 * ev.slot + 2]
        assert pair[0] != pair[1] and ev.alpha == pytest.approx(np.mean(pair))


def row_of(run: Path) -> dict[str, Any]:
    """The run's last metrics row."""
    return read_jsonl(run / "metrics.jsonl")[-1]


def test_grouping_survives_checkpoint_and_resume(tmp_path: Path) -> None:
    cfg = tiny_config(learners_per_reward=2, total_steps=400, checkpoint_every=100, reward_period=120)
    a = make_engine(tiny_task(), cfg, scratch_rewards(), Proposer(), run_dir=tmp_path / "a")
    a.run(until_steps=150)
    saved = a.save_checkpoint()
    assert saved is not None and a.round == 1
    kept = shutil.copytree(saved, tmp_path / "kept")
    leaders = list(a.population.leaders)
    a.run(until_steps=300)
    b = restore_engine(kept, tiny_task(), load_reward, Proposer(), tmp_path / "b")
    assert b.config.to_json()["learners"]["learners_per_reward"] == 2
    assert b.population.learners.k == 6 and b.population.leaders == leaders
    b.run(until_steps=300)
    assert b.round == a.round == 2 and b.population.leaders == a.population.leaders
    assert_same_state(a.population.learners.state_dict(), b.population.learners.state_dict(), "population")
    buf_a, buf_b = a.population.buffer, b.population.buffer
    assert np.array_equal(buf_a.raw_reward[: len(buf_a)], buf_b.raw_reward[: len(buf_b)])
    a.close()
    b.close()


def test_init_setting_keeps_one_extra_learner_after_the_groups() -> None:
    cfg = tiny_config(setting="init", learners_per_reward=2, total_steps=60)
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), Proposer())
    try:
        pop = engine.population
        assert pop.learners.k == 7 and pop.extra == 6 and pop.buffer.num_columns == 4
        info = engine.step()
        assert 6 in info.acted
    finally:
        engine.close()


def test_config_checks() -> None:
    with pytest.raises(ConfigError, match="learners_per_reward"):
        tiny_config(learners_per_reward=0)
    with pytest.raises(ConfigError, match="--learners-per-reward applies to the replay-buffer engine"):
        SearchConfig(learner="es", learners_per_reward=2)
    with pytest.raises(ConfigError, match="--learners-per-reward must be between 1 and 16"):
        SearchConfig(learners_per_reward=17)
    assert engine_config(SearchConfig(learners_per_reward=3)).learners.learners_per_reward == 3  # type: ignore[union-attr]


def test_lares_run_with_two_learners_per_reward_end_to_end(tmp_path: Path) -> None:
    """The CLI run (search layer, background rounds against an OpenAI-compatible server), then its report and
    trace: the grouping reaches config.json, the checkpoints, the metrics and what the user reads."""
    from fake_openai import FakeOpenAI, reacher_answer, serving
    from typer.testing import CliRunner

    from lares_agent.cli.app import app

    class Server(FakeOpenAI):
        def answer(self, path: str, headers: Any, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            with self.lock:
                self.n = getattr(self, "n", 0) + 1
                return 200, reacher_answer(body, self.n)

    def lares(*args: str) -> Any:
        return CliRunner().invoke(app, list(args), env={"LARES_HOME": str(tmp_path / "home"), "COLUMNS": "240",
                                                        "OPENAI_API_KEY": ""})

    with serving(Server()) as server:
        result = lares("run", "--task", "Reacher-v5", "--budget", "300", "--reward-period", "150", "--population",
                       "2", "--elites", "1", "--learners-per-reward", "2", "--setting", "scratch", "--no-retrieval",
                       "--llm", "openai", "--model", "fake", "--base-url", server.url, "--run-dir",
                       str(tmp_path / "runs"))
    assert result.exit_code == 0, result.output
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert json.loads((run / "config.json").read_text())["learners_per_reward"] == 2
    rows = list(read_jsonl(run / "metrics.jsonl"))
    assert rows and all(len(s["learner_success"]) == 2 for r in rows for s in r["slots"])
    assert all(len(r["acted"]) == 4 for r in rows if "acted" in r)
    html = (run / "report" / "index.html").read_text()
    assert "over 2]" in html  # the fitness breakdown shows the spread over the slot's learners
    evaluated = [r for r in read_jsonl(run / "candidates.jsonl") if r.get("verdict") == "evaluated"]
    assert evaluated and all(len(r["learner_success"]) == 2 for r in evaluated)
    shown = lares("trace", str(run), "--candidate", evaluated[0]["id"])
    assert shown.exit_code == 0 and "its learners:" in shown.output, shown.output
    # A sweep's "where the search fell short" section reads the same run: one line per reward update.
    from lares_agent.report.sweep_why import explain_trial

    told = explain_trial(run)
    assert told[0].startswith("- round 1 at ") and "graded by " in told[0] and "ranked first: " in told[0]
    assert told[-1].startswith("- last evaluation at 150 steps: slot 0 ")
