"""experiments/sample_efficiency.py's archive and restore: a machine that kept only the repository continues the
experiment from what was committed, running only the trials that never finished."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from lares_agent.runs.files import RunLog
from lares_agent.runs.sweep_layout import SweepLayout
from lares_agent.search.sweep_spec import SweepSpec

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _script(name: str = "sample_efficiency") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trial(layout: SweepLayout, name: str, finished: bool | None) -> None:
    """A run folder with config and metrics; `finished` None: no run_end; False: a stopped session's run_end."""
    run = layout.run(name)
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"task": "reach-v3"}), encoding="utf-8")
    (run / "metrics.jsonl").write_text(json.dumps({"env_steps": 300, "round": 0}) + "\n", encoding="utf-8")
    (run / "checkpoints").mkdir()
    if finished is not None:
        RunLog(run).event("run_end", finished=finished, env_steps=300, wall_s=1.0)


def test_restore_brings_back_the_finished_trials_only(tmp_path: Path) -> None:
    script = _script()
    sweep = SweepLayout(tmp_path / "sweep")
    SweepSpec(tasks=("reach-v3",), seeds=(0, 1, 2), methods=("lares",), options={"budget": 300}).save(sweep.spec)
    _trial(sweep, "reach-v3-lares-s0", finished=True)
    _trial(sweep, "reach-v3-lares-s1", finished=False)
    _trial(sweep, "reach-v3-lares-s2", finished=None)
    archived = tmp_path / "archive"
    copied = script.archive(sweep.root, archived)
    assert not any("checkpoints" in p.parts for p in copied)

    again = SweepLayout(tmp_path / "again")
    assert script.main(["--restore", str(archived), str(again.root)]) == 0
    assert SweepSpec.load(again.spec) == SweepSpec.load(sweep.spec)
    assert sorted(p.name for p in again.runs.iterdir()) == ["reach-v3-lares-s0"]
    restored = again.run("reach-v3-lares-s0")
    assert sorted(p.name for p in restored.iterdir()) == ["config.json", "events.jsonl", "metrics.jsonl"]
    assert (restored / "metrics.jsonl").read_text() == (sweep.run("reach-v3-lares-s0") / "metrics.jsonl").read_text()


def test_restore_never_writes_into_a_sweep(tmp_path: Path) -> None:
    script = _script()
    sweep = SweepLayout(tmp_path / "sweep")
    SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares",)).save(sweep.spec)
    before = sweep.spec.read_text()
    with pytest.raises(SystemExit, match="holds a sweep already"):
        script.restore(sweep.root, sweep.root)
    assert sweep.spec.read_text() == before and not sweep.runs.exists()


def test_final_policies_keeps_its_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A restored sweep has no policy files: its numbers come from the file, lines of another setting stay."""
    sweep = SweepLayout(tmp_path / "sweep")
    SweepSpec(tasks=("reach-v3",), seeds=(0, 1), methods=("lares",)).save(sweep.spec)
    _trial(sweep, "reach-v3-lares-s0", finished=True)
    _trial(sweep, "reach-v3-lares-s1", finished=True)
    kept = tmp_path / "final.csv"
    kept.write_text("trial,episodes,seed,success\nreach-v3-lares-s0,30,2000,0.5\nreach-v3-lares-s0,10,2000,0.9\n",
                    encoding="utf-8")
    assert _script("final_policies").main([str(sweep.root), "--csv", str(kept)]) == 0
    out = capsys.readouterr()
    assert "| reach-v3 | lares | 1 | 50% ± 0% | 50% |" in out.out
    assert "reach-v3-lares-s1 finished but its policy is not here" in out.err
    assert kept.read_text(encoding="utf-8").splitlines() == [
        "trial,episodes,seed,success", "reach-v3-lares-s0,10,2000,0.9", "reach-v3-lares-s0,30,2000,0.5"]
