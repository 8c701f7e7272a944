"""What a finished (or stopped) run leaves the user, as the last screen's lines: the selected
reward's expression, the selected policy's success, where the policy file and the report are, and the commands
to evaluate and export."""

from __future__ import annotations

from pathlib import Path

from lares_agent.runs import FINAL_POLICY, RunLayout, RunLog

HUMAN_ID = "human"  # engine.contracts.HumanReward's id: the task's own reward


def reward_expression(run: RunLayout, reward_id: str) -> str:
    """`name: expr; name: expr` of the reward `reward_id` from candidates.jsonl (its newest line with
    components), or a sentence when the run did not record it."""
    if reward_id == HUMAN_ID:
        return "the task's own reward (human-written)"
    rows = [r for r in RunLog(run).candidates.read() if r.id == reward_id and r.components]
    if not rows:
        return "(expression not recorded in candidates.jsonl)"
    components = rows[-1].components or {}
    return "; ".join(f"{name} = {expr}" for name, expr in components.items())


def takeaway_lines(root: Path, ranked_success: float | None, report: Path | None) -> list[str]:
    """The 'what you got' block; empty when the run wrote no policy (it never got that far)."""
    run = RunLayout(root)
    path = run.policy(FINAL_POLICY)
    if not path.is_file():
        return []
    from lares_agent.engine import EngineError, PolicyArtefact

    try:
        policy = PolicyArtefact.load(path)
    except EngineError as exc:
        return [f"policy: {path} cannot be read ({exc})"]
    success = "--" if ranked_success is None else f"{ranked_success:.0%}"
    lines = [
        f"selected reward {policy.reward_id} (slot {policy.data['slot']}): {reward_expression(run, policy.reward_id)}",
        f"selected policy: {policy.learner}, success {success} at the last evaluation, {path}",
        f"report: {report}" if report is not None else f"report: not written (lares report {root})",
    ]
    export = "" if policy.reward_id == HUMAN_ID else f"    export the reward: lares export {root}"
    lines.append(f"  evaluate: lares eval {root}{export}")  # the task's own reward is not exported
    return lines
