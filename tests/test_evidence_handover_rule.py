"""experiments/evidence/handover_rule.py: the with-init curve with the task-reward learner handed over before the
first update, read from the evidence grid's records (its runs.tar.xz, unpacked)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import load_script, unpacked_study

STUDY = Path(__file__).resolve().parents[1] / "experiments" / "evidence"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpacked_study("evidence", tmp_path_factory.mktemp("evidence")) / "runs"


def test_before_the_first_update_the_task_reward_learners_evaluations_replace_slot_0s(runs: Path) -> None:
    init, human = runs / "door-close-v3-lares-init-s1", runs / "door-close-v3-human-s1"
    script = load_script(STUDY / "handover_rule.py")
    steps, recorded, rule = script.curves(init)
    first = steps.index(10_200)  # seed 1's first update started at 10,200 (its events)
    assert recorded[:first] != rule[:first] and max(recorded[:first]) == 0.2 and max(rule[:first]) == 1.0
    assert recorded[first:] == rule[first:]  # from the first ranking on, the records decide
    _, h_recorded, h_rule = script.curves(human)
    assert h_recorded == h_rule  # a baseline has no update and no extra learner: unchanged


def test_a_trial_still_training_is_left_out(tmp_path: Path, runs: Path) -> None:
    init = runs / "door-close-v3-lares-init-s1"
    script = load_script(STUDY / "handover_rule.py")
    running = tmp_path / "door-close-v3-lares-init-s0"
    running.mkdir()
    lines = (init / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    (running / "metrics.jsonl").write_text("\n".join(lines[:5]) + "\n", encoding="utf-8")
    events = [e for e in (init / "events.jsonl").read_text(encoding="utf-8").splitlines() if '"run_end"' not in e]
    (running / "events.jsonl").write_text("\n".join(events) + "\n", encoding="utf-8")
    (tmp_path / init.name).symlink_to(init)
    assert [name for name, *_ in script.areas(sorted(tmp_path.glob("*")))] == [init.name]
