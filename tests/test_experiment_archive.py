"""experiments/sample_efficiency/run.py's archive and restore: a machine that kept only the repository continues
the experiment from what was committed, running only the trials that never finished."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from helpers import load_script

from lares_agent.runs.files import RunLog
from lares_agent.runs.sweep_layout import SweepLayout
from lares_agent.search.sweep_spec import SweepSpec

STUDY = Path(__file__).resolve().parents[1] / "experiments" / "sample_efficiency"


def _script(name: str = "run") -> ModuleType:
    return load_script(STUDY / f"{name}.py", f"sample_efficiency_{name}")


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
    sweep.targets.write_text((STUDY / "targets.json").read_text(), encoding="utf-8")
    sweep.report.mkdir()
    (sweep.report / "table.md").write_text("| task |\n", encoding="utf-8")
    archived = tmp_path / "archive"
    copied = script.archive(sweep.root, archived)
    assert not any("checkpoints" in p.parts for p in copied)
    assert (archived / "results" / "table.md").is_file() and not (archived / "report").exists()

    again = SweepLayout(tmp_path / "again")
    assert script.main(["--restore", str(archived), str(again.root)]) == 0
    assert SweepSpec.load(again.spec) == SweepSpec.load(sweep.spec)
    assert again.targets.read_text() == sweep.targets.read_text()  # the report judges by the same targets
    assert sorted(p.name for p in again.runs.iterdir()) == ["reach-v3-lares-s0"]
    restored = again.run("reach-v3-lares-s0")
    assert sorted(p.name for p in restored.iterdir()) == ["config.json", "events.jsonl", "metrics.jsonl"]
    assert (restored / "metrics.jsonl").read_text() == (sweep.run("reach-v3-lares-s0") / "metrics.jsonl").read_text()


def test_an_archive_names_no_path_of_the_machine_that_ran_it(tmp_path: Path) -> None:
    script = _script()
    sweep = SweepLayout(tmp_path / "sweep")
    SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares",)).save(sweep.spec)
    _trial(sweep, "reach-v3-lares-s0", finished=True)
    model = Path.home() / ".cache" / "models" / "m.gguf"
    reason = f"LLM call 'propose' on {model}: the answer was cut; from run {sweep.root}/runs/x"
    (sweep.run("reach-v3-lares-s0") / "candidates.jsonl").write_text(json.dumps({"reason": reason}) + "\n")
    script.archive(sweep.root, tmp_path / "archive")
    kept = json.loads((tmp_path / "archive" / "runs" / "reach-v3-lares-s0" / "candidates.jsonl").read_text())
    assert kept["reason"] == "LLM call 'propose' on m.gguf: the answer was cut; from run x"
    assert script.without_machine_paths("exp(-obj_to_target/0.05) + x/2/3", [str(Path.home())]) == \
        "exp(-obj_to_target/0.05) + x/2/3"  # a reward's divisions are no paths


def test_restore_never_writes_into_a_sweep(tmp_path: Path) -> None:
    script = _script()
    sweep = SweepLayout(tmp_path / "sweep")
    SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares",)).save(sweep.spec)
    before = sweep.spec.read_text()
    with pytest.raises(SystemExit, match="holds a sweep already"):
        script.restore(sweep.root, sweep.root)
    assert sweep.spec.read_text() == before and not sweep.runs.exists()


def test_a_new_sweep_gets_the_study_targets_and_a_resumed_one_keeps_its_own(tmp_path: Path) -> None:
    script = _script()
    out = tmp_path / "grid"
    script.give_targets(script.sweep_args(["--out", str(out)]), ablations=False)
    assert (out / "targets.json").read_text() == (STUDY / "targets.json").read_text()
    ablations = tmp_path / "ablations"
    script.give_targets(script.sweep_args(["--ablations", "--out", str(ablations)]), ablations=True)
    assert (ablations / "targets.json").read_text() == (STUDY.parent / "ablations" / "targets.json").read_text()

    kept = SweepLayout(tmp_path / "kept")
    SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares",)).save(kept.spec)
    kept.targets.write_text('{"targets": []}', encoding="utf-8")
    script.give_targets(script.sweep_args(["--out", str(kept.root), "--resume"]), ablations=False)
    assert kept.targets.read_text() == '{"targets": []}'
    missing = tmp_path / "missing"
    script.give_targets(script.sweep_args(["--out", str(missing), "--resume"]), ablations=False)
    assert not missing.exists()  # `lares sweep --resume` says it is no sweep; nothing is left behind


def test_final_policies_keeps_its_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A restored sweep has no policy files: its numbers come from the file; lines of another setting or of another
    sweep's trials stay."""
    sweep = SweepLayout(tmp_path / "sweep")
    SweepSpec(tasks=("reach-v3",), seeds=(0, 1), methods=("lares",)).save(sweep.spec)
    _trial(sweep, "reach-v3-lares-s0", finished=True)
    _trial(sweep, "reach-v3-lares-s1", finished=True)
    kept = tmp_path / "final.csv"
    kept.write_text("trial,episodes,seed,success\nreach-v3-lares-s0,30,2000,0.5\nreach-v3-lares-s0,10,2000,0.9\n"
                    "push-v3-lares-s0,30,2000,1\n", encoding="utf-8")
    assert _script("final_policies").main([str(sweep.root), "--csv", str(kept)]) == 0
    out = capsys.readouterr()
    assert "| reach-v3 | lares | 1 | 50% ± 0% | 50% |" in out.out
    assert "reach-v3-lares-s1 finished but its policy is not here" in out.err
    assert kept.read_text(encoding="utf-8").splitlines() == [
        "trial,episodes,seed,success", "reach-v3-lares-s0,10,2000,0.9", "push-v3-lares-s0,30,2000,1",
        "reach-v3-lares-s0,30,2000,0.5"]  # push-v3's trial is another sweep's: its line stays
