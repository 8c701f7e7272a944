"""The reflection nodes, analyse and critique: computed facts and defects, optionally worded by the LLM.

`analyse` computes the round's facts (`tools/diagnosis.py`) from the rollouts, the elites and the feature sample.
With `GraphLimits.analysis == "facts"` (the default) the analysis is the rendered facts and no LLM is called; with
"llm" the model summarises the facts and every sentence that contradicts one is dropped (`tools/fact_check.py`),
the count going to the state and to the call's `meta` in llm_calls.jsonl. `critique` turns the facts into
defects with concrete edits (`tools/critique_rules.py`); in "llm" mode each critic persona (`--personas`) may add
defects in one call, and the defects are merged by vote. The user's notes the round takes (`lares feedback`) are
defects of their own, listed first and kept whatever the vote. Neither node raises on model trouble: the computed
facts and defects stand in.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from lares_agent.graphs.asking import ask, sorted_elites
from lares_agent.graphs.budget import fit_prompt
from lares_agent.graphs.context import RunContext
from lares_agent.graphs.prompting import AnswerError, clip, render_elites, render_reasons, render_stats
from lares_agent.graphs.state import RoundState, step
from lares_agent.llm.errors import LLMError
from lares_agent.tools.critique_rules import (
    Defect,
    defects_from_facts,
    defects_from_text,
    feedback_defects,
    render_defects,
    vote,
)
from lares_agent.tools.diagnosis import diagnose
from lares_agent.tools.fact_check import CheckResult, check_text
from lares_agent.tools.facts import Fact, facts_from_json, render_facts

__all__ = ["analyse", "critique"]

# What a small context trims from the critique prompt first (`budget.fit_prompt`): the component statistics and the
# rejection history, then the computed defects, the analysis and, last, the elites.
CRITIQUE_TRIM = ("component_stats", "rejections", "defects", "analysis", "elites")


def _checker(facts: list[Fact], into: list[CheckResult]) -> Any:
    """An `annotate` for `LLMClient.complete`: checks the answer and records the drop count with the call."""

    def annotate(text: str) -> dict[str, Any]:
        result = check_text(text, facts)
        into.append(result)
        return {"fact_check": {"checked": len(result.kept) + result.count, "dropped": result.count}}

    return annotate


def analyse(state: RoundState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """State the computed facts of the round; in "llm" mode, the model's fact-checked summary of them."""
    ctx = runtime.context
    limits = ctx.limits
    ids = list(state.get("rollout_ids") or [])
    found = [ctx.rollouts[i] for i in ids if i in ctx.rollouts]
    facts = diagnose(found, sorted_elites(state), ctx.sample, ctx.task, limits.checks.limits)
    rendered = render_facts(facts, limits.section_chars)
    missing = [i for i in ids if i not in ctx.rollouts]
    if missing:
        rendered += f"\n(no data for rollouts {', '.join(missing[:5])})"
    update: dict[str, Any] = {"facts": [f.to_json() for f in facts]}
    if limits.analysis == "facts":
        return step("analyse", 0, f"{len(facts)} computed fact(s) from {len(found)} rollout(s), no LLM call",
                    analysis=rendered, **update)
    user = fit_prompt(ctx, "analyse", {"round": state.get("round", 0), "facts": rendered}, ("facts",),
                      max_tokens=limits.analyse_max_tokens)
    checks: list[CheckResult] = []
    try:
        text = ask(ctx, "analyse", state, user, 0, annotate=_checker(facts, checks),
                   temperature=limits.temperature, max_tokens=limits.analyse_max_tokens)
        checked = checks[-1] if checks else check_text(text, facts)
        analysis = checked.text or rendered  # everything refuted: the facts speak for themselves
        summary = (f"analysed {len(found)} rollout(s) from {len(facts)} fact(s); the fact check dropped "
                   f"{checked.count} statement(s)")
        update["fact_check"] = checked.to_json()
    except (LLMError, AnswerError) as exc:
        analysis = f"(no LLM analysis: {exc}) Computed facts:\n{rendered}"
        summary = f"analysis fell back to the computed facts: {exc}"
    return step("analyse", 0, summary, analysis=clip(analysis, limits.section_chars), **update)


def critique(state: RoundState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The elites' defects, each tied to a fact and with its edit; in "llm" mode, what each critic adds, by vote."""
    ctx = runtime.context
    limits = ctx.limits
    elites = sorted_elites(state)
    round_ = state.get("round", 0)
    critique_id = f"{ctx.id_prefix}r{round_}-critique"
    stored = state.get("facts")
    facts = (facts_from_json(stored) if stored is not None
             else diagnose([], elites, ctx.sample, ctx.task, limits.checks.limits))
    critics = [p.name for p in ctx.critic_personas]
    features = list(ctx.offered_features())
    computed = defects_from_facts(facts, elites, ctx.task.progress_feature, features, critics)
    from_user = feedback_defects(state.get("feedback") or [])
    update: dict[str, Any] = {"critics": critics}
    added: list[Defect] = []
    notes: list[str] = []
    if limits.analysis == "llm":
        components = sorted({c for e in elites for c in (e.get("components") or {})})
        dropped = 0
        for persona in ctx.critic_personas:
            values = dict(
                round=round_,
                elites=render_elites(elites, limits.section_chars),
                component_stats=render_stats(elites, limits.section_chars),
                analysis=state.get("analysis") or "no rollouts were analysed",
                defects=render_defects([*from_user, *computed], max_chars=limits.section_chars),
                rejections=render_reasons(state.get("rejections") or [], limits.section_chars),
            )
            user = fit_prompt(ctx, "critique", values, CRITIQUE_TRIM, persona=persona,
                              max_tokens=limits.critique_max_tokens)
            checks: list[CheckResult] = []
            try:
                text = ask(ctx, "critique", state, user, 0, persona=persona, annotate=_checker(facts, checks),
                           temperature=limits.temperature, max_tokens=limits.critique_max_tokens)
            except (LLMError, AnswerError) as exc:
                notes.append(f"{persona.name}: no critique ({exc})")
                continue
            checked = checks[-1] if checks else check_text(text, facts)
            dropped += checked.count
            added += defects_from_text(checked.text, persona.name, components, features)
        update["critique_check"] = {"dropped": dropped}
    defects = [*from_user, *vote([*computed, *added], critics)]
    text = render_defects(defects, critics, limits.section_chars)
    by_llm = sum(1 for d in defects if d.source == "llm")
    mode = "no LLM call" if limits.analysis == "facts" else f"{by_llm} added by {len(critics)} critic(s)"
    noted = (f" and {len(from_user)} user note(s) ({', '.join(d.subject for d in from_user)})"
             if from_user else "")
    summary = (f"critique {critique_id}: {len(defects)} defect(s) from {len(facts)} fact(s){noted}, {mode}"
               + (f"; {'; '.join(notes)}" if notes else ""))
    return step("critique", 0, summary, critique=clip(text, limits.section_chars), critique_id=critique_id,
                defects=[d.to_json() for d in defects], **update)
