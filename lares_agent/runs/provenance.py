"""Which code a run ran: the lares-agent version and, in a git checkout, the commit. An experiment says
exactly what ran on which commit, and a resumed run may continue on other code than it started with."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

__all__ = ["short_revision", "source_revision"]


def source_revision() -> dict[str, object]:
    """`{"version": ..., "commit": ..., "dirty": ...}`; commit and dirty only where the package is a git checkout."""
    try:
        version: str | None = metadata.version("lares-agent")
    except metadata.PackageNotFoundError:
        version = None
    out: dict[str, object] = {"version": version}
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=5, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
                                 "lares_agent"], capture_output=True, text=True, timeout=5, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return out
    out.update(commit=commit, dirty=bool(status.strip()))
    return out


def short_revision(source: object) -> str:
    """A `source_revision()` record as a short label: the commit's first 7 characters, "+dirty" when the checkout
    had changes, "unknown" when the record has no commit (not a git checkout, or an older run)."""
    commit = str(source.get("commit") or "") if isinstance(source, dict) else ""
    if not commit:
        return "unknown"
    return commit[:7] + ("+dirty" if isinstance(source, dict) and source.get("dirty") else "")
