"""Computed diagnosis: rollouts, the elites' rewards and the round's feature sample -> typed facts.

No LLM: the numbers a small model misread (docs/DESIGN.md §4) are computed here, and the text of each fact is
generated from its numbers. Behaviour facts come from the rollouts, grouped by the reward their policy trained
on; reward facts from the elites' component statistics and from the elites' compiled rewards evaluated on the
sample (`rewards.compile_record`: the expressions are parsed by the reward parser, never eval'd). A component
is "flat" where a 10% move of the progress feature changes it by less than 1e-3 of its range, the case of
`exp(-100*d)` at d ~ 0.2 (about 2e-9: no gradient for the learner).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from lares_agent.rewards import CompiledReward, Limits, RewardTask, compile_record
from lares_agent.tools.facts import Fact
from lares_agent.tools.series import is_flag, is_speed, true_runs
from lares_agent.tools.trajectory import Rollout

__all__ = ["component_facts", "diagnose", "evaluated_success", "return_facts", "rollout_facts", "with_evaluation"]

_ZERO = 1e-9  # |value| at or below this is "does not fire"
_FLAT_REL = 1e-3  # a 10% move changing a component by < 1e-3 of its range is no signal
_MOST = 0.5  # "on most rows"
_DOMINANT = 0.8  # the encoder's threshold (tools/trajectory.py)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _g(x: float) -> str:
    return f"{x:.3g}"


def _arrays(r: Rollout) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=np.float64).reshape(-1) for k, v in r.features.items()}


def _units(task: RewardTask) -> dict[str, str]:
    return {f.name: str(f.unit) for f in task.features}


# ---------------------------------------------------------------------------------------------- behaviour
def _progress_facts(name: str, series: list[np.ndarray], source: str, success: list[np.ndarray]) -> list[Fact]:
    starts = np.array([x[0] for x in series])
    ends = np.array([x[-1] for x in series])
    bests = np.array([np.min(x) for x in series])
    closed = np.array([(s - e) / abs(s) if s != 0 else 0.0 for s, e in zip(starts, ends, strict=True)])
    frac = float(np.mean(closed))
    how = (f"{_pct(frac)} of the start distance closed" if frac >= 0
           else f"ended {_pct(-frac)} farther than it started")
    facts = [Fact("progress", name, {"start": float(starts.mean()), "end": float(ends.mean()),
                                     "best": float(bests.mean()), "closed": frac, "episodes": len(series)},
                  f"{name} went from {_g(starts.mean())} to {_g(ends.mean())}: {how} (best {_g(bests.mean())})",
                  source)]
    regressed, stalls, reversals = [], [], []
    for i, x in enumerate(series):
        t = x.shape[0]
        span = float(np.ptp(x))
        noise = 1e-2 * max(span, 1e-9)
        best_t = int(np.argmin(x))
        if best_t < t - 1 and x[-1] - x[best_t] > max(0.1 * (x[0] - x[best_t]), noise):
            regressed.append((float(x[best_t]), best_t, float(x[-1])))
        tol = 1e-3 * max(abs(float(x[0])), 1e-3)
        done = success[i] > 0.5 if i < len(success) else np.zeros(t, bool)
        still = np.concatenate([[False], (np.abs(np.diff(x)) <= tol) & ~done[1:]])
        for a, b in true_runs(still):
            a = max(a - 1, 0)
            value = float(np.mean(x[a:b]))
            if b - a >= max(5, t // 5) and value > 0.05 * abs(float(x[0])) + tol:
                stalls.append((b - a, a, b - 1, value, float(x[0])))
        moves = np.diff(x)
        signs = np.sign(moves[np.abs(moves) > noise])
        flips = int(np.sum(signs[1:] != signs[:-1])) if signs.size > 1 else 0
        if flips >= max(4, int(0.15 * t)):
            reversals.append((flips, t))
    if regressed:
        best, step, end = (float(np.mean([r[k] for r in regressed])) for k in range(3))
        facts.append(Fact("regressed", name, {"best": best, "best_step": step, "end": end,
                                              "episodes": len(regressed), "of": len(series)},
                          f"{name} reached its best {_g(best)} at t{step:.0f}, then regressed to {_g(end)} "
                          f"({len(regressed)}/{len(series)} episodes)", source))
    if stalls:
        length, a, b, value, start = max(stalls)
        near = value <= 0.3 * abs(start)
        facts.append(Fact("stall", name, {"from": a, "to": b, "steps": length, "value": value,
                                          "near_goal": float(near), "episodes": len(stalls)},
                          f"{name} stalled at {_g(value)} from t{a} to t{b} ({length} steps"
                          f"{', near the goal' if near else ''})", source))
    if reversals:
        mean_flips = float(np.mean([r[0] for r in reversals]))
        facts.append(Fact("oscillation", name, {"reversals": mean_flips, "episodes": len(reversals)},
                          f"{name} turned back and forth {mean_flips:.0f} times in an episode "
                          f"({len(reversals)}/{len(series)} episodes)", source))
    return facts


def _speed_facts(name: str, series: list[np.ndarray], source: str) -> list[Fact]:
    v = np.concatenate([np.abs(x) for x in series])
    vmax = float(np.max(v)) if v.size else 0.0
    stopped = float(np.mean(v <= 0.05 * vmax)) if vmax > 0 else 1.0
    facts = [Fact("speed", name, {"mean": float(np.mean(v)), "max": vmax, "stopped": stopped},
                  f"{name}: mean {_g(np.mean(v))}, max {_g(vmax)}, stopped on {_pct(stopped)} of steps", source)]
    jerks, abrupt = [], []
    for x in series:
        if x.size < 3:
            continue
        d2 = np.abs(np.diff(x, n=2))
        scale = float(np.mean(np.abs(x)))
        jerks.append(float(np.mean(d2)))
        abrupt.append(float(np.mean(d2 > 0.5 * scale)) if scale > _ZERO else 0.0)
    jerky = [i for i, a in enumerate(abrupt) if a >= 0.2]
    if jerky:
        share = float(np.mean([abrupt[i] for i in jerky]))
        mean = float(np.mean([jerks[i] for i in jerky]))
        facts.append(Fact("jerk", name, {"mean_jerk": mean, "abrupt": share, "episodes": len(jerky)},
                          f"{name} changes abruptly on {_pct(share)} of steps (mean |d2v| {_g(mean)}; "
                          f"{len(jerky)}/{len(abrupt)} episodes)", source))
    return facts


def _flag_fact(name: str, series: list[np.ndarray], source: str) -> Fact:
    on = [x > 0.5 for x in series]
    share = float(np.mean(np.concatenate(on)))
    with_it = float(np.mean([m.any() for m in on]))
    if name == "success":
        hits = [int(np.argmax(m)) for m in on if m.any()]
        word = "never" if with_it == 0 else "always" if with_it == 1 else "sometimes"
        first = float(np.mean(hits)) if hits else -1.0
        where = f", first at t{first:.0f} on average" if hits else ""
        return Fact("success", name, {"rate": with_it, "episodes": len(series), "first_step": first},
                    f"success {word}: {_pct(with_it)} of {len(series)} episode(s){where}", source)
    text = (f"{name}: never on" if share == 0
            else f"{name}: on {_pct(share)} of steps, in {_pct(with_it)} of episodes")
    return Fact("contact", name, {"share": share, "episodes_with": with_it}, text, source)


def rollout_facts(rollouts: Sequence[Rollout], task: RewardTask) -> list[Fact]:
    """Behaviour facts, per reward (the `reward_id` of the rollouts' policy; the source is empty when there is one)."""
    groups: dict[str, list[dict[str, np.ndarray]]] = defaultdict(list)
    for r in rollouts:
        arrays = _arrays(r)
        if arrays and all(a.size for a in arrays.values()):
            groups[r.reward_id].append(arrays)
    units = _units(task)
    facts: list[Fact] = []
    for rid, episodes in groups.items():
        source = rid if len(groups) > 1 else ""
        names = sorted(set().union(*episodes))
        success = [e["success"] for e in episodes if "success" in e]
        for name in names:
            series = [e[name] for e in episodes if name in e]
            if name == task.progress_feature or name == task.approach_feature:
                facts += _progress_facts(name, series, source, success if name == task.progress_feature else [])
            elif is_speed(name, units.get(name, "")):
                facts += _speed_facts(name, series, source)
            elif name != "human_reward" and is_flag(units.get(name, ""), np.concatenate(series)):
                facts.append(_flag_fact(name, series, source))
    order = {"success": 0, "progress": 1, "regressed": 2, "stall": 3, "oscillation": 4, "contact": 5}
    return sorted(facts, key=lambda f: (order.get(f.kind, 6), f.source))


# ---------------------------------------------------------------------------------------------- rewards
def _compiled(elite: Mapping[str, Any], task: RewardTask, limits: Limits) -> CompiledReward | None:
    try:
        return compile_record({"id": elite.get("id"), "components": dict(elite.get("components") or {})}, task, limits)
    except Exception:  # the task's own reward or a stale record has no expression to compile
        return None


def _uses(reward: CompiledReward, component: str) -> set[str]:
    return {s.name for s in reward.parsed.components[component].free_symbols}


def _shares(elite: Mapping[str, Any], rollouts: Sequence[Rollout]) -> dict[str, float]:
    stats = elite.get("stats") or {}
    shares = {c: float(s["share"]) for c, s in stats.items() if isinstance(s, Mapping) and "share" in s}
    if shares:
        return shares
    mass: dict[str, float] = defaultdict(float)
    for r in rollouts:
        if r.reward_id == elite.get("id"):
            for c, v in r.components.items():
                mass[c] += float(np.nansum(np.abs(np.asarray(v, dtype=np.float64))))
    total = sum(mass.values())
    return {c: m / total for c, m in mass.items()} if total > 0 else {}


def _silent(name: str, elite: Mapping[str, Any], rollouts: Sequence[Rollout],
            on_sample: np.ndarray | None) -> bool:
    seen = []
    stat = (elite.get("stats") or {}).get(name)
    if isinstance(stat, Mapping) and "mean" in stat:
        seen.append(abs(float(stat["mean"])) <= _ZERO and abs(float(stat.get("std", 0.0))) <= _ZERO)
    for r in rollouts:
        if r.reward_id == elite.get("id") and name in r.components:
            seen.append(bool(np.all(np.abs(np.asarray(r.components[name], dtype=np.float64)) <= _ZERO)))
    if on_sample is not None:
        seen.append(bool(np.all(np.abs(on_sample[np.isfinite(on_sample)]) <= _ZERO)))
    return bool(seen) and all(seen)


def _sensitivity(reward: CompiledReward, name: str, sample: Mapping[str, np.ndarray], feature: str,
                 base: np.ndarray) -> tuple[float, float, float, float]:
    """(share of rows where a 10% move of `feature` changes the component by < 1e-3 of its range, share of rows
    where it rises with the feature, the median change, the range): a central difference on the sample rows."""
    x = np.asarray(sample[feature], dtype=np.float64)
    h = max(0.1 * float(np.median(np.abs(x))), 1e-4)
    up, down, goal = dict(sample), dict(sample), dict(sample)
    up[feature], down[feature], goal[feature] = x + h, np.maximum(x - h, 0.0), np.zeros_like(x)
    delta = reward.components(up)[name] - reward.components(down)[name]
    at_goal = reward.components(goal)[name]
    ok = np.isfinite(delta) & np.isfinite(base) & np.isfinite(at_goal)
    if not ok.any():
        return 0.0, 0.0, 0.0, 0.0
    span = float(max(np.max(np.abs(at_goal[ok] - base[ok])), np.max(np.abs(delta[ok]))))
    flat = float(np.mean(np.abs(delta[ok]) <= _FLAT_REL * span)) if span > 0 else 1.0
    rises = float(np.mean(delta[ok] > 1e-9 * (1.0 + np.abs(base[ok]))))
    return flat, rises, float(np.median(np.abs(delta[ok]))), span


def _is_effort(used: set[str], units: Mapping[str, str]) -> bool:
    return bool(used) and all("action" in n or is_speed(n, units.get(n, "")) for n in used)


def component_facts(elites: Sequence[Mapping[str, Any]], rollouts: Sequence[Rollout],
                    sample: Mapping[str, np.ndarray], task: RewardTask, limits: Limits | None = None) -> list[Fact]:
    """Reward facts per elite: shares, a dominant or a silent component, flat or wrong-signed progress shaping, an
    effort term that outweighs progress."""
    limits = limits if limits is not None else Limits()
    units = _units(task)
    shaped = [f for f in (task.progress_feature, task.approach_feature) if f]
    facts: list[Fact] = []
    for elite in elites:
        eid = str(elite.get("id") or "?")
        shares = _shares(elite, rollouts)
        if shares:
            parts = ", ".join(f"{c} {_pct(s)}" for c, s in sorted(shares.items(), key=lambda kv: -kv[1]))
            facts.append(Fact("shares", eid, dict(shares), f"component shares of |reward|: {parts}", eid))
            top, share = max(shares.items(), key=lambda kv: kv[1])
            if share > _DOMINANT and len(shares) > 1:
                facts.append(Fact("dominant", top, {"share": share},
                                  f"{top} dominates with {_pct(share)} of |reward|: the other terms barely matter",
                                  eid))
        reward = _compiled(elite, task, limits)
        rows = reward is not None and bool(sample) and all(f in sample for f in reward.feature_names)
        parts_on = reward.components(sample) if reward is not None and rows else {}
        names = list(reward.parsed.components) if reward is not None else list(shares)
        for name in names:
            if _silent(name, elite, rollouts, parts_on.get(name)):
                facts.append(Fact("silent", name, {"max_abs": 0.0}, f"{name} is 0 on every step: it never fires", eid))
        if reward is None or not rows:
            continue
        for name in names:
            used = _uses(reward, name)
            for feature in (f for f in shaped if f in used):
                flat, rises, change, span = _sensitivity(reward, name, sample, feature, parts_on[name])
                median = float(np.median(np.asarray(sample[feature], dtype=np.float64)))
                if flat >= _MOST and span > 0:
                    facts.append(Fact("flat", name, {"flat_share": flat, "median": median, "change": change,
                                                     "range": span},
                                      f"{name} is flat in {feature} on {_pct(flat)} of sample rows (median "
                                      f"{feature} {_g(median)}): a 10% move changes it by {_g(change)} of a "
                                      f"range of {_g(span)}", eid, feature))
                if rises > _MOST:
                    facts.append(Fact("wrong_sign", name, {"rising_share": rises},
                                      f"{name} rises when {feature} grows on {_pct(rises)} of sample rows "
                                      f"({feature} is lower-is-better)", eid, feature))
        effort = [n for n in names if _is_effort(_uses(reward, n), units)]
        progress = [n for n in names if _uses(reward, n) & set(shaped)]
        if effort and progress:
            p_std = float(np.std(sum(parts_on[n] for n in progress)))
            for name in effort:
                e_std = float(np.std(parts_on[name]))
                if e_std > p_std:
                    facts.append(Fact("effort", name, {"effort_std": e_std, "progress_std": p_std,
                                                       "ratio": e_std / max(p_std, _ZERO)},
                                      f"{name} varies {e_std / max(p_std, _ZERO):.3g}x as much as the progress "
                                      f"terms on the sample (std {_g(e_std)} vs {_g(p_std)}): effort outweighs "
                                      "progress", eid))
    return facts


def evaluated_success(fact: Fact, elites: Sequence[Mapping[str, Any]]) -> float | None:
    """The success rate the reward update measured for the fact's reward (its elite's ``success``, over all its
    evaluation episodes); None when the elites do not say."""
    mine = [e for e in elites if e.get("id") == fact.source] if fact.source else list(elites)[:1]
    values = [float(e["success"]) for e in mine if isinstance(e.get("success"), (int, float))]
    return max(values) if values else None


def with_evaluation(fact: Fact, elites: Sequence[Mapping[str, Any]]) -> Fact:
    """A success fact with the evaluation's success rate beside the kept episodes' (`numbers["evaluated"]`).

    The rollouts behind a fact are the few episodes kept of an evaluation; "success never: 0% of 2 episode(s)"
    beside a fitness of 40% over 5 made the critique ask for a bonus that already fired."""
    rate = evaluated_success(fact, elites) if fact.kind == "success" and "evaluated" not in fact.numbers else None
    if rate is None:
        return fact
    return replace(fact, numbers={**fact.numbers, "evaluated": rate},
                   text=f"{fact.text} (kept episodes; the evaluation: {_pct(rate)})")


def return_facts(elites: Sequence[Mapping[str, Any]]) -> list[Fact]:
    """Each elite's task return: the task's own (hand-designed) reward summed over an evaluation episode, mean over
    the update's episodes, and whether the update graded fitness on it (no slot succeeded, success-then-return).

    It grades approach, grasp and partial progress that the success rate and the progress feature miss; the
    reference's feedback gave the same number ("human designed expert reward" score) in both settings, so it is
    stated in the scratch setting too: a score, not the human reward's expression. An elite without a finite
    return (a task without a human reward) has no such fact."""
    facts = []
    for elite in elites:
        value = elite.get("task_return")
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        graded = elite.get("graded_by") == "return"
        why = ", the fitness while no policy succeeds" if graded else ""
        facts.append(Fact("task_return", "task_return", {"task_return": float(value), "graded": float(graded)},
                          f"task return {_g(float(value))} per episode (the task's own reward{why})",
                          str(elite.get("id") or "?")))
    return facts


def diagnose(rollouts: Sequence[Rollout], elites: Sequence[Mapping[str, Any]], sample: Mapping[str, np.ndarray],
             task: RewardTask, limits: Limits | None = None) -> list[Fact]:
    """Every fact of a round: behaviour from the rollouts first (success with the evaluation's rate beside the
    kept episodes'), then each elite's task return, then the elites' rewards."""
    behaviour = [with_evaluation(f, elites) for f in rollout_facts(rollouts, task)]
    return behaviour + return_facts(elites) + component_facts(elites, rollouts, sample, task, limits)
