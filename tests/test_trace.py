"""`lares trace`: the reader joins trace.sqlite, llm_calls.jsonl and candidates.jsonl, and the command shows them.

The run under test is written by the real search-layer code (GraphProposer over the real round graph with a
SQLite checkpointer and the real LLM client), with a scripted chat model instead of an LLM and without
training: round 0 fills two slots, round 1 refills one from an elite, through every node and several retries.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine import UpdateContext, random_feature_sample
from lares_agent.engine.tasks import get_task
from lares_agent.errors import LaresError
from lares_agent.graphs.build import build_graph, open_trace
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.llm import LLMClient, LLMConfig, LLMError
from lares_agent.runs import RunLayout, RunLog, SlotRecord
from lares_agent.search.config import SearchConfig
from lares_agent.search.proposer import GraphProposer
from lares_agent.trace import UnknownCandidateError, read_trace

X = {"components": {"reach": "-fingertip_to_target", "effort": "-0.1*action_norm"}, "rationale": "close in"}
Y = {"components": {"reach": "exp(-5*fingertip_to_target)", "bonus": "2*success"}, "rationale": "shaped"}
Z = {"components": {"reach": "-2*fingertip_to_target", "calm": "-0.05*joint_speed"}, "rationale": "calm arm"}
ANALYSIS = "The arm swings past the target and never settles."
CRITIQUE = "The reach term is too flat near the target; add a calm term."
# Propose answers in call order: round 0 (an endpoint failure, X, then Y on the retry), round 1 (prose, a
# duplicate of the elite X, then Z).
PROPOSALS: list[Any] = [
    LLMError("endpoint said no"), X, Y,
    "I would reward closeness to the target.", X, Z,
]


class ScriptedChat(BaseChatModel):
    """Answers analyse / critique with fixed text and propose calls from a script (an exception is raised)."""

    _queue: list[Any] = PrivateAttr(default_factory=lambda: list(PROPOSALS))

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        user = str(messages[-1].content)
        if user.startswith("# Step: analyse"):
            text = ANALYSIS
        elif user.startswith("# Step: critique"):
            text = CRITIQUE
        else:
            item = self._queue.pop(0)
            if isinstance(item, Exception):
                raise item
            text = item if isinstance(item, str) else json.dumps({"candidates": [item]})
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("runs") / "Reacher-v5-test"
    run = RunLayout.create(root.parent, "Reacher-v5", root.name)
    SearchConfig(task="Reacher-v5", population=2, elites=1, llm_backend="openai", llm_model="scripted").save(run.config)
    task = get_task("Reacher-v5")
    client = LLMClient(ScriptedChat(), LLMConfig(max_retries=0), run.llm_calls, sleep=lambda s: None)
    deps = RunContext(llm=client, task=task, run_id=run.root.name, id_prefix="t-",
                      limits=GraphLimits(analysis="llm"))  # the scripted model answers analyse and critique
    saver = open_trace(run.root)
    try:
        proposer = GraphProposer(build_graph(saver), deps, RunLog(run), task.name)
        sample = random_feature_sample(task, 100, seed=0)
        rewards = tuple(proposer.initial(2, sample))
        slots = tuple(
            SlotRecord(slot=i, reward_id=r.id, success=s, task_return=-5.0, own_return=1.0, final_progress=0.1,
                       complexity=r.complexity, fitness=s, graded_by="success",
                       learner_success=(0.25, 0.75) if i == 0 else ())  # slot 0: two learners per reward
            for i, (r, s) in enumerate(zip(rewards, (0.5, 0.0), strict=True))
        )
        episode = {k: np.asarray(v[:50]) for k, v in sample.items()}
        ctx = UpdateContext(round=1, env_steps=150, setting="scratch", slots=slots, ranking=(0, 1), elites=(0,),
                            refill=(1,), rewards=rewards, rollouts={0: (episode,)}, feature_sample=sample)
        assert len(proposer(ctx)) == 1
    finally:
        saver.conn.close()
    yield run.root


def _by_components(trace: Any, components: dict[str, str], verdict: str) -> Any:
    found = [c for c in trace.candidates.values() if c.verdict == verdict and
             set(c.components) == set(components)]
    assert len(found) == 1, [(c.id, c.verdict, dict(c.components)) for c in trace.candidates.values()]
    return found[0]


def test_steps_follow_the_graph_in_order_with_their_calls(traced_run: Path) -> None:
    trace = read_trace(traced_run)
    assert trace.rounds == (0, 1)
    assert [(s.round, s.node, s.attempt) for s in trace.steps] == [
        (0, "propose", 1), (0, "validate", 1), (0, "propose", 2), (0, "validate", 2),
        (1, "analyse", 0), (1, "critique", 0), (1, "propose", 1), (1, "validate", 1),
        (1, "propose", 2), (1, "validate", 2), (1, "propose", 3), (1, "validate", 3),
    ]
    times = [s.time for s in trace.steps]
    assert times == sorted(times) and all(s.seconds is not None and s.seconds >= 0 for s in trace.steps)
    calls = {(s.round, s.node, s.attempt): len({c.call for c in s.calls}) for s in trace.steps}
    assert calls[(0, "propose", 1)] == 2 and calls[(0, "propose", 2)] == 1
    assert calls[(1, "analyse", 0)] == calls[(1, "critique", 0)] == 1
    assert all(n == 0 for (_, node, _), n in calls.items() if node == "validate")
    # every recorded call is claimed by exactly one step
    total = sum(len(s.calls) for s in trace.steps)
    assert total == len((traced_run / "llm_calls.jsonl").read_text().splitlines()) and not trace.unmatched_calls
    analyse = trace.select(node="analyse")[0]
    assert analyse.calls[0].answer == ANALYSIS and analyse.output["analysis"] == ANALYSIS
    assert analyse.persona == "neutral" and analyse.summary.startswith("analysed 1 rollout")
    failed = [c for c in trace.select(round=0, node="propose")[0].calls if not c.ok]
    assert len(failed) == 1 and "endpoint said no" in failed[0].error


def test_verdicts_and_lineage_of_a_child(traced_run: Path) -> None:
    trace = read_trace(traced_run)
    x = _by_components(trace, X["components"], "accepted")
    z = _by_components(trace, Z["components"], "accepted")
    assert (x.round, x.slot) == (0, 0) and x.evaluations[0]["fitness"] == pytest.approx(0.5)
    assert x.evaluations[0]["learner_success"] == [0.25, 0.75]  # the spread over the slot's learners
    assert (z.round, z.attempt, z.slot) == (1, 3, 1)
    lineage = trace.lineage(z.id)
    assert [a.id for a in lineage.ancestors] == [x.id] and z.id in trace.lineage(x.id).children
    assert lineage.critique and CRITIQUE in lineage.critique and z.critique_id and z.critique_id.endswith("r1-critique")
    assert lineage.proposed_by is not None and (lineage.proposed_by.round, lineage.proposed_by.attempt) == (1, 3)
    assert lineage.call is not None and json.loads(lineage.call.answer)["candidates"][0] == Z
    assert "# Step: propose" in lineage.call.messages[-1]["content"]
    assert x.id in lineage.call.messages[-1]["content"]  # the child was asked to improve its elite
    assert lineage.validated_by is not None and "accepted 1" in lineage.validated_by.summary


def test_rejections_keep_their_reason_and_the_call_that_caused_them(traced_run: Path) -> None:
    trace = read_trace(traced_run)
    rejected = [c for c in trace.candidates.values() if c.verdict == "rejected"]
    assert len(rejected) == 3
    dup = _by_components(trace, X["components"], "rejected")
    assert dup.round == 1 and "duplicate" in dup.reason
    assert trace.lineage(dup.id).call.answer == json.dumps({"candidates": [X]})
    failed = next(c for c in rejected if "endpoint said no" in c.reason)
    call = trace.lineage(failed.id).call
    assert failed.round == 0 and call is not None and not call.ok
    prose = next(c for c in rejected if c.round == 1 and c.attempt == 1)
    assert "JSON" in prose.reason and trace.lineage(prose.id).call.answer == PROPOSALS[3]


def test_select_refuses_what_the_run_does_not_have(traced_run: Path) -> None:
    trace = read_trace(traced_run)
    assert {s.node for s in trace.select(node="validate")} == {"validate"}
    assert {s.round for s in trace.select(round=1)} == {1}
    with pytest.raises(LaresError, match="--node must be one of"):
        trace.select(node="plan")
    with pytest.raises(LaresError, match="no round 5; its rounds are: 0, 1"):
        trace.select(round=5)
    with pytest.raises(UnknownCandidateError, match="known ids include"):
        trace.lineage("t-r9-a9-9")


def test_a_run_without_trace_is_empty_and_left_untouched(tmp_path: Path) -> None:
    SearchConfig(task="Reacher-v5").save(tmp_path / "config.json")
    (tmp_path / "llm_calls.jsonl").write_text('{"call": 0, "tag": "propose", "meta": {"node": "propose", "round": 0, '
                                             '"attempt": 1}, "answer": "x", "ok": true}\n{"call": 1, "ta')
    trace = read_trace(tmp_path)
    assert trace.steps == () and trace.rounds == () and len(trace.unmatched_calls) == 1
    assert not (tmp_path / "trace.sqlite").exists()


def test_a_damaged_trace_is_a_one_line_error(tmp_path: Path) -> None:
    SearchConfig(task="Reacher-v5").save(tmp_path / "config.json")
    (tmp_path / "trace.sqlite").write_bytes(b"not a database " * 100)
    with pytest.raises(LaresError, match="not a readable graph trace"):
        read_trace(tmp_path)


def test_reading_does_not_write_to_the_trace(traced_run: Path) -> None:
    before = (traced_run / "trace.sqlite").read_bytes()
    read_trace(traced_run)
    assert (traced_run / "trace.sqlite").read_bytes() == before
    assert sorted(p.name for p in traced_run.glob("trace.sqlite*")) == ["trace.sqlite"]  # no -shm / -wal left


def test_a_live_run_can_be_read_while_its_writer_holds_the_trace(traced_run: Path, tmp_path: Path) -> None:
    live = tmp_path / "live"
    shutil.copytree(traced_run, live)
    writer = open_trace(live)
    try:
        assert len(list(writer.list(None))) > 0 and (live / "trace.sqlite-wal").exists()
        assert [s.node for s in read_trace(live).steps] == [s.node for s in read_trace(traced_run).steps]
    finally:
        writer.conn.close()
    with sqlite3.connect(live / "trace.sqlite") as conn:  # still a valid checkpoint store
        assert conn.execute("select count(distinct thread_id) from checkpoints").fetchone()[0] == 2


# ---------------------------------------------------------------------------------------------- the command
def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["trace", *args], env={"COLUMNS": "240"})


def test_cli_table_lists_every_step_and_the_accepted_lineage(traced_run: Path) -> None:
    result = _invoke(str(traced_run))
    assert result.exit_code == 0, result.output
    trace = read_trace(traced_run)
    z = _by_components(trace, Z["components"], "accepted")
    for s in trace.steps:
        assert s.summary[:40] in result.output
    assert z.id in result.output and "accepted candidates" in result.output
    assert "[answer]" not in result.output  # prompts only when drilling in


def test_cli_drills_into_a_node_with_prompts_and_answers(traced_run: Path) -> None:
    result = _invoke(str(traced_run), "--node", "critique", "--round", "1")
    assert result.exit_code == 0, result.output
    assert "[user]" in result.output and "# Step: critique" in result.output
    assert f"[answer]\n{CRITIQUE}" in result.output
    assert "# Step: propose" not in result.output


def test_cli_candidate_shows_lineage_critique_and_answer(traced_run: Path) -> None:
    trace = read_trace(traced_run)
    x = _by_components(trace, X["components"], "accepted")
    z = _by_components(trace, Z["components"], "accepted")
    result = _invoke(str(traced_run), "--candidate", z.id)
    assert result.exit_code == 0, result.output
    assert f"lineage: {z.id} <- {x.id}" in result.output
    assert CRITIQUE in result.output and '"calm": "-0.05*joint_speed"' in result.output
    shown = _invoke(str(traced_run), "--candidate", x.id)
    assert "success 0.5 (its learners: 0.25, 0.75)" in shown.output, shown.output


def test_cli_json_matches_the_reader(traced_run: Path) -> None:
    result = _invoke(str(traced_run), "--json", "--round", "1")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    trace = read_trace(traced_run)
    assert [s["node"] for s in data["steps"]] == [s.node for s in trace.select(round=1)]
    assert all(c["round"] == 1 for c in data["candidates"]) and data["rounds"] == [0, 1]
    assert data["steps"][0]["calls"][0]["answer"] == ANALYSIS
    z = _by_components(trace, Z["components"], "accepted")
    one = json.loads(_invoke(str(traced_run), "--json", "--candidate", z.id).output)["candidate"]
    assert one["candidate"]["id"] == z.id and one["ancestors"][0]["components"] == X["components"]
    assert CRITIQUE in one["critique"]  # after the computed defects


def test_the_propose_prompt_gives_each_elites_task_return_in_the_scratch_setting(traced_run: Path) -> None:
    """As the reference's feedback did in both settings: the score, never the human reward's expression."""
    (propose, *_) = read_trace(traced_run).select(round=1, node="propose")
    user = propose.calls[0].messages[-1]["content"]
    assert "task return -5, complexity" in user and "the task's own hand-designed reward" in user
    assert "human_reward" not in user


def test_the_trace_says_which_grade_ranked_each_update_and_what_each_slot_was_made_of(
        traced_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "graded"
    shutil.copytree(traced_run, run)
    trace = read_trace(run)
    x = _by_components(trace, X["components"], "accepted")
    y = _by_components(trace, Y["components"], "accepted")

    def slot(i: int, rid: str, ret: float) -> dict[str, Any]:
        return {"slot": i, "reward_id": rid, "fitness": ret - 0.01, "success": 0.0, "task_return": ret,
                "complexity": 10.0, "graded_by": "return", "progress_closed": 0.132, "complexity_penalty": 0.01}

    with (run / "events.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"event": "reward_update", "round": 1, "env_steps": 150, "fitness": {},
                             "ranking": [0, 1], "elites": [0], "best": 0, "replaced": {"1": "new"},
                             "slots": [slot(0, x.id, 412.3), slot(1, y.id, 96.5)]}) + "\n")
    with (run / "candidates.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": x.id, "round": 2, "slot": 0, "verdict": "evaluated", "fitness": 412.29,
                             "success": 0.0, "graded_by": "return", "task_return": 412.3,
                             "complexity_penalty": 0.01}) + "\n")
    line = (f"round 1 at 150 steps, ranked by return: slot 0 {x.id} return 412.3 - 0.01 cx (elite); "
            f"slot 1 {y.id} return 96.5 - 0.01 cx (replaced)")
    overview = _invoke(str(run))
    assert overview.exit_code == 0, overview.output
    assert line in " ".join(overview.output.split())  # wrapped at the console's width
    assert line in " ".join(_invoke(str(run), "--round", "1").output.split())
    shown = _invoke(str(run), "--candidate", x.id).output
    assert "evaluated at round 2: fitness 412.29 (return 412.3 - 0.01 cx), success 0.0, task return 412.3" in shown
    # the run's own round-1 evaluation (graded on success, slot 0's spread over its two learners)
    assert "evaluated at round 1: fitness 0.5 (success 0.50), success 0.5" in shown  # the fitness is the graded value
    data = json.loads(_invoke(str(run), "--json", "--round", "1").output)
    assert [s["graded_by"] for s in data["updates"][0]["slots"]] == ["return", "return"]
    assert read_trace(run).update(1) is not None and read_trace(run).update(2) is None
