"""Which structured-output `response_format` each OpenAI-compatible endpoint accepts, remembered per process.

Servers differ: OpenAI and vLLM take `json_schema`, some llama-server and Ollama builds only `json_object`,
others nothing; and some answer an unsupported format with a 5xx instead of a 400. The
client steps down the ladder json_schema -> json_object -> none when an error names the format, and records
the step here, keyed by (base URL, model), so every later client of the same endpoint in this process (a
resumed run, the next run of a sweep, the report's helpers) starts at the step that worked instead of paying
the failed request again. The registry is an explicit object: `LLMClient` takes one, and `FORMAT_STEPS` is the
process-wide default (an empty dict at import, nothing else).

Above the ladder sits the answer grammar (`rewards/grammar.py`, GBNF): a call that has one asks with it first
(llama.cpp's server reads a `grammar` field, vLLM `guided_grammar` or `structured_outputs`), and an endpoint that
refused it, or answered text the grammar could not have produced (a server that ignores unknown fields), is
asked with the response_format from then on. Which endpoints gave the grammar up is remembered the same way.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["FORMAT_LADDER", "FORMAT_STEPS", "GRAMMAR", "REPEAT_PENALTY", "Endpoint", "FormatSteps", "follows_grammar",
           "grammar_body", "names_format"]

FORMAT_LADDER = ("json_schema", "json_object", "none")
GRAMMAR = "grammar"  # the step above the ladder, for calls that carry an answer grammar
# Words an error message uses when the server refused the structured-output request itself.
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar", "guided", "structured_output")


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint as the format registry knows it."""

    base_url: str
    model: str

    def __str__(self) -> str:
        return f"{self.base_url} ({self.model})"


def names_format(message: str) -> bool:
    """Whether an error message is about the response format (so a weaker one may be accepted)."""
    text = message.lower()
    return any(word in text for word in _FORMAT_WORDS)


REPEAT_PENALTY = 1.0
"""The repeat penalty answers are decoded with, locally and by a server that reads the grammar: llama.cpp's own
default, which llama-cpp-python's server raises to 1.1. A reward names the same features again and again
(`"success": "success"`), and the raised penalty pushed the same model's answers onto other names and other
expressions, fewer of them valid (docs/RESULTS.md, "Proposals")."""


def grammar_body(grammar: str) -> dict[str, Any]:
    """The request fields that carry a GBNF grammar: llama.cpp's server reads `grammar`; vLLM, whose xgrammar
    backend reads llama.cpp's GBNF, `guided_grammar` before 0.12 and `structured_outputs.grammar` from 0.10 on.
    Each server ignores the fields it does not know. No response_format goes with them: llama.cpp refuses a
    request holding both a grammar and a JSON schema. The local backend's repeat penalty goes with them
    (`REPEAT_PENALTY`, a field of llama.cpp's servers), so that a server decodes as the local backend does."""
    return {"grammar": grammar, "guided_grammar": grammar, "structured_outputs": {"grammar": grammar},
            "repeat_penalty": REPEAT_PENALTY}


def follows_grammar(text: str) -> bool:
    """Whether an answer could have been decoded under the answer grammar, as far as the client can tell: the
    grammar writes one JSON object (`rewards/grammar.py`), so anything else came from a server that ignored it."""
    try:
        answer = json.loads(text)
    except ValueError:
        return False
    return isinstance(answer, dict)


class FormatSteps:
    """Per endpoint: the index into `FORMAT_LADDER` its server accepted (0 = json_schema until refused)."""

    def __init__(self) -> None:
        self._levels: dict[Endpoint, int] = {}
        self._no_grammar: set[Endpoint] = set()
        self._lock = threading.Lock()

    def grammar(self, endpoint: Endpoint) -> bool:
        """Whether `endpoint` is still asked with the answer grammar (until it refuses or ignores it)."""
        with self._lock:
            return endpoint not in self._no_grammar

    def drop_grammar(self, endpoint: Endpoint) -> bool:
        """`endpoint` refused or ignored the grammar: True if this call gave it up (False: another had already)."""
        with self._lock:
            if endpoint in self._no_grammar:
                return False
            self._no_grammar.add(endpoint)
            return True

    def level(self, endpoint: Endpoint) -> int:
        """The ladder index to ask `endpoint` with."""
        with self._lock:
            return self._levels.get(endpoint, 0)

    def step_down(self, endpoint: Endpoint, refused: int) -> int | None:
        """`endpoint` refused ladder index `refused`: the index to ask with next, or None at the bottom.

        A step another client already took counts (two clients refused at once step down once, not twice).
        """
        with self._lock:
            current = self._levels.get(endpoint, 0)
            if current > refused:
                return current
            if refused + 1 >= len(FORMAT_LADDER):
                return None
            self._levels[endpoint] = refused + 1
            return refused + 1

    def forget(self, endpoint: Endpoint | None = None) -> None:
        """Drop what was learnt about `endpoint` (all endpoints without one): a server that was upgraded."""
        with self._lock:
            if endpoint is None:
                self._levels.clear()
                self._no_grammar.clear()
            else:
                self._levels.pop(endpoint, None)
                self._no_grammar.discard(endpoint)


FORMAT_STEPS = FormatSteps()
