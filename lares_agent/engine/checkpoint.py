"""Atomic checkpoints of the engine state (learners, optimisers, buffer, rewards, TS, RNG, counters).

Layout under a ``checkpoints/`` root::

    LATEST              one line: the name of the newest complete checkpoint directory
    round-0002/         one per reward update, kept for the life of the run
    step-000040000/     the newest periodic checkpoint (older periodic ones are pruned)

A checkpoint directory is written under a temporary name, every file and the directory are fsynced, and only
then is it renamed into place with ``os.replace`` and ``LATEST`` swapped (also by ``os.replace``). A run killed
at any moment therefore leaves ``LATEST`` naming a complete checkpoint (docs/DESIGN.md §6: nothing accepted is lost).

No pickle: a state tree is split into JSON (structure, scalars), one ``.npz`` of numpy arrays (loaded with
``allow_pickle=False``) and one torch file of tensors (loaded with ``weights_only=True``), so that loading a
checkpoint cannot execute code.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "CheckpointError",
    "latest_checkpoint",
    "load_checkpoint",
    "save_checkpoint",
]

FORMAT_VERSION = 1
_LATEST = "LATEST"
_MARKERS = ("__nd__", "__npscalar__", "__pt__", "__tuple__", "__dict__")


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------------------------------------- encoding
class _Encoder:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.tensors: dict[str, torch.Tensor] = {}

    def encode(self, obj: Any, where: str) -> Any:
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, torch.Tensor):
            key = f"t{len(self.tensors)}"
            self.tensors[key] = obj.detach().cpu().clone()
            return {"__pt__": key}
        if isinstance(obj, np.ndarray):
            if obj.dtype == object:
                raise CheckpointError(f"object array at {where} cannot be stored without pickle")
            key = f"a{len(self.arrays)}"
            self.arrays[key] = obj
            return {"__nd__": key}
        if isinstance(obj, np.generic):
            key = f"a{len(self.arrays)}"
            self.arrays[key] = np.asarray(obj)
            return {"__npscalar__": key}
        if isinstance(obj, tuple):
            return {"__tuple__": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if isinstance(obj, Mapping):
            plain = all(isinstance(k, str) for k in obj) and not any(m in obj for m in _MARKERS)
            if plain:
                return {k: self.encode(v, f"{where}.{k}") for k, v in obj.items()}
            return {"__dict__": [[self.encode(k, where), self.encode(v, f"{where}.{k}")] for k, v in obj.items()]}
        raise CheckpointError(f"cannot store value of type {type(obj).__name__} at {where}")


def _decode(obj: Any, arrays: Mapping[str, np.ndarray], tensors: Mapping[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, arrays, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if len(obj) == 1:
        (mark, val), = obj.items()
        if mark == "__nd__":
            return arrays[val]
        if mark == "__npscalar__":
            return arrays[val][()]
        if mark == "__pt__":
            return tensors[val]
        if mark == "__tuple__":
            return tuple(_decode(v, arrays, tensors) for v in val)
        if mark == "__dict__":
            return {_decode(k, arrays, tensors): _decode(v, arrays, tensors) for k, v in val}
    return {k: _decode(v, arrays, tensors) for k, v in obj.items()}


# ---------------------------------------------------------------------------------------------- files
def _fsync_file(path: Path) -> None:
    with path.open("rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # directories cannot be opened on some platforms; rename durability is then best effort
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_latest(root: Path, name: str) -> None:
    tmp = root / f".{_LATEST}.tmp"
    tmp.write_text(name + "\n", encoding="utf-8")
    _fsync_file(tmp)
    os.replace(tmp, root / _LATEST)
    _fsync_dir(root)


def save_checkpoint(root: str | Path, state: Mapping[str, Any], name: str, prune_prefix: str | None = None) -> Path:
    """Write ``state`` atomically to ``root/name`` and point ``LATEST`` at it.

    ``prune_prefix`` (e.g. ``"step-"``): after the swap, delete other checkpoint directories whose name starts
    with it, so that periodic checkpoints do not pile up while per-round ones are kept. Returns the directory.
    """
    if not name or "/" in name or name.startswith("."):
        raise CheckpointError(f"invalid checkpoint name {name!r}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    enc = _Encoder()
    tree = enc.encode(dict(state), "state")
    tmp = root / f".tmp-{name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        (tmp / "state.json").write_text(json.dumps(tree), encoding="utf-8")
        with (tmp / "arrays.npz").open("wb") as fh:
            np.savez(fh, **enc.arrays)  # type: ignore[arg-type]  # numpy stubs type **kwds as allow_pickle
        torch.save(enc.tensors, tmp / "tensors.pt")
        (tmp / "meta.json").write_text(json.dumps({"format": FORMAT_VERSION, "name": name}), encoding="utf-8")
        for f in tmp.iterdir():
            _fsync_file(f)
        _fsync_dir(tmp)
        final = root / name
        if final.exists():  # re-saving the same step after a resume: move the old copy aside first
            trash = root / f".old-{name}-{os.getpid()}"
            os.replace(final, trash)
            os.replace(tmp, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _write_latest(root, name)
    if prune_prefix:
        for old in root.iterdir():
            if old.is_dir() and old.name.startswith(prune_prefix) and old.name != name:
                shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(root: str | Path) -> Path | None:
    """The directory ``LATEST`` names under ``root``, or ``None`` when no checkpoint was completed."""
    root = Path(root)
    pointer = root / _LATEST
    if not pointer.is_file():
        return None
    target = root / pointer.read_text(encoding="utf-8").strip()
    return target if (target / "meta.json").is_file() else None


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint directory, or the latest one when ``path`` is a checkpoints root."""
    path = Path(path)
    if (path / _LATEST).is_file():
        resolved = latest_checkpoint(path)
        if resolved is None:
            raise CheckpointError(f"{path}: LATEST names a missing or incomplete checkpoint")
        path = resolved
    meta_path = path / "meta.json"
    if not meta_path.is_file():
        raise CheckpointError(f"{path}: not a checkpoint directory (no meta.json)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format {meta.get('format')} != {FORMAT_VERSION}")
    try:
        with np.load(path / "arrays.npz", allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        tensors = torch.load(path / "tensors.pt", map_location="cpu", weights_only=True)
        tree = json.loads((path / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: unreadable checkpoint ({exc})") from exc
    state: dict[str, Any] = _decode(tree, arrays, tensors)
    return state
