"""`lares report`: run-directory reader, summary numbers, figures, HTML page, --compare and the CLI errors.

Run directories are synthesised in tmp_path with the field names of docs/ARCHITECTURE.md ("Run directory"),
and every expected number is computed from the synthetic data, not written down.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lares_agent.report import influence, plots
from lares_agent.report.html import write_report
from lares_agent.report.summary import final_population, lineage, summarize
from lares_agent.runs.reader import NotARunError, read_run

PERIOD = 1000  # env steps between reward updates
EVAL_EVERY = 500


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_run(root: Path, name: str, *, slots: int = 3, rounds: int = 3, seed: int = 0, llm: bool = True) -> dict:
    """Write a plausible run directory; returns what the report should find in it."""
    rng = np.random.default_rng(seed)
    run = root / name
    run.mkdir(parents=True)
    budget = rounds * PERIOD
    (run / "config.json").write_text(
        json.dumps({"task": "reach-v3", "setting": "from_scratch", "population": slots, "budget": budget})
    )
    holders = {s: f"r0-{s}" for s in range(slots)}
    candidates = []
    for s in range(slots):
        candidates.append(_candidate(holders[s], 0, s, float(rng.integers(3, 20))))
    metrics, events, calls = [], [], []
    updates: list[dict[str, Any]] = []
    for step in range(EVAL_EVERY, budget + 1, EVAL_EVERY):
        rnd = (step - 1) // PERIOD
        succ = np.clip(rng.uniform(0, 1, slots) * step / budget, 0, 1).round(3)
        metrics.append(
            {
                "kind": "eval",
                "env_steps": step,
                "round": rnd,
                "wall_time": step / 100.0,
                "slots": [
                    {"slot": s, "reward_id": holders[s], "success": float(succ[s]),
                     "task_return": float(100 * succ[s] + s), "own_return": 1.0, "unknown_extra": [1, 2]}
                    for s in range(slots)
                ],
                "acted": [1] * slots,
                "losses": {"q_loss": [0.5] * slots, "actor_loss": [-1.0] * slots},
                "alpha": [0.1] * slots,
            }
        )
        if step % PERIOD == 0 and step < budget:
            fitness = {s: float(succ[s]) for s in range(slots)}
            order = sorted(fitness, key=fitness.__getitem__, reverse=True)
            elites = order[: max(1, slots - 1)]
            worst = order[-1]
            new_id = f"r{rnd + 1}-{worst}"
            replaced = {worst: new_id} if slots > 1 else {}
            ev = {"event": "reward_update", "round": rnd, "env_steps": step, "fitness": {str(k): v for k, v in
                  fitness.items()}, "elites": elites, "replaced": {str(k): v for k, v in replaced.items()},
                  "best": order[0]}
            events.append(ev)
            updates.append(ev)
            if replaced:
                candidates.append(_candidate(new_id, rnd + 1, worst, float(rng.integers(3, 20)),
                                             parent=holders[order[0]]))
                candidates.append({"id": f"bad{rnd}", "round": rnd + 1, "verdict": "rejected", "reason": "constant",
                                   "components": {"x": "1"}, "complexity": 1.0})
                holders.update(replaced)
            for tag in ("analyse", "critique", "propose"):
                calls.append({"tag": tag, "round": rnd, "meta": {"round": rnd},
                              "prompt_tokens": int(rng.integers(200, 900)),
                              "completion_tokens": int(rng.integers(20, 300)), "seconds": float(rng.uniform(1, 9))})
    events.insert(0, {"event": "run_start", "round": 0, "env_steps": 0})
    events.append({"event": "run_end", "env_steps": budget, "wall_s": budget / 100.0 + 1.5})
    _write_jsonl(run / "metrics.jsonl", metrics)
    _write_jsonl(run / "events.jsonl", events)
    _write_jsonl(run / "candidates.jsonl", candidates)
    if llm:
        _write_jsonl(run / "llm_calls.jsonl", calls)
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write('{"env_steps": 99999, "slots": [')  # a killed writer's truncated last line
    all_success = np.array([[s["success"] for s in m["slots"]] for m in metrics])
    return {
        "path": run,
        "budget": budget,
        "best_success": float(all_success.max()),
        "best_steps": int(metrics[int(all_success.max(axis=1).argmax())]["env_steps"]),
        "final_mean": float(all_success[-1].mean()),
        "holders": dict(holders),
        "updates": updates,
        "tokens": sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls),
        "wall_s": budget / 100.0 + 1.5,
        "complexity": {c["id"]: c["complexity"] for c in candidates},
    }


def _candidate(cid: str, rnd: int, slot: int, complexity: float, parent: str | None = None) -> dict[str, Any]:
    return {
        "id": cid, "round": rnd, "slot": slot, "verdict": "accepted", "reason": "", "complexity": complexity,
        "components": {"reach": "-tcp_to_obj", "smooth": "-0.1*action_norm",
                       "bonus": "Piecewise((1, grasp > 0.5), (0, True))"},
        "rationale": "reach then grasp", "parent_id": parent, "critique_id": None,
        "component_stats": {"reach": {"mean": -0.3, "std": 0.1, "share": 0.6},
                            "smooth": {"mean": -0.05, "std": 0.01, "share": 0.1},
                            "bonus": {"mean": 0.2, "std": 0.4, "share": 0.3}},
    }


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


def _row(page: str, key: str) -> str:
    m = re.search(rf'<tr id="{key}">(.*?)</tr>', page, re.S)
    assert m, f"summary row {key} missing"
    return m.group(1)


def test_report_writes_page_and_valid_figures(tmp_path: Path) -> None:
    syn = make_run(tmp_path, "run1")
    page = write_report(syn["path"])
    assert page == syn["path"] / "report" / "index.html"
    text = page.read_text()
    for name in ("success.png", "return.png", "lineage.png", "influence.png", "llm_cost.png"):
        png = page.parent / name
        assert f'src="{name}"' in text
        w, h = _png_size(png)
        assert w >= 400 and h >= 150
        assert png.stat().st_size > 8000  # a blank canvas compresses far below this
    assert not list(page.parent.glob(".*.tmp"))


def test_summary_numbers_match_the_data(tmp_path: Path) -> None:
    syn = make_run(tmp_path, "run1")
    text = write_report(syn["path"]).read_text()
    assert f"{syn['best_success']:.2f} at {syn['best_steps']} env steps" in _row(text, "best_success")
    assert f"/ {syn['final_mean']:.2f}" in _row(text, "final_success")
    assert f"= {syn['tokens']}" in _row(text, "llm_tokens")
    assert f"<td>{syn['budget']}</td>" in _row(text, "budget")
    assert f"{syn['wall_s']:.0f} s" in _row(text, "wall_time")
    for rid in syn["holders"].values():
        assert f"<td>{rid}</td>" in text
    assert "tcp_to_obj" in text


def test_lineage_and_final_population_follow_the_updates(tmp_path: Path) -> None:
    syn = make_run(tmp_path, "run1", rounds=4)
    run = read_run(syn["path"])
    cells = lineage(run)
    assert len(cells) == len(syn["updates"]) * 3
    for u in syn["updates"]:
        got = {c.slot: c for c in cells if c.round == u["round"]}
        assert {s for s, c in got.items() if c.elite} == set(u["elites"])
        assert {str(s): c.replaced_by for s, c in got.items() if c.replaced_by} == u["replaced"]
        assert [s for s, c in got.items() if c.best] == [u["best"]]
        for s, c in got.items():
            assert c.fitness == pytest.approx(u["fitness"][str(s)])
            assert c.complexity == syn["complexity"][c.reward_id]
    pop = final_population(run)
    assert {m.slot: m.reward_id for m in pop} == syn["holders"]
    assert all(m.complexity == syn["complexity"][m.reward_id] for m in pop)


def _spy_legends(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Each figure's legend texts by file name, filled as the report saves its figures."""
    legends: dict[str, list[str]] = {}
    real_save = plots._save

    def spy(fig: Any, out_dir: Path, name: str) -> Path:
        legends[name] = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        return real_save(fig, out_dir, name)

    monkeypatch.setattr(plots, "_save", spy)
    return legends


