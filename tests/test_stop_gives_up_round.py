"""A stop gives up the LLM round in flight within seconds.

A first SIGTERM used to wait for the round's LLM calls, as long as the calls' time-outs and retries
(benchmarks/README.md, "Stopping during an LLM round"). Now the client gives the call up (`llm/cancel.py`), the round is
abandoned with nothing installed and no checkpoint after it, and a resume redoes it. Checked at each layer: the
client (a silent HTTP server, a back-off), the engine (a background and a blocking round, then the resume equals
the uninterrupted run) and the whole CLI (SIGTERM in round 0 and in a background round, then `lares resume`).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reacher_answer, serving
from helpers import ScriptedChatModel
from langchain_core.messages import HumanMessage
from test_faults_resume import TINY, assert_rows_once, lares, only_run
from test_lares_engine import Proposer, load_reward, scratch_rewards, tiny_config, tiny_task

from lares_agent.engine import LaResEngine, UpdateContext, make_engine, restore_engine
from lares_agent.engine.state.checkpoint import latest_checkpoint, load_checkpoint
from lares_agent.errors import Cancelled
from lares_agent.llm import LLMClient, LLMConfig, make_client
from lares_agent.runs import read_jsonl

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WAIT_S = 60.0  # hang guard; a held request is answered after it (so the code before the fix ends, late)
STOP_S = 30.0  # SIGTERM to exit in the CLI tests: the training step in progress (up to ~10 s on a loaded
# 2-core machine) plus the LLM's share (the calls' time-outs and retries before the fix)


# ---------------------------------------------------------------------------------------------- the client
@contextmanager
def silent_server() -> Iterator[str]:
    """An OpenAI base URL whose server accepts every connection and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.05)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                held.append(sock.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        done.set()
        thread.join(WAIT_S)
        for conn in held:
            conn.close()
        sock.close()


def _stop_after(seconds: float) -> threading.Event:
    """A stand-in for the run's stop request, set `seconds` from now."""
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.daemon = True
    timer.start()
    return stop


def test_a_stop_gives_up_a_call_to_a_server_that_never_answers(tmp_path: Path) -> None:
    with silent_server() as url:
        client = make_client(LLMConfig(backend="openai", model="fake", base_url=url, timeout_s=120.0), tmp_path)
        stop = _stop_after(0.5)
        client.cancelled = stop.is_set
        began = time.monotonic()
        with pytest.raises(Cancelled):
            client.complete([HumanMessage("propose a reward")], tag="propose", meta={"round": 0})
        assert time.monotonic() - began < 0.5 + 1.5
    # a stop is no failure: nothing recorded, nothing counted against the endpoint
    assert not (tmp_path / "llm_calls.jsonl").exists() or not (tmp_path / "llm_calls.jsonl").read_text().strip()
    assert client.breaker.refusal(0) is None


def test_a_stop_ends_the_back_off_between_attempts() -> None:
    model = ScriptedChatModel(script=[ConnectionError("connection refused")])  # every attempt fails, retried
    client = LLMClient(model, LLMConfig(max_retries=6))  # back-off 0.5, 1, 2, 4, 8, 8 s
    client.cancelled = _stop_after(0.7).is_set
    began = time.monotonic()
    with pytest.raises(Cancelled):
        client.complete([HumanMessage("hi")], tag="propose")
    assert time.monotonic() - began < 0.7 + 1.0 and model.calls <= 2


def test_without_a_stop_request_the_client_calls_as_before() -> None:
    model = ScriptedChatModel(script=["fine"])
    client = LLMClient(model, LLMConfig())
    assert client.complete([HumanMessage("hi")]).text == "fine"
    client.cancelled = lambda: False
    assert client.complete([HumanMessage("hi")]).text == "fine"  # on its own thread, waited for


# ---------------------------------------------------------------------------------------------- the engine
class StoppedProposer(Proposer):
    """An LLM round on a silent server: it waits for the stop, then raises `Cancelled` as the client does. Blocking
    (`signal_inside`), the learners wait in the round, so that is where the signal arrives."""

    def __init__(self, signal_inside: bool) -> None:
        super().__init__()
        self.stop, self.signal_inside = threading.Event(), signal_inside

    def __call__(self, ctx: UpdateContext) -> Sequence[Any]:
        if self.signal_inside:
            self.stop.set()
        if not self.stop.wait(WAIT_S):
            raise TimeoutError("the test never stopped the run")
        raise Cancelled("an LLM call given up: the run was asked to stop")


def _events(engine: LaResEngine, kind: str) -> list[dict[str, Any]]:
    return [e for e in engine.events if e["event"] == kind]


def _installs(engine: LaResEngine) -> list[tuple[int, int, str, int]]:
    return [(e["round"], e["slot"], e["reward_id"], e["proposed_at"]) for e in _events(engine, "candidate_accepted")]


@pytest.mark.parametrize("background", [True, False], ids=["background", "blocking"])
def test_a_stop_abandons_the_round_and_the_resume_redoes_it(tmp_path: Path, background: bool) -> None:
    cfg = tiny_config(total_steps=300, checkpoint_every=30, max_rounds=1, propose_in_background=background)
    hook = StoppedProposer(signal_inside=not background)
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), hook, run_dir=tmp_path / "stopped")
    before = [fn.id for fn in engine.rewards]

    def should_stop() -> bool:  # a signal arrives while the round waits on the LLM
        if engine.update_in_flight:
            hook.stop.set()
        return hook.stop.is_set()

    began = time.monotonic()
    engine.run(should_stop=should_stop)
    assert time.monotonic() - began < WAIT_S / 2  # did not sit out the hang guard
    (gave_up,) = _events(engine, "reward_update_abandoned")
    assert engine.abandoned == gave_up["round"] == 1 and engine.round == 0 and not engine.update_in_flight
    assert not _installs(engine) and not _events(engine, "reward_update")
    assert [fn.id for fn in engine.rewards] == before
    assert engine.save_checkpoint() is None and engine.save_checkpoint("round-0001") is None
    last = latest_checkpoint(tmp_path / "stopped" / "checkpoints")
    assert last is not None
    state = load_checkpoint(last)
    assert state["counters"]["round"] == 0 and state["counters"]["env_steps"] <= gave_up["proposed_at"]
    engine.close()

    resumed = restore_engine(last, tiny_task(), load_reward, Proposer(), tmp_path / "resumed")
    resumed.run()
    whole = make_engine(tiny_task(), cfg, scratch_rewards(), Proposer(), run_dir=tmp_path / "whole")
    whole.run()
    assert _events(resumed, "reward_update_started")[0]["env_steps"] == gave_up["proposed_at"]  # redone at its step
    assert _installs(resumed) == _installs(whole) and len(_installs(whole)) == 2
    assert [fn.id for fn in resumed.rewards] == [fn.id for fn in whole.rewards]
    resumed.close()
    whole.close()


