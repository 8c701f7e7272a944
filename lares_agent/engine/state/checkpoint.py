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

import errno
import json
import os
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "CheckpointError",
    "checkpoint_meta",
    "latest_checkpoint",
    "load_checkpoint",
    "newest_loadable",
    "remove_stale",
    "save_checkpoint",
    "verify_checkpoint",
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


def _write_failure(where: Path, exc: BaseException) -> CheckpointError:
    """One line naming the checkpoint and the cause. A full disk shows up in torch's writer as a RuntimeError
    ("enforce fail ... unexpected pos"), so the free space is asked when the error itself does not say."""
    code = getattr(exc, "errno", None)
    if code is None:
        try:
            if shutil.disk_usage(where.parent).free < 1 << 20:
                code = errno.ENOSPC
        except OSError:
            pass
    cause = os.strerror(code).lower() if isinstance(code, int) else " ".join(str(exc).split())[:160]
    fix = "free some space" if code in (errno.ENOSPC, errno.EDQUOT) else "check the folder"
    return CheckpointError(f"cannot write checkpoint {where}: {cause} (nothing was kept of it; {fix}, then "
                           "`lares resume` the run)")


def save_checkpoint(
    root: str | Path,
    state: Mapping[str, Any],
    name: str,
    prune_prefix: str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``state`` atomically to ``root/name`` and point ``LATEST`` at it.

    ``prune_prefix`` (e.g. ``"step-"``): after the swap, delete other checkpoint directories whose name starts
    with it, so that periodic checkpoints do not pile up while per-round ones are kept. ``meta``: JSON kept in
    ``meta.json`` beside the format (the run's log sizes, which a resume truncates back to). A failed write
    (a full disk, permissions) leaves nothing behind and raises CheckpointError naming the folder and the cause.
    Returns the directory.
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
    try:
        tmp.mkdir()
    except OSError as exc:
        raise _write_failure(root / name, exc) from exc
    try:
        try:
            (tmp / "state.json").write_text(json.dumps(tree), encoding="utf-8")
            with (tmp / "arrays.npz").open("wb") as fh:
                np.savez(fh, **enc.arrays)  # type: ignore[arg-type]  # numpy stubs type **kwds as allow_pickle
            torch.save(enc.tensors, tmp / "tensors.pt")
            info = {**dict(meta or {}), "format": FORMAT_VERSION, "name": name}
            (tmp / "meta.json").write_text(json.dumps(info), encoding="utf-8")
        except (OSError, RuntimeError) as exc:
            raise _write_failure(root / name, exc) from exc
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


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:160] if lines else "no message"


def checkpoint_meta(path: str | Path) -> dict[str, Any]:
    """A checkpoint directory's ``meta.json`` ({} when unreadable)."""
    try:
        data = json.loads((Path(path) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def verify_checkpoint(path: str | Path) -> str | None:
    """Why the checkpoint directory cannot be loaded (one line naming the file), or None when it is whole.

    Both data files are zip archives (``np.savez``, ``torch.save``): every member's CRC is checked without
    decoding, so a truncated or overwritten file is found before an engine is built on it.
    """
    path = Path(path)
    meta = path / "meta.json"
    if not meta.is_file():
        return f"{meta} is missing"
    if checkpoint_meta(path).get("format") != FORMAT_VERSION:
        return f"{meta}: not checkpoint format {FORMAT_VERSION}"
    for name in ("arrays.npz", "tensors.pt"):
        file = path / name
        try:
            with zipfile.ZipFile(file) as archive:
                bad = archive.testzip()
            if bad is not None:
                return f"{file} is damaged (member {bad} fails its checksum)"
        except Exception as exc:  # BadZipFile, EOFError, OSError
            return f"{file} is damaged ({type(exc).__name__}: {_first_line(exc)})"
    try:
        json.loads((path / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{path / 'state.json'} is damaged ({type(exc).__name__}: {_first_line(exc)})"
    return None


def _progress(path: Path) -> tuple[bool, int, int]:
    """(unreadable, env steps, round) a checkpoint reached, read from its small state.json.

    An unreadable state.json sorts first, as if newest: its checkpoint may be the newest one, and trying it first
    is what sets it aside as damaged with a note; sorted last, an older checkpoint was chosen before it was ever
    tried, and the damaged one was left in place, unreported, for a later prune. Readable but odd counters
    count as (-1, -1)."""
    try:
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True, -1, -1
    try:
        counters = state.get("counters", {})
        return False, int(counters.get("env_steps", -1)), int(counters.get("round", -1))
    except (ValueError, TypeError, AttributeError):
        return False, -1, -1


def newest_loadable(root: str | Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest checkpoint under ``root`` that verifies, and the newer ones skipped with the reason.

    Newest by the env steps (then round) the checkpoint reached, ``LATEST``'s own first among equals. A skipped
    checkpoint is renamed ``damaged-<name>`` (kept for inspection, never tried again) and ``LATEST`` is pointed
    at the one returned.
    """
    root = Path(root)
    if not root.is_dir():
        return None, []
    latest = latest_checkpoint(root)
    found = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "damaged-"))
             and (p / "meta.json").is_file()]
    found.sort(key=lambda p: (*_progress(p), p == latest), reverse=True)
    skipped: list[tuple[Path, str]] = []
    for path in found:
        reason = verify_checkpoint(path)
        if reason is None:
            if path != latest:
                _write_latest(root, path.name)
            return path, skipped
        skipped.append((path, reason))
        aside = root / f"damaged-{path.name}"
        if not aside.exists():
            os.replace(path, aside)
    if skipped and (root / _LATEST).exists():
        (root / _LATEST).unlink()
    return None, skipped


def remove_stale(root: str | Path) -> list[Path]:
    """Delete what a killed checkpoint write left (``.tmp-*`` / ``.old-*`` folders, ``.LATEST.tmp``); returns
    what was removed. Only while no other process writes this run (a resume owns it)."""
    root = Path(root)
    if not root.is_dir():
        return []
    removed = []
    for p in root.iterdir():
        if p.name.startswith((".tmp-", ".old-")) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
        elif p.name == f".{_LATEST}.tmp":
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


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
    current = path / "arrays.npz"
    try:
        with np.load(current, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        current = path / "tensors.pt"
        tensors = torch.load(current, map_location="cpu", weights_only=True)
        current = path / "state.json"
        tree = json.loads(current.read_text(encoding="utf-8"))
    except Exception as exc:  # zipfile.BadZipFile, EOFError, pickle errors of a truncated file: all "damaged"
        raise CheckpointError(f"{current} is damaged ({type(exc).__name__}: {_first_line(exc)})") from exc
    state: dict[str, Any] = _decode(tree, arrays, tensors)
    return state
