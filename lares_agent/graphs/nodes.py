"""The propose and validate nodes (analyse and critique: graphs/reflect.py). Each returns a partial state update.

Nodes are plain functions of the state and LangGraph's `Runtime[RunContext]` (the run's read-only context).

Nodes never raise on model trouble: an LLM error, an empty or prose answer, broken JSON or a hostile
expression becomes a rejected candidate (or a fallback text) with a one-line reason, which the router
sends back to `propose`. Every LLM call is tagged with its node and carries the round and attempt in
`meta`, so `llm_calls.jsonl` links each call to its step in `trace.sqlite`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from langgraph.runtime import Runtime

from lares_agent.graphs.asking import ask, sorted_elites
from lares_agent.graphs.budget import fit_prompt
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.fillers import children, critique_edits, opening, opening_bounds, random_edits
from lares_agent.graphs.prompting import (
    AnswerError,
    answer_format,
    extract_candidates,
    proposal_schema,
    render_elites,
    render_reasons,
    render_taken,
)
from lares_agent.graphs.state import HUMAN_ELITE, CandidateRecord, EliteInfo, RoundState, step
from lares_agent.llm.errors import BudgetExceeded, LLMError
from lares_agent.rewards import answer_grammar, record_key
from lares_agent.rewards import validate as validate_candidate
from lares_agent.rewards.prescreen import proxy_score
from lares_agent.rewards.verifier import VerifierScore, verify
from lares_agent.tools.critique_rules import feedback_defects, render_defects
from lares_agent.tools.retrieval import render_cases, retrieve_cases

__all__ = ["propose", "validate"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# What a small context trims from the propose prompt first (`budget.fit_prompt`): past cases, the history of
# rejections and proposals, then the critique and, last, the elites; the task, features, rules and step stay.
PROPOSE_TRIM = ("cases", "rejections", "taken", "critique", "elites")


def _sorted_elites(state: RoundState) -> list[EliteInfo]:
    """Best first; elites without a fitness last (`asking.sorted_elites`)."""
    return sorted_elites(state)


def _grammar(ctx: RunContext, n: int, max_components: int) -> str | None:
    """The answer grammar for one candidate per call (`GraphLimits.grammar`); several per call keep the schema.
    From scratch the answer opens with correctly signed progress and approach terms (`rewards/grammar.py`); a
    refinement of the task's own reward keeps that reward's structure free."""
    if not ctx.limits.grammar or n != 1:
        return None
    features = ctx.offered_features()
    if ctx.human_reward is not None:
        return answer_grammar(features, max_components)
    progress = ctx.task.progress_feature if ctx.task.progress_feature in features else None
    room = progress and max_components >= 2  # the approach term comes second
    approach = ctx.task.approach_feature if room and ctx.task.approach_feature in features else None
    return answer_grammar(features, max_components, progress=progress, approach=approach,
                          scales=opening_bounds(ctx, opening(ctx).values()))


def _ask(ctx: RunContext, node: str, state: RoundState, user: str, attempt: int, **kw: Any) -> str:
    """One LLM call as the run's persona (`asking.ask`); raises LLMError / AnswerError (empty answer)."""
    return ask(ctx, node, state, user, attempt, **kw)


def _cases(ctx: RunContext) -> str:
    if ctx.cases is None:
        return "none (retrieval off)"
    try:
        found = retrieve_cases(ctx.cases, ctx.task, ctx.limits.retrieve_k, exclude_run=ctx.run_id or None)
    except Exception as exc:  # a broken case store must not stop a round
        return f"none (case store unavailable: {type(exc).__name__})"
    hidden = ctx.hidden_names()
    if hidden:  # from scratch: a past reward that reads the designer's features would hand them over
        found = [c for c in found if not hidden & set(_WORD.findall(" ".join(c.components.values())))]
    return render_cases(found, ctx.limits.section_chars)


def _notes_alone(state: RoundState, max_chars: int) -> str:
    """The critique where no critique node ran (the no-reflection ablation): the user's notes, else none."""
    notes = feedback_defects(state.get("feedback") or [])
    return render_defects(notes, max_chars=max_chars) if notes else "none"