def test_compare_overlays_the_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syn = make_run(tmp_path, "lares-run")
    base = make_run(tmp_path, "sac-human", slots=1, seed=1, llm=False)
    legends = _spy_legends(monkeypatch)
    text = write_report(syn["path"], compare=base["path"]).read_text()
    for fig in ("success.png", "return.png"):
        assert any("sac-human" in t for t in legends[fig])
        assert any("lares-run" in t for t in legends[fig])
    assert "sac-human (baseline)" in text
    assert f"{base['best_success']:.2f}" in _row(text, "best_success")


def _keep_human_learner(run: Path, human_ranks_last: bool) -> list[float]:
    """Make a synthetic run an init-setting run: a kept learner on the task's own reward in every metrics line
    (``extra``), ranked first at the end unless ``human_ranks_last``; returns its success per line."""
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "setting": "init"}))
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()[:-1]]  # not the cut line
    human = []
    for i, row in enumerate(rows):
        human.append(round(0.9 * (i + 1) / len(rows), 3))
        row["extra"] = {"member": len(row["slots"]), "success": human[-1], "task_return": 500.0 + i,
                        "own_return": 500.0 + i}
        row["best_slot"] = 0 if human_ranks_last else len(row["slots"])
    _write_jsonl(run / "metrics.jsonl", rows)
    return human


