"""Several learners per reward, and reward squashing, measured on fixed reward candidates (no LLM, so only the
learners and the ranking vary).

selection: does several learners per reward pick the better reward more often, at the same total learner count
and env steps? Four candidates per task are each trained afresh on 3 seeds (one learner alone on the reward, the
``baseline`` setting): their mean success (ties: mean start distance closed) is the truth. Then populations of
``--total-learners`` learners rank them after ``--budget`` steps, exactly as a reward update would (the graded
fitness of ``setup/fitness.py``, over ``fitness.slot_view``): with 1 learner per reward all four candidates
at once, one population per seed; with N per reward, K = total / N candidates per population, the pairs (or
groups) rotated over the seeds so every candidate is ranked. Reported: top-1 accuracy (the ranked-first is the
truly best of its population) with its chance level, pairwise accuracy (every pair of candidates in one
population ordered as the truth orders them: comparable across K), and the regret (truth of the best of the
population minus truth of the ranked-first).

squash: one population of three candidates whose scales differ by 100x (the same shaping at x0.01, x1, x100,
plus a success bonus at the same relative size), no reward updates, trained with each ``--reward-normalisation``
on 3 seeds; reported: each slot's final success (mean ± std over seeds, the mean share of the start distance
closed in brackets) and the population's mean.

    python experiments/learners_per_reward/run.py selection --task reach-v3 \
        --out experiments/learners_per_reward/results/reach
    python experiments/learners_per_reward/run.py selection --task Reacher-v5 \
        --out experiments/learners_per_reward/results/reacher
    python experiments/learners_per_reward/run.py squash --task reach-v3 --budget 6000 \
        --out experiments/learners_per_reward/results/squash

(what docs/RESULTS.md, "Learners per reward and reward squashing", reports; with the stored results a rerun
trains nothing and prints the tables).

Every finished unit is a line of ``<out>/results.jsonl``; a rerun skips them (resumable), then prints the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lares_agent.engine import EngineConfig, get_task, make_engine
from lares_agent.engine.setup.fitness import rank_slots, slot_evaluations
from lares_agent.rewards import compile_record
from lares_agent.search.config import engine_config
from lares_agent.search.presets import preset_config

# Shapes like those the local model writes (the sample-efficiency sweep's round-0 candidates), per progress feature.
CANDIDATES: Mapping[str, Sequence[Mapping[str, str]]] = {
    "tcp_to_target": (
        {"progress": "-tcp_to_target"},
        {"progress": "-5*tcp_to_target", "bonus": "5*success"},
        {"progress": "3*exp(-20*tcp_to_target)", "effort": "-0.01*action_norm"},
        {"progress": "-tcp_to_target", "effort": "-0.5*action_norm"},
    ),
    "fingertip_to_target": (
        {"progress": "-fingertip_to_target"},
        {"progress": "-5*fingertip_to_target", "bonus": "5*success"},
        {"progress": "3*exp(-20*fingertip_to_target)", "effort": "-0.01*action_norm"},
        {"progress": "-fingertip_to_target", "effort": "-0.5*action_norm"},
    ),
    "obj_to_target": (
        {"approach": "-tcp_to_obj", "progress": "-5*obj_to_target", "bonus": "5*success"},
        {"approach": "-tcp_to_obj", "progress": "3*exp(-20*obj_to_target)", "effort": "-0.01*action_norm"},
        {"progress": "-obj_to_target"},
        {"approach": "-tcp_to_obj", "progress": "-obj_to_target", "effort": "-0.5*action_norm"},
    ),
}
SCALES = (0.01, 1.0, 100.0)


def _rewards(task_name: str, comps: Sequence[Mapping[str, str]], tag: str) -> list[Any]:
    task = get_task(task_name)
    return [compile_record({"id": f"{tag}{i}", "components": dict(c), "rationale": ""}, task)
            for i, c in enumerate(comps)]


def _engine_config(args: argparse.Namespace, seed: int, population: int = 1, per_reward: int = 1,
                   **overrides: Any) -> EngineConfig:
    """The demo preset's learner at ``--budget`` steps, no reward updates, ``--eval-episodes`` per learner."""
    cfg = engine_config(preset_config("demo", {"task": args.task, "budget": args.budget, "seed": seed,
                                               "population": population, "elites": 1,
                                               "learners_per_reward": per_reward, "eval_episodes": args.eval_episodes}))
    return dataclasses.replace(cfg, max_rounds=0, eval_every=0, checkpoint_every=0, **overrides)


def _train(task_name: str, config: EngineConfig, rewards: list[Any]) -> dict[str, Any]:
    """Train, then evaluate and rank the slots as a reward update does; the slots' evaluations as JSON."""
    task = get_task(task_name)
    start = time.monotonic()
    engine = make_engine(task, config, rewards if config.setting != "baseline" else rewards[:1])
    try:
        engine.run()
        k = engine.num_slots
        view = list(engine.rank(config.update_eval_episodes).evals[:k])  # each slot led as a reward update leads it
        slots = slot_evaluations(view, engine.rewards[:k], config.complexity_lambda,
                                 [engine.population.quarantined(s) for s in range(k)])
        return {"ranking": [int(s) for s in rank_slots(slots, False)], "wall_s": time.monotonic() - start,
                "slots": [{"reward_id": engine.rewards[s.slot].id, "success": s.success,
                           "progress_closed": s.progress_closed, "fitness": s.fitness,
                           "learner_success": list(s.learner_success)} for s in slots]}
    finally:
        engine.close()


def _done(out: Path) -> dict[str, dict[str, Any]]:
    path = out / "results.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return {r["key"]: r for r in rows}