def _instruction(parent: EliteInfo | None, explore: bool, examples: bool = True) -> str:
    """The propose step's task; ``examples``: the system message shows an example answer (not under "none", where
    a note not to repeat it would point at nothing)."""
    if parent is not None and parent.get("id") == HUMAN_ELITE:
        base = ("Refine the task's own reward (the elite human, written by its designer): adjust its parameters, "
                "add or change terms where the results show a weakness, and change at least one term or constant "
                "(an unchanged copy is a duplicate); keep its success conditions.")
    elif parent is None:
        base = ("Write a new reward for this task from scratch, with your own terms and weights"
                + (" (do not repeat the examples)." if examples else "."))
    else:
        base = (f"Improve the elite {parent.get('id', '?')}: keep what works, fix the defects the critique "
                f"names, and change at least one term.")
    if explore:
        base += (" The population has lost diversity: propose a substantially different reward (other terms "
                 "or another shaping), not a reweighting of an elite.")
    return base


def _temperature(limits: GraphLimits, explore: bool, made: int) -> float:
    """Base temperature for a round's first proposal, warmer for each later one up to `max_temperature`, so
    repeated prompts do not return the same candidate; the explore temperature when diversity is low."""
    if explore:
        return limits.explore_temperature
    return min(limits.temperature + limits.temperature_step * made,
               max(limits.max_temperature, limits.temperature))


