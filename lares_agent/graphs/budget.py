"""Fit a node's prompt into the model's context (`LLMClient.window`): the system message once per run, the user
message section by section.

A server started with its defaults holds 2,048 tokens, and the propose prompt of a later round (elites, critique,
past cases, rejections) took more: llama.cpp then cut every answer after a few tokens. What a proposal cannot do
without is kept whole: the task, its features, the rules of the reward language and the step's instruction.
What can go, goes in the order the node names, least useful first (past cases, the rejection history, the
statistics, then the critique and the elites): a section loses its last lines (they are ranked, best first),
then characters, then all of it but a note. The system message, byte-identical for every call of a run (the
prefix cache), is shortened as a whole (`prompting.system_text`'s `detail`) only when it would leave the user
message less than a quarter of the context. With no known context (a replay, a stand-in model) nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lares_agent.graphs.context import RunContext
from lares_agent.graphs.prompting import MAX_DETAIL, clip, messages, persona_text, system_text
from lares_agent.llm.window import ContextWindow
from lares_agent.prompts.loader import Persona, load_template

__all__ = ["LEFT_OUT", "fit_prompt", "fitted_system", "user_body"]

LEFT_OUT = "(left out: the model's context is too small for it)"
_USER_SHARE = 4  # the system message leaves at least 1/4 of the context to the user message (and the answer more)
_MIN_CLIP = 80  # a one-line section shorter than this is left out rather than cut again


def user_body(user: str, persona: Persona) -> str:
    """The user message as sent: the node's text, then the persona (`asking.ask`)."""
    return f"{user.rstrip()}\n\n{persona_text(persona)}"


def _window(ctx: RunContext) -> ContextWindow | None:
    window = getattr(ctx.llm, "window", None)  # a stand-in client without one has no known context
    return window if isinstance(window, ContextWindow) and window.size is not None else None


def fitted_system(ctx: RunContext) -> str:
    """The run's system message, at the most detail that leaves the answer of a proposal and a quarter of the
    context to the user message (all of it where the context is unknown or large enough)."""
    window = _window(ctx)
    text = ""
    for detail in range(MAX_DETAIL + 1):
        text = system_text(ctx.task, ctx.offered_features(), ctx.limits.checks.limits.max_components,
                           ctx.limits.task_examples, ctx.human_reward, detail, ctx.limits.shaping)
        if window is None:
            return text
        size = window.size or 0
        need = window.count_messages(messages(text, "")) + ctx.limits.propose_max_tokens + size // _USER_SHARE
        if need <= size:
            return text
    return text


def _shorter(text: str) -> str:
    """`text` one step shorter: without its last line, or cut to half its characters, or left out."""
    lines = text.rstrip().splitlines()
    if len(lines) > 1:
        return "\n".join(lines[:-1])
    if len(text) > _MIN_CLIP:
        return clip(text, len(text) // 2)
    return LEFT_OUT


def fit_prompt(ctx: RunContext, template: str, values: Mapping[str, object], trim: Sequence[str], *,
               max_tokens: int, persona: Persona | None = None) -> str:
    """`template` rendered with `values`, with the sections named in `trim` shortened, in that order, until the system
    message, this user message (with `persona`, default the run's) and an answer of `max_tokens` fit the context.

    What still does not fit once every named section is left out is the client's to judge: it shortens the answer
    to what is left, or refuses the call with the cause and the fix (`ContextWindow.answer_room`)."""
    window = _window(ctx)
    shaped = load_template(template)
    texts = {k: str(v) for k, v in values.items()}
    user = shaped.render(texts)
    if window is None:
        return user
    size = window.size or 0
    system = fitted_system(ctx)
    who = persona if persona is not None else ctx.persona

    def fits(text: str) -> bool:
        return window.count_messages(messages(system, user_body(text, who))) + max_tokens <= size

    for name in trim:
        while not fits(user):
            shorter = _shorter(texts[name])
            if len(shorter) >= len(texts[name]):  # "none" is shorter than the note that it was left out
                break
            texts[name] = shorter
            user = shaped.render(texts)
    return user
