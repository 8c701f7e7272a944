"""Fixtures shared by several test modules (plain helpers live in ``helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread for the test, then the previous count: the machine's cores are shared.

    Not autouse: modules opt in with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