def propose(state: RoundState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask for `oversample` candidates per missing slot, `per_call` per LLM call, rotating the parent elite, and
    add the elites' numeric children; validate dedupes them all by key and keeps the best by the proxy.

    Each proposal keeps the mapping its answer decoded to (`candidate`): validate parses exactly that, and the
    size limit is the reward language's (`Limits.max_candidate_chars`), not a cut of re-encoded text.
    """
    ctx = runtime.context
    limits = ctx.limits
    attempt = int(state.get("attempts", 0)) + 1
    accepted = list(state.get("accepted") or [])
    rejected = list(state.get("rejected") or [])
    missing = max(int(state.get("n_wanted", 0)) - len(accepted), 0)
    asked = math.ceil(missing * limits.oversample - 1e-9)  # LLM candidates this pass (the pool validate screens)
    calls = min(math.ceil(asked / limits.per_call), limits.max_calls_per_pass) if limits.llm_proposals else 0
    update: dict[str, Any] = {}
    cases = state.get("cases")
    if cases is None:
        cases = update["cases"] = _cases(ctx)
    elites = _sorted_elites(state)
    explore = bool(state.get("explore", False))
    reasons = list(state.get("rejections") or []) + [r.get("reason", "") for r in rejected]
    max_components = limits.checks.limits.max_components
    round_ = int(state.get("round", 0))
    pending: list[CandidateRecord] = []
    shows_examples = limits.task_examples != "none"
    for call in range(calls):
        n = max(1, min(limits.per_call, asked - len(pending)))
        # From scratch, every second call writes a new reward rather than an edit, so the population keeps more
        # than the elites' structures (ORSO regenerates half its candidates each round); init refines throughout.
        scratch = ctx.human_reward is None
        edit = call // 2 if scratch else call  # the edits still rotate over the elites, best first
        parent = elites[(attempt - 1 + edit) % len(elites)] if elites and not (scratch and call % 2) else None
        values = dict(
            round=round_,
            attempt=attempt,
            elites=render_elites(elites, limits.section_chars),
            critique=state.get("critique") or _notes_alone(state, limits.section_chars),
            cases=cases,
            rejections=render_reasons(reasons, limits.section_chars),
            taken=render_taken(accepted + pending, limits.section_chars),
            instruction=_instruction(parent, explore, shows_examples),
            answer_format=answer_format(n, shows_examples),
        )
        user = fit_prompt(ctx, "propose", values, PROPOSE_TRIM, max_tokens=limits.propose_max_tokens * n)
        base = CandidateRecord(round=round_, attempt=attempt, parent_id=parent.get("id") if parent else None,
                               critique_id=state.get("critique_id"))
        try:
            made = len(accepted) + len(rejected) + len(pending)
            text = _ask(ctx, "propose", state, user, attempt, json_schema=proposal_schema(n, max_components),
                        grammar=_grammar(ctx, n, max_components),
                        temperature=_temperature(limits, explore, made), max_tokens=limits.propose_max_tokens * n)
            items = extract_candidates(text)[:n]
        except (LLMError, AnswerError) as exc:
            cid = f"{ctx.id_prefix}r{round_}-a{attempt}-{len(pending)}"
            pending.append(CandidateRecord(**base, id=cid, components={}, rationale="", error=str(exc)))
            if isinstance(exc, BudgetExceeded):
                break
            continue
        for item in items:
            cid = f"{ctx.id_prefix}r{round_}-a{attempt}-{len(pending)}"
            comps = {str(k): str(v)[:300] for k, v in dict(item["components"]).items()}  # shown as written
            pending.append(CandidateRecord(
                **base, id=cid, components=comps, rationale=str(item.get("rationale", ""))[:300], candidate=item,
            ))
    bad = sum(1 for p in pending if p.get("error"))
    # With no elite yet (round 0 from scratch) a retry pass perturbs the LLM rewards this round accepted: a model
    # that keeps repeating one answer then fills the slots with its structure, not with the built-in fallback.
    parents = elites or [EliteInfo(id=str(r.get("id", "?")), components=dict(r.get("components") or {}))
                         for r in accepted if r.get("origin") != "child"]
    # the controls' edits take the LLM's place where they are on (ablation), first in the pool as its proposals are
    critique_id = state.get("critique_id")
    edits: list[CandidateRecord] = []
    if missing and limits.edits == "random":
        edits = random_edits(ctx, elites, round_, attempt, len(pending), critique_id, asked)
    elif missing and limits.edits == "critique":
        edits = critique_edits(ctx, elites, state.get("defects") or [], round_, attempt, len(pending), critique_id,
                               asked)
    # without the LLM nor edits (ablation) the children are the whole pool, as many as it would have asked for
    count = limits.numeric_children if limits.llm_proposals or edits else max(limits.numeric_children, asked)
    kids = children(ctx, parents, round_, attempt, len(pending) + len(edits), critique_id, count) if missing else []
    edited = f", {len(edits)} {limits.edits} edit(s)" if limits.edits != "none" else ""
    summary = (f"attempt {attempt}: {calls} call(s), {len(pending) - bad} proposal(s), {bad} unusable answer(s)"
               f"{edited}, {len(kids)} numeric child(ren)")
    return step("propose", attempt, summary, pending=pending + edits + kids, attempts=1, **update)


def _taken(state: RoundState, ctx: RunContext) -> set[str]:
    """`reward_key`s a new candidate must differ from: the elites', the task's own reward's in init (its learner is
    kept beside the slots, so a copy would train a second learner on it), every reward the run tried before (a
    discarded reward trained once already) and this round's accepted ones."""
    limits = ctx.limits.checks.limits
    own = [{"components": ctx.human_reward}] if ctx.human_reward else []
    keys = {record_key(e, ctx.task, limits) for e in [*(state.get("elites") or []), *own]}
    keys |= set(state.get("tried") or [])
    keys |= {r.get("key") for r in state.get("accepted") or []}
    return {k for k in keys if k}


_SCREEN_SCORES = {"proxy": "proxy", "verifier": "verifier_tau"}  # GraphLimits.screen -> the record field it ranks by


def _screen(ctx: RunContext, valid: list[CandidateRecord], room: int) -> tuple[list[CandidateRecord],
                                                                            list[CandidateRecord]]:
    """Keep the `room` valid candidates with the best score of `GraphLimits.screen` (stable: ties, and candidates
    without a score, keep proposal order); the others become rejected records that say the score they lost with.
    "order", or no score at all (round 0 has no verifier score): the first `room`, as the reference takes every
    answer it gets."""
    if len(valid) <= room:
        return valid, []
    field_ = _SCREEN_SCORES.get(ctx.limits.screen)
    scores = [rec.get(field_) for rec in valid] if field_ is not None else []
    if not any(isinstance(v, (int, float)) for v in scores):
        return valid[:room], [CandidateRecord(**{**rec, "accepted": False,
                                                 "reason": "surplus: the round already has enough candidates"})
                              for rec in valid[room:]]
    value = [float(v) if isinstance(v, (int, float)) else -math.inf for v in scores]
    order = sorted(range(len(valid)), key=lambda i: -value[i])
    bar = value[order[room - 1]] if room else math.inf  # the lowest kept, as the records hold it (4 decimals)
    out = []
    for i in order[room:]:
        reason = (f"screened out: {ctx.limits.screen} {value[i]:.4f} < {bar:.4f}" if value[i] < bar else
                  f"screened out: {ctx.limits.screen} {value[i]:.4f}, tied with the lowest kept (proposal order)")
        out.append(CandidateRecord(**{**valid[i], "accepted": False, "reason": reason}))
    return [valid[i] for i in order[:room]], out


