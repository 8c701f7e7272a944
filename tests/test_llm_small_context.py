"""A server with a 2,048-token context, as llama.cpp's own (`python -m llama_cpp.server`) starts by default.

The stand-in counts prompt tokens roughly, as a tokenizer would (3.6 characters a token, plus the chat template),
refuses a prompt that fills its context with llama.cpp's error, and, like llama.cpp, shortens an answer to what
its context has left (`finish_reason=length`). The propose prompt must fit it with room for the answer; a cut
answer must not be sent again unchanged; its tokens must be recorded; and the message must name the cause and
the fix.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, chat_completion, serving
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from lares_agent.engine.tasks import get_task
from lares_agent.graphs.budget import LEFT_OUT, fitted_system
from lares_agent.graphs.context import GraphLimits, RunContext, TaskExampleMode
from lares_agent.graphs.nodes import propose
from lares_agent.graphs.state import HUMAN_ELITE
from lares_agent.llm import LLMClient, LLMConfig, make_client
from lares_agent.llm.errors import AnswerCut, ContextTooSmall
from lares_agent.llm.formats import FormatSteps
from lares_agent.llm.openai_compat import make_openai_chat_model
from lares_agent.runs import LLM_CALLS_NAME, LLMCallRow, RecordFile
from lares_agent.search.config import SearchConfig, llm_config

N_CTX = 2048
CANDIDATE = json.dumps({"components": {"approach": "-tcp_to_obj", "progress": "-5*obj_to_target",
                                       "bonus": "5*success"}, "rationale": "reach, then carry; a bonus on success"})


def rough_tokens(messages: list[Mapping[str, Any]]) -> int:
    """What a tokenizer of these prompts counts, roughly: 3.6 characters a token, 5 a message, 3 to answer."""
    return sum(math.ceil(len(str(m.get("content", ""))) / 3.6) + 5 for m in messages) + 3


class SmallContext(FakeOpenAI):
    """llama.cpp's server at its default context of 2,048 tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        prompt = rough_tokens(body["messages"])
        limit = int(body.get("max_tokens") or body.get("max_completion_tokens") or N_CTX)
        with self.lock:
            self.requests.append({"prompt": prompt, "max_tokens": limit, "body": body})
        if prompt >= N_CTX:  # llama_cpp.server's words (llama_cpp/server/errors.py)
            message = (f"This model's maximum context length is {N_CTX} tokens. However, you requested "
                       f"{prompt + limit} tokens ({prompt} in the messages, {limit} in the completion). Please "
                       "reduce the length of the messages or completion.")
            return 400, {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                                   "code": "context_length_exceeded"}}
        if prompt + limit > N_CTX:  # llama.cpp shortens max_tokens to what the context has left
            made = N_CTX - prompt
            payload = chat_completion(CANDIDATE[: made * 3], body["model"], prompt, made)
            payload["choices"][0]["finish_reason"] = "length"
            return 200, payload
        return 200, chat_completion(CANDIDATE, body["model"], prompt, 40)

    @property
    def fitted(self) -> bool:
        """Every request left its whole answer room inside the context."""
        return all(r["prompt"] + r["max_tokens"] <= N_CTX for r in self.requests)


@pytest.fixture
def server() -> Any:
    with serving(SmallContext()) as srv:
        yield srv


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def _client(url: str, record: Path | None = None, level: int = 0, **kw: Any) -> LLMClient:
    """A client of the stand-in; `level` 1 starts at response_format json_object (llama.cpp's server refuses
    json_schema: the SDK then reads the answer itself), 2 sends none."""
    config = LLMConfig(backend="openai", model="qwen", base_url=url, **kw)
    formats = FormatSteps()
    client = LLMClient(make_openai_chat_model(config), config, record, sleep=lambda s: None, formats=formats)
    for _ in range(level):
        formats.step_down(client.endpoint, formats.level(client.endpoint))
    return client


