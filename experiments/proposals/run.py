"""Reward proposals of the local model through the round graph (propose -> validate, which dedupes and
pre-screens), on initial-round prompts over 3 MetaWorld tasks.

Asks for N candidates in total (slots to fill, `--per-round` per round, as a reward update refills them) and
prints per task and overall:

- filled:   slots the graph filled with an accepted candidate (parses, compiles, within the complexity cap,
            numerically sound, the progress sign and approach term right, not a copy), of the slots asked
            ("valid" in the targets)
- distinct: distinct canonical rewards (`reward_key`) among the accepted ones of a task, across its rounds (each
            round is a fresh initial-round prompt, so repeats across rounds are counted against the model)
- sane:     accepted, and the reward never rises when the progress feature grows while it does fall somewhere
- approach: accepted ones that shape the approach (use the task's `approach_feature`), where the task has one
- raw valid: the LLM's own candidates that passed the validator before dedupe and screen (duplicates count as
            valid here), of all LLM candidates; the round asks for `--oversample` per free slot. The validator
            repairs a component whose sign is clearly wrong (`CheckConfig.repair_sign`); "without the sign repair"
            re-validates the same recorded answers with it off
- cost: completion tokens and seconds of LLM calls per accepted candidate, the first (cold) call excluded
- shapes:   accepted ones by their terms against the prompt's own examples for the task (`graphs/example_shapes.py`:
            "example 1" is its first example with other weights), measured whatever `--task-examples` hid
- copies:   accepted ones holding two or more terms of the example shown for a different task, its names mapped
            onto the task's (`other_task_shape`); "none shown" under `--task-examples none`, which shows no example

Its targets: >= 95% filled ("valid"), >= 80% distinct. The sample is the engine's random-action sample
(`random_feature_sample`), which carries next steps, so the pre-screen runs as in a search. Run by hand:

    python experiments/proposals/run.py                       # default 1.5B model, 50 slots
    python experiments/proposals/run.py --model qwen2.5-coder-0.5b --n 12 --per-call 1
    python experiments/proposals/run.py --task-examples other   # with an answer for a different task
    python experiments/proposals/run.py --task-examples own     # and two answers for the task itself
    python experiments/proposals/run.py --base-url http://127.0.0.1:8000/v1 --model qwen   # through a server

docs/RESULTS.md reports its runs ("Proposals without own-task examples, under the grammar" and the sections
around it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.engine import random_feature_sample
from lares_agent.engine.tasks import get_task
from lares_agent.graphs.asking import system_message
from lares_agent.graphs.build import build_graph
from lares_agent.graphs.context import TASK_EXAMPLE_MODES, GraphLimits, GraphTask, RunContext
from lares_agent.graphs.example_shapes import KINDS, example_kind, example_shapes, other_task_shape, shape
from lares_agent.graphs.prompting import AnswerError, extract_candidates
from lares_agent.graphs.round import run_round
from lares_agent.llm import LLMConfig, make_client
from lares_agent.prompts.loader import load_persona
from lares_agent.rewards import CheckConfig, compile_record, progress_monotonicity, validate

TASKS = ("reach-v3", "push-v3", "pick-place-v3")
RAW_VALID = ("accepted", "duplicate", "screened out", "surplus")
NONE_SHOWN = "none shown"


def unrepaired_valid(calls: list[dict[str, Any]], task: GraphTask, sample: Mapping[str, np.ndarray],
                     checks: CheckConfig) -> int:
    """The recorded answers' candidates the validator accepts with the sign repair off (no `taken`: a duplicate
    counts as valid, as in raw valid), so that raw valid compares with runs from before the repair."""
    off = dataclasses.replace(checks, repair_sign=False)
    valid = 0
    for call in calls:
        try:
            found = extract_candidates(call["answer"] or "")
        except AnswerError:
            continue
        valid += sum(validate(c, task, sample, config=off).accepted for c in found)
    return valid


def bench_task(task_name: str, n: int, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    task = get_task(task_name)
    sample = random_feature_sample(task, 1024, args.seed)
    served = args.base_url is not None  # an OpenAI-compatible server (llama.cpp's own) serving the same model
    llm = make_client(LLMConfig(backend="openai" if served else "local", model=args.model, base_url=args.base_url,
                                context=args.context if served else None, temperature=args.temperature,
                                seed=args.seed, timeout_s=600.0), run_dir=run_dir)
    steps: list[str] = []  # the grammar or response format stepped down (a server that refused or ignored it)
    llm.on_format_step = lambda endpoint, refused, step, why: steps.append(f"{refused} -> {step}: {why}")
    limits = GraphLimits(per_call=args.per_call, temperature=args.temperature, oversample=args.oversample,
                         reflect=False, task_examples=args.task_examples)
    ctx = RunContext(llm=llm, task=task, sample=sample, persona=load_persona(args.persona), limits=limits)
    graph = build_graph()
    uses_approach = re.compile(rf"\b{task.approach_feature}\b") if task.approach_feature else None
    keys: list[str] = []
    reasons: list[str] = []
    asked = filled = sane = approach = llm_cands = raw_valid = 0
    proxies: list[float] = []
    examples = example_shapes(task)
    other = other_task_shape(task, system_message(ctx))
    shapes: list[str] = []
    copies = 0  # accepted rewards holding 2+ terms of the example shown for a different task (none: nothing shown)
    rnd = 0
    while asked < n:
        want = min(args.per_round, n - asked)
        asked += want
        # as a search does: a reward the task's earlier rounds accepted is not accepted again (`tried`)
        result = run_round(graph, {"round": rnd, "n_wanted": want, "tried": sorted(set(keys))}, f"bench-{rnd}", ctx)
        for rec in (*result.accepted, *result.rejected):
            llm_cands += 1
            reason = "accepted" if rec.get("accepted") else str(rec.get("reason", ""))
            raw_valid += reason.startswith(RAW_VALID)
            if not rec.get("accepted"):
                reasons.append(reason)
        for rec in result.accepted:
            filled += 1
            keys.append(str(rec.get("key")))
            proxies.append(float(rec.get("proxy") or 0.0))
            shapes.append(example_kind(rec["components"], examples))
            copies += len(shape(rec["components"]) & other) >= 2
            reward = compile_record(rec, task)
            approach += bool(uses_approach and any(uses_approach.search(x) for x in rec["components"].values()))
            rises, falls = progress_monotonicity(reward, sample, task.progress_feature)
            if rises <= 0.01 and falls > 0.0:
                sane += 1
            elif args.verbose:
                print(f"  not sane ({task.progress_feature}: rises {rises:.0%}): {rec['components']}")
        if args.verbose:
            for rec in result.accepted:
                print(f"  r{rnd} proxy {rec.get('proxy')}: {rec['components']}")
        rnd += 1
    calls = [json.loads(x) for x in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    ok = [c for c in calls if c["ok"]]
    return {"task": task_name, "n": asked, "filled": filled, "sane": sane, "distinct": len(set(keys)),
            "approach": approach if uses_approach else None, "llm_cands": llm_cands, "raw_valid": raw_valid,
            "unrepaired": unrepaired_valid(ok, task, sample, limits.checks),
            "secs": [c["seconds"] for c in ok], "tokens": [c["completion_tokens"] for c in ok],
            "calls": len(calls), "reasons": reasons, "proxies": proxies, "shapes": shapes,
            "copies": copies if other else NONE_SHOWN, "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--n", type=int, default=50, help="slots to fill in total, split over the tasks")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--per-call", type=int, default=GraphLimits().per_call)
    parser.add_argument("--oversample", type=float, default=2.0, help="LLM candidates per free slot")
    parser.add_argument("--per-round", type=int, default=2, help="slots per round (a reward update's refill)")
    parser.add_argument("--temperature", type=float, default=0.4)
    parser.add_argument("--persona", default="neutral")
    parser.add_argument("--task-examples", choices=TASK_EXAMPLE_MODES, default=GraphLimits().task_examples)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="keep the llm_calls.jsonl records in this folder")
    parser.add_argument("--base-url", default=None,
                        help="ask this OpenAI-compatible server for --model instead of the local model")
    parser.add_argument("--context", type=int, default=4096, help="the server's context in tokens (--base-url)")
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    share = [args.n // len(tasks) + (1 if i < args.n % len(tasks) else 0) for i in range(len(tasks))]
    rows = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, n in zip(tasks, share, strict=True):
            rows.append(bench_task(name, n, args, (args.keep or Path(tmp)) / name))
            r = rows[-1]
            print(f"{name:16s} slots={r['n']:3d} filled {r['filled'] / r['n']:.0%} "
                  f"distinct {r['distinct']}/{r['filled']} sane {r['sane']}/{r['filled']} approach {r['approach']} "
                  f"raw valid {r['raw_valid']}/{r['llm_cands']} (without the sign repair {r['unrepaired']}) "
                  f"copies {r['copies']} calls {r['calls']} "
                  f"first call {r['secs'][0]:.1f} s, then median {statistics.median(r['secs'][1:] or [0.0]):.2f} s",
                  flush=True)
    n = sum(r["n"] for r in rows)
    filled = sum(r["filled"] for r in rows)
    warm_secs = sum(sum(r["secs"][1:]) for r in rows)
    tokens = sum(sum(r["tokens"]) for r in rows)
    print(f"\nmodel {args.model}, {n} slots, per_call {args.per_call}, oversample {args.oversample}, "
          f"T={args.temperature}, task examples {args.task_examples}, wall {time.perf_counter() - start:.0f} s")
    print(f"valid    {filled / n:.1%}   (slots filled; target 100%)")
    print(f"distinct {sum(r['distinct'] for r in rows) / max(filled, 1):.1%} of accepted   (target >= 90%)")
    print(f"sane     {sum(r['sane'] for r in rows) / max(filled, 1):.1%} of accepted")
    print(f"raw valid {sum(r['raw_valid'] for r in rows) / max(sum(r['llm_cands'] for r in rows), 1):.1%} "
          f"of {sum(r['llm_cands'] for r in rows)} LLM candidates   (target >= 90%); without the sign repair "
          f"{sum(r['unrepaired'] for r in rows)}/{sum(r['llm_cands'] for r in rows)} (same answers)")
    shaped = [r for r in rows if r["approach"] is not None]
    if shaped:
        print(f"approach {sum(r['approach'] for r in shaped) / max(sum(r['filled'] for r in shaped), 1):.1%} of "
              f"accepted on {', '.join(r['task'] for r in shaped)}")
    warm_calls = sum(len(r["secs"]) - 1 for r in rows)
    print(f"per accepted candidate: {tokens / max(filled, 1):.0f} completion tokens, "
          f"{warm_secs / max(filled, 1):.1f} s of warm LLM time ({warm_calls} warm calls, "
          f"median {statistics.median([s for r in rows for s in r['secs'][1:]] or [0.0]):.1f} s each)")
    shapes = [k for r in rows for k in r["shapes"]]
    if shapes:
        print("shapes   " + ", ".join(f"{k} {shapes.count(k) / len(shapes):.0%}" for k in KINDS)
              + f" of {len(shapes)} accepted")
    counted = [r["copies"] for r in rows if r["copies"] != NONE_SHOWN]
    if counted:
        print(f"copies   {sum(counted)} of {filled} accepted hold 2+ terms of the example shown for a different task")
    else:
        print(f"copies   {NONE_SHOWN}: the prompt shows no example answer (--task-examples {args.task_examples}), "
              "so none can be copied")
    proxies = [p for r in rows for p in r["proxies"]]
    if proxies:
        print(f"proxy of accepted: median {statistics.median(proxies):.2f}, min {min(proxies):.2f}")
    failures: dict[str, int] = {}
    for r in rows:
        for reason in r["reasons"]:
            failures[reason[:90]] = failures.get(reason[:90], 0) + 1
    steps = [s for r in rows for s in r["steps"]]
    print(f"format steps {len(steps)}" + "".join(f"\n  {s}" for s in steps))
    for reason, count in sorted(failures.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  rejected x{count}: {reason}")


if __name__ == "__main__":
    main()
