"""The checks of a run's outside world made before a run folder exists: the case store opens, the model, replay
record or endpoint the LLM backend needs is there, and so is the GPU `--device cuda` asks for (`runner.check_start`
calls them; `lares resume` calls `check_llm` and `device_for_resume`)."""

from __future__ import annotations

import dataclasses
import socket
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lares_agent.errors import ConfigError, LaresError
from lares_agent.runs.oserrors import cause_of
from lares_agent.search.config import SearchConfig, llm_config

if TYPE_CHECKING:
    from lares_agent.engine import TaskSpec

__all__ = ["check_case_store", "check_constants_to_search", "check_device", "check_llm", "device_for_resume",
           "probe_endpoint"]


def check_case_store() -> None:
    """The shared case store opens and takes writes (a read-only `LARES_HOME` used to leave a run folder holding only
    config.json, or to fail a reward period into the run)."""
    import sqlite3

    from lares_agent.memory.cases import CaseStore, default_case_path

    path = default_case_path()
    try:
        with CaseStore(path) as store:
            store.check_writable()  # a store that exists already opens read-only without a complaint
    except (OSError, sqlite3.Error) as exc:
        cause = cause_of(exc)[0] if isinstance(exc, OSError) else str(exc)
        raise LaresError(f"cannot open the case store {path}: {cause}; fix: set LARES_HOME to a writable folder, "
                         "or pass --no-retrieval") from None


def check_device(cfg: SearchConfig) -> None:
    """`--device cuda` where torch sees no GPU: refused in one line (`ConfigError`, exit 2), as an unknown option
    value is, rather than a run folder whose first step fails. "auto" never fails; ES has no device."""
    if cfg.learner == "es":
        return
    from lares_agent.engine.learners.devices import device_problem

    problem = device_problem(cfg.device)
    if problem is not None:
        raise ConfigError(problem)


def device_for_resume(cfg: SearchConfig, notify: Callable[[str], None]) -> SearchConfig:
    """The config a resume runs with: a run started with `--device cuda` continues on the CPU of a machine without
    a GPU (checkpoints keep every tensor in host memory), said through `notify`; config.json keeps what was asked."""
    if cfg.learner == "es" or cfg.device == "cpu":
        return cfg
    from lares_agent.engine.learners.devices import device_problem

    problem = device_problem(cfg.device)
    if problem is None:
        return cfg
    notify(f"this run trained with --device {cfg.device}, and torch sees no CUDA GPU here: it continues on the CPU")
    return dataclasses.replace(cfg, device="cpu")


def check_constants_to_search(task: TaskSpec, ablation: str) -> None:
    """The `no-llm` ablation searches the constants of the task's own reward, and the `critique-edit` one does until
    the critique finds a defect: one without any would leave every slot to the built-in fallback."""
    import numpy as np

    from lares_agent.rewards.mutate import numeric_children

    if not numeric_children(dict(task.human_components or ()), task, 1, np.random.default_rng(0)):
        shown = "; ".join(f"{name} = {expr}" for name, expr in task.human_components or ())
        raise ConfigError(f"--ablations {ablation} searches the constants of the task's own reward, and "
                          f"{task.name}'s has none to change ({shown}): use a task whose reward has constants, or "
                          f"leave {ablation} out")


def check_llm(cfg: SearchConfig) -> None:
    """The model file, model name, replay record or endpoint a run needs, in about a second.

    The graph's nodes turn every LLM failure into a rejected candidate (by design, so one bad answer never
    stops a run); without this check an unreachable endpoint would surface only as a run of fallback rewards.
    """
    if cfg.llm_backend == "replay":
        if not cfg.replay_from:
            raise LaresError("--llm-backend replay needs --replay-from RUN (the run whose llm_calls.jsonl to replay)")
        from lares_agent.llm.replay import load_record, record_path

        load_record(Path(cfg.replay_from))
        recorded = _recorded_task(record_path(Path(cfg.replay_from)).parent)
        if recorded is not None and recorded != cfg.task:
            raise ConfigError(f"--replay-from {cfg.replay_from} is a run of task {recorded!r}, and this run's task is "
                              f"{cfg.task!r}: its answers are rewards over the other task's features, so every one "
                              "would be refused; replay a run of the same task")
    elif cfg.llm_backend == "local":
        from lares_agent.llm.models import resolve_model

        resolve_model(cfg.llm_model)
    else:
        from lares_agent.llm.openai_compat import make_openai_chat_model

        make_openai_chat_model(llm_config(cfg))
        if cfg.base_url:
            probe_endpoint(cfg.base_url)


def _recorded_task(folder: Path) -> str | None:
    """The task of the run in `folder` (its config.json), or None where there is no readable one."""
    import json

    from lares_agent.runs import RunLayout
    from lares_agent.runs.input_files import check_input_file

    path = RunLayout(folder).config
    try:
        check_input_file(path, "--replay-from")
        task = json.loads(path.read_text(encoding="utf-8")).get("task")
    except (OSError, ValueError, AttributeError):
        return None
    return task if isinstance(task, str) else None


def probe_endpoint(base_url: str, timeout_s: float = 3.0) -> None:
    """Open (and close) a TCP connection to the endpoint's host and port: no request is sent."""
    parts = urllib.parse.urlsplit(base_url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        raise LaresError(f"--base-url {base_url!r} is not an http(s) URL; e.g. http://127.0.0.1:8080/v1")
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise LaresError(f"cannot reach the LLM endpoint {base_url} ({exc.strerror or exc}); "
                         "fix: start the server or correct --base-url") from None
