"""Where the SAC/CrossQ population computes: the device names a run may ask for, and what they resolve to.

A run names the device it wants ("cpu", "cuda" or "auto"); the name, not what it resolved to, is what the configs
and checkpoints keep, so a run started with "auto" on a GPU machine resumes on a machine without one. Only the
learners' tensors live on the device: the replay buffer, the reward relabelling (numpy) and every checkpoint and
policy file stay in host memory, so a file written by a run on one device loads on any other.

torch is imported inside the functions: the search layer checks the option before it loads the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from lares_agent.engine.errors import EngineError

if TYPE_CHECKING:
    import torch

__all__ = ["DEVICES", "Device", "cuda_available", "device_problem", "is_device_name", "resolve_device"]

Device = Literal["auto", "cpu", "cuda"]
DEVICES: tuple[Device, ...] = get_args(Device)
"""The names `--device` takes; the engine also takes any other torch device name (``meta`` in the tests)."""


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (one place, so tests can say there is none, or one)."""
    import torch

    return bool(torch.cuda.is_available())


def is_device_name(name: str) -> bool:
    """Whether ``name`` is "auto" or a device name torch knows (whether or not this machine has it)."""
    if name == "auto":
        return True
    import torch

    try:
        torch.device(name)
    except (RuntimeError, TypeError):
        return False
    return True


def device_problem(name: str) -> str | None:
    """Why ``name`` cannot run on this machine (one line naming the fix), or None when it can."""
    if not is_device_name(name):
        return f"unknown device {name!r}; choose one of {', '.join(DEVICES)}"
    if name == "auto":
        return None
    import torch

    if torch.device(name).type == "cuda" and not cuda_available():
        return (f"device {name} asked for, but torch sees no CUDA GPU here (torch {torch.__version__}); use "
                "--device cpu, or --device auto to take a GPU only where there is one")
    return None


def resolve_device(name: str) -> torch.device:
    """The torch device ``name`` stands for: "auto" is cuda where torch sees a GPU, else cpu. A device this machine
    lacks is an `EngineError` (one line), raised before any tensor is made."""
    import torch

    if name == "auto":
        return torch.device("cuda" if cuda_available() else "cpu")
    problem = device_problem(name)
    if problem is not None:
        raise EngineError(problem)
    return torch.device(name)
