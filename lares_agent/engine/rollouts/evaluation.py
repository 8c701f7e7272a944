"""Deterministic evaluation of population members (LaRes fitness, docs/lares-reference.md §3 and §9).

Every evaluated member plays the same ``episodes`` deterministic episodes (common reset seeds, so members
are compared on identical initial conditions). Per member it reports:

* success rate, where an episode succeeds if the task's success flag is set at ANY step (the reference's
  elite rule; TS uses the same rule so the two agree, docs/lares-reference.md §12 item 15);
* task return = sum of ``human_reward`` (NaN for tasks without one);
* own return = sum of the member's *raw* reward (its function's output before the buffer's affine map);
* mean, first-step and final value of the task's progress feature (the from-scratch tie-break, §12 item 14),
  and the share of the start distance closed, of it and of the approach feature (the graded fitness before any
  success, docs/DESIGN.md);
* how jerky the actions are: mean squared change of the policy-space action per step (Pareto selection);
* per-component statistics {mean, std, share of total |r|} of its reward over all evaluation steps;
* the per-step feature arrays of the first few episodes, for the LLM's trajectory encoder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lares_agent.engine.contracts import HUMAN_REWARD_FEATURE, ComponentStats, MemberEvaluation, RewardFunction
from lares_agent.engine.rollouts.episodes import EnvPool, batch_features, run_episodes
from lares_agent.engine.rollouts.progress import SUCCESS_FEATURE, progress_closed

__all__ = ["MAX_EVAL_ENVS", "action_jerk", "component_stats", "evaluate_members", "progress_closed"]

MAX_EVAL_ENVS = 20
"""The most envs an evaluation steps in lock step (the default population's 4 learners x 5 episodes). Each further
env is built once and kept (a MetaWorld env takes about 0.6 s to build and some MB; docs/RESULTS.md, "Evaluation
episodes stepped together")."""



def _row_wise(act: Callable[[np.ndarray, np.ndarray], np.ndarray],
              members: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``act`` over a batch's rows, each member's rows given together; a lone row goes in twice.

    A one-row matrix product takes another kernel than a several-row one (BLAS matrix-vector) and rounds
    differently in the last bits, which a MuJoCo episode amplifies; with at least two rows a member's actions
    are the same whether it plays one episode at a time or several together."""
    _, counts = np.unique(members, return_counts=True)
    if counts.min() > 1:
        return lambda obs: act(obs, members)
    doubled = np.concatenate([members, members])
    return lambda obs: act(np.concatenate([obs, obs]), doubled)[: len(members)]


def action_jerk(actions: np.ndarray) -> float:
    """Mean over steps of ||a_t - a_{t-1}||^2 of one episode's policy-space actions [T, act_dim] (0 for T < 2)."""
    a = np.asarray(actions, np.float64)
    if a.shape[0] < 2:
        return 0.0
    return float(np.mean(np.sum(np.diff(a, axis=0) ** 2, axis=-1)))


def component_stats(components: Mapping[str, np.ndarray]) -> dict[str, ComponentStats]:
    """Mean, std and share of total |r| of each component (shares sum to 1 unless every value is 0)."""
    arrays = {k: np.asarray(v, np.float64).reshape(-1) for k, v in components.items()}
    abs_sums = {k: float(np.abs(v[np.isfinite(v)]).sum()) for k, v in arrays.items()}
    total = sum(abs_sums.values())
    out: dict[str, ComponentStats] = {}
    for k, v in arrays.items():
        fin = v[np.isfinite(v)]
        mean = float(fin.mean()) if fin.size else float("nan")
        std = float(fin.std()) if fin.size else float("nan")
        out[k] = ComponentStats(mean=mean, std=std, share=abs_sums[k] / total if total > 0 else 0.0)
    return out


def evaluate_members(
    pool: EnvPool,
    act: Callable[[np.ndarray, np.ndarray], np.ndarray],
    raw_state: Callable[..., np.ndarray],
    features: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]],
    members: Sequence[int],
    rewards: Sequence[RewardFunction | None],
    episodes: int,
    horizon: int,
    reset_seeds: Sequence[int],
    progress_feature: str,
    keep_rollouts: int = 0,
    drop_features: frozenset[str] = frozenset(),
    approach_feature: str | None = None,
    max_envs: int = MAX_EVAL_ENVS,
) -> list[MemberEvaluation]:
    """Evaluate ``members`` for ``episodes`` deterministic episodes, as many as ``max_envs`` envs allow in lock
    step (one ``act`` call a step over every member's episodes).

    Every member plays every episode on an env of ``pool``'s first construction seed (``EnvPool.alike``), so members
    meet the same start and goal for a reset seed, and the numbers do not depend on how many episodes run at once:
    ``max_envs`` = the member count plays one episode of each member at a time.
    ``act(obs [N, obs_dim], members [N]) -> [N, act_dim]`` must be deterministic (tanh of the mean) and act on each
    row alone; ``rewards[i]`` is member ``members[i]``'s raw reward function (None: own
    return and components are NaN). ``reset_seeds[e]`` seeds episode e for every member. ``drop_features`` are
    removed from the kept rollouts (the human reward is never shown to the LLM in the from-scratch setting).
    ``approach_feature``: the task's (None: ``approach_closed`` is NaN).
    """
    if len(rewards) != len(members):
        raise ValueError(f"evaluate_members: {len(members)} members but {len(rewards)} reward functions")
    if len(reset_seeds) < episodes:
        raise ValueError(f"evaluate_members: {episodes} episodes but {len(reset_seeds)} reset seeds")
    m = len(members)
    if m == 0 or episodes < 1:
        return []
    member_arr = np.asarray(members, np.int64)
    together = max(1, min(episodes, max_envs // m))  # episodes of each member in one lock-step batch
    succ = np.zeros((m, episodes))
    task_ret = np.zeros((m, episodes))
    own_ret = np.zeros((m, episodes))
    mean_prog = np.zeros((m, episodes))
    final_prog = np.zeros((m, episodes))
    start_prog = np.zeros((m, episodes))
    closed = np.zeros((m, episodes))
    approach = np.full((m, episodes), np.nan)
    jerk = np.zeros((m, episodes))
    length = np.zeros((m, episodes))
    nonfinite = np.zeros(m, bool)
    comps: list[dict[str, list[np.ndarray]]] = [{} for _ in range(m)]
    kept: list[list[dict[str, np.ndarray]]] = [[] for _ in range(m)]
    for first in range(0, episodes, together):
        n_ep = min(together, episodes - first)
        # rows episode-major: row j * m + i is member i's episode first + j, every row on an env of one construction
        # seed, so that members meet the same goal on the same reset seed (MT1 draws its goals from that seed)
        envs = pool.alike(n_ep * m)
        row_members = np.tile(member_arr, n_ep)
        batch = run_episodes(envs, _row_wise(act, row_members), raw_state, horizon,
                             [reset_seeds[first + j] for j in range(n_ep) for _ in range(m)])
        feats, offsets = batch_features(features, batch)
        for row in range(n_ep * m):
            e, i = first + row // m, row % m
            nonfinite[i] |= bool(batch.nonfinite[row])
            rows = slice(int(offsets[row]), int(offsets[row + 1]))
            f = {k: v[rows] for k, v in feats.items()}
            succ[i, e] = float(np.any(f[SUCCESS_FEATURE] > 0.5))
            human = f.get(HUMAN_REWARD_FEATURE)
            task_ret[i, e] = float(np.sum(human)) if human is not None else float("nan")
            prog = np.asarray(f[progress_feature], np.float64)
            mean_prog[i, e], final_prog[i, e] = float(prog.mean()), float(prog[-1])
            start_prog[i, e], closed[i, e] = float(prog[0]), progress_closed(prog)
            if approach_feature is not None:
                approach[i, e] = progress_closed(f[approach_feature])
            jerk[i, e] = action_jerk(batch.action[row, batch.valid(row)])
            length[i, e] = float(batch.lengths[row])
            fn = rewards[i]
            if fn is None:
                own_ret[i, e] = float("nan")
            else:
                own_ret[i, e] = float(np.sum(np.asarray(fn(f), np.float64)))
                nonfinite[i] |= not np.isfinite(own_ret[i, e])
                for name, vals in fn.components(f).items():
                    comps[i].setdefault(name, []).append(np.asarray(vals, np.float64).reshape(-1))
            if e < keep_rollouts:
                kept[i].append({k: v.copy() for k, v in f.items() if k not in drop_features})
    out: list[MemberEvaluation] = []
    for i, member in enumerate(members):
        bad = bool(nonfinite[i])
        out.append(
            MemberEvaluation(
                member=int(member),
                episodes=episodes,
                success_rate=0.0 if bad else float(succ[i].mean()),
                task_return=float(task_ret[i].mean()),
                own_return=float(own_ret[i].mean()),
                mean_progress=float(mean_prog[i].mean()),
                final_progress=float(final_prog[i].mean()),
                episode_length=float(length[i].mean()),
                component_stats=component_stats({k: np.concatenate(v) for k, v in comps[i].items()}),
                rollouts=tuple(kept[i]),
                nonfinite=bad,
                start_progress=float(start_prog[i].mean()),
                progress_closed=float(closed[i].mean()),
                approach_closed=float(approach[i].mean()),
                action_jerk=float(jerk[i].mean()),
            )
        )
    return out
