"""Contradictions between an analysis and the computed facts: facts mode against the local LLM.

On three crafted reach-v3 rounds (rollouts, an elite reward and a feature sample), prints per scenario the
statements that contradict the computed facts (`tools/fact_check.py`):

- facts:      `--analysis facts`, the rendered facts themselves (0 by construction; checked here)
- llm raw:    the old prompt (analyse.v1: the encoded rollouts, no facts), the model's answer checked
- llm facts:  `--analysis llm` (analyse.v2: the model summarises the facts); what the node drops before the
              critique sees it

One LLM call per scenario and mode (6 calls, 5-12 s each on 2 cores). Run by hand:

    python experiments/analysis/run.py                     # the default 1.5B model
    python experiments/analysis/run.py --model qwen2.5-coder-0.5b

experiments/proposals/README.md, "The analysis", reports what it found.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from lares_agent.engine.tasks import get_task
from lares_agent.graphs.asking import ask
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.reflect import analyse
from lares_agent.llm import LLMConfig, make_client
from lares_agent.prompts.loader import render
from lares_agent.rewards.sampling import synthetic_sample
from lares_agent.tools.diagnosis import diagnose
from lares_agent.tools.fact_check import check_text
from lares_agent.tools.facts import render_facts
from lares_agent.tools.trajectory import FeatureInfo, Rollout, encode_rollouts

T = np.arange(60.0)


def _rollout(d: np.ndarray, rid: str, **feats: np.ndarray) -> Rollout:
    base = {"tcp_to_target": d, "tcp_speed": np.abs(np.gradient(d)) * 10, "action_norm": 0.5 + 0 * d,
            "success": 0 * d, "grasped": 0 * d}
    return Rollout({**base, **feats}, policy_id="slot-0", reward_id=rid)


def scenarios() -> dict[str, tuple[list[Rollout], list[dict[str, Any]]]]:
    """Three rounds: a stall after 34% closed (flat exp term), a regress with some success, an oscillation."""
    stall = np.concatenate([0.3 - 0.0051 * T[:20], np.full(40, 0.3 - 0.0051 * 19)])  # 0.3 -> 0.197: 34% closed
    back = np.concatenate([0.3 - 0.012 * T[:25], 0.012 + 0.002 * T[:35]])
    wobble = 0.25 - 0.001 * T + 0.02 * (-1.0) ** T
    hits = (back < 0.05).astype(float)
    return {
        "stall+flat exp": ([_rollout(stall, "e1")],
                           [{"id": "e1", "components": {"near": "exp(-100*tcp_to_target)", "effort": "-action_norm"},
                             "stats": {"near": {"mean": 1e-9, "std": 1e-9, "share": 0.0},
                                       "effort": {"mean": -0.5, "std": 0.1, "share": 1.0}}}]),
        "regress, some success": ([_rollout(back, "e2", success=hits), _rollout(back[::-1] * 0 + 0.2, "e2")],
                                  [{"id": "e2", "components": {"progress": "-tcp_to_target", "bonus": "5*success"},
                                    "stats": {"progress": {"mean": -0.1, "std": 0.05, "share": 0.7},
                                              "bonus": {"mean": 0.3, "std": 1.0, "share": 0.3}}}]),
        "oscillation": ([_rollout(wobble, "e3")],
                        [{"id": "e3", "components": {"progress": "-2*tcp_to_target", "effort": "-0.01*action_norm"},
                          "stats": {"progress": {"mean": -0.4, "std": 0.05, "share": 0.98},
                                    "effort": {"mean": -0.005, "std": 0.001, "share": 0.02}}}]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="local model name or GGUF path (default: the 1.5B model)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    task = get_task("reach-v3")
    rng = np.random.default_rng(args.seed)
    sample = dict(synthetic_sample(task.features, 512, rng))
    sample["tcp_to_target"] = rng.uniform(0.1, 0.3, 512)
    infos = [FeatureInfo(f.name, f.unit, f.meaning) for f in task.features]
    with tempfile.TemporaryDirectory() as tmp:
        llm = make_client(LLMConfig(backend="local", model=args.model, temperature=0.4, seed=args.seed,
                                    timeout_s=600.0), run_dir=Path(tmp))
        base = RunContext(llm=llm, task=task, sample=sample, limits=GraphLimits(analysis="llm"))
        totals = {"facts": 0, "llm raw": 0, "llm facts": 0}
        print(f"{'scenario':24s} {'facts':>6s} {'llm raw':>8s} {'llm facts':>10s}")
        for name, (rollouts, elites) in scenarios().items():
            facts = diagnose(rollouts, elites, sample, task)
            in_facts = check_text(render_facts(facts), facts).count
            ids = [f"p{i}" for i in range(len(rollouts))]
            ctx = replace(base, rollouts=dict(zip(ids, rollouts, strict=True)))
            state: Any = {"round": 1, "n_wanted": 1, "rollout_ids": ids, "elites": elites}
            encoded = encode_rollouts(rollouts, task.progress_feature, infos, 512)
            raw_text = ask(ctx, "analyse", state, render("analyse", version=1, round=1, trajectories=encoded), 0,
                           temperature=0.4, max_tokens=200)
            raw = check_text(raw_text, facts)
            update = analyse(state, Runtime(context=ctx))
            dropped = int((update.get("fact_check") or {}).get("dropped", 0))
            totals["facts"] += in_facts
            totals["llm raw"] += raw.count
            totals["llm facts"] += dropped
            print(f"{name:24s} {in_facts:6d} {raw.count:8d} {dropped:10d}")
            for d in raw.dropped:
                print(f"    raw dropped: {d.statement!r} ({d.reason})")
            for d in (update.get("fact_check") or {}).get("statements", []):
                print(f"    facts dropped: {d['statement']!r} ({d['reason']})")
        print(f"{'total':24s} {totals['facts']:6d} {totals['llm raw']:8d} {totals['llm facts']:10d}")
        print(f"LLM calls: {llm.usage['calls']}, seconds: {llm.usage['seconds']:.1f}")


if __name__ == "__main__":
    main()
