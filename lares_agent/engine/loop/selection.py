"""Selecting elite reward candidates (the method and its settings: ``SelectionConfig``, ``setup/selection.py``).

Truncation (LaRes: the top E of K by fitness) is the default. Tournament selection is the seed text's remedy
for stalled progress ("策略收敛停滞 / 进化种群多样性不足 / 引入锦标赛选择机制"): weaker candidates keep a chance
to survive, so the population does not collapse onto one reward family (how diverse it still is:
``setup/diversity.py``). Pareto selection (``loop/pareto.py``) keeps the non-dominated candidates over (fitness,
smoothness of the policy's actions, simplicity of the reward): the seed's "fast and smooth" multi-objective case.

All randomness comes from an explicit ``np.random.Generator``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lares_agent.engine.loop.pareto import pareto_select
from lares_agent.engine.setup.selection import SelectionConfig
from lares_agent.runs.slots import SlotRecord

__all__ = [
    "choose_elites",
    "pareto_objectives",
    "select_elites",
    "tournament_select",
    "truncation_select",
]


def _order(fitness: np.ndarray) -> np.ndarray:
    # best first; NaN ranks last; ties keep the lower slot index first (stable, reproducible)
    f = np.where(np.isnan(fitness), -np.inf, fitness)
    return np.argsort(-f, kind="stable")


def truncation_select(fitness: Sequence[float] | np.ndarray, n_elites: int) -> np.ndarray:
    """Indices of the ``n_elites`` fittest candidates, best first."""
    f = np.asarray(fitness, dtype=np.float64)
    _check_n(f, n_elites)
    return _order(f)[:n_elites]


def tournament_select(
    fitness: Sequence[float] | np.ndarray, n_elites: int, tournament_size: int, rng: np.random.Generator,
    keep_best: bool = True,
) -> np.ndarray:
    """``n_elites`` distinct survivors, each the winner of a tournament among the not-yet-chosen.

    Every tournament draws ``min(tournament_size, remaining)`` candidates without replacement and keeps the
    fittest (ties: lower index). Size 1 is uniform random selection; a size of at least K reproduces
    truncation. With ``keep_best`` the overall best is chosen first. Returned best first.
    """
    f = np.asarray(fitness, dtype=np.float64)
    _check_n(f, n_elites)
    if tournament_size < 1:
        raise ValueError(f"tournament_size must be >= 1, got {tournament_size}")
    key = np.where(np.isnan(f), -np.inf, f)
    pool = list(range(f.size))
    chosen: list[int] = []
    if keep_best and n_elites > 0:
        chosen.append(int(_order(f)[0]))
        pool.remove(chosen[0])
    while len(chosen) < n_elites:
        entrants = rng.choice(np.asarray(pool), size=min(tournament_size, len(pool)), replace=False)
        entrants = np.sort(entrants)
        winner = int(entrants[np.argmax(key[entrants])])
        chosen.append(winner)
        pool.remove(winner)
    out = np.asarray(chosen, dtype=np.int64)
    return np.asarray(out[_order(f[out])], dtype=np.int64)


def select_elites(
    fitness: Sequence[float] | np.ndarray, n_elites: int, config: SelectionConfig, rng: np.random.Generator
) -> np.ndarray:
    """Dispatch on ``config.method``; indices best first. Pareto needs more than one fitness: ``choose_elites``."""
    if config.method == "pareto":
        raise ValueError("pareto selection needs every slot's objectives; call choose_elites")
    if config.method == "tournament":
        return tournament_select(fitness, n_elites, config.tournament_size, rng, keep_best=config.keep_best)
    return truncation_select(fitness, n_elites)


def pareto_objectives(slots: Sequence[SlotRecord]) -> np.ndarray:
    """[K, 3] maximised objectives: fitness, -action_jerk (smooth actions), -complexity (simple rewards).

    A missing (non-finite) value takes its column's worst finite value, so it never helps a slot onto a front."""
    obj = np.array([[s.fitness, -s.action_jerk, -s.complexity] for s in slots], dtype=np.float64).reshape(-1, 3)
    for j in range(obj.shape[1]):
        col = obj[:, j]
        fin = np.isfinite(col)
        col[~fin] = col[fin].min() if fin.any() else 0.0
    return obj


def choose_elites(
    ranking: Sequence[int], slots: Sequence[SlotRecord], n_elites: int, config: SelectionConfig,
    rng: np.random.Generator,
) -> list[int]:
    """The elites of one reward update, best first by ``ranking`` (``rank_slots``: fitness, then tie-breaks).

    truncation: the top ``n_elites``; tournament: tournaments over rank positions, so they respect the ranking's
    tie-breaks; pareto: NSGA-II over ``pareto_objectives`` with the ranking as the final tie order. Quarantined
    slots join a Pareto front only when too few others are left (they go last, in ranking order)."""
    k = len(ranking)
    if config.method == "truncation":
        return [int(i) for i in ranking[:n_elites]]
    if config.method == "tournament":
        score = np.empty(k)
        score[np.asarray(ranking)] = -np.arange(k, dtype=np.float64)
        return [int(i) for i in select_elites(score, n_elites, config, rng)]
    _check_n(np.zeros(k), n_elites)
    position = {int(s): p for p, s in enumerate(ranking)}
    by_slot = {s.slot: s for s in slots}
    pool = [int(s) for s in ranking if not by_slot[int(s)].quarantined]
    need = min(n_elites, len(pool))
    chosen: list[int] = []
    if need > 0:
        obj = pareto_objectives([by_slot[s] for s in pool])
        chosen = [pool[int(i)] for i in pareto_select(obj, need, priority=[position[s] for s in pool])]
    best = int(ranking[0])
    if config.keep_best and n_elites > 0 and best not in chosen:
        # the best slot can be dominated only by one of equal fitness; it still survives (its learner is inherited)
        chosen = [best, *chosen[: n_elites - 1]]
    chosen += [int(s) for s in ranking if int(s) not in chosen][: n_elites - len(chosen)]
    return sorted(chosen, key=position.__getitem__)


def _check_n(f: np.ndarray, n: int) -> None:
    if f.ndim != 1 or f.size == 0:
        raise ValueError("fitness must be a non-empty 1-D array")
    if not 0 <= n <= f.size:
        raise ValueError(f"cannot select {n} elites from {f.size} candidates")
