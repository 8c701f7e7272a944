"""Files a command writes where the user says (`lares export --out`, `lares eval --video`): into a folder that
exists and takes writes, checked before the work, and never a folder made on the way (a mistyped path must not
leave folders behind, wherever it points)."""

from __future__ import annotations

import os
from pathlib import Path

from lares_agent.errors import ConfigError

__all__ = ["EXPORT_MODE", "check_out_path"]

EXPORT_MODE = 0o644  # a file the user takes home: readable by others, as the files their editor writes


def check_out_path(path: Path, flag: str) -> None:
    """ConfigError, one line naming `flag`, where `path` is a folder or its folder is missing or cannot be written
    (permissions, a read-only file system)."""
    folder = path.parent
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a folder: give a file name (e.g. {path / 'reward.py'})")
    if not folder.is_dir():
        raise ConfigError(f"{flag} {path}: the folder {folder} does not exist (lares makes no folder for it: create "
                          "it first, or give an existing one)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: the folder {folder} cannot be written (permission denied or a read-only "
                          "file system): choose a writable folder")
