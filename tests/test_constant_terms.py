"""experiments/proposals/constant_terms.py: a handed-over term that pays the same on every step the run took is
named, and the script fails; a reward whose every term moves passes."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from helpers import load_script

from lares_agent.engine.state.checkpoint import save_checkpoint
from lares_agent.runs import CandidateRow, MetricRow, RunLayout, RunLog, SlotRecord
from lares_agent.search.config import SearchConfig

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "proposals" / "constant_terms.py"


def _script() -> ModuleType:
    return load_script(SCRIPT)


def _run(tmp_path: Path, components: dict[str, str]) -> Path:
    root = tmp_path / "run"
    root.mkdir()
    layout = RunLayout(root)
    SearchConfig(task="reach-v3", budget=300, reward_period=150, population=1).save(layout.config)
    log = RunLog(layout)
    log.candidates.append(CandidateRow(id="r-a", round=0, slot=0, verdict="accepted", components=components))
    log.metrics.append(MetricRow(kind="eval", env_steps=300, round=1, best_slot=0,
                                 slots=(SlotRecord(0, "r-a", success=0.2),)))
    rng = np.random.default_rng(0)
    features = np.stack([rng.uniform(0.0, 0.3, 50), np.zeros(50)], axis=1).astype(np.float32)  # grasped never on
    buffer = {"feature_names": ["tcp_to_target", "grasped"], "features": features, "size": 50}
    save_checkpoint(layout.checkpoints, {"population": {"buffer": buffer}}, "step-000000300")
    return root


def test_a_term_that_never_moves_on_the_run_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, {"reach": "-tcp_to_target", "bonus": "grasped*(1 - 0.4*tcp_to_target)"})
    assert _script().main([str(run)]) == 1
    out = capsys.readouterr().out
    assert "bonus = grasped*(1 - 0.4*tcp_to_target): spread 0 (CONSTANT on the run)" in out
    assert "1 of 2 terms constant on the run: bonus" in out and "50 steps in its buffer" in out


def test_a_reward_whose_terms_all_move_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _script().main([str(_run(tmp_path, {"reach": "-tcp_to_target"}))]) == 0
    assert "0 of 1 terms constant on the run" in capsys.readouterr().out