def _long_prompt() -> list[Any]:
    """About 2,020 tokens to the server: round 1's propose prompt in the run that found the problem."""
    return [SystemMessage("You write rewards. " * 200), HumanMessage("Elite: -tcp_to_obj. " * 171)]


SCHEMA = {"type": "object", "properties": {"components": {"type": "object"}}, "required": ["components"]}


@pytest.mark.parametrize("level", [1, 2])
def test_a_cut_answer_is_not_sent_again_unchanged_and_its_tokens_are_recorded(
        server: SmallContext, tmp_path: Path, level: int) -> None:
    # the user said the server holds 8192 (it holds 2048), so the client sends the long prompt once
    client = _client(server.url, tmp_path / LLM_CALLS_NAME, level=level, context=8192, max_retries=2)
    notes: list[str] = []
    client.window.on_note = notes.append
    with pytest.raises(AnswerCut) as cut:
        client.complete(_long_prompt(), json_schema=SCHEMA, max_tokens=384, tag="propose", meta={"round": 1})
    assert len(server.requests) == 1  # not retried: the same request is cut the same way
    prompt = server.requests[0]["prompt"]
    assert 2000 <= prompt < N_CTX
    message = str(cut.value)
    assert "finish_reason=length" in message and f"after {N_CTX - prompt} tokens" in message
    assert f"server's {N_CTX:,}-token context" in message
    assert "python -m llama_cpp.server --n_ctx 8192" in message and "pass --llm-context 8192" in message
    assert f"or pass --llm-context {N_CTX}, the server's" in message  # or trim to the context it has
    assert notes == [message]  # said once, for the screen and events.jsonl
    # the tokens the server reported are recorded for the failed call, and count in the usage
    (row,) = RecordFile(tmp_path / LLM_CALLS_NAME, LLMCallRow.from_json).read()
    assert not row.ok and (row.prompt_tokens, row.completion_tokens) == (prompt, N_CTX - prompt)
    assert row.error is not None and "finish_reason=length" in row.error and row.answer
    usage = client.usage
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["failures"]) == (prompt, N_CTX - prompt, 1)
    assert client.breaker.refusal(1) is None  # a context too small is not the endpoint being down
    # the server's context is learned: the same request is refused before it is sent, with the same fix
    assert client.window.size == N_CTX
    with pytest.raises(ContextTooSmall, match=r"not made: .*2,048-token context.*--n_ctx 8192"):
        client.complete(_long_prompt(), json_schema=SCHEMA, max_tokens=384, tag="propose", meta={"round": 1})
    assert len(server.requests) == 1
    # a prompt that fits still gets its answer
    short = [SystemMessage("You write rewards."), HumanMessage("Elite: -tcp_to_obj.")]
    assert json.loads(client.complete(short, json_schema=SCHEMA, max_tokens=384).text)["components"]


def test_a_prompt_that_fills_the_context_gets_the_fix_and_the_context_is_learned(server: SmallContext) -> None:
    client = _client(server.url, level=1, context=8192)
    big = [SystemMessage("You write rewards. " * 200), HumanMessage("Elite: -tcp_to_obj. " * 200)]
    with pytest.raises(ContextTooSmall, match=r"server's 2,048-token context.*fix: .*--n_ctx 8192") as refused:
        client.complete(big, json_schema=SCHEMA, max_tokens=384, tag="propose")
    assert not isinstance(refused.value, AnswerCut) and len(server.requests) == 1
    assert client.window.size == N_CTX


def test_a_server_gets_a_2048_token_window_unless_told_otherwise() -> None:
    assert llm_config(SearchConfig(llm_backend="openai", llm_model="m")).context is None
    client = make_client(LLMConfig(backend="openai", model="m", base_url="http://127.0.0.1:9/v1"), None)
    assert client.window.size == N_CTX
    told = llm_config(SearchConfig(llm_backend="openai", llm_model="m", llm_context=8192))
    assert told.context == 8192 and told.n_ctx == LLMConfig.n_ctx  # a server's n_ctx is its own
    local = llm_config(SearchConfig(llm_context=8192))
    assert (local.context, local.n_ctx) == (8192, 8192)  # the local model loads with it
    assert SearchConfig.from_json(SearchConfig(llm_context=8192).to_json()).llm_context == 8192
    with pytest.raises(Exception, match="--llm-context must be between 1024"):
        SearchConfig(llm_context=100)


