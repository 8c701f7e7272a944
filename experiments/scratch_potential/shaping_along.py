"""What a run's potentials pay along whole episodes of given policies: does the shaping favour the policy that succeeds?

Under exact bootstrapping the shaped critic is the base critic less Phi(s) (Ng, Harada and Russell 1999; Wiewiora
2003: shaping is initialising Q with Phi), which does not depend on the action, so a potential can guide a learner
only while its critic is still wrong. Along one truncated episode the shaping sums to
gamma^T*Phi(s_T) - Phi(s_0) - (1 - gamma)*sum Phi(s_t): with Phi shifted to at most 0 on the stored states
(engine/replay/potential.py) the last term pays for time spent where Phi is low. This prints, for each policy file,
its success and each of the run's potentials (those of its latest checkpoint): the shaping summed over the episode
and discounted as the learner's return is (gamma^t), Phi at its first and last step, and the base reward
discounted.

    python experiments/scratch_potential/shaping_along.py RUN POLICY.pt [POLICY.pt ...] [--episodes 3] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lares_agent.engine import PolicyArtefact, get_task, latest_checkpoint
from lares_agent.engine.rollouts.episodes import EVAL_STREAM, EnvPool, episode_seed
from lares_agent.engine.rollouts.evaluation import evaluate_members
from lares_agent.runs import RunLayout
from lares_agent.search.potentials import load_potential
from lares_agent.search.runner import read_config


def latest_rewards(run: Path) -> tuple[str, list[dict[str, object]]]:
    """The task and the potentials of the run's latest checkpoint (its `state.json`)."""
    layout = RunLayout(run)
    ckpt = latest_checkpoint(layout.checkpoints)
    if ckpt is None:
        raise SystemExit(f"{run} has no completed checkpoint")
    state = json.loads((ckpt / "state.json").read_text(encoding="utf-8"))
    return read_config(layout).task, [r for r in state["rewards"] if r.get("kind") == "potential"]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("policies", type=Path, nargs="+")
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    task_name, rewards = latest_rewards(args.run)
    task = get_task(task_name)
    seeds = [episode_seed(args.seed, EVAL_STREAM, e) for e in range(args.episodes)]
    for path in args.policies:
        policy = PolicyArtefact.load(path)

        def act(obs: np.ndarray, _members: np.ndarray, policy: PolicyArtefact = policy) -> np.ndarray:
            return np.asarray(policy.act(obs))

        pool = EnvPool(task.make_env, args.seed)
        try:
            (ev,) = evaluate_members(pool, act, task.raw_state, task.features, [0],
                                     [None], args.episodes, int(task.horizon), seeds, task.progress_feature,
                                     max_envs=1, keep_rollouts=args.episodes)
        finally:
            pool.close()
        print(f"{path}: success {ev.success_rate:.0%}, final progress {ev.final_progress:.3f}")
        for data in rewards:
            shaped = [(r, load_potential(data, list(r))) for r in
                      ({k: np.asarray(v) for k, v in ro.items()} for ro in ev.rollouts)]
            parts = [p.components(r) for r, p in shaped]
            gamma = shaped[0][1].gamma
            sums = [float(c["shaping"].sum()) for c in parts]
            disc = [float(np.sum(c["shaping"] * gamma ** np.arange(c["shaping"].size))) for c in parts]
            base = [float(np.sum(c["base"] * gamma ** np.arange(c["base"].size))) for c in parts]
            phi = [p.phi(r) for r, p in shaped]
            print(f"  {data['id']}: shaping summed {np.mean(sums):+.2f}, discounted {np.mean(disc):+.2f}; Phi first "
                  f"{np.mean([f[0] for f in phi]):+.2f}, last {np.mean([f[-1] for f in phi]):+.2f}; base discounted "
                  f"{np.mean(base):.1f}")


if __name__ == "__main__":
    main()
