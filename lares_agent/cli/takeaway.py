"""What a finished (or stopped) run leaves the user, as the last screen's lines: the selected
reward's expression, the selected policy's success, where the policy file and the report are, and the commands
to evaluate and export."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from lares_agent.runs import FINAL_POLICY, RunLayout, RunLog
from lares_agent.runs.handover import HandoverRecord
from lares_agent.runs.reader import HUMAN_REWARD_ID as HUMAN_ID
from lares_agent.search.found_reward import given_components


def reward_expression(run: RunLayout, reward_id: str) -> str:
    """`name: expr; name: expr` of the reward `reward_id` from candidates.jsonl (its newest line with
    components), or a sentence when the run did not record it."""
    if reward_id == HUMAN_ID:
        return "the task's own reward (human-written)"
    rows = [r for r in RunLog(run).candidates.read() if r.id == reward_id and r.components]
    given = given_components(_config(run), reward_id)  # a baseline on a found reward: config.json holds it
    if not rows and given is None:
        return "(expression not recorded in candidates.jsonl)"
    components = (rows[-1].components if rows else given) or {}
    return "; ".join(f"{name} = {expr}" for name, expr in components.items())


def _config(run: RunLayout) -> dict[str, Any]:
    """The run's config.json as a dict (empty when it cannot be read: the last screen says less, never fails)."""
    try:
        data = json.loads(run.config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _kept_human_line(run: RunLayout, selected_is_human: bool) -> list[str]:
    """The init setting keeps a learner on the task's own reward: its success beside the selected policy's."""
    rows = RunLog(run).metrics.read()
    extra = rows[-1].extra if rows else None
    if not extra or extra.get("success") is None:
        return []
    best_llm = max((s.success for s in rows[-1].slots if s.success is not None), default=None)
    llm = "--" if best_llm is None else f"{best_llm:.0%}"
    role = "selected" if selected_is_human else "kept"
    return [f"human-reward learner ({role}): success {extra['success']:.0%}; best searched-reward learner: {llm} "
            "(last evaluation)"]


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
    success = ("--" if ranked_success is None else f"{ranked_success:.0%}") + " at the last evaluation"
    handover = HandoverRecord.from_policy(policy.data)  # chosen on fresh episodes (engine/loop/handover.py)
    winner = handover.winner if handover is not None else None
    if handover is not None and winner is not None and math.isfinite(winner.success):
        success = f"{winner.success:.0%} on {handover.episodes} fresh episodes"
    config = _config(run)
    given = config.get("reward_source") if config.get("setting") == "baseline" else None  # --reward-from/-file
    origin = ("the task's own reward" if policy.trained_on_human_reward
              else "the reward given to it" if given else "a searched reward")
    lines = [
        f"selected reward {policy.reward_id} (slot {policy.data['slot']}): {reward_expression(run, policy.reward_id)}",
        *([f"reward given: {given}"] if given else []),
        f"selected policy: {policy.learner}, trained on {origin}, success {success}, {path}",
        *_kept_human_line(run, policy.trained_on_human_reward),
        f"report: {report}" if report is not None else f"report: not written (lares report {root})",
    ]
    export = "" if policy.reward_id == HUMAN_ID else f"    export the reward: lares export {root}"
    lines.append(f"  evaluate: lares eval {root}{export}")  # the task's own reward is not exported
    return lines
