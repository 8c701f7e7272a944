"""When a reward update runs, and when a background proposal is installed (``LaResEngine.step``,
``loop/engine.py``): functions of the engine's config, its counters and the update in flight, so the cadence
reads apart from the loop that follows it.

Every ``reward_period`` counted env steps an update is due, counted from the step the last one started at (round
0's, written beside the learners, from its install), until ``max_rounds``. A proposal running in the background is
installed when it has returned, or waited for once it is overdue (the next update is due), so rounds keep their
cadence and never overlap (``loop/proposals.py``).
"""

from __future__ import annotations

from lares_agent.engine.loop.proposals import PendingUpdate
from lares_agent.engine.loop.records import Counters
from lares_agent.engine.setup.config import EngineConfig

__all__ = ["install_now", "update_due", "update_follows"]


def update_due(config: EngineConfig, env_steps: int, round_: int, last_update_steps: int) -> bool:
    """Whether a reward update is due at ``env_steps`` after ``round_`` rounds, the last started at
    ``last_update_steps``."""
    if config.setting == "baseline" or config.reward_period <= 0:
        return False
    if config.max_rounds is not None and round_ >= config.max_rounds:
        return False
    return env_steps - last_update_steps >= config.reward_period


def _overdue(config: EngineConfig, env_steps: int, pending: PendingUpdate) -> bool:
    return env_steps - pending.ctx.env_steps >= config.reward_period


def update_follows(config: EngineConfig, counters: Counters, pending: PendingUpdate | None) -> bool:
    """Whether the next step starts with a reward update's evaluation at this env step: the budget is not spent
    and one is due, after the install of ``pending`` (the proposal in flight) when that is overdue (waited for,
    whatever the LLM's speed; the install may reset replaced learners first). One in flight and not overdue: no
    update."""
    c = counters
    done = c.env_steps >= config.total_steps
    if pending is None:
        return not done and update_due(config, c.env_steps, c.round, c.last_update_steps)
    if not _overdue(config, c.env_steps, pending):
        return False
    # as the counters will be after its install (round 0's period counts from its install, at this step)
    after = (pending.ctx.round, pending.ctx.env_steps) if pending.ctx.round > 0 else (c.round, c.env_steps)
    return not done and update_due(config, c.env_steps, *after)


def install_now(config: EngineConfig, env_steps: int, pending: PendingUpdate, ready: bool, held: int | None) -> bool:
    """Whether to install ``pending`` at ``env_steps``: it returned (``ready``) or is overdue. ``held``: the env
    step an earlier session installed this round's proposal at; a round replayed on resume is installed there,
    not earlier."""
    if held is not None:
        return env_steps >= held
    return ready or _overdue(config, env_steps, pending)