@pytest.mark.parametrize("human_first", [True, False])
def test_an_init_run_shows_the_kept_human_learner_beside_the_searched_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, human_first: bool) -> None:
    syn = make_run(tmp_path, "init-run")
    human = _keep_human_learner(syn["path"], human_ranks_last=not human_first)
    data = read_run(syn["path"])
    steps, values = data.human_series("success")
    assert values.tolist() == human and steps.tolist() == [e.env_steps for e in data.evaluations]
    s = summarize(data)
    assert s.final_human_success == human[-1]
    assert s.final_best_success == max(slot.success for slot in data.evaluations[-1].slots)  # the searched ones
    assert s.handed_over.startswith("the task's own reward" if human_first else "a searched reward, r")
    legends = _spy_legends(monkeypatch)
    text = write_report(syn["path"]).read_text()
    for fig in ("success.png", "return.png"):
        assert "init-run: task's own reward" in legends[fig] and "init-run: searched rewards' best" in legends[fig]
    assert f"{human[-1]:.2f} vs {s.final_best_success:.2f}" in _row(text, "human_learner")
    assert ("the task&#x27;s own reward" if human_first else "a searched reward") in _row(text, "handed_over")


def test_a_run_without_a_kept_human_learner_draws_none(tmp_path: Path) -> None:
    syn = make_run(tmp_path, "scratch-run")
    assert read_run(syn["path"]).human_series("success")[0].size == 0
    assert _row(write_report(syn["path"]).read_text(), "human_learner").endswith("<td>–</td>")


def test_run_with_only_config_says_no_evaluations_yet(tmp_path: Path) -> None:
    run = tmp_path / "fresh"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task": "push-v3", "setting": "with_init"}))
    text = write_report(run).read_text()
    assert "no evaluations yet" in text.lower()
    assert "push-v3" in _row(text, "task")
    assert not list((run / "report").glob("*.png"))


def test_not_a_run_directory_fails_with_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lares_agent.cli.app import app

    (tmp_path / "empty").mkdir()
    with pytest.raises(NotARunError, match="not a run directory"):
        read_run(tmp_path / "empty")
    result = CliRunner().invoke(app, ["report", str(tmp_path / "empty")])
    assert result.exit_code == 1
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "not a run directory" in lines[0]
    assert not (tmp_path / "empty" / "report").exists()


def test_cli_report_writes_the_page(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lares_agent.cli.app import app


    syn = make_run(tmp_path, "run1", rounds=2)
    base = make_run(tmp_path, "base", slots=1, rounds=2, llm=False)
    result = CliRunner().invoke(app, ["report", str(syn["path"]), "--compare", str(base["path"])])
    assert result.exit_code == 0, result.output
    assert (syn["path"] / "report" / "index.html").is_file()
    assert str(syn["path"] / "report" / "index.html") in result.stdout


def test_reader_tolerates_gaps_and_junk(tmp_path: Path) -> None:
    run = tmp_path / "odd"
    run.mkdir()
    (run / "metrics.jsonl").write_text(
        '{"env_steps": 200, "slots": [{"slot": 4, "success": 0.25}], "new_field": {"x": 1}}\n'
        "[1, 2, 3]\n"
        "not json at all\n"
        '{"env_steps": 100, "slots": [{"slot": 4, "success": null, "task_return": 7}]}\n'
    )
    (run / "events.jsonl").write_text(
        '{"event": "quarantine", "slot": 4}\n{"event": "reward_update", "fitness": {"4": 0.5}}\n')
    data = read_run(run)
    steps, success, slots = data.slot_matrix("success")
    assert steps.tolist() == [100, 200] and slots == [4]
    assert np.isnan(success[0, 0]) and success[1, 0] == 0.25
    assert data.updates[0].best_slot == 4 and data.candidates == () and data.llm_calls == ()
    assert data.task == "?" and data.budget is None
    s = summarize(data)
    assert s.best_success == 0.25 and s.llm_calls == 0


def test_html_escapes_llm_text(tmp_path: Path) -> None:
    syn = make_run(tmp_path, "run1", rounds=1)
    with (syn["path"] / "candidates.jsonl").open("a") as fh:
        fh.write(json.dumps({"id": "r0-0", "components": {"evil": "<script>alert(1)</script>"}}) + "\n")
    text = write_report(syn["path"]).read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text


class _FakeCompiled:
    """Stands in for rewards.CompiledReward: r = 2*a + b, so d r/d a = 2 and d r/d b = 1."""

    class parsed:
        features_used = frozenset({"a", "b"})

    def torch(self, f: dict) -> tuple[Any, dict]:
        return 2 * f["a"] + f["b"], {"lin": 2 * f["a"] + f["b"]}

    def components(self, f: dict) -> dict:
        return {"lin": 2 * f["a"] + f["b"]}


def test_gradient_influence_from_feature_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syn = make_run(tmp_path, "run1", rounds=2)
    (syn["path"] / "checkpoints").mkdir()
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 1.0, 5000), rng.normal(0, 4.0, 5000)
    np.savez(syn["path"] / "checkpoints" / "feature_sample.npz", a=a, b=b, success=np.zeros(5000))
    fake_api = (lambda data, names: data, lambda p, i: _FakeCompiled())
    monkeypatch.setattr(influence, "_load_rewards_api", lambda: fake_api)
    run = read_run(syn["path"])
    rid = summarize(run).best_reward_id
    assert rid is not None
    got = influence.gradient_influence(run, rid)
    assert got is not None and got.names == ("a", "b")
    sa, sb = 2 * np.std(a[:4096]), np.std(b[:4096])  # thinned sample keeps the spread to a few percent
    assert got.shares[0] == pytest.approx(sa / (sa + sb), abs=0.03)
    assert plots.plot_influence(run, tmp_path / "out") is not None


