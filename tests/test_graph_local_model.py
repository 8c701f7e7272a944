"""One propose + validate round on reach-v3 with the real 0.5B model (the CI model; about a minute)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lares_agent.engine.tasks import get_task
from lares_agent.graphs.build import build_graph, open_trace
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.round import run_round
from lares_agent.llm import LLMConfig, make_client
from lares_agent.llm.models import KNOWN_MODELS, parts_installed
from lares_agent.rewards import compile_record, progress_monotonicity
from lares_agent.rewards.sampling import synthetic_sample

MODEL = "qwen2.5-coder-0.5b"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not parts_installed(KNOWN_MODELS[MODEL]), reason="0.5B model parts not installed (test extra)"),
]


def test_real_model_proposes_a_valid_reach_reward(tmp_path: Path) -> None:
    task = get_task("reach-v3")
    sample = synthetic_sample(task.features, 512, np.random.default_rng(0))
    llm = make_client(LLMConfig(backend="local", model=MODEL, timeout_s=300.0), run_dir=tmp_path)
    deps = RunContext(llm=llm, task=task, sample=sample, limits=GraphLimits(retry_budget=4))
    saver = open_trace(tmp_path)
    try:
        result = run_round(build_graph(checkpointer=saver), {"round": 0, "n_wanted": 1}, "round-0", deps)
    finally:
        saver.conn.close()
    reasons = [r["reason"] for r in result.rejected]
    assert len(result.accepted) == 1, reasons
    (rec,) = result.accepted
    reward = compile_record(rec, task)
    rises, _ = progress_monotonicity(reward, sample, task.progress_feature)
    assert rises <= 0.5  # validate refused wrong-signed progress terms
    assert np.all(np.isfinite(reward(sample)))
    calls = [json.loads(line) for line in (tmp_path / "llm_calls.jsonl").read_text().splitlines()]
    assert calls and all(c["tag"] == "propose" for c in calls)
    assert 1 <= sum(c["ok"] for c in calls) <= result.attempts  # one answered call per propose pass
