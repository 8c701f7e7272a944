"""Lock-step episodes of several policies, one environment each (training, warm-up and evaluation share it).

The M acting members step M environments together so that the policy forward pass is one batched call per
step instead of M (docs/lares-reference.md §12 item 23). Episode reset seeds are derived from (run seed, stream,
episode counter), never from an environment's internal RNG, so that a run restored from a checkpoint with
fresh environments replays exactly the same episodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

__all__ = [
    "EnvPool",
    "EpisodeBatch",
    "batch_features",
    "episode_seed",
    "run_episodes",
    "seeded_reset",
    "to_env_action",
]

TRAIN_STREAM = 0
EVAL_STREAM = 1
WARMUP_STREAM = 2
HANDOVER_STREAM = 3
"""The episodes a run replays its top learners on before it hands one over (``loop/handover.py``): never an
evaluation's, so the policy handed over is not judged on the episodes that ranked it."""


def episode_seed(run_seed: int, stream: int, counter: int) -> int:
    """A 31-bit reset seed for episode ``counter`` of ``stream``; independent streams for train/eval/warm-up/
    hand-over."""
    return int(np.random.SeedSequence([int(run_seed), int(stream), int(counter)]).generate_state(1)[0] >> 1)


def to_env_action(action: np.ndarray, space: gymnasium.Space[Any]) -> np.ndarray:
    """Map policy actions in [-1, 1] (tanh-squashed) onto the environment's Box bounds."""
    if not isinstance(space, gymnasium.spaces.Box):
        raise TypeError(f"tasks need Box action spaces, got {type(space).__name__}")
    low = np.asarray(space.low, dtype=np.float64)
    high = np.asarray(space.high, dtype=np.float64)
    if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
        return np.asarray(low + (np.clip(action, -1.0, 1.0) + 1.0) * 0.5 * (high - low))
    return np.asarray(action, dtype=np.float64)


def seeded_reset(env: gymnasium.Env, seed: int) -> tuple[Any, dict[str, Any]]:
    """Reset so that the initial state depends only on ``seed`` (and the env's construction seed).

    MetaWorld v3 ignores ``reset(seed=...)`` and draws goals and task variations from the generator set by
    its ``seed()`` method, so that method is called first where the unwrapped env has one.
    """
    seeder = getattr(env.unwrapped, "seed", None)
    if callable(seeder):
        seeder(seed)
        return env.reset()
    return env.reset(seed=seed)


class EnvPool:
    """A growable list of environments of one task, created on first use (MetaWorld ``make`` costs ~0.6 s).

    Environment ``i`` is built with construction seed ``base_seed + i``. An episode depends on that seed as well
    as on its reset seed (MetaWorld's MT1 draws its list of goal variations from it), never on the episodes the
    env played before; so ``copies`` hands out further envs of the same construction seed, on which a member
    plays the episodes it would have played one after another on env ``i``, at the same time.
    """

    def __init__(self, make_env: Callable[[int], gymnasium.Env], base_seed: int) -> None:
        self._make_env = make_env
        self._base_seed = int(base_seed)
        self._envs: list[gymnasium.Env] = []
        self._copies: dict[int, list[gymnasium.Env]] = {}

    def get(self, n: int) -> list[gymnasium.Env]:
        """The first ``n`` environments, creating missing ones."""
        while len(self._envs) < n:
            self._envs.append(self._make_env(self._base_seed + len(self._envs)))
        return self._envs[:n]

    def alike(self, k: int) -> list[gymnasium.Env]:
        """``k`` environments of the first construction seed (env 0 and ``k - 1`` copies of it): members compared on
        them meet the same goal for the same reset seed, which MT1 would not give on envs of different seeds."""
        return self.copies(1, k)[0]

    def copies(self, n: int, k: int) -> list[list[gymnasium.Env]]:
        """``k`` environments of each of the first ``n`` construction seeds: row ``i`` is env ``i`` (``get``) and
        ``k - 1`` more built like it, created on first use and kept."""
        first = self.get(n)
        out: list[list[gymnasium.Env]] = []
        for i in range(n):
            more = self._copies.setdefault(i, [])
            while len(more) < k - 1:
                more.append(self._make_env(self._base_seed + i))
            out.append([first[i], *more[: k - 1]])
        return out

    def close(self) -> None:
        """Close every environment (MuJoCo renderers hold native resources)."""
        for env in [*self._envs, *(e for more in self._copies.values() for e in more)]:
            env.close()
        self._envs.clear()
        self._copies.clear()


