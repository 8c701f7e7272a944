"""Rollout worker processes: the sub-envs of one ES population split over W processes, whole episodes each.

Gymnasium's ``AsyncVectorEnv`` sends one message per sub-env and step; on a laptop the pipe round trip costs
about as much as a MuJoCo step. Here each worker owns a ``SyncVectorEnv`` of its block of sub-envs and plays
the whole episode locally with the (picklable) ``PolicyBatch`` it was sent, so a rollout costs one message
per worker, and the batched policy and feature calls of ``vec_rollout`` are kept inside each worker.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import ForkContext, SpawnContext
from typing import TYPE_CHECKING, Any

import numpy as np

from lares_agent.engine.es.policies import PolicyBatch
from lares_agent.engine.rollouts.vector import Rollout, concat_rollouts, make_vector_env, rollout

if TYPE_CHECKING:
    from lares_agent.engine.tasks import TaskSpec

__all__ = ["RolloutWorkerError", "RolloutWorkers"]


class RolloutWorkerError(RuntimeError):
    """A worker failed or died; ``reason`` carries its error in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _serve(conn: Connection, task: TaskSpec, num_envs: int, seed: int) -> None:
    venv = make_vector_env(task, num_envs, seed=seed)
    try:
        while True:
            msg = conn.recv()
            if msg is None:
                break
            policy, horizon, seeds = msg
            try:
                conn.send(("ok", rollout(venv, task, policy, horizon, seeds)))
            except Exception as exc:
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        venv.close()
        conn.close()


class RolloutWorkers:
    """``num_envs`` sub-envs of ``task`` split into ``num_workers`` contiguous blocks, one process each."""

    def __init__(self, task: TaskSpec, num_envs: int, num_workers: int, seed: int = 0) -> None:
        if not 1 <= num_workers <= num_envs:
            raise ValueError(f"num_workers must be in 1..{num_envs}, got {num_workers}")
        bounds = np.linspace(0, num_envs, num_workers + 1).round().astype(int)
        self.blocks = [(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        self.num_envs = num_envs
        # fork: the child inherits the task (user-registered envs need not be importable); the worker only
        # steps MuJoCo and numpy, never torch, so forking a process that loaded torch is safe here
        ctx: ForkContext | SpawnContext = (
            mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context("spawn")
        )
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        for a, b in self.blocks:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child, task, b - a, seed + a), daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)

    def rollout(self, policy: PolicyBatch, horizon: int, seeds: Sequence[int]) -> Rollout:
        """One episode in every sub-env (policy rows and seeds indexed by sub-env), blocks in parallel."""
        if len(seeds) != self.num_envs or policy.params.shape[0] != self.num_envs:
            raise ValueError(f"need {self.num_envs} seeds and policy rows")
        for conn, (a, b) in zip(self._conns, self.blocks, strict=True):
            conn.send((policy.chunk(a, b), horizon, list(seeds[a:b])))
        replies: list[tuple[str, Any]] = []
        for conn in self._conns:  # read every reply first, so the pipes stay in step after a failure
            try:
                replies.append(conn.recv())
            except EOFError:
                replies.append(("error", "a rollout worker died"))
        errors = [value for status, value in replies if status != "ok"]
        if errors:
            raise RolloutWorkerError(f"rollout worker failed: {errors[0]}")
        return concat_rollouts([value for _, value in replies])

    def close(self) -> None:
        """Stop the workers (they close their envs) and wait for them."""
        for conn in self._conns:
            with contextlib.suppress(BrokenPipeError, OSError):
                conn.send(None)
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
        for conn in self._conns:
            conn.close()
        self._conns, self._procs = [], []
