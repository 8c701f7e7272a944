"""A run whose LLM answered every call, but never with a usable candidate, is no successful search.

tests/test_llm_breaker.py covers the loud case (every call a 500, the breaker trips). Here nothing fails at the
HTTP level and the breaker never trips: every answer is valid JSON whose reward names a feature Reacher does not
have, so the validator rejects each one and every slot runs on the fallback reward. The last screen, the run_end
event and the report must say so, and the exit status is non-zero unless --allow-fallback is given.
"""

from __future__ import annotations

import json
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, chat_completion, serving
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.runs import LLM_CALLS_NAME, LLMCallRow, RecordFile, read_jsonl

TINY = ["--task", "Reacher-v5", "--budget", "300", "--reward-period", "150", "--population", "2", "--elites", "1",
        "--no-retrieval", "--seed", "6", "--handover-episodes", "2"]

pytestmark = pytest.mark.slow  # two tiny runs


class Useless(FakeOpenAI):
    """Answers every call with a well-formed chat completion; every proposed reward uses an unknown feature."""

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        n = self.count()
        user = str(body["messages"][-1]["content"])
        text = "The arm overshoots." if "# Step: propose" not in user else json.dumps({"candidates": [{
            "components": {"reach": f"-{n}*banana_distance"}, "rationale": f"variant {n}"}]})
        return 200, chat_completion(text, body.get("model", "fake"), 50, 10)


def lares(*args: str, home: Path) -> Any:
    return CliRunner().invoke(app, list(args), env={"LARES_HOME": str(home), "COLUMNS": "240", "OPENAI_API_KEY": ""})


def only_run(base: Path) -> Path:
    (run,) = [p for p in base.iterdir() if p.is_dir()]
    return run


def test_a_run_of_invalid_answers_only_is_no_success(tmp_path: Path) -> None:
    with serving(Useless()) as srv:
        args = ["run", *TINY, "--llm", "openai", "--model", "fake", "--base-url", srv.url]
        result = lares(*args, "--no-report", "--run-dir", str(tmp_path / "a"), home=tmp_path)
        assert result.exit_code == 3, result.output
        assert "warning: no LLM candidate was accepted" in result.output
        assert "0 LLM call(s) failed" in result.output and "banana_distance" in result.output
        run = only_run(tmp_path / "a")
        calls = RecordFile(run / LLM_CALLS_NAME, LLMCallRow.from_json).read()
        assert calls and all(c.ok for c in calls)  # it failed softly: every call answered
        events = list(read_jsonl(run / "events.jsonl"))
        assert not [e for e in events if e["event"] == "llm_breaker"]
        assert [e for e in events if e["event"] == "fallback"]
        assert events[0]["event"] == "run_start"  # round 0's fallbacks come after the session's first line
        end = [e for e in events if e["event"] == "run_end"][-1]
        assert end["finished"] and "no LLM candidate was accepted" in end["only_fallbacks"]

        allowed = lares(*args, "--allow-fallback", "--report", "--run-dir", str(tmp_path / "b"), home=tmp_path)
        assert allowed.exit_code == 0, allowed.output  # accepted on request, but still said
        assert "warning: no LLM candidate was accepted" in allowed.output
        page = (only_run(tmp_path / "b") / "report" / "index.html").read_text()
        assert "The LLM delivered no reward" in page
