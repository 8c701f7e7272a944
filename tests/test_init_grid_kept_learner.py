"""experiments/init_grid/kept_learner.py: the learner on the task's own reward read from a loop trial (listed as the
evaluation's `extra`) and from the learner alone (a slot of its own), on the init grid's records."""

from __future__ import annotations

from pathlib import Path

from helpers import load_script, unpacked_study

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "init_grid" / "kept_learner.py"


def test_the_loop_reads_its_kept_learner_and_the_learner_alone_its_slot(tmp_path: Path) -> None:
    script = load_script(SCRIPT)
    runs = unpacked_study("init_grid", tmp_path) / "runs"
    alone, share = script.own_reward_success(runs / "window-close-v3-human-s1" / "metrics.jsonl")
    assert share is None and len(alone) == 33 and alone[-1][0] >= 49_000
    kept, share = script.own_reward_success(runs / "window-close-v3-lares-init-s0" / "metrics.jsonl")
    assert len(kept) == 33 and 0.2 < share < 0.5  # one member of four, Thompson sampling's share
    assert kept[-1][1] == 1.0 and min(s for _, s in kept) == 0.0  # it learned within the trial
    rows = script.main([str(runs)])
    assert any(r.startswith("| window-close-v3-human-s1 |") and r.endswith("| alone |") for r in rows)
