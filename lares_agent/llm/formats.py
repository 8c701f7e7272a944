"""Which structured-output `response_format` each OpenAI-compatible endpoint accepts, remembered per process.

Servers differ: OpenAI and vLLM take `json_schema`, some llama-server and Ollama builds only `json_object`,
others nothing; and some answer an unsupported format with a 5xx instead of a 400. The
client steps down the ladder json_schema -> json_object -> none when an error names the format, and records
the step here, keyed by (base URL, model), so every later client of the same endpoint in this process (a
resumed run, the next run of a sweep, the report's helpers) starts at the step that worked instead of paying
the failed request again. The registry is an explicit object: `LLMClient` takes one, and `FORMAT_STEPS` is the
process-wide default (an empty dict at import, nothing else).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["FORMAT_LADDER", "FORMAT_STEPS", "Endpoint", "FormatSteps", "names_format"]

FORMAT_LADDER = ("json_schema", "json_object", "none")
# Words an error message uses when the server refused the structured-output request itself.
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar")


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


class FormatSteps:
    """Per endpoint: the index into `FORMAT_LADDER` its server accepted (0 = json_schema until refused)."""

    def __init__(self) -> None:
        self._levels: dict[Endpoint, int] = {}
        self._lock = threading.Lock()

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
            else:
                self._levels.pop(endpoint, None)


FORMAT_STEPS = FormatSteps()
