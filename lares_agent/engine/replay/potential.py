"""A reward written as a potential: base(s, a, s') + gamma*Phi(s') - Phi(s), computed from stored states.

Ng, Harada and Russell (1999): adding F = gamma*Phi(s') - Phi(s) to a reward leaves its optimal policies unchanged,
whatever Phi is, so a poor Phi (the LLM's, under `--shaping potential`) can slow learning but cannot make a wrong
behaviour optimal, as an additive reward that pays for standing still can. `PotentialReward` wraps the base reward
and Phi (both `RewardFunction`s) into one, so the buffer's relabel and column map, the evaluation and the
component statistics ("base" and "shaping") work on it as on any reward.

Which state is which. A buffer row, like a rollout step, holds the features computed right after its step
(`rollouts/episodes.py`): those of s', the state the step reached. Phi(s') reads the row; Phi(s) reads the same
episode's previous row. The buffer hands both (`ReplayBuffer.prev_rows`, as `PREV_PREFIX` keys with `FIRST_STEP`
and `TERMINATED`), so a relabel over the buffer is exact; a call without them (the evaluation, the rollouts shown
to the LLM) passes one episode's rows in order, and the previous row is taken from the rows themselves.

Terminals and time limits (Grzes, "Reward shaping in episodic reinforcement learning"): at a true terminal
Phi(s') = 0, the classic choice; a time-limit truncation is not a terminal, so its last row keeps Phi of the real
state it reached and the learner bootstraps through it (`Batch.terminated` is 0 there). MetaWorld episodes end by
truncation only. A call without `TERMINATED` knows no terminal and treats every row as a truncation would.

The first step of an episode. The reset state's features are not stored (a task computes features after a step),
so Phi(s_0) is taken as 0, the top of the standardised potential below. A value that does not depend on the
action keeps the invariance exact: it changes the return of every episode from s_0 by the same -Phi(s_0). The
oldest row of a full ring buffer, whose previous row was overwritten, is taken so too at a relabel.

Standardised and shifted, fixed at install like the buffer's `ColumnMap`: Phi_std = (Phi - top) / spread, with
`top` the largest and `spread` the standard deviation of Phi over the states it was fitted on (`fitted`). The scale
makes one gamma and one base reward fit every Phi the LLM writes; the shift is the one Mueller and Kudenko (2025,
arXiv 2502.01307) discuss: a constant shift changes no preference between policies, only early learning against
critics that start near 0, and Phi - max Phi puts every stored state at or below the start value 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, get_args

import numpy as np

from lares_agent.engine.contracts import RewardFunction

__all__ = ["FIRST_STEP", "PREV_PREFIX", "SHAPINGS", "TERMINATED", "PotentialReward", "Shaping", "is_potential"]

Shaping = Literal["additive", "potential"]
"""What the LLM's reward is (`--shaping`): "additive", the reward itself (LaRes); "potential", a Phi that shapes a
base reward (this module)."""
SHAPINGS: tuple[Shaping, ...] = get_args(Shaping)

PREV_PREFIX = "prev:"
"""``prev:<name>``: the feature at the same episode's previous row (the state s the step left), as the buffer hands
it to a reward that reads transitions; meaningless where ``FIRST_STEP`` is set."""
FIRST_STEP = "step:first"
"""True where the row has no stored previous row of its episode (the episode's first step)."""
TERMINATED = "step:terminated"
"""True where the step really ended its episode (not a time limit): Phi(s') is 0 there."""

_MIN_SPREAD = 1e-9


def is_potential(fn: object) -> bool:
    """Whether a reward reads transitions (the previous row and the terminal flag), as `PotentialReward` does."""
    return bool(getattr(fn, "reads_transitions", False))


class PotentialReward:
    """base + gamma*Phi_std(s') - Phi_std(s) (module docstring); immutable once built.

    ``id``, ``key``, ``complexity`` and ``expression`` are the potential's: it is what the LLM wrote and what the
    search ranks, refines and shows.
    """

    reads_transitions = True

    def __init__(self, base: RewardFunction, potential: RewardFunction, gamma: float, top: float,
                 spread: float) -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], not {gamma}")
        if not (math.isfinite(top) and math.isfinite(spread) and spread > 0):
            raise ValueError(f"a potential's top must be finite and its spread positive, not {top}, {spread}")
        self.base, self.potential = base, potential
        self.gamma, self.top, self.spread = float(gamma), float(top), float(spread)
        self.id: str = potential.id
        self.key: str = potential.key
        self.complexity: float = float(potential.complexity)

    @classmethod
    def fitted(cls, base: RewardFunction, potential: RewardFunction, gamma: float,
               sample: Mapping[str, np.ndarray]) -> PotentialReward:
        """The potential standardised on ``sample`` (stored states): top = its largest finite value, spread = its
        standard deviation (1 where it is constant or there is nothing finite)."""
        with np.errstate(all="ignore"):
            values = np.asarray(potential(sample), np.float64).reshape(-1)
        finite = values[np.isfinite(values)]
        top = float(finite.max()) if finite.size else 0.0
        spread = float(finite.std()) if finite.size > 1 else 0.0
        return cls(base, potential, gamma, top, spread if spread > _MIN_SPREAD else 1.0)

    @property
    def expression(self) -> Mapping[str, str] | None:
        """The potential's expression (`RewardFunction.expression`)."""
        return self.potential.expression

    # ------------------------------------------------------------------ values
    def phi(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """The standardised potential of each row's state (the state its step reached)."""
        with np.errstate(all="ignore"):
            raw = np.asarray(self.potential(features), np.float64)
        return (raw - self.top) / self.spread

    def shaping(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """gamma*Phi(s') - Phi(s) per row: Phi(s') = 0 at a true terminal, Phi(s) = 0 at an episode's first step."""
        here = self.phi(features)
        n = here.shape[0] if here.ndim else 1
        here = np.broadcast_to(here, (n,)).astype(np.float64)
        nxt = np.where(np.asarray(features[TERMINATED], bool), 0.0, here) if TERMINATED in features else here
        if FIRST_STEP in features:
            prev_features = {k[len(PREV_PREFIX):]: v for k, v in features.items() if k.startswith(PREV_PREFIX)}
            prev = np.broadcast_to(self.phi(prev_features), (n,))
            prev = np.where(np.asarray(features[FIRST_STEP], bool), 0.0, prev)
        else:  # one episode's rows in order: the previous state is the previous row's
            prev = np.concatenate([[0.0], here[:-1]]) if n else here
        with np.errstate(all="ignore"):
            return np.asarray(self.gamma * nxt - prev, np.float64)

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The base reward and the shaping term, apart (they sum to the reward)."""
        shaping = self.shaping(features)
        base = np.broadcast_to(np.asarray(self.base(features), np.float64), shaping.shape).copy()
        return {"base": base, "shaping": shaping}

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        parts = self.components(features)
        return np.asarray(parts["base"] + parts["shaping"], np.float64)

    def to_json(self) -> dict[str, Any]:
        """Both rewards' own descriptions, gamma and the standardisation: the search layer's loader rebuilds it."""
        return {"id": self.id, "kind": "potential", "complexity": self.complexity, "gamma": self.gamma,
                "top": self.top, "spread": self.spread, "potential": self.potential.to_json(),
                "base": self.base.to_json()}

    def __repr__(self) -> str:
        return (f"PotentialReward(id={self.id!r}, base={self.base.id!r}, gamma={self.gamma:g}, top={self.top:.6g}, "
                f"spread={self.spread:.6g})")
