"""Fixtures shared by several test modules: a tiny task, a scripted LLM, a run folder (built in helpers.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from helpers import point_task, scripted_client

from lares_agent.engine.tasks import TaskSpec
from lares_agent.llm import LLMClient
from lares_agent.runs import RunLayout


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
