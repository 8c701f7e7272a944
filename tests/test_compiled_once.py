"""A candidate is compiled once: the reward the proposer installs is the function validate compiled and checked
(`RoundResult.compiled`), under the rationale its record keeps; a round the trace gives back (a resume) holds no
function, and its record compiles to the same reward. Scripted model, real graph, validator and proposer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import scripted_client
from langgraph.checkpoint.memory import InMemorySaver
from test_graph_candidates import TASK, episodes_sample

from lares_agent.graphs.build import build_graph
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.round import RoundResult
from lares_agent.rewards import CompiledReward, compile_record
from lares_agent.runs import RunLayout, RunLog
from lares_agent.search import proposer as proposer_module
from lares_agent.search.proposer import GraphProposer

LONG = "closer is better; " * 20  # longer than the record keeps of a rationale
ANSWERS = [{"components": {"reach": "-2*tcp_to_goal", "done": "5*success"}, "rationale": LONG},
           {"components": {"reach": "exp(-tcp_to_goal/0.1)"}, "rationale": "sharp"}]


def _proposer(run: RunLog, saver: InMemorySaver) -> GraphProposer:
    llm = scripted_client(ANSWERS)
    llm.kind = "local"
    ctx = RunContext(llm=llm, task=TASK, limits=GraphLimits(reflect=False))
    return GraphProposer(build_graph(saver), ctx, run, TASK.name)


def test_the_proposer_installs_the_function_validate_compiled(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    results: list[RoundResult] = []

    def run_round(*args: Any) -> RoundResult:
        results.append(real(*args))
        return results[-1]

    real = proposer_module.run_round
    monkeypatch.setattr(proposer_module, "run_round", run_round)
    saver, sample = InMemorySaver(), episodes_sample()
    run = RunLog(RunLayout.create(tmp_path, TASK.name, "run"))
    first = _proposer(run, saver).initial(2, sample)
    (result,) = results
    assert [r["id"] for r in result.accepted] == list(result.compiled) == [r.id for r in first]
    long, short = first
    for reward, rec in zip(first, result.accepted, strict=True):
        assert isinstance(reward, CompiledReward)
        assert reward.program is result.compiled[rec["id"]].program  # the validator's program, not compiled again
        record = compile_record(rec, TASK)  # what compiling the record gives
        assert reward.to_json() == record.to_json() and reward.key == record.key == rec["key"]
        assert np.array_equal(reward(sample), record(sample))
    assert short is result.compiled[short.id]  # its rationale is the record's as it is
    kept = result.accepted[0]["rationale"]
    assert len(kept) < len(LONG) and long.parsed.rationale == kept  # what the record keeps, as the checkpoint will
    assert result.compiled[long.id].parsed.rationale == LONG  # the validator read the answer's whole rationale

    # The same round again, from the trace (a resume): records only, compiled from them to the same rewards.
    again = _proposer(run, saver).initial(2, sample)
    assert results[-1].compiled == {} and results[-1].accepted == result.accepted
    assert [r.to_json() for r in again] == [r.to_json() for r in first]
    assert all(np.array_equal(a(sample), b(sample)) for a, b in zip(again, first, strict=True))