@dataclass(frozen=True)
class EpisodeBatch:
    """M episodes padded to the longest; row m is valid for its first ``lengths[m]`` steps.

    ``action`` is the policy-space action in [-1, 1] (what SAC learns); ``raw`` the task's raw state after
    each step, from which ``task.features`` computes reward features. ``nonfinite[m]`` is set when member m's
    policy emitted a non-finite action (it was replaced by zeros so the simulator stays valid).
    """

    obs: np.ndarray  # [M, T, obs_dim] float32
    action: np.ndarray  # [M, T, act_dim] float32, policy space
    env_action: np.ndarray  # [M, T, act_dim] float64, env space (what the features see)
    next_obs: np.ndarray  # [M, T, obs_dim] float32
    terminated: np.ndarray  # [M, T] bool
    truncated: np.ndarray  # [M, T] bool
    raw: np.ndarray  # [M, T, state_dim] float64
    lengths: np.ndarray  # [M] int
    nonfinite: np.ndarray  # [M] bool

    def valid(self, m: int) -> slice:
        """Slice of episode m's real steps."""
        return slice(0, int(self.lengths[m]))


def run_episodes(
    envs: Sequence[gymnasium.Env],
    act: Callable[[np.ndarray], np.ndarray],
    raw_state: Callable[[gymnasium.Env, np.ndarray, dict[str, Any]], np.ndarray],
    horizon: int,
    reset_seeds: Sequence[int],
) -> EpisodeBatch:
    """Play one episode in each env in lock step, at most ``horizon`` steps.

    ``act(obs [M, obs_dim]) -> [M, act_dim]`` in [-1, 1] (policy space). An episode ends when the env reports
    termination or truncation, or at ``horizon`` (stored as truncation, never termination: docs/lares-reference.md
    §12 item 12).
    """
    m = len(envs)
    if m == 0 or len(reset_seeds) != m:
        raise ValueError(f"run_episodes: {m} envs but {len(reset_seeds)} reset seeds")
    first = [seeded_reset(env, int(s)) for env, s in zip(envs, reset_seeds, strict=True)]
    cur = np.stack([np.asarray(o, dtype=np.float32).ravel() for o, _ in first])
    obs_dim = cur.shape[1]
    act_dim = int(np.prod(envs[0].action_space.shape or (1,)))
    obs = np.zeros((m, horizon, obs_dim), np.float32)
    nxt = np.zeros((m, horizon, obs_dim), np.float32)
    action = np.zeros((m, horizon, act_dim), np.float32)
    env_action = np.zeros((m, horizon, act_dim), np.float64)
    term = np.zeros((m, horizon), bool)
    trunc = np.zeros((m, horizon), bool)
    raws: list[list[np.ndarray]] = [[] for _ in range(m)]
    lengths = np.zeros(m, np.int64)
    nonfinite = np.zeros(m, bool)
    alive = np.ones(m, bool)
    for t in range(horizon):
        a = np.asarray(act(cur), dtype=np.float64).reshape(m, act_dim)
        bad = ~np.all(np.isfinite(a), axis=1)
        if bad.any():
            nonfinite |= bad & alive
            a[bad] = 0.0
        for step_i in np.flatnonzero(alive):
            i = int(step_i)
            env = envs[i]
            ea = to_env_action(a[i], env.action_space)
            o2, _, te, tr, info = env.step(ea.astype(env.action_space.dtype, copy=False))
            o2 = np.asarray(o2, dtype=np.float32).ravel()
            obs[i, t], nxt[i, t], action[i, t], env_action[i, t] = cur[i], o2, a[i], ea
            raws[i].append(np.asarray(raw_state(env, o2, info), dtype=np.float64))
            term[i, t] = bool(te)
            trunc[i, t] = bool(tr) or (t == horizon - 1 and not te)
            lengths[i] = t + 1
            cur[i] = o2
            if te or tr:
                alive[i] = False
        if not alive.any():
            break
    t_max = int(lengths.max())
    state_dim = raws[0][0].shape[0]
    raw = np.zeros((m, t_max, state_dim), np.float64)
    for i in range(m):
        raw[i, : lengths[i]] = np.stack(raws[i])
    return EpisodeBatch(
        obs=obs[:, :t_max],
        action=action[:, :t_max],
        env_action=env_action[:, :t_max],
        next_obs=nxt[:, :t_max],
        terminated=term[:, :t_max],
        truncated=trunc[:, :t_max],
        raw=raw,
        lengths=lengths,
        nonfinite=nonfinite,
    )


def batch_features(
    features: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]], batch: EpisodeBatch
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Features of every valid step of every episode in ONE vectorised call.

    Returns the concatenated feature arrays (episode 0's steps, then episode 1's, ...) and the row offsets
    ``[M + 1]`` so that episode m's rows are ``offsets[m]:offsets[m + 1]``.
    """
    m = len(batch.lengths)
    raw = np.concatenate([batch.raw[i, batch.valid(i)] for i in range(m)])
    act = np.concatenate([batch.env_action[i, batch.valid(i)] for i in range(m)])
    offsets = np.concatenate([[0], np.cumsum(batch.lengths)]).astype(np.int64)
    feats = features(raw, act)
    return {k: np.asarray(v) for k, v in feats.items()}, offsets
