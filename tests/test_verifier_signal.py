"""experiments/sample_efficiency/verifier_signal.py: the pre-screen's within-round statistic, for the verifier's tau,
on tiny hand-made runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "sample_efficiency" / "verifier_signal.py"


def _run(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.mkdir()
    (path / "events.jsonl").write_text("")
    (path / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _trained(cid: str, round_: int, tau: float | None, fitness: float) -> list[dict[str, Any]]:
    """A proposal of `round_` (with the verifier's tau where given) and the fitness it earned at the next update."""
    proposal: dict[str, Any] = {"id": cid, "round": round_, "slot": 1, "verdict": "accepted", "proxy": 0.5}
    if tau is not None:
        proposal["verifier_tau"] = tau
    return [proposal, {"id": cid, "round": round_ + 1, "slot": 1, "verdict": "evaluated", "fitness": fitness}]


def test_a_verifier_that_orders_each_round_as_training_does_carries_signal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = (_trained("a", 1, 0.9, 0.8) + _trained("b", 1, 0.1, 0.5) + _trained("c", 1, -0.5, 0.2)
            + _trained("d", 2, 0.3, 0.9) + _trained("e", 2, 0.2, 0.1))
    run = _run(tmp_path / "t-lares-s0", rows)
    tau, low, high = load_script(SCRIPT).main([str(run)])
    assert tau == low == high == 1.0
    assert "the verifier_tau carries signal" in capsys.readouterr().out
    backwards = _run(tmp_path / "t-lares-s1", _trained("a", 1, 0.9, 0.1) + _trained("b", 1, 0.1, 0.5))
    assert load_script(SCRIPT).main([str(backwards)])[0] == -1.0


def test_runs_from_before_the_verifier_add_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "old-lares-s0", _trained("a", 1, None, 0.8) + _trained("b", 1, None, 0.5))
    tau, low, _ = load_script(SCRIPT).main([str(run)])
    assert math.isnan(tau) and math.isnan(low)
    assert "carries no signal" in capsys.readouterr().out
