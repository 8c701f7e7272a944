"""The format marker in `config.json`: what tells a lares run folder from any folder that holds a config.json.

`lares resume` on another program's folder used to load its config as the defaults, write `trace.sqlite` into
it and start loading a model. Every run now writes `format` and `format_version` first in
its config; a config without them is a run's only if it holds every key an older lares always wrote, and a
newer version is refused rather than misread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lares_agent.runs.layout import NotARunError, RunLayout

__all__ = ["RUN_FORMAT", "RUN_FORMAT_VERSION", "check_marker", "marked", "read_marked_config"]

RUN_FORMAT = "lares-run"
RUN_FORMAT_VERSION = 1
_OLD_KEYS = ("task", "setting", "budget", "reward_period", "population")  # what every older config.json held


def marked(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with the marker first (what `config.json` holds)."""
    rest = {k: v for k, v in config.items() if k not in ("format", "format_version")}
    return {"format": RUN_FORMAT, "format_version": RUN_FORMAT_VERSION, **rest}


def check_marker(data: Mapping[str, Any], run: RunLayout) -> None:
    """Raise NotARunError (one line) unless `data`, read from `run.config`, is a lares run's config."""
    fmt, version = data.get("format"), data.get("format_version")
    if fmt is None and version is None:
        if all(k in data for k in _OLD_KEYS):  # written before the marker existed
            return
        raise NotARunError(f"{run.root} is not a lares run: its {run.config.name} has no \"format\": "
                           f"\"{RUN_FORMAT}\" marker; nothing was written there (pass the folder `lares run` printed)")
    if fmt != RUN_FORMAT:
        raise NotARunError(f"{run.root} is not a lares run: {run.config.name} says format {fmt!r}, not "
                           f"{RUN_FORMAT!r}; nothing was written there")
    if not isinstance(version, int) or version > RUN_FORMAT_VERSION:
        raise NotARunError(f"{run.root} was written by a newer lares (run format version {version!r}; this one "
                           f"reads up to {RUN_FORMAT_VERSION}): upgrade lares-agent to resume it")


def read_marked_config(run: RunLayout) -> dict[str, Any]:
    """The config of a lares run as a dict (marker checked, marker keys dropped); NotARunError otherwise."""
    try:
        data = json.loads(Path(run.config).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise NotARunError(f"{run.config} is not a readable run configuration ({exc})") from None
    if not isinstance(data, dict):
        raise NotARunError(f"{run.config} is not a lares run configuration (not a JSON object)")
    check_marker(data, run)
    return {k: v for k, v in data.items() if k not in ("format", "format_version")}
