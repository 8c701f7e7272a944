"""Benchmark: reward proposals of the local model through the graph's propose node.

Asks for N proposals spread over 3 MetaWorld tasks (initial-round prompts, one candidate per call, as the
graph does) and prints per task and overall:

- valid:    parses, compiles, within the complexity cap and numerically sound on a sample of states
- sane:     valid, and the reward never rises when the task's progress feature grows (it is lower-is-better)
            while it does fall somewhere (the feature is used the right way)
- distinct: distinct canonical rewards among the valid ones
- approach: valid ones that shape the approach (use the task's `approach_feature`, e.g. tcp_to_obj), among the
            tasks that have one
- seconds per proposal: the first call (cold: model load and the whole system prompt) and the rest (warm:
  llama.cpp reuses the cached system-prompt prefix)

Targets (issue 4): >= 95% valid, >= 80% sane, <= 2 s warm. Run by hand:

    python benchmarks/proposals.py                       # default 1.5B model, 50 proposals
    python benchmarks/proposals.py --model qwen2.5-coder-0.5b --n 12
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from langgraph.runtime import Runtime

from lares_agent.engine.tasks import get_task
from lares_agent.graphs import nodes
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.llm.client import LLMConfig, make_client
from lares_agent.prompts.loader import load_persona
from lares_agent.rewards import progress_monotonicity, validate
from lares_agent.rewards.sampling import synthetic_sample

TASKS = ("reach-v3", "push-v3", "pick-place-v3")


def bench_task(task_name: str, n: int, args: argparse.Namespace, run_dir: Path) -> dict:
    task = get_task(task_name)
    sample = synthetic_sample(task.features, 1024, np.random.default_rng(args.seed))
    llm = make_client(LLMConfig(backend="local", model=args.model, temperature=args.temperature,
                                seed=args.seed, timeout_s=600.0), run_dir=run_dir)
    limits = GraphLimits(per_call=args.per_call, temperature=args.temperature)
    runtime = Runtime(context=RunContext(llm=llm, task=task, sample=sample, persona=load_persona(args.persona),
                                         limits=limits))
    # the sign and the approach term are counted below, not required
    no_sign = replace(limits.checks, require_progress_sign=False, require_approach_use=False)
    valid = sane = approach = 0
    uses_approach = re.compile(rf"\b{task.approach_feature}\b") if task.approach_feature else None
    keys: set[str] = set()
    reasons: list[str] = []
    made = rnd = 0
    while made < n:
        want = min(args.per_round, n - made)
        state = {"round": rnd, "n_wanted": want, "elites": [], "accepted": [], "rejected": [], "attempts": 0}
        for rec in nodes.propose(state, runtime)["pending"]:
            made += 1
            if rec.get("error"):
                reasons.append(rec["error"])
                continue
            res = validate(rec["candidate"], task, sample, id=rec["id"], config=no_sign)
            if not res.accepted or res.reward is None:
                reasons.append(res.reason)
                continue
            valid += 1
            keys.add(res.key or "")
            approach += bool(uses_approach and any(uses_approach.search(x) for x in (res.canonical or {}).values()))
            rises, falls = progress_monotonicity(res.reward, sample, task.progress_feature)
            if rises <= 0.01 and falls > 0.0:
                sane += 1
            elif args.verbose:
                print(f"  not sane ({task.progress_feature}: rises {rises:.0%}): {rec['components']}")
        rnd += 1
    calls = [json.loads(x) for x in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    secs = [c["seconds"] for c in calls if c["ok"]]
    return {"task": task_name, "n": made, "valid": valid, "sane": sane, "distinct": len(keys), "secs": secs,
            "approach": approach if uses_approach else None,
            "completion_tokens": [c["completion_tokens"] for c in calls if c["ok"]], "reasons": reasons}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--n", type=int, default=50, help="proposals in total, split over the tasks")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--per-call", type=int, default=1)
    parser.add_argument("--per-round", type=int, default=2, help="candidates asked for per propose pass")
    parser.add_argument("--temperature", type=float, default=0.4)
    parser.add_argument("--persona", default="neutral")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="keep the llm_calls.jsonl records in this folder")
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    share = [args.n // len(tasks) + (1 if i < args.n % len(tasks) else 0) for i in range(len(tasks))]
    rows = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, n in zip(tasks, share, strict=True):
            rows.append(bench_task(name, n, args, (args.keep or Path(tmp)) / name))
            r = rows[-1]
            print(f"{name:16s} n={r['n']:3d} valid {r['valid'] / r['n']:.0%} sane {r['sane'] / r['n']:.0%} "
                  f"distinct {r['distinct']}/{r['valid']} approach {r['approach']} first call {r['secs'][0]:.1f} s, "
                  f"then median {statistics.median(r['secs'][1:] or [float('nan')]):.2f} s")
    n = sum(r["n"] for r in rows)
    valid = sum(r["valid"] for r in rows)
    warm = [s for r in rows for s in r["secs"][1:]]
    tokens = [t for r in rows for t in r["completion_tokens"]]
    print(f"\nmodel {args.model}, {n} proposals, per_call {args.per_call}, T={args.temperature}, "
          f"wall {time.perf_counter() - start:.0f} s")
    print(f"valid    {valid / n:.1%}   (target >= 95%)")
    print(f"sane     {sum(r['sane'] for r in rows) / n:.1%}   (target >= 80%)")
    print(f"distinct {sum(r['distinct'] for r in rows) / max(valid, 1):.1%} of valid")
    shaped = [r for r in rows if r["approach"] is not None]
    if shaped:
        print(f"approach {sum(r['approach'] for r in shaped) / max(sum(r['valid'] for r in shaped), 1):.1%} of valid "
              f"on {', '.join(r['task'] for r in shaped)}")
    print(f"seconds per proposal: cold (first call) {rows[0]['secs'][0] / args.per_call:.2f}, "
          f"first call of later tasks {statistics.mean([r['secs'][0] for r in rows[1:]] or [float('nan')]):.2f}, "
          f"warm median {statistics.median(warm) / args.per_call:.2f} (target <= 2 s), "
          f"warm mean {statistics.mean(warm) / args.per_call:.2f}; "
          f"completion tokens median {statistics.median(tokens)}")
    failures: dict[str, int] = {}
    for r in rows:
        for reason in r["reasons"]:
            failures[reason[:90]] = failures.get(reason[:90], 0) + 1
    for reason, count in sorted(failures.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  rejected x{count}: {reason}")


if __name__ == "__main__":
    main()
