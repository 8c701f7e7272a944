"""The four nodes: analyse, critique, propose, validate. Each returns a partial state update.

Nodes never raise on model trouble: an LLM error, an empty or prose answer, broken JSON or a hostile
expression becomes a rejected candidate (or a fallback text) with a one-line reason, which the router
sends back to `propose`. Every LLM call is tagged with its node and carries the round and attempt in
`meta`, so `llm_calls.jsonl` links each call to its step in `trace.sqlite`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from lares_agent.graphs.deps import GraphDeps
from lares_agent.graphs.prompting import (
    AnswerError,
    answer_format,
    clip,
    extract_candidates,
    messages,
    proposal_schema,
    render_elites,
    render_reasons,
    render_stats,
    render_taken,
    system_text,
)
from lares_agent.graphs.state import CandidateRecord, EliteInfo, RoundState, step
from lares_agent.llm.errors import BudgetExceeded, LLMError
from lares_agent.prompts.loader import render
from lares_agent.tools.checks import allowed_features, check_candidate, elite_keys
from lares_agent.tools.retrieval import render_cases, retrieve_cases
from lares_agent.tools.trajectory import FeatureInfo, encode_rollouts

__all__ = ["RoundNodes"]


def _sorted_elites(state: RoundState) -> list[EliteInfo]:
    """Best first; elites without a fitness last (stable, so equal fitness keeps the caller's order)."""
    elites = list(state.get("elites") or [])
    return sorted(elites, key=lambda e: (e.get("fitness") is None, -float(e.get("fitness") or 0.0)))


class RoundNodes:
    """Node functions bound to a run's dependencies (deps are not state: they are never checkpointed)."""

    def __init__(self, deps: GraphDeps) -> None:
        self.deps = deps
        self.feature_names = allowed_features(deps.task)
        self.system = system_text(
            deps.task, self.feature_names, deps.persona, deps.limits.checks.limits.max_components
        )

    # -- helpers -------------------------------------------------------------------------------------

    def _ask(self, node: str, state: RoundState, user: str, attempt: int, **kw: Any) -> str:
        """One LLM call; returns the stripped text or raises LLMError / AnswerError (empty answer)."""
        meta = {"node": node, "round": state.get("round", 0), "attempt": attempt, "persona": self.deps.persona.name}
        answer = self.deps.llm.complete(messages(self.system, user), tag=node, meta=meta, **kw)
        text = answer.text.strip()
        if not text:
            raise AnswerError("empty answer")
        return text

    def _cases(self) -> str:
        deps = self.deps
        if deps.cases is None:
            return "none (retrieval off)"
        try:
            found = retrieve_cases(deps.cases, deps.task, deps.limits.retrieve_k, exclude_run=deps.run_id or None)
        except Exception as exc:  # noqa: BLE001 - a broken case store must not stop a round
            return f"none (case store unavailable: {type(exc).__name__})"
        return render_cases(found, deps.limits.section_chars)

    # -- nodes ---------------------------------------------------------------------------------------

    def analyse(self, state: RoundState) -> dict[str, Any]:
        """Describe the best policies' behaviour from deterministically encoded rollouts."""
        deps, limits = self.deps, self.deps.limits
        ids = list(state.get("rollout_ids") or [])
        found = [deps.rollouts[i] for i in ids if i in deps.rollouts]
        infos = [FeatureInfo(f.name, f.unit, f.meaning) for f in deps.task.features]
        try:
            encoded = encode_rollouts(found, deps.task.progress_feature, infos, limits.trajectory_tokens)
        except (ValueError, TypeError) as exc:
            encoded = f"rollouts could not be encoded: {exc}"
        missing = [i for i in ids if i not in deps.rollouts]
        if missing:
            encoded += f"\n(no data for rollouts {', '.join(missing[:5])})"
        user = render("analyse", round=state.get("round", 0), trajectories=encoded)
        try:
            text = self._ask("analyse", state, user, 0, temperature=limits.temperature,
                             max_tokens=limits.analyse_max_tokens)
            summary = f"analysed {len(found)} rollout(s)"
        except (LLMError, AnswerError) as exc:
            text = f"(no LLM analysis: {exc}) Encoded rollouts:\n{encoded}"
            summary = f"analysis fell back to the raw encoding: {exc}"
        return step("analyse", 0, summary, analysis=clip(text, limits.section_chars))

    def critique(self, state: RoundState) -> dict[str, Any]:
        """Name the elites' defects against the task goal, from behaviour, statistics and past failures."""
        limits = self.deps.limits
        elites = _sorted_elites(state)
        critique_id = f"{self.deps.id_prefix}r{state.get('round', 0)}-critique"
        user = render(
            "critique",
            round=state.get("round", 0),
            elites=render_elites(elites, limits.section_chars),
            component_stats=render_stats(elites, limits.section_chars),
            analysis=state.get("analysis") or "no rollouts were analysed",
            rejections=render_reasons(state.get("rejections") or [], limits.section_chars),
        )
        try:
            text = self._ask("critique", state, user, 0, temperature=limits.temperature,
                             max_tokens=limits.critique_max_tokens)
            summary = f"critique {critique_id}: {text.splitlines()[0]}"
        except (LLMError, AnswerError) as exc:
            text = ""
            summary = f"no critique: {exc}"
        return step("critique", 0, summary, critique=clip(text, limits.section_chars),
                    critique_id=critique_id if text else None)

    def _instruction(self, parent: EliteInfo | None, explore: bool) -> str:
        if parent is None:
            base = ("Write a new reward for this task from scratch, with your own terms and weights (do not "
                    "repeat the examples).")
        else:
            base = (f"Improve the elite {parent.get('id', '?')}: keep what works, fix the defects the critique "
                    f"names, and change at least one term.")
        if explore:
            base += (" The population has lost diversity: propose a substantially different reward (other terms "
                     "or another shaping), not a reweighting of an elite.")
        return base

    def _temperature(self, explore: bool, made: int) -> float:
        """Base temperature for a round's first proposal, warmer for each later one (capped), so repeated
        prompts do not return the same candidate; the explore temperature when diversity is low."""
        limits = self.deps.limits
        if explore:
            return limits.explore_temperature
        return min(limits.temperature + limits.temperature_step * made, max(limits.explore_temperature,
                                                                            limits.temperature))

    def propose(self, state: RoundState) -> dict[str, Any]:
        """Ask for the missing candidates, one LLM call per `per_call` candidates, rotating the parent elite."""
        deps, limits = self.deps, self.deps.limits
        attempt = int(state.get("attempts", 0)) + 1
        accepted = list(state.get("accepted") or [])
        rejected = list(state.get("rejected") or [])
        missing = max(int(state.get("n_wanted", 0)) - len(accepted), 0)
        calls = min(math.ceil(missing / limits.per_call), limits.max_calls_per_pass)
        update: dict[str, Any] = {}
        cases = state.get("cases")
        if cases is None:
            cases = update["cases"] = self._cases()
        elites = _sorted_elites(state)
        explore = bool(state.get("explore", False))
        reasons = list(state.get("rejections") or []) + [r.get("reason", "") for r in rejected]
        max_components = limits.checks.limits.max_components
        pending: list[CandidateRecord] = []
        for call in range(calls):
            n = max(1, min(limits.per_call, missing - len(pending)))
            parent = elites[(attempt - 1 + call) % len(elites)] if elites else None
            user = render(
                "propose",
                round=state.get("round", 0),
                attempt=attempt,
                elites=render_elites(elites, limits.section_chars),
                critique=state.get("critique") or "none",
                cases=cases,
                rejections=render_reasons(reasons, limits.section_chars),
                taken=render_taken(accepted + pending, limits.section_chars),
                instruction=self._instruction(parent, explore),
                answer_format=answer_format(n),
            )
            base = {"round": state.get("round", 0), "attempt": attempt,
                    "parent_id": parent.get("id") if parent else None, "critique_id": state.get("critique_id")}
            try:
                made = len(accepted) + len(rejected) + len(pending)
                text = self._ask("propose", state, user, attempt, json_schema=proposal_schema(n, max_components),
                                 temperature=self._temperature(explore, made), max_tokens=limits.propose_max_tokens * n)
                items = extract_candidates(text)[:n]
            except (LLMError, AnswerError) as exc:
                cid = f"{deps.id_prefix}r{base['round']}-a{attempt}-{len(pending)}"
                pending.append(CandidateRecord(id=cid, components={}, rationale="", error=str(exc), **base))
                if isinstance(exc, BudgetExceeded):
                    break
                continue
            for item in items:
                cid = f"{deps.id_prefix}r{base['round']}-a{attempt}-{len(pending)}"
                comps = {str(k): str(v)[:300] for k, v in dict(item["components"]).items()}
                pending.append(CandidateRecord(
                    id=cid, components=comps, rationale=str(item.get("rationale", ""))[:300],
                    raw=json.dumps(item, default=str)[:8000], **base,
                ))
        bad = sum(1 for p in pending if p.get("error"))
        summary = f"attempt {attempt}: {calls} call(s), {len(pending) - bad} proposal(s), {bad} unusable answer(s)"
        return step("propose", attempt, summary, pending=pending, attempts=1, **update)

    def validate(self, state: RoundState) -> dict[str, Any]:
        """Check every pending proposal; accepted rewards are compiled into `deps.registry`."""
        deps, limits = self.deps, self.deps.limits
        attempt = int(state.get("attempts", 0))
        already = list(state.get("accepted") or [])
        taken = elite_keys(state.get("elites") or [], self.feature_names, limits.checks.limits)
        taken |= {r["key"] for r in already if r.get("key")}
        room = max(int(state.get("n_wanted", 0)) - len(already), 0)
        sample_error = ""
        try:
            sample: Mapping[str, Any] | None = deps.get_sample()
        except Exception as exc:  # noqa: BLE001 - reported as the reason of every candidate
            sample, sample_error = None, f"no validation sample ({type(exc).__name__}: {exc})"
        accepted: list[CandidateRecord] = []
        rejected: list[CandidateRecord] = []
        for rec in state.get("pending") or []:
            out = CandidateRecord(**{k: v for k, v in rec.items() if k not in ("raw", "error")})
            if rec.get("error"):
                rejected.append(CandidateRecord(**out, accepted=False, reason=str(rec["error"])))
                continue
            if sample is None:
                rejected.append(CandidateRecord(**out, accepted=False, reason=sample_error))
                continue
            result = check_candidate(
                rec.get("raw") or {"components": rec.get("components", {})}, feature_names=self.feature_names,
                sample=sample, candidate_id=rec["id"], progress_feature=deps.task.progress_feature, taken=taken,
                config=limits.checks, approach_feature=getattr(deps.task, "approach_feature", None),
            )
            if result.accepted and len(accepted) >= room:
                result = type(result)(False, "surplus: the round already has enough candidates", result.canonical,
                                      result.complexity, result.key)
            comps = dict(result.canonical) if result.canonical else out.get("components", {})
            out.update(components=comps, complexity=result.complexity, accepted=result.accepted,
                       reason=result.reason, key=result.key)
            if result.accepted and result.reward is not None:
                deps.registry[rec["id"]] = result.reward
                taken.add(result.key or "")
                accepted.append(out)
            else:
                rejected.append(out)
        reasons = "; ".join(r["reason"] for r in rejected[:3])
        summary = f"accepted {len(accepted)}, rejected {len(rejected)}" + (f": {reasons}" if reasons else "")
        return step("validate", attempt, summary, accepted=accepted, rejected=rejected, pending=[])
