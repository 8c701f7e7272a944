"""One LLM call of a node: the run's fixed system message, the user text, then the persona.

The system message is byte-identical for every node, call and persona of a run (llama.cpp reuses its KV prefix):
the persona, which differs between the critics of an ensemble (`--personas`), ends the user message instead.
Every call is tagged with its node and carries the round, attempt and persona in `meta`, so `llm_calls.jsonl`
links each call to its step in `trace.sqlite`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lares_agent.graphs.budget import fitted_system, user_body
from lares_agent.graphs.context import RunContext
from lares_agent.graphs.prompting import AnswerError, messages
from lares_agent.graphs.state import EliteInfo, RoundState
from lares_agent.prompts.loader import Persona

__all__ = ["ask", "sorted_elites", "system_message"]


def system_message(ctx: RunContext) -> str:
    """The run's fixed system message (no persona in it: see the module docstring), shortened as a whole only
    where the model's context is small (`budget.fitted_system`)."""
    return fitted_system(ctx)


def ask(
    ctx: RunContext,
    node: str,
    state: RoundState,
    user: str,
    attempt: int,
    persona: Persona | None = None,
    annotate: Callable[[str], Mapping[str, Any]] | None = None,
    **kw: Any,
) -> str:
    """One LLM call as `persona` (default: the run's); returns the stripped text or raises LLMError / AnswerError
    (empty answer). `annotate` adds the caller's verdict on the answer to the recorded meta."""
    who = persona if persona is not None else ctx.persona
    meta = {"node": node, "round": state.get("round", 0), "attempt": attempt, "persona": who.name}
    body = user_body(user, who)
    answer = ctx.llm.complete(messages(system_message(ctx), body), tag=node, meta=meta, annotate=annotate, **kw)
    text = answer.text.strip()
    if not text:
        raise AnswerError("empty answer")
    return text


def sorted_elites(state: RoundState) -> list[EliteInfo]:
    """Best first; elites without a fitness last (stable, so equal fitness keeps the caller's order)."""
    elites = list(state.get("elites") or [])
    return sorted(elites, key=lambda e: (e.get("fitness") is None, -float(e.get("fitness") or 0.0)))
