"""Deterministic trajectory encoder: a rollout's per-step arrays -> a short text for the analyse node.

No LLM is involved (docs/DESIGN.md §4): the same rollout always gives the same text, and the text fits a token
budget (default 512, the seed's "limit trajectory descriptions to 512 tokens"). Tokens are estimated as
about 4 characters each, which over-counts slightly for English and numbers and so stays safely under
the model's context without downloading a tokenizer.

The text covers what the reference never fed back (docs/lares-reference.md §2.2: only final-step `info` dicts):
progress toward the goal over time, speeds, stops and jerk, contacts/grasp, success, and which reward
components dominated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lares_agent.tools.series import is_flag, is_speed, true_runs

__all__ = ["FeatureInfo", "Rollout", "encode_rollout", "encode_rollouts", "estimate_tokens"]

_CHARS_PER_TOKEN = 4
_PROGRESS_POINTS = 8
_STOP_MIN_STEPS = 5


@dataclass(frozen=True)
class FeatureInfo:
    """What the encoder needs to know about a feature (a subset of `engine.tasks.Feature`)."""

    name: str
    unit: str = ""
    meaning: str = ""


@dataclass(frozen=True)
class Rollout:
    """One evaluated episode: per-step feature arrays [T] and per-step reward-component arrays [T]."""

    features: Mapping[str, np.ndarray]
    components: Mapping[str, np.ndarray] = field(default_factory=dict)
    policy_id: str = ""
    reward_id: str = ""


def estimate_tokens(text: str) -> int:
    """Rough token count (~4 characters per token, rounded up)."""
    return -(-len(text) // _CHARS_PER_TOKEN)


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return str(float(x))
    if x == 0:
        return "0"
    if abs(x) >= 100 or abs(x) < 0.01:
        return f"{x:.2g}"
    return f"{x:.3g}"


def _unit(info: FeatureInfo | None) -> str:
    return info.unit if info is not None else ""


def _progress_lines(name: str, x: np.ndarray) -> list[str]:
    t = x.shape[0]
    idx = np.unique(np.linspace(0, t - 1, num=min(_PROGRESS_POINTS, t)).round().astype(int))
    series = ", ".join(f"t{i}={_fmt(x[i])}" for i in idx)
    start, end, best = float(x[0]), float(x[-1]), float(np.min(x))
    best_t = int(np.argmin(x))
    change = (start - end) / abs(start) * 100 if start != 0 else 0.0
    steps = np.diff(x)
    noise = 1e-2 * max(float(np.ptp(x)), 1e-9)  # ignore sensor-level jitter
    worse = int(np.sum(steps > noise))
    lines = [
        f"progress {name} (lower is better): {series}",
        f"  start {_fmt(start)}, end {_fmt(end)} ({_fmt(change)}% closer), best {_fmt(best)} at t{best_t}; "
        f"moved away on {worse}/{max(t - 1, 1)} steps",
    ]
    if best < end and (end - best) > 0.1 * abs(start - best + 1e-12):
        lines.append(f"  regressed after t{best_t}: ended {_fmt(end - best)} worse than its best")
    return lines


def _speed_lines(name: str, v: np.ndarray) -> list[str]:
    vmax = float(np.max(np.abs(v))) if v.size else 0.0
    threshold = 0.05 * vmax if vmax > 0 else 0.0
    stops = [r for r in true_runs(np.abs(v) <= threshold) if r[1] - r[0] >= _STOP_MIN_STEPS]
    lines = [f"{name}: mean {_fmt(float(np.mean(v)))}, max {_fmt(vmax)}"]
    if stops:
        spans = ", ".join(f"t{a}-t{b - 1}" for a, b in stops[:4])
        more = f" (+{len(stops) - 4} more)" if len(stops) > 4 else ""
        lines.append(f"  stopped (<5% of max) {len(stops)} time(s): {spans}{more}")
    if v.size >= 3:
        jerk = np.abs(np.diff(v, n=2))
        scale = float(np.mean(np.abs(v))) + 1e-12
        spikes = int(np.sum(jerk > 0.5 * scale)) if scale > 1e-9 else 0
        lines.append(f"  jerk: mean |d2v| {_fmt(float(np.mean(jerk)))}, abrupt changes on {spikes} steps")
    return lines


def _flag_lines(name: str, f: np.ndarray) -> list[str]:
    on = f > 0.5
    if not on.any():
        return [f"{name}: never"]
    runs = true_runs(on)
    longest = max(b - a for a, b in runs)
    drops = len(runs) - 1 if runs[-1][1] == on.shape[0] else len(runs)
    return [
        f"{name}: on {int(on.sum())}/{on.shape[0]} steps, first at t{runs[0][0]}, longest streak {longest}, "
        f"lost {drops} time(s){', on at the end' if on[-1] else ''}"
    ]


def _component_lines(components: Mapping[str, np.ndarray]) -> list[str]:
    if not components:
        return []
    names = sorted(components)
    totals = np.array([float(np.nansum(components[n])) for n in names])
    mass = np.array([float(np.nansum(np.abs(components[n]))) for n in names])
    share = mass / mass.sum() if mass.sum() > 0 else np.zeros_like(mass)
    order = np.argsort(-share, kind="stable")
    parts = [f"{names[i]} {share[i] * 100:.0f}% (sum {_fmt(totals[i])})" for i in order]
    lines = ["reward components by share of |reward|: " + ", ".join(parts)]
    if share[order[0]] > 0.8 and len(names) > 1:
        lines.append(f"  {names[order[0]]} dominates: the other terms barely matter to the learner")
    return lines


def _other_lines(name: str, x: np.ndarray) -> list[str]:
    return [f"{name}: start {_fmt(float(x[0]))}, end {_fmt(float(x[-1]))}, min {_fmt(float(np.min(x)))}, "
            f"max {_fmt(float(np.max(x)))}"]


def encode_rollout(
    rollout: Rollout,
    progress_feature: str,
    features: Sequence[FeatureInfo] = (),
    budget_tokens: int = 512,
    title: str = "",
) -> str:
    """Encode one rollout as text of at most `budget_tokens` estimated tokens.

    Sections are ranked (success, progress, components, speeds, contacts, other features) and the
    lowest-ranked lines are dropped first when the budget is tight, so the progress story survives.
    """
    info = {f.name: f for f in features}
    arrays = {k: np.asarray(v, dtype=np.float64).reshape(-1) for k, v in rollout.features.items()}
    lengths = {a.shape[0] for a in arrays.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"rollout arrays must share one non-zero length, got {sorted(lengths)}")
    (t,) = lengths
    head = title or f"rollout of policy {rollout.policy_id or '?'} (reward {rollout.reward_id or '?'})"
    ranked: list[tuple[int, str]] = [(0, f"{head}: {t} steps")]
    if "success" in arrays:
        hits = np.flatnonzero(arrays["success"] > 0.5)
        ranked.append((0, f"success: yes, first at t{hits[0]}, held {hits.size} steps" if hits.size else "success: no"))
    if progress_feature in arrays:
        ranked += [(1, line) for line in _progress_lines(progress_feature, arrays[progress_feature])]
    comps = {k: np.asarray(v, dtype=np.float64).reshape(-1) for k, v in rollout.components.items()}
    ranked += [(2, line) for line in _component_lines(comps)]
    rest = [n for n in sorted(arrays) if n not in ("success", "human_reward", progress_feature)]
    for name in rest:
        x = arrays[name]
        if is_speed(name, _unit(info.get(name))):
            ranked += [(3, line) for line in _speed_lines(name, x)]
        elif is_flag(_unit(info.get(name)), x):
            ranked += [(4, line) for line in _flag_lines(name, x)]
        else:
            ranked += [(5, line) for line in _other_lines(name, x)]
    return _fit(ranked, budget_tokens)


def _fit(ranked: list[tuple[int, str]], budget_tokens: int) -> str:
    """Order lines by rank, dropping the lowest-ranked (then latest) lines until the text fits."""
    keep = list(range(len(ranked)))
    while keep and estimate_tokens("\n".join(ranked[i][1] for i in keep)) > budget_tokens:
        worst = max(keep, key=lambda i: (ranked[i][0], i))
        if ranked[worst][0] == 0 and len(keep) == 1:
            break
        keep.remove(worst)
    text = "\n".join(ranked[i][1] for i in sorted(keep, key=lambda i: (ranked[i][0], i)))
    limit = budget_tokens * _CHARS_PER_TOKEN
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def encode_rollouts(
    rollouts: Sequence[Rollout],
    progress_feature: str,
    features: Sequence[FeatureInfo] = (),
    budget_tokens: int = 512,
) -> str:
    """Encode several rollouts, splitting the budget evenly; the joined text stays within `budget_tokens`."""
    if not rollouts:
        return "no rollouts yet (initial round)"
    share = max(budget_tokens // len(rollouts) - 2, 16)
    parts = [encode_rollout(r, progress_feature, features, share) for r in rollouts]
    return _fit([(0, p) for p in parts], budget_tokens) if len(parts) > 1 else parts[0]
