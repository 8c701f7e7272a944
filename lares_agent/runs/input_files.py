"""Files a user names on the command line (`--config`, `--rewards-file`, `--reward-file`): regular files of a
bounded size, checked before a byte is read.

Reading `/dev/zero` never ends and a named pipe waits for a writer forever, so a device, pipe or folder is refused
by its `stat` (which does not block); a file larger than any real options or rewards file is refused by its size,
so a mistaken path costs no memory.
"""

from __future__ import annotations

import stat
from pathlib import Path

from lares_agent.errors import ConfigError

__all__ = ["MAX_INPUT_BYTES", "check_input_file"]

MAX_INPUT_BYTES = 1 << 20  # 1 MiB: a run's config.json is ~3 kB, a rewards file of 1,000 candidates ~300 kB


def check_input_file(path: Path, flag: str, limit: int = MAX_INPUT_BYTES) -> None:
    """ConfigError where `path` is not a regular file of at most `limit` bytes (`flag` names the option in the
    message); FileNotFoundError and other OSErrors of its `stat` are left to the caller, which words them."""
    info = path.stat()
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{flag}: {path} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{flag}: {path} is not a regular file (a device or a pipe is not read)")
    if info.st_size > limit:
        raise ConfigError(f"{flag}: {path} is {info.st_size:,} bytes; a file of at most {limit:,} bytes is read")
