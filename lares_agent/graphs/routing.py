"""Routers: pure functions of the state that name the next node (the edges are in their return types)."""

from __future__ import annotations

from typing import Literal

from lares_agent.graphs.state import RoundState

__all__ = ["route_after_validate", "route_start"]

# LangGraph's END is "__end__"; returned as the literal so the edges stay in the return types.


def route_start(state: RoundState, reflect: bool = True) -> Literal["analyse", "critique", "propose", "__end__"]:
    """Rollouts to read -> analyse; elites but no rollouts -> critique; the initial round -> propose (in the init
    setting its elite is the task's own reward, refined at once as the reference does: no policy has acted yet, so
    there is nothing to critique it with).

    A user's note (`feedback`) is a defect the critique states, so a round that takes one goes through critique
    even where it would not (round 0). `reflect=False` (ablation, `GraphLimits.reflect`) always goes straight to
    propose (which then shows the notes itself).
    """
    if int(state.get("n_wanted", 0)) <= 0:
        return "__end__"
    noted = bool(state.get("feedback"))
    if not reflect:
        return "propose"
    if state.get("round") == 0:
        return "critique" if noted else "propose"
    if state.get("rollout_ids"):
        return "analyse"
    if state.get("elites") or noted:
        return "critique"
    return "propose"


def route_after_validate(state: RoundState, max_attempts: int) -> Literal["propose", "__end__"]:
    """Back to propose (with the rejection reasons in state) while candidates are missing and budget is left."""
    if len(state.get("accepted") or []) >= int(state.get("n_wanted", 0)):
        return "__end__"
    if int(state.get("attempts", 0)) >= max_attempts:
        return "__end__"
    return "propose"