# ------------------------------------------------------------------------------------------ the propose prompt
def _round_one(task: Any) -> dict[str, Any]:
    """Round 1 of the init setting on pick-place (its system message is the longest): three elites with long
    expressions and statistics, a long critique, past cases and a rejection history."""
    human = dict(task.human_components)
    elites = [{"id": HUMAN_ELITE, "components": human, "fitness": 0.1, "success": 0.0, "task_return": 812.5,
               "complexity": 40.0}]
    for i in range(2):
        comps = {"approach": f"-{1 + i}*tcp_to_obj", "grasp": "2*grasped*tolerance(obj_lift, 0.02, 0.3, 0.1, 0.1)",
                 "deliver": f"grasped*{3 + i}*exp(-obj_to_target/0.1)", "bonus": "10*success"}
        elites.append({"id": f"r0-a1-{i}", "components": comps, "fitness": 0.2 - i / 10, "success": 0.2,
                       "task_return": 900.0 + i, "complexity": 20.0,
                       "stats": {c: {"mean": 0.1, "std": 0.2, "corr_progress": -0.3} for c in comps}})
    critique = "\n".join(f"- defect {i}: the approach term dominates the deliver term by {i + 3}x on the buffer; fix: "
                         f"scale approach to -0.{i + 1}*tcp_to_obj and give deliver weight {i + 4}" for i in range(8))
    cases = "\n".join(f"- case {i} (pick-place-v3, success 0.{i}): approach = -tcp_to_obj; deliver = "
                      f"grasped*exp(-obj_to_target/0.{i + 1}); bonus = 10*success" for i in range(6))
    return {"round": 1, "n_wanted": 2, "elites": elites, "critique": critique, "critique_id": "r1-critique",
            "cases": cases, "rejections": [f"candidate {i}: uses unknown feature puck_{i}" for i in range(6)],
            "attempts": 0}


@pytest.mark.parametrize("examples", ["other", "none"])
def test_the_propose_prompt_fits_a_2048_token_server_with_room_for_the_answer(server: SmallContext,
                                                                             examples: TaskExampleMode) -> None:
    task = get_task("pick-place-v3")
    client = _client(server.url, level=1)  # no --llm-context: a server is taken to hold 2048 tokens
    limits = GraphLimits(reflect=False, oversample=2.0, numeric_children=0, task_examples=examples)
    ctx = RunContext(llm=client, task=task, limits=limits, human_reward=dict(task.human_components))
    out = propose(_round_one(task), Runtime(context=ctx))  # type: ignore[arg-type]
    assert len(server.requests) == 4 and server.fitted, [(r["prompt"], r["max_tokens"]) for r in server.requests]
    assert all(p.get("components") and not p.get("error") for p in out["pending"]), out["pending"]
    system, user = (m["content"] for m in server.requests[-1]["body"]["messages"])
    # kept: the task, every feature, the rules, the task's own reward, the step and the answer format
    assert "# Task: pick-place-v3" in system and "# Sign conventions" in system and "- hamacher(a, b)" in system
    assert all(f"- {name} [" in system for name in ("tcp_to_obj", "obj_to_target", "initial_obj_z", "success"))
    assert "The task's own reward" in system and "For a DIFFERENT task" not in system
    assert "# Step: propose" in user and "Answer with ONE JSON object" in user
    # trimmed first: the past cases and the rejection history (its newest line first)
    assert f"Past cases that worked on similar tasks:\n{LEFT_OUT}" in user and "case 0" not in user
    assert "puck_0" not in user
    # the whole system message is one for the run (the server's prefix cache)
    assert len({r["body"]["messages"][0]["content"] for r in server.requests}) == 1
    assert system == fitted_system(ctx)


