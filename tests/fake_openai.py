"""A tiny OpenAI-compatible HTTP server on 127.0.0.1 for tests: the plumbing, with the answers left to subclasses.

Each test module subclasses `FakeOpenAI` and implements `answer` (what its scenario needs: fixed candidates, a
rejected `json_schema`, a request held until the test releases it). `serving` runs one on a daemon thread and
always shuts it down, so nothing outlives the test.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

__all__ = ["FakeOpenAI", "ReacherServer", "RefusesFormat", "asked_format", "chat_completion", "format_refusal",
           "serving"]


class FakeOpenAI(ThreadingHTTPServer):
    """Hands every POST body (JSON) to `answer` and sends back the status and JSON payload it returns."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.requests = 0  # `count` adds one per request that asks for it

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def url(self) -> str:
        """The OpenAI base URL clients are configured with."""
        return f"{self.origin}/v1"

    def count(self) -> int:
        """Counts one request (thread-safe) and returns how many have been counted, this one included."""
        with self.lock:
            self.requests += 1
            return self.requests

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes]:
        """(HTTP status, JSON payload) for one request; runs on the request's own thread. A `bytes` payload is
        sent as it is (text/html): a server that answers something other than JSON."""
        raise NotImplementedError


def chat_completion(content: str, model: str, prompt_tokens: int, completion_tokens: int,
                    id: str = "cmpl-1") -> dict[str, Any]:
    """A `/v1/chat/completions` response with one assistant message and its token usage."""
    return {
        "id": id, "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def reacher_answer(body: dict[str, Any], n: int) -> dict[str, Any]:
    """The n-th answer of a server that proposes distinct valid Reacher candidates and says a sentence to the other
    nodes (60 tokens a call)."""
    user = str(body["messages"][-1]["content"])
    text = "The arm overshoots." if "# Step: propose" not in user else json.dumps({"candidates": [{
        "components": {"reach": f"-{1 + 0.25 * n}*fingertip_to_target", "calm": "-0.01*joint_speed"},
        "rationale": f"variant {n}"}]})
    return chat_completion(text, body.get("model", "fake"), 50, 10)


def asked_format(body: dict[str, Any]) -> str:
    """What a request asks its answer to follow: "grammar" (a `grammar` field), else its response_format's type
    ("none" without one)."""
    return "grammar" if body.get("grammar") else (body.get("response_format") or {}).get("type", "none")


def format_refusal(body: dict[str, Any], refused: tuple[str, ...] = ("json_schema",),
                   status: int = 500) -> tuple[int, dict[str, Any]] | None:
    """The error a server that cannot honour a `response_format` of a kind in `refused` (or "grammar": a
    `grammar` field, as OpenAI's own endpoint refuses it) answers (some answer 500, not 400); None when the
    request asks for another format."""
    fmt = asked_format(body)
    if fmt not in refused:
        return None
    message = ("Unrecognized request argument supplied: grammar" if fmt == "grammar"
               else f"response_format {fmt} not supported")
    return status, {"error": {"message": message, "type": "server_error"}}


class RefusesFormat(FakeOpenAI):
    """Answers like `reacher_answer`, but requests asking for a format in `refused` get `format_refusal`'s
    error; `formats` lists what every request asked with (`asked_format`)."""

    def __init__(self, refused: tuple[str, ...] = ("json_schema",), status: int = 500) -> None:
        super().__init__()
        self.refused = refused
        self.status = status
        self.formats: list[str] = []

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes]:
        with self.lock:
            self.formats.append(asked_format(body))
            n = len(self.formats)
        refusal = format_refusal(body, self.refused, self.status)
        return refusal if refusal is not None else (200, reacher_answer(body, n))


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        status, payload = self.server.answer(self.path, self.headers, body)
        raw = isinstance(payload, bytes)
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/html" if raw else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client was killed while waiting
            pass


Server = TypeVar("Server", bound=FakeOpenAI)


@contextmanager
def serving(server: Server, join_timeout: float = 5.0) -> Iterator[Server]:
    """`server` answering on a daemon thread for the block; shut down and closed after it."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=join_timeout)


class ReacherServer(FakeOpenAI):
    """Distinct valid Reacher candidates for propose calls, a sentence for the others; 60 tokens a call."""

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, reacher_answer(body, self.count())