def _record(out: Path, key: str, row: dict[str, Any]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    row = {"key": key, **row}
    with (out / "results.jsonl").open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    print(json.dumps({k: row[k] for k in ("key", "ranking", "wall_s") if k in row}), flush=True)
    return row


def _groups(n_cands: int, k: int, seed: int) -> list[tuple[int, ...]]:
    """Partitions of the candidates into populations of k, rotated with the seed (so pairs differ by seed)."""
    order = list(range(n_cands))
    if k < n_cands:
        order = [order[0], *np.roll(order[1:], seed).tolist()]
    return [tuple(order[i : i + k]) for i in range(0, n_cands, k)]


def selection(args: argparse.Namespace) -> None:
    task = get_task(args.task)
    comps = CANDIDATES[task.progress_feature]
    out, done = args.out, _done(args.out)
    # Truth: every candidate alone, afresh, on every seed.
    truth: dict[int, list[tuple[float, float]]] = {c: [] for c in range(len(comps))}
    for c, seed in itertools.product(range(len(comps)), args.seeds):
        key = f"truth-c{c}-s{seed}"
        row = done.get(key) or _record(out, key, _train(args.task, _engine_config(
            args, seed, setting="baseline"), _rewards(args.task, [comps[c]], f"c{c}-")))
        truth[c].append((row["slots"][0]["success"], row["slots"][0]["progress_closed"]))
    # rounded: means of success rates (tenths) must tie exactly when equal, not by float summation order
    score = {c: (round(float(np.mean([s for s, _ in v])), 6), round(float(np.nanmean([p for _, p in v])), 6))
             for c, v in truth.items()}
    lines = [f"{args.task}: truth after {args.budget} steps, {len(args.seeds)} seeds each, {args.eval_episodes} "
             "evaluation episodes (mean success, mean share closed):"]
    lines += [f"  c{c} {dict(comps[c])}: {score[c][0]:.2f}, {score[c][1]:.2f}" for c in score]
    table = ["| learners per reward | candidates per population | populations | top-1 accuracy (chance) | "
             "pairwise accuracy | mean regret (success) |", "|---|---|---|---|---|---|"]
    for n in args.per_reward:
        k = args.total_learners // n
        top1, pairs, regret, chance = [], [], [], []
        for seed in args.seeds:
            for group in _groups(len(comps), k, seed):
                key = f"pop-n{n}-s{seed}-{'-'.join(map(str, group))}"
                row = done.get(key) or _record(out, key, _train(args.task, _engine_config(
                    args, seed, population=len(group), per_reward=n),
                    _rewards(args.task, [comps[c] for c in group], f"c{'-'.join(map(str, group))}-")))
                first = group[row["ranking"][0]]
                best = max(group, key=lambda c: score[c])
                top1.append(score[first] == score[best])
                chance.append(1.0 / len(group))
                regret.append(score[best][0] - score[first][0])
                pos = {group[s]: i for i, s in enumerate(row["ranking"])}
                for a, b in itertools.combinations(group, 2):
                    if score[a] != score[b]:
                        pairs.append((pos[a] < pos[b]) == (score[a] > score[b]))
        table.append(f"| {n} | {k} | {len(top1)} | {np.mean(top1):.2f} ({np.mean(chance):.2f}) | "
                     f"{np.mean(pairs) if pairs else math.nan:.2f} ({len(pairs)} pairs) | {np.mean(regret):.3f} |")
    _report(out, [*lines, "", *table])


def squash(args: argparse.Namespace) -> None:
    task = get_task(args.task)
    base = CANDIDATES[task.progress_feature][1]  # shaping + success bonus, scaled as a whole
    comps = [{name: f"{scale:g}*({expr})" for name, expr in base.items()} for scale in SCALES]
    out, done = args.out, _done(args.out)
    table = ["| normalisation | " + " | ".join(f"slot x{s:g}" for s in SCALES) + " | population mean |",
             "|---|" + "---|" * (len(SCALES) + 1)]
    for norm in ("affine", "sigmoid", "tanh"):
        per_slot = []
        for seed in args.seeds:
            key = f"squash-{norm}-s{seed}"
            row = done.get(key) or _record(out, key, _train(args.task, _engine_config(
                args, seed, population=len(SCALES), reward_normalisation=norm),
                _rewards(args.task, comps, "x")))
            per_slot.append([(s["success"], s["progress_closed"]) for s in row["slots"]])
        succ, closed = np.asarray(per_slot)[..., 0], np.asarray(per_slot)[..., 1]
        cells = " | ".join(f"{a:.2f} ± {b:.2f} ({c:.2f})" for a, b, c in zip(
            succ.mean(axis=0), succ.std(axis=0), np.nanmean(closed, axis=0), strict=True))
        table.append(f"| {norm} | {cells} | {float(succ.mean()):.2f} ({float(np.nanmean(closed)):.2f}) |")
    _report(out, [f"{args.task}, {args.budget} steps, {len(args.seeds)} seeds, candidates {comps}", "", *table])


def _report(out: Path, lines: list[str]) -> None:
    text = "\n".join(lines)
    (out / "summary.md").write_text(text + "\n")
    print(text)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("selection", "squash"))
    ap.add_argument("--task", default="reach-v3")
    ap.add_argument("--budget", type=int, default=10_000)
    ap.add_argument("--eval-episodes", type=int, default=10, help="per learner, for the truth and the ranking")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--total-learners", type=int, default=4)
    ap.add_argument("--per-reward", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    (selection if args.mode == "selection" else squash)(args)


if __name__ == "__main__":
    main()
