"""LLM fault injection: every kind of bad answer becomes a reason, and a run with 50% faults still completes.

The LLM is a deterministic fake behind `FaultyChatModel`; the client's back-off sleep is a no-op so retries
cost nothing. The engine run uses Reacher-v5 with tiny networks and short episodes.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import ScriptedChatModel, flat_config

from lares_agent.engine import LaResEngine, SACConfig, make_engine
from lares_agent.engine.tasks import get_task
from lares_agent.graphs.build import build_graph
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.round import run_round
from lares_agent.llm import LLMClient, LLMConfig
from lares_agent.llm.faults import FAULT_KINDS, FaultyChatModel, read_faults
from lares_agent.rewards import synthetic_sample
from lares_agent.runs import LLM_CALLS_NAME as RECORD_NAME
from lares_agent.runs import RunLayout, RunLog, read_jsonl
from lares_agent.search.proposer import GraphProposer

torch.set_num_threads(1)
TASK = get_task("Reacher-v5")


def candidate_model() -> ScriptedChatModel:
    """Answers every call with a new, valid, distinct Reacher candidate (so only injected faults fail)."""

    def answer(call: int) -> dict[str, Any]:
        weight = 1.0 + 0.25 * call
        return {"candidates": [{
            "components": {"reach": f"-{weight}*fingertip_to_target", "calm": "-0.01*joint_speed"},
            "rationale": f"closer is better (variant {call})",
        }]}

    return ScriptedChatModel(then=answer, usage=(50, 20))


def _client(
    tmp_path: Path, rate: float, seed: int, kinds: tuple[str, ...] = FAULT_KINDS
) -> tuple[LLMClient, FaultyChatModel]:
    model = FaultyChatModel(inner=candidate_model(), rate=rate, kinds=kinds, seed=seed,
                            events_path=str(tmp_path / "faults.jsonl"))
    return LLMClient(model, LLMConfig(max_retries=2), tmp_path / RECORD_NAME, sleep=lambda s: None), model


def _deps(client: LLMClient, retry_budget: int = 3) -> RunContext:
    sample = synthetic_sample(TASK.features, 256, np.random.default_rng(0))
    # analysis="llm": the critique calls the (faulty) model too, and must fall back
    return RunContext(llm=client, task=TASK, sample=sample,
                      limits=GraphLimits(retry_budget=retry_budget, analysis="llm"))


def _records(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / RECORD_NAME).read_text().splitlines()]


def _assert_every_fault_logged(tmp_path: Path, model: FaultyChatModel) -> None:
    """Each injected fault is in the wrapper's list, in the events file, and on its own llm_calls.jsonl row."""
    faults = model.faults()
    assert read_faults(tmp_path / "faults.jsonl") == faults
    rows = _records(tmp_path)
    assert len(rows) == model.calls  # one record row per attempt, in call order (single-threaded here)
    by_call = {f.call: f for f in faults}
    for i, row in enumerate(rows):
        if i in by_call:
            assert row.get("fault") == by_call[i].kind
            assert by_call[i].reason.startswith("injected fault")
        else:
            assert "fault" not in row and row["ok"]


ELITE = {"id": "e0", "components": {"reach": "-fingertip_to_target"}, "fitness": 0.1, "success": 0.1,
         "complexity": 2.0, "stats": {}}
EXPECTED_REASON = {
    "timeout": "did not answer within its time limit",
    "connection": "connection refused",
    "empty": "empty answer",
    "prose": "holds no JSON",
    "truncated": "not valid JSON",
    "wrong_fields": "'components'",
}


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_every_fault_kind_becomes_a_rejection_with_its_reason(kind: str, tmp_path: Path) -> None:
    client, model = _client(tmp_path, rate=1.0, seed=3, kinds=(kind,))
    deps = _deps(client, retry_budget=1)
    result = run_round(build_graph(), {"round": 1, "n_wanted": 2, "elites": [ELITE]}, "r1", deps)
    assert result.accepted == ()
    assert result.attempts == 2 and len(result.rejected) == 4  # 2 passes x 2 calls, each a rejection
    for rec in result.rejected:
        assert rec["reason"] and "\n" not in rec["reason"]
        if kind in EXPECTED_REASON:
            assert EXPECTED_REASON[kind] in rec["reason"], rec["reason"]
        else:  # hostile: refused by the reward language, which names what it refused
            assert rec["accepted"] is False and rec["reason"] != "ok"
    critique = [s for s in result.steps if s["node"] == "critique"]
    assert critique and all(s["summary"] for s in critique)  # the critique fell back instead of crashing
    assert {f.kind for f in model.faults()} == {kind}
    _assert_every_fault_logged(tmp_path, model)
    if kind in ("timeout", "connection"):  # transient: retried, until the breaker stops calling for the round
        assert model.calls == {"timeout": 2, "connection": 3}[kind]  # (llm/breaker.py; was 3 x 5 calls)
        assert all("not called for the rest of round 1" in r["reason"] for r in result.rejected)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_half_faulty_rounds_complete_and_log_every_fault(seed: int, tmp_path: Path) -> None:
    client, model = _client(tmp_path, rate=0.5, seed=seed)
    result = run_round(build_graph(), {"round": 1, "n_wanted": 2, "elites": [ELITE]}, "r1", _deps(client))
    assert len(result.accepted) <= 2 and 1 <= result.attempts <= 4
    assert all(r["reason"] for r in result.rejected)
    assert len({r["key"] for r in result.accepted}) == len(result.accepted)  # no duplicate children
    assert model.faults(), "a 50% fault rate must inject faults"
    _assert_every_fault_logged(tmp_path, model)


