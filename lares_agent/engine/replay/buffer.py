"""Shared replay buffer with the reward features of every step and one reward column per candidate.

LaRes keeps one transition store for the whole policy population and gives every stored transition a
reward under every reward candidate (docs/lares-reference.md §4). The reference keeps Python tuples with info
dicts and relabels in a per-transition loop (§12 items 19, 23, 24); here everything is a preallocated
array, a reward column is relabelled with one vectorised call, and each column keeps one fixed map
(`ColumnMap`: LaRes' affine match, optionally after a sigmoid/tanh squash) for its whole life, so old and new
rows are scaled alike (no drift, §12 item 4).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lares_agent.engine.contracts import NEXT_PREFIX, Batch, RewardFunction
from lares_agent.engine.errors import ConstantRewardError, NonFiniteRewardError, RewardColumnError
from lares_agent.engine.replay.column_map import REWARD_NORMALISATIONS, Affine, ColumnMap, RewardNormalisation
from lares_agent.engine.replay.potential import FIRST_STEP, PREV_PREFIX, TERMINATED, is_potential

__all__ = ["Affine", "ColumnMap", "ReplayBuffer"]

# A column whose standard deviation is below this fraction of its magnitude is treated as constant:
# dividing by it would blow float noise up to reward scale.
_CONSTANT_RTOL = 1e-6


class ReplayBuffer:
    """FIFO ring buffer of transitions, features and a [capacity x K] reward matrix.

    Reward column j stores `squash_j(fn_j(features)) - center_j` as float32 (centring keeps float32 precision
    for rewards with a large offset; squash_j is the identity unless the column is sigmoid/tanh-normalised) and
    samples `stored * scale_j + shift_j` (plus the centre), i.e. `ColumnMap.apply(raw)` with the map fixed by
    `set_column`. `add` evaluates every set column's function on the new rows, through the same map.
    """

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        act_dim: int,
        feature_names: Sequence[str],
        num_columns: int,
    ) -> None:
        if capacity < 1 or obs_dim < 1 or act_dim < 1 or num_columns < 1:
            raise ValueError("capacity, obs_dim, act_dim and num_columns must all be positive")
        if len(set(feature_names)) != len(feature_names):
            raise ValueError(f"duplicate feature names in {list(feature_names)}")
        self.capacity = capacity
        self.obs_dim = obs_dim
        self.act_dim = act_dim
        self.feature_names: tuple[str, ...] = tuple(feature_names)
        self.num_columns = num_columns
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.action = np.zeros((capacity, act_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.terminated = np.zeros(capacity, bool)
        self.truncated = np.zeros(capacity, bool)
        self.features = np.zeros((capacity, len(self.feature_names)), np.float32)
        self.raw_reward = np.zeros((capacity, num_columns), np.float32)
        self._center = np.zeros(num_columns, np.float64)
        self._affine: list[ColumnMap | None] = [None] * num_columns
        self._fns: list[RewardFunction | None] = [None] * num_columns
        self.nonfinite_count = np.zeros(num_columns, np.int64)
        """Rows added after `set_column` whose reward was NaN/inf and was stored as the column's mean."""
        self.size = 0
        self.ptr = 0

    def __len__(self) -> int:
        return self.size

    # ------------------------------------------------------------------ writing rows
    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        features: Mapping[str, np.ndarray],
    ) -> None:
        """Append N transitions (oldest rows are overwritten when full) and reward them in every set column.

        `features` must hold every name in `feature_names` as an [N] array; extra names are ignored.
        """
        obs = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        n = obs.shape[0]
        missing = [name for name in self.feature_names if name not in features]
        if missing:
            raise KeyError(f"features missing from add(): {missing}")
        columns = [np.asarray(features[name], np.float32).reshape(-1) for name in self.feature_names]
        parts = (action, next_obs, terminated, truncated, *columns)
        if any(np.shape(p)[0] != n for p in parts):
            raise ValueError(f"add(): every argument must have {n} rows")
        if n == 0:
            return
        if n > self.capacity:  # only the newest `capacity` rows survive a ring buffer anyway
            keep = slice(n - self.capacity, n)
            obs, action, next_obs = obs[keep], np.asarray(action)[keep], np.asarray(next_obs)[keep]
            terminated, truncated = np.asarray(terminated)[keep], np.asarray(truncated)[keep]
            columns = [c[keep] for c in columns]
            n = self.capacity
        rows = (self.ptr + np.arange(n)) % self.capacity
        self.obs[rows] = obs
        self.action[rows] = np.asarray(action, np.float32).reshape(n, self.act_dim)
        self.next_obs[rows] = np.asarray(next_obs, np.float32).reshape(n, self.obs_dim)
        self.terminated[rows] = np.asarray(terminated, bool)
        self.truncated[rows] = np.asarray(truncated, bool)
        if columns:
            self.features[rows] = np.stack(columns, axis=1)
        self.ptr = int((self.ptr + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        # Reward the new rows from the *stored* (float32) features, exactly as set_column reads old rows,
        # and through each column's fixed map: new and old data stay on one scale (§12 item 4).
        stored = {name: self.features[rows, i] for i, name in enumerate(self.feature_names)}
        steps: dict[str, np.ndarray] | None = None  # made once, where a column's reward reads transitions
        for j, fn in enumerate(self._fns):
            if fn is None:
                continue
            inputs = stored
            if is_potential(fn):
                steps = steps if steps is not None else {**stored, **self.transition_features(rows)}
                inputs = steps
            raw = self._evaluate(fn, inputs, n)
            bad = ~np.isfinite(raw)
            column_map = self._affine[j]
            assert column_map is not None  # set together with the function
            with np.errstate(all="ignore"):  # the non-finite rows are replaced just below
                pre = column_map.squash(raw)
            if bad.any():
                # A run must not die on one state where, say, log(0) occurs; the column's set-time mean is
                # the neutral value (it maps to the reference mean). Counted so the loop can report it.
                pre[bad] = self._center[j]
                self.nonfinite_count[j] += int(bad.sum())
            self.raw_reward[rows, j] = (pre - self._center[j]).astype(np.float32)

    # ------------------------------------------------------------------ reward columns
    def set_column(self, j: int, fn: RewardFunction, reference: int | None, relabel: bool = True,
                   allow_constant: bool = False, normalisation: RewardNormalisation = "affine",
                   scale: float = 1.0) -> ColumnMap:
        """Relabel column j over every stored row with `fn`, and fix its `ColumnMap` for life.

        `normalisation` 'sigmoid'/'tanh' first squashes the raw reward standardised by its buffer mean/std
        (fixed now, like the rest of the map; a constant column, allowed only without a reference, uses std 1).
        With a `reference` column, the (squashed) column's mean/std over the buffer are then matched to the
        reference column's *scaled* mean/std (LaRes, docs/lares-reference.md §6); without one that affine part
        is a product by `scale` (1: the reward as written; `reward_gain.gain_scale` chooses another).
        `relabel=False` (ablation of LaRes' relabelling) fixes the map from `fn`'s statistics as usual but
        leaves the stored rows with the values they already had (as learners sampled them); only rows added
        later get `fn`'s reward. An unset column is always labelled (its rows have no value yet).
        Raises `NonFiniteRewardError` or `ConstantRewardError` (nothing is changed then); `allow_constant` takes a
        constant reward without a reference (the sparse baseline's success indicator, 0 on all warm-up steps).
        """
        self._check_column(j)
        if not (np.isfinite(scale) and scale > 0) or (reference is not None and scale != 1.0):
            raise ValueError(f"a column's scale is a positive factor given without a reference, not {scale}")
        ref_mean = ref_std = 0.0
        if reference is not None:
            self._check_column(reference)
            if self._affine[reference] is None:
                raise RewardColumnError(f"reference column {reference} has no reward function yet")
            if self.size < 2:
                raise RewardColumnError("matching a reference scale needs at least 2 stored steps")
            ref_values = self.rewards(reference).astype(np.float64)
            ref_mean, ref_std = float(ref_values.mean()), float(ref_values.std())
            if ref_std <= _CONSTANT_RTOL * max(1.0, abs(ref_mean)):
                raise ConstantRewardError(f"reference column {reference} is constant on the buffer")
        view = self.feature_view()
        if is_potential(fn):  # Phi(s) reads each row's previous row (replay/potential.py)
            view.update(self.transition_features(np.arange(self.size)))
        raw = self._evaluate(fn, view, self.size)
        bad = ~np.isfinite(raw)
        if bad.any():
            raise NonFiniteRewardError(
                f"reward {fn.id!r} is NaN or infinite on {int(bad.sum())} of {self.size} stored steps"
            )
        if normalisation not in REWARD_NORMALISATIONS:
            raise ValueError(f"unknown reward normalisation {normalisation!r}")
        raw_mean = float(raw.mean()) if self.size else 0.0
        raw_std = float(raw.std()) if self.size else 0.0
        constant = self.size < 2 or raw_std <= _CONSTANT_RTOL * max(1.0, abs(raw_mean))
        if constant and self.size >= 2 and not (allow_constant and reference is None):
            raise ConstantRewardError(
                f"reward {fn.id!r} is constant ({raw_mean:.6g}) on all {self.size} stored steps"
            )
        squash = ColumnMap(kind=normalisation, mean=raw_mean if normalisation != "affine" else 0.0,
                           std=raw_std if normalisation != "affine" and not constant else 1.0)
        pre = squash.squash(raw)
        mean = float(pre.mean()) if self.size else 0.0
        std = float(pre.std()) if self.size else 0.0
        if reference is None:
            affine = dataclasses.replace(squash, scale=scale)
        else:  # (x - m_j) * sigma_E / sigma_j + mu_E, docs/lares-reference.md §6 (x squashed, if asked)
            if std <= _CONSTANT_RTOL * max(1.0, abs(mean)):  # only a squash saturated on every row gets here
                raise ConstantRewardError(f"reward {fn.id!r} is constant on the buffer after its {normalisation}")
            scale = ref_std / std
            affine = ColumnMap(shift=ref_mean - mean * scale, scale=scale, kind=normalisation, mean=squash.mean,
                               std=squash.std)
        if relabel or self._affine[j] is None:
            self.raw_reward[: self.size, j] = (pre - mean).astype(np.float32)
        else:  # keep the old sampled values: store them so that the new map gives them back unchanged
            kept = self.rewards(j).astype(np.float64)
            self.raw_reward[: self.size, j] = ((kept - affine.shift) / affine.scale - mean).astype(np.float32)
        self._center[j] = mean
        self._affine[j] = affine
        self._fns[j] = fn
        self.nonfinite_count[j] = 0
        return affine

    def affine(self, j: int) -> ColumnMap | None:
        """The map of column j (None while the column is unset)."""
        self._check_column(j)
        return self._affine[j]

    def reward_function(self, j: int) -> RewardFunction | None:
        """The function that labels column j (None while the column is unset)."""
        self._check_column(j)
        return self._fns[j]

    def rewards(self, j: int) -> np.ndarray:
        """Scaled rewards of column j over the filled rows, float32 [size] (a new array)."""
        scale, shift = self._stored_map(j)
        return self.raw_reward[: self.size, j] * np.float32(scale) + np.float32(shift)

    def feature_view(self, n: int | None = None) -> dict[str, np.ndarray]:
        """The first n filled rows (default: all) of every feature, by name; views, not copies."""
        n = self.size if n is None else min(n, self.size)
        return {name: self.features[:n, i] for i, name in enumerate(self.feature_names)}

    def feature_sample(self, n: int, rng: np.random.Generator,
                       drop: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
        """Up to n random filled rows (copies, in row order) of every feature but ``drop``, and each feature at the
        row's next step as ``NEXT_PREFIX`` + name (NaN where there is none, `next_rows`)."""
        idx = np.sort(rng.choice(self.size, size=min(n, self.size), replace=False)) if self.size else np.zeros(0, int)
        view = {k: v for k, v in self.feature_view().items() if k not in drop}
        nxt, has_next = self.next_rows(idx)
        out = {k: np.asarray(v[idx], np.float64) for k, v in view.items()}
        for k, v in view.items():
            out[NEXT_PREFIX + k] = np.where(has_next, np.asarray(v[nxt], np.float64), np.nan)
        return out

    def next_rows(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For stored rows `idx`: the row of the same episode's next step, and whether it exists (the step did
        not end its episode, and the next row is stored: not past the newest row, not the oldest of a full ring).
        Episodes are stored whole and in order (`add`), so the next step is the next row. Where there is none the
        row itself is returned, so the result always indexes the filled rows (`feature_view`)."""
        idx = np.asarray(idx, np.int64)
        nxt = (idx + 1) % self.capacity
        newest = (self.ptr - 1) % self.capacity
        ok = ~(self.terminated[idx] | self.truncated[idx]) & (idx != newest) & (nxt < self.size)
        return np.where(ok, nxt, idx), ok

    def prev_rows(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For stored rows `idx`: the row of the same episode's previous step, and whether it exists (the previous
        row did not end an episode and is still stored: `idx` is not the oldest row). Where there is none the row
        itself is returned, as `next_rows` does."""
        idx = np.asarray(idx, np.int64)
        prv = (idx - 1) % self.capacity
        oldest = self.ptr if self.size == self.capacity else 0
        ok = (idx != oldest) & ~(self.terminated[prv] | self.truncated[prv])
        return np.where(ok, prv, idx), ok

    def transition_features(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """What a reward that reads transitions needs besides rows `idx`' own features (replay/potential.py): each
        feature at the previous row (`PREV_PREFIX`), whether there is none (`FIRST_STEP`), and whether the step
        really ended its episode (`TERMINATED`; a time-limit cut is not a terminal)."""
        prv, has_prev = self.prev_rows(idx)
        out = {PREV_PREFIX + name: self.features[prv, i] for i, name in enumerate(self.feature_names)}
        out[FIRST_STEP] = ~has_prev
        out[TERMINATED] = self.terminated[np.asarray(idx, np.int64)].copy()
        return out

    # ------------------------------------------------------------------ sampling
    def sample(
        self, batch_size: int, columns: Sequence[int], rng: np.random.Generator
    ) -> Batch:
        """Draw an independent minibatch (uniform, with replacement) for each listed column.

        Independent indices per learner avoid the reference's identical minibatch streams (§12 item 13).
        """
        if self.size == 0:
            raise RewardColumnError("cannot sample from an empty buffer")
        cols = np.asarray(columns, np.int64)
        maps = np.array([self._stored_map(int(c)) for c in cols], np.float32).reshape(-1, 2)
        idx = rng.integers(0, self.size, size=(len(cols), batch_size))
        reward = self.raw_reward[idx, cols[:, None]] * maps[:, :1] + maps[:, 1:]
        return Batch(
            obs=self.obs[idx],
            action=self.action[idx],
            reward=reward,
            next_obs=self.next_obs[idx],
            terminated=self.terminated[idx].astype(np.float32),
            indices=idx,
        )

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Arrays and scalars of the filled part; reward functions are saved by id only."""
        n = self.size
        return {
            "capacity": self.capacity,
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "feature_names": list(self.feature_names),
            "num_columns": self.num_columns,
            "size": n,
            "ptr": self.ptr,
            "obs": self.obs[:n].copy(),
            "action": self.action[:n].copy(),
            "next_obs": self.next_obs[:n].copy(),
            "terminated": self.terminated[:n].copy(),
            "truncated": self.truncated[:n].copy(),
            "features": self.features[:n].copy(),
            "raw_reward": self.raw_reward[:n].copy(),
            "center": self._center.copy(),
            "affine": np.array([(a.shift, a.scale) if a else (np.nan, np.nan) for a in self._affine]),
            "map_kind": [a.kind if a else None for a in self._affine],
            "map_stats": np.array([(a.mean, a.std) if a else (0.0, 1.0) for a in self._affine]),
            "column_ids": [fn.id if fn is not None else None for fn in self._fns],
            "nonfinite_count": self.nonfinite_count.copy(),
        }

    def load_state_dict(
        self, d: Mapping[str, Any], rewards: Sequence[RewardFunction | None] | None = None
    ) -> None:
        """Restore from `state_dict()`; `rewards[j]` re-attaches column j's function (ids must match).

        Everything is checked before anything is changed. A set column given no function keeps its
        stored rewards and map, but `add` then leaves it unlabelled on new rows, so pass them all.
        """
        shape = (d["capacity"], d["obs_dim"], d["act_dim"], tuple(d["feature_names"]), d["num_columns"])
        mine = (self.capacity, self.obs_dim, self.act_dim, self.feature_names, self.num_columns)
        if shape != mine:
            raise ValueError(f"buffer state has shape {shape}, this buffer is {mine}")
        ids = list(d["column_ids"])
        fns = list(rewards) if rewards is not None else [None] * self.num_columns
        if len(fns) != self.num_columns:
            raise ValueError(f"expected {self.num_columns} reward functions, got {len(fns)}")
        for j, (saved, fn) in enumerate(zip(ids, fns, strict=True)):
            if fn is not None and fn.id != saved:
                raise ValueError(f"column {j} was labelled by {saved!r}, not {fn.id!r}")
        n = int(d["size"])
        for name in ("obs", "action", "next_obs", "terminated", "truncated", "features", "raw_reward"):
            getattr(self, name)[:n] = d[name]
        self.size, self.ptr = n, int(d["ptr"])
        self._center[:] = d["center"]
        # Checkpoints from before the squash (no map_kind / map_stats) hold affine maps only.
        kinds = list(d.get("map_kind", ["affine"] * self.num_columns))
        stats = np.asarray(d.get("map_stats", np.tile([0.0, 1.0], (self.num_columns, 1))), np.float64)
        self._affine = [
            None if saved is None else ColumnMap(float(s), float(c), kind=kind or "affine", mean=float(m),
                                                 std=float(sd))
            for saved, (s, c), kind, (m, sd) in zip(ids, np.asarray(d["affine"]), kinds, stats, strict=True)
        ]
        self._fns = [fn if saved is not None else None for saved, fn in zip(ids, fns, strict=True)]
        self.nonfinite_count[:] = d["nonfinite_count"]

    # ------------------------------------------------------------------ helpers
    def _check_column(self, j: int) -> None:
        if not 0 <= j < self.num_columns:
            raise IndexError(f"reward column {j} out of range 0..{self.num_columns - 1}")

    def _stored_map(self, j: int) -> tuple[float, float]:
        """(scale, shift) applied to the stored, centred values of column j."""
        self._check_column(j)
        a = self._affine[j]
        if a is None:
            raise RewardColumnError(f"reward column {j} has no reward function yet")
        return a.scale, a.shift + self._center[j] * a.scale

    @staticmethod
    def _evaluate(fn: RewardFunction, features: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        """Call fn once over n rows, as float64 [n] (scalars broadcast; any other shape is an error)."""
        with np.errstate(all="ignore"):  # NaN/inf are detected and reported by the callers
            out = np.asarray(fn(features), np.float64)
        if out.shape not in ((n,), ()):
            raise RewardColumnError(f"reward {fn.id!r} returned shape {out.shape}, expected ({n},)")
        return np.array(np.broadcast_to(out, (n,)), np.float64)