# ---------------------------------------------------------------------------------------------- the CLI
class Held(FakeOpenAI):
    """Valid Reacher answers, except that a request whose prompt holds `hold` ("": every one) is not answered
    until `release` is set (or ever, as far as the run can tell)."""

    def __init__(self, hold: str | None) -> None:
        super().__init__()
        self.hold = hold
        self.held, self.release = threading.Event(), threading.Event()

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        n = self.count()
        hold = self.hold
        if hold is not None and hold in str(body["messages"][-1]["content"]):
            self.held.set()
            if not self.release.wait(WAIT_S):
                self.release.set()  # the next requests are answered at once
        return 200, reacher_answer(body, n)


def sigterm_once_held(server: Held) -> list[float]:
    """Send this process a SIGTERM shortly after the server starts holding a request; the list gets its time."""
    sent: list[float] = []

    def send() -> None:
        if server.held.wait(WAIT_S):
            time.sleep(0.3)
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=send, daemon=True).start()
    return sent


def _run(server: Held, base: Path) -> tuple[Any, float]:
    sent = sigterm_once_held(server)
    result = lares("run", *TINY, "--llm", "openai", "--model", "fake", "--base-url", server.url,
                   "--llm-timeout", "600", "--checkpoint-every", "60", "--run-dir", str(base / "runs"), home=base)
    assert sent, result.output
    return result, time.monotonic() - sent[0]


def test_sigterm_in_round_0_ends_at_once_and_the_resume_asks_again(tmp_path: Path) -> None:
    with serving(Held(hold="")) as server:
        result, took = _run(server, tmp_path)
        assert result.exit_code == 128 + signal.SIGTERM, result.output
        assert took < STOP_S, (took, result.output)
        assert "round 0 was given up" in result.output and "lares resume" in result.output
        run = only_run(tmp_path / "runs")
        assert latest_checkpoint(run / "checkpoints") is None  # the first checkpoint follows round 0's install
        end = [e for e in read_jsonl(run / "events.jsonl") if e["event"] == "run_end"][-1]
        assert end["stopped_by"] == "SIGTERM" and end["abandoned_round"] == 0 and not end["finished"]
        server.hold, asked = None, server.requests
        server.release.set()
        again = lares("resume", str(run), "--no-report", home=tmp_path)
        assert again.exit_code == 0 and "run finished" in again.output, again.output
        assert server.requests > asked  # round 0 was asked again
    rows = [r for r in read_jsonl(run / "candidates.jsonl") if r["round"] == 0 and r["verdict"] == "accepted"]
    assert rows and all(r["reason"] != "fallback" for r in rows), rows
    assert_rows_once(run)


def test_sigterm_in_a_background_round_ends_at_once_and_the_resume_redoes_it(tmp_path: Path) -> None:
    with serving(Held(hold="(round 1")) as server:
        result, took = _run(server, tmp_path)
        assert result.exit_code == 128 + signal.SIGTERM, result.output
        assert took < STOP_S, (took, result.output)
        assert "the reward round in flight was given up" in result.output
        assert "reward round 1 given up, no checkpoint after it" in result.output  # the last screen agrees
        assert "checkpoint written" not in result.output
        run = only_run(tmp_path / "runs")
        events = read_jsonl(run / "events.jsonl")
        (gave_up,) = [e for e in events if e["event"] == "reward_update_abandoned"]
        assert gave_up["round"] == 1 and not [e for e in events if e["event"] == "reward_update"]
        end = [e for e in events if e["event"] == "run_end"][-1]
        assert end["abandoned_round"] == 1 and not end["finished"]  # even when the budget was spent meanwhile
        state = load_checkpoint(latest_checkpoint(run / "checkpoints"))  # type: ignore[arg-type]
        assert state["counters"]["round"] == 0 and state["counters"]["env_steps"] <= gave_up["proposed_at"]
        server.hold = None
        server.release.set()
        again = lares("resume", str(run), "--no-report", home=tmp_path)
        assert again.exit_code == 0 and "run finished" in again.output, again.output
    events = read_jsonl(run / "events.jsonl")
    assert [e["round"] for e in events if e["event"] == "reward_update"][:1] == [1]  # the round was redone
    assert [e["round"] for e in events if e["event"] == "reward_update_abandoned"] == [1]  # and the stop is told
    assert_rows_once(run)