def test_a_large_context_keeps_the_prompt_as_it_was(server: SmallContext) -> None:
    task = get_task("pick-place-v3")
    ctx = RunContext(llm=_client(server.url, level=1, context=8192), task=task,
                     limits=GraphLimits(reflect=False, task_examples="other"), human_reward=dict(task.human_components))
    system = fitted_system(ctx)
    assert "For a DIFFERENT task" in system and "the puck sits between the two finger pads" in system


@pytest.mark.slow
def test_a_run_told_the_wrong_context_says_the_cause_and_fix_once_and_goes_on(server: SmallContext,
                                                                              tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lares_agent.cli.app import app
    from lares_agent.runs import EVENTS_NAME, Event

    args = ["run", "--task", "pick-place-v3", "--setting", "init", "--budget", "300", "--reward-period", "150",
            "--population", "2", "--elites", "1", "--no-report", "--no-retrieval", "--llm-backend", "openai",
            "--llm-model", "qwen", "--base-url", server.url, "--llm-context", "8192", "--handover-episodes", "2",
            "--run-dir", str(tmp_path / "runs")]
    result = CliRunner().invoke(app, args, env={"LARES_HOME": str(tmp_path), "COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if "2,048-token context" in line]
    assert len(notes) == 1 and notes[0].startswith("note: ") and "--n_ctx 8192" in notes[0], result.output
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    events = [e for e in RecordFile(run / EVENTS_NAME, Event.from_json).read() if e.event == "llm_context"]
    assert len(events) == 1 and "--n_ctx 8192" in str(events[0].get("message"))
    rows = RecordFile(run / LLM_CALLS_NAME, LLMCallRow.from_json).read()
    assert sum(1 for r in rows if not r.ok) == 1 and sum(1 for r in rows if r.ok) >= 1  # refused once, then fitted
    assert all(r["prompt"] + r["max_tokens"] <= N_CTX for r in server.requests[1:])


def test_each_detail_level_of_the_system_message_is_shorter_and_keeps_task_features_and_rules() -> None:
    from lares_agent.graphs.prompting import MAX_DETAIL, system_text
    from lares_agent.rewards import prompt_features

    task = get_task("pick-place-v3")
    names = prompt_features(task)
    for human in (dict(task.human_components), None):
        texts = [system_text(task, names, 4, "own", human, detail) for detail in range(MAX_DETAIL + 1)]
        assert all(len(a) > len(b) for a, b in itertools.pairwise(texts))
        for text in texts:
            assert "# Task: pick-place-v3" in text and "# Sign conventions" in text and "# Reward language" in text
            assert all(f"- {name} [" in text for name in names)
        assert ("10*(obj_to_target < 0.05)" in texts[-1]) == (human is not None)  # the task's own reward stays
        assert "Building blocks" not in texts[1] and "For a DIFFERENT task" not in texts[1]


def test_with_no_example_shown_each_detail_level_is_no_longer_and_none_shows_one() -> None:
    from lares_agent.graphs.prompting import MAX_DETAIL, system_text
    from lares_agent.rewards import prompt_features

    task = get_task("pick-place-v3")
    names = prompt_features(task)
    for human in (dict(task.human_components), None):
        texts = [system_text(task, names, 4, "none", human, detail) for detail in range(MAX_DETAIL + 1)]
        assert all(len(a) >= len(b) for a, b in itertools.pairwise(texts)) and len(texts[0]) > len(texts[-1])
        assert not any("For a DIFFERENT task" in t or "For this task:" in t for t in texts)
        # each level below the first is "other"'s at that level: only the example was left out
        assert texts[1:] == [system_text(task, names, 4, "other", human, d) for d in range(1, MAX_DETAIL + 1)]
        assert ("Building blocks" in texts[0]) == (human is None) and "Building blocks" not in texts[1]