def _verifier_fields(score: VerifierScore) -> CandidateRecord:
    """The verifier's numbers as record fields, rounded; an undefined one is left out (JSON has no NaN)."""
    out = CandidateRecord()
    if math.isfinite(score.order_tau):
        out["verifier_tau"] = round(score.order_tau, 4)
    if math.isfinite(score.progress_gain):
        out["verifier_progress"] = round(score.progress_gain, 4)
    if math.isfinite(score.flooding):
        out["verifier_flooding"] = round(score.flooding, 4)
    return out


def validate(state: RoundState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Check every pending proposal with the one validator (`rewards.validate`), dedupe by `reward_key` against
    the elites, earlier passes and each other, score the valid ones with the offline proxy on the round's sample
    (`rewards.prescreen`) and the verifier on the update's episodes (`rewards.verifier`), and keep as many as the
    round has free slots, in the order `GraphLimits.screen` names; the rest are rejected with their score.

    The screen is part of this node, not a node of its own: it is one more verdict on the same pass, and the
    trace links each record to the step that judged it. Accepted records stay in the state (canonical
    components, id, rationale, key, proxy); the functions the validator compiled go to the context's `compiled`,
    which the round hands to the search layer.
    """
    ctx = runtime.context
    attempt = int(state.get("attempts", 0))
    taken = _taken(state, ctx)
    room = max(int(state.get("n_wanted", 0)) - len(state.get("accepted") or []), 0)
    progress, approach = ctx.task.progress_feature, ctx.task.approach_feature
    valid: list[CandidateRecord] = []
    rejected: list[CandidateRecord] = []
    for rec in state.get("pending") or []:
        out = CandidateRecord(**rec)
        out.pop("candidate", None)  # the state keeps canonical expressions, not the LLM's decoded answer
        out.pop("error", None)
        if rec.get("error"):
            rejected.append(CandidateRecord(**out, accepted=False, reason=str(rec["error"])))
            continue
        data = rec.get("candidate") or {"components": rec.get("components", {}), "rationale": rec.get("rationale")}
        verdict = validate_candidate(data, ctx.task, ctx.sample, id=rec.get("id"), taken=taken,
                                     config=ctx.checks)
        comps = dict(verdict.canonical) if verdict.canonical else out.get("components", {})
        out.update(CandidateRecord(components=comps, complexity=verdict.complexity, accepted=verdict.accepted,
                                   reason=verdict.reason, key=verdict.key))
        if verdict.accepted and verdict.reward is not None:
            taken.add(verdict.key or "")
            ctx.compiled[str(out.get("id"))] = verdict.reward
            if progress in ctx.sample:  # scored even when it does not decide, so its signal stays measurable
                out["proxy"] = round(proxy_score(verdict.reward, ctx.sample, progress, approach).score, 4)
            if ctx.episodes:  # measured, not deciding (docs/DESIGN.md, "The verifier")
                out.update(_verifier_fields(verify(verdict.reward, ctx.episodes, progress)))
            valid.append(out)
        else:
            rejected.append(out)
    accepted, screened = _screen(ctx, valid, room)
    rejected += screened
    reasons = "; ".join(r.get("reason", "") for r in rejected[:3])
    summary = f"accepted {len(accepted)}, rejected {len(rejected)}" + (f": {reasons}" if reasons else "")
    return step("validate", attempt, summary, accepted=accepted, rejected=rejected, pending=[])