def _engine_run(run_layout: RunLayout, rate: float, seed: int) -> tuple[LaResEngine, GraphProposer, FaultyChatModel]:
    from lares_agent.engine import random_feature_sample

    run = RunLog(run_layout)
    client, model = _client(run_layout.root, rate=rate, seed=seed)
    deps = RunContext(llm=client, task=TASK, limits=GraphLimits(retry_budget=2))
    proposer = GraphProposer(build_graph(), deps, run, TASK.name)
    cfg = flat_config(population=3, elites=1, total_steps=300, warmup_steps=60, reward_period=80,
                       eval_every=0, eval_episodes=1, update_eval_episodes=1, ts_window=10, buffer_capacity=2000,
                       horizon=20, seed=seed, feature_sample=200,
                       sac=SACConfig(hidden=(32, 32), batch_size=32, utd_ratio=0.1))
    initial = proposer.initial(3, random_feature_sample(TASK, 200, seed, horizon=20))
    engine = make_engine(TASK, cfg, initial, proposer, run_dir=run_layout.root)
    try:
        engine.run()
    finally:
        engine.close()
    return engine, proposer, model


def test_engine_run_with_half_faults_completes_its_reward_updates(run_layout: RunLayout) -> None:
    engine, _, model = _engine_run(run_layout, rate=0.5, seed=0)
    assert engine.done and engine.round >= 2
    events = read_jsonl(run_layout.events)
    updates = [e for e in events if e["event"] == "reward_update"]
    assert [u["round"] for u in updates] == list(range(1, engine.round + 1))
    candidates = read_jsonl(run_layout.candidates)
    for u in updates:  # every replaced slot holds a child accepted in that round; the rest kept their reward
        accepted = {c["id"] for c in candidates if c["round"] == u["round"] and c["verdict"] == "accepted"}
        assert set(u["replaced"].values()) <= accepted
        assert len(u["replaced"]) == len(accepted)
    assert sum(len(u["replaced"]) for u in updates) > 0  # children did arrive despite the faults
    rejected = [c for c in candidates if c["verdict"] == "rejected"]
    assert rejected and all(c["reason"] for c in rejected)
    assert len(model.faults()) >= 5
    _assert_every_fault_logged(run_layout.root, model)


def test_engine_run_with_only_faults_keeps_its_population(run_layout: RunLayout) -> None:
    engine, _, model = _engine_run(run_layout, rate=1.0, seed=1)
    assert engine.done and engine.round >= 2
    ids = [fn.id for fn in engine.rewards]
    assert ids == [f"fallback-r0-s{s}" for s in range(3)]  # initial fallbacks, never replaced afterwards
    events = read_jsonl(run_layout.events)
    assert sum(e["event"] == "fallback" for e in events) == 3
    assert all(u["replaced"] == {} for u in events if u["event"] == "reward_update")
    assert all(f.reason for f in model.faults()) and len(model.faults()) == model.calls
    _assert_every_fault_logged(run_layout.root, model)


def test_fault_model_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="rate"):
        FaultyChatModel(inner=candidate_model(), rate=1.5)
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultyChatModel(inner=candidate_model(), kinds=("meteor",))


def test_fault_sequence_depends_only_on_the_seed() -> None:
    def kinds(seed: int) -> list[tuple[int, str]]:
        model = FaultyChatModel(inner=candidate_model(), rate=0.5, seed=seed)
        client = LLMClient(model, LLMConfig(max_retries=0), None, sleep=lambda s: None)
        from langchain_core.messages import HumanMessage

        for _ in range(30):
            with contextlib.suppress(Exception):
                client.complete([HumanMessage("propose")])
        return [(f.call, f.kind) for f in model.faults()]

    first = kinds(7)
    assert first == kinds(7) and first != kinds(8)
    assert 5 <= len(first) <= 25  # about half of 30 calls


def test_client_sees_through_the_wrapper_for_backend_options(tmp_path: Path) -> None:
    from lares_agent.llm import ReplayChatModel

    record = tmp_path / RECORD_NAME
    record.write_text(json.dumps({"key": "k", "answer": "{}", "ok": True}) + "\n")
    wrapped = FaultyChatModel(inner=ReplayChatModel.from_record(record), rate=0.0)
    assert LLMClient(wrapped, LLMConfig(), None).kind == "replay"  # so the schema still reaches the replay model
    assert LLMClient(FaultyChatModel(inner=candidate_model()), LLMConfig(), None).kind == "generic"