def test_gradient_influence_with_the_real_rewards_layer(tmp_path: Path) -> None:
    rewards = pytest.importorskip("lares_agent.rewards")
    if not hasattr(rewards, "compile_reward"):
        pytest.skip("rewards layer not built yet")
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    (run_dir / "candidates.jsonl").write_text(json.dumps(
        {"id": "c1", "verdict": "accepted", "fitness": 0.5,
         "components": {"near": "-2*tcp_to_obj", "slow": "-tcp_speed"}}
    ) + "\n")
    (run_dir / "checkpoints").mkdir()
    rng = np.random.default_rng(4)
    np.savez(run_dir / "checkpoints" / "feature_sample.npz", tcp_to_obj=rng.uniform(0, 1, 500),
             tcp_speed=rng.uniform(0, 1, 500))
    got = influence.gradient_influence(read_run(run_dir), "c1")
    assert got is not None
    shares = dict(zip(got.names, got.shares, strict=True))
    assert shares["tcp_to_obj"] > shares["tcp_speed"]


def test_engine_style_records(tmp_path: Path) -> None:
    """The engine's own shapes: "best" for best_slot, judged "slots" in the update, per-slot loss arrays, and
    the update's evaluation logged after the swap under the new reward ids."""
    run = tmp_path / "eng"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task": "reach-v3"}))
    stats = {"near": {"mean": -1.0, "std": 0.2, "share": 0.75}, "slow": {"mean": -0.1, "std": 0.1, "share": 0.25}}

    def ev(step: int, ids: list[str], succ: list[float], kind: str) -> dict[str, Any]:
        return {"kind": kind, "env_steps": step, "round": 0, "wall_time": step / 10,
                "slots": [{"member": i, "slot": i, "reward_id": r, "success": s, "task_return": 10 * s}
                          for i, (r, s) in enumerate(zip(ids, succ, strict=True))],
                "acted": [3, 1], "losses": {"q_loss": [0.5, 0.7], "actor_loss": [-1.0, -2.0]}, "alpha": [0.2, 0.3]}

    _write_jsonl(run / "metrics.jsonl", [ev(50, ["a", "b"], [0.2, 0.1], "eval"),
                                         ev(100, ["a", "c"], [0.6, 0.0], "update")])
    _write_jsonl(run / "events.jsonl", [{
        "event": "reward_update", "round": 1, "env_steps": 100, "fitness": {"0": 0.55, "1": -0.05},
        "elites": [0], "best": 0, "replaced": {"1": "c"},
        "slots": [{"slot": 0, "reward_id": "a", "complexity": 5.0, "fitness": 0.55, "components": stats},
                  {"slot": 1, "reward_id": "b", "complexity": 9.0, "fitness": -0.05, "components": {}}],
    }])
    data = read_run(run)
    cells = {c.slot: c for c in lineage(data)}
    assert (cells[0].reward_id, cells[0].best, cells[0].complexity) == ("a", True, 5.0)
    assert (cells[1].reward_id, cells[1].replaced_by, cells[1].complexity) == ("b", "c", 9.0)
    assert data.evaluations[1].slots[1].q_loss == 0.7 and data.evaluations[0].acted == {0: 3, 1: 1}
    assert {m.slot: m.reward_id for m in final_population(data)} == {0: "a", 1: "c"}
    got = influence.component_influence(data, "a")
    assert got is not None
    assert dict(zip(got.names, got.shares, strict=True)) == pytest.approx({"near": 0.75, "slow": 0.25})
    assert summarize(data).wall_s == 10.0
