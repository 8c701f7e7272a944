"""Fixtures shared by several test modules: a tiny task, a scripted LLM, a run folder (built in helpers.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from helpers import point_task, scripted_client

from lares_agent.engine.tasks import TaskSpec
from lares_agent.llm import LLMClient
from lares_agent.runs import RunLayout


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (`make test`), each worker runs on a core of its own: every affinity-aware default (torch
    and llama.cpp threads, a run's cores, Ray's CPUs) then sees one core, and no worker's threads wait on a core the
    other is using (llama.cpp's threads meet at every layer: one more busy thread than cores stalls them all)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= int(count or 1) > 1:
        os.sched_setaffinity(0, {cores[int(worker[2:]) % len(cores)]})
        torch.set_num_threads(1)  # torch counted its threads when it was imported, before this


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread for the test, then the previous count: the machine's cores are shared.

    Not autouse: modules opt in with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny_task() -> TaskSpec:
    """The point-mass task (a real `TaskSpec`, milliseconds per episode); `helpers.point_task` for variants."""
    return point_task()


@pytest.fixture
def run_layout(tmp_path: Path) -> RunLayout:
    """A fresh, empty run folder under ``tmp_path``, its file names from `lares_agent.runs` (never spelled here)."""
    return RunLayout.create(tmp_path, "point-mass", "run")


@pytest.fixture
def scripted_llm() -> Callable[..., LLMClient]:
    """`helpers.scripted_client`: an `LLMClient` over a `ScriptedChatModel` answering a script in call order."""
    return scripted_client
