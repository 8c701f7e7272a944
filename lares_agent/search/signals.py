"""Graceful SIGTERM / SIGINT: the first one asks the run to stop after the current step, a second one stops it.

Before, both ended the run at once with no message, no final checkpoint and no end-of-run event. Now the
first signal only sets a flag that the engine's `should_stop` reads between iterations; the
search then writes a checkpoint and a `run_end` event and the CLI prints how to resume. Every write is atomic
or a whole line, so the second signal can end the process at once (the default action, re-raised).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["StopRequest", "graceful_signals"]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Which signal asked the run to stop (None: none yet)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by that signal (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + (self.signum or 0)


@contextmanager
def graceful_signals(on_first: Callable[[int], None] | None = None) -> Iterator[StopRequest]:
    """Within the block, the first SIGTERM/SIGINT sets the returned request; a second one ends the process with
    that signal's default action. Outside the main thread (no signal handlers there) nothing is installed."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if request.signum is None:
            request.signum = signum
            if on_first is not None:
                on_first(signum)
            return
        signal.signal(signum, signal.SIG_DFL)  # the second signal: stop at once
        os.kill(os.getpid(), signum)

    previous = {sig: signal.signal(sig, handle) for sig in _SIGNALS}
    try:
        yield request
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
