"""`lares trace RUN [--node N] [--round R] [--candidate ID] [--json]`: what the agent graph did, step by step.

Without options: one row per node execution (time, node, persona, summary, LLM use), the reward updates (what
graded each one's slots and each slot's graded value) and the accepted candidates with their lineage.
`--node` / `--round` select steps and show each one's prompts, answers and verdicts (`--round` the round's reward
update first); `--candidate` shows one candidate's verdict, every fitness it got and what it was made of, lineage
(elite and critique it came from) and the prompt and answer that produced it. `--json` prints the same selection
as JSON for scripts.
"""

from __future__ import annotations

import datetime as _dt
import json as _json
import math
import textwrap
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

# Long texts (system prompts are ~3 kB) are cut in the human view; `--json` always has them whole.
_SYSTEM_CHARS = 300
_TEXT_CHARS = 4000


def trace_command(
    run: Annotated[Path, typer.Argument(help="run directory (runs/<run-id>)")],
    node: Annotated[str | None, typer.Option(
        help="only this node's steps (analyse, critique, propose, validate), with prompts and answers")] = None,
    round: Annotated[int | None, typer.Option(
        "--round", help="only this round's steps (0 = the initial population), with prompts and answers")] = None,
    candidate: Annotated[str | None, typer.Option(
        help="one candidate: verdict, lineage (elite and critique it came from), prompt and answer")] = None,
    json: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
) -> None:
    """Show the graph trace of a run: every node step, its LLM calls, verdicts and candidates' lineage."""
    from lares_agent.trace import read_trace

    trace = read_trace(run)
    if candidate is not None:
        lineage = trace.lineage(candidate)
        if json:
            typer.echo(_json.dumps({"run": str(trace.root), "candidate": lineage.to_json(),
                                    "form": trace.form(candidate)}, indent=2, default=str))
        else:
            _show_lineage(lineage, trace.form(candidate))
        return
    steps = trace.select(node=node, round=round)
    if json:
        payload = {
            "run": str(trace.root), "task": trace.task, "persona": trace.persona, "llm_backend": trace.llm_backend,
            "shaping": trace.shaping, "potentials": trace.potentials,
            "rounds": list(trace.rounds), "steps": [asdict(s) for s in steps],
            "candidates": [asdict(c) for c in trace.candidates.values()
                           if round is None or c.round == round],
            "updates": [u.to_json() for u in trace.updates if round is None or u.round == round],
            "notes": [asdict(n) for n in trace.notes if round is None or n.round == round],
        }
        typer.echo(_json.dumps(payload, indent=2, default=str))
        return
    _show_steps(trace, steps, detailed=node is not None or round is not None, round_selected=round is not None)


# ---------------------------------------------------------------------------------------------- rendering
def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


def _local_time(iso: str) -> str:
    try:
        return _dt.datetime.fromisoformat(iso).astimezone().strftime("%H:%M:%S")
    except ValueError:
        return iso or "?"


def _cut(text: str | None, limit: int = _TEXT_CHARS) -> str:
    text = text or ""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars; whole in --json)"


def update_line(update: Any) -> str:
    """One reward update: the round, the grade that ranked it and each slot, best first, with what its fitness was
    made of, e.g. "round 2 at 13,500 steps, ranked by return: slot 0 res-0 return 412.3 - 0.01 cx (elite), ...".
    A run from before graded fitness ranked by success (and says so)."""
    grades = sorted({s.graded_by for s in update.slots if s.graded_by})
    by = "/".join(grades) if grades else "success (no grade recorded)"
    slots = {s.slot: s for s in update.slots}
    order = list(update.ranking) or sorted(slots)
    parts = []
    for i in order:
        s = slots.get(i)
        if s is None:
            continue
        what = "quarantined" if s.quarantined else (s.breakdown or f"fitness {s.fitness:.2f}")
        tag = " (elite)" if i in update.elites else (" (replaced)" if i in update.replaced else "")
        parts.append(f"slot {i} {s.reward_id} {what}{tag}")
    return f"round {update.round} at {update.env_steps:,} steps, ranked by {by}: " + "; ".join(parts)


def _show_notes(console: Any, trace: Any, rounds: set[int] | None = None) -> None:
    """The user's notes (`lares feedback`) and the round whose critique took each; with rounds selected, theirs."""
    from rich.text import Text

    wrap = textwrap.TextWrapper(width=max(40, min(console.width, 120)) - 1, initial_indent="    ",
                                subsequent_indent="    ")
    notes = [n for n in trace.notes if rounds is None or n.round in rounds]
    if notes:
        console.print(Text("user notes (lares feedback; each taken into one round's critique):"))
    for n in notes:
        when = f"round {n.round}" if n.round is not None else "waiting for the next round"
        console.print(Text(wrap.fill(f"{n.id} ({when}): {n.text}")))


def _show_steps(trace: Any, steps: tuple[Any, ...], detailed: bool, round_selected: bool = False) -> None:
    from rich.text import Text

    console = _console()
    console.print(Text(f"run {trace.root}"))  # the path on its own line: never folded into a column
    console.print(Text(f"task {trace.task}  persona {trace.persona}  llm {trace.llm_backend}"))
    if not trace.steps:
        console.print(Text("no graph steps recorded (a baseline run, or killed before its first round finished)"))
        _show_notes(console, trace)
        return
    if not steps:
        console.print(Text("no step matches this selection (rounds: " + ", ".join(map(str, trace.rounds)) + ")"))
        return
    # one line per step and its summary indented below: readable at 80 columns, where a table folds the
    # summary into a column a few letters wide
    wrap = textwrap.TextWrapper(width=max(40, min(console.width, 120)) - 1, initial_indent="    ",
                                subsequent_indent="    ")
    for s in steps:
        llm = f"{len({c.call for c in s.calls})} call(s), {s.tokens} tok" if s.calls else "no LLM call"
        seconds = f"{s.seconds:.1f} s" if s.seconds is not None else "-"
        console.print(Text(f"round {s.round}  {_local_time(s.time)}  {seconds}  {s.node} (try {s.attempt})  "
                           f"{s.persona}  {llm}"))
        if s.summary:
            console.print(Text(wrap.fill(str(s.summary))))
    if detailed:
        for r in sorted({s.round for s in steps}) if round_selected else ():
            update = trace.update(r)
            if update is not None:
                console.print(Text(wrap.fill(update_line(update))))
        for s in steps:
            _show_detail(console, s)
    else:
        if trace.updates:
            console.print(Text("reward updates (what ranked the slots; each slot's graded value):"))
            for u in trace.updates:
                console.print(Text(wrap.fill(update_line(u))))
        _show_candidates(console, trace)
    _show_notes(console, trace, {s.round for s in steps} if round_selected else None)
    if trace.unmatched_calls:
        console.print(Text(f"{len(trace.unmatched_calls)} LLM call(s) belong to no stored step "
                           "(a node was stopped mid-call; `lares resume` re-runs it)"))


def _show_candidates(console: Any, trace: Any) -> None:
    from rich.text import Text

    accepted = [c for c in trace.candidates.values() if c.verdict == "accepted"]
    if not accepted:
        return
    console.print(Text("accepted candidates:" if trace.shaping != "potential" else
                       "accepted candidates (potentials: the learners trained on the base reward plus "
                       "gamma*Phi(s') - Phi(s); --candidate ID says more):"))
    wrap = textwrap.TextWrapper(width=max(40, min(console.width, 120)) - 1, initial_indent="    ",
                                subsequent_indent="      ")
    for c in accepted:
        fitness = ", ".join(f"{e.get('fitness', 0):.2f}" for e in c.evaluations if e.get("fitness") is not None)
        console.print(Text(f"  {c.id}  fitness {fitness or '-'}"))
        console.print(Text(f"    round {c.round}, slot {c.slot}, parent {c.parent_id or '-'}, "
                           f"critique {c.critique_id or '-'}"))
        for k, v in c.components.items():
            console.print(Text(wrap.fill(f"{k} = {v}")))
    console.print(Text("drill in: --round N, --node NAME, --candidate ID; --json for scripts"))


def _show_detail(console: Any, step: Any) -> None:
    from rich.rule import Rule
    from rich.text import Text

    console.print(Rule(Text(f"round {step.round} · {step.node} · try {step.attempt}")))
    console.print(Text(f"summary: {step.summary}"))
    out = step.output
    if out.get("facts"):
        console.print(Text("facts:\n" + "\n".join(
            f"  [{f.get('kind')}] {f.get('source') + ': ' if f.get('source') else ''}{f.get('text')}"
            for f in out["facts"])))
    if out.get("analysis"):
        console.print(Text(f"analysis:\n{_cut(out['analysis'])}"))
    check = out.get("fact_check")
    if check:
        console.print(Text(f"fact check: dropped {check.get('dropped', 0)} of {check.get('checked', 0)} statement(s)"
                           + "".join(f"\n  dropped: {d.get('statement')} ({d.get('reason')})"
                                     for d in check.get("statements") or [])))
    if out.get("critique"):
        console.print(Text(f"critique {out.get('critique_id')}:\n{_cut(out['critique'])}"))
    for d in out.get("defects") or []:
        critics = len(out.get("critics") or []) or len(d.get("voters") or [])
        console.print(Text(f"defect [{d.get('kind')} {d.get('subject')}] ({d.get('source')}), voted by "
                           f"{', '.join(d.get('voters') or []) or '-'} ({len(d.get('voters') or [])}/{critics}): "
                           f"{d.get('edit')}"))
    for rec in out.get("pending") or []:
        what = f"error: {rec['error']}" if rec.get("error") else _components(rec.get("components"))
        console.print(Text(f"proposed {rec.get('id')} (parent {rec.get('parent_id') or '-'}): {what}"))
    for key in ("accepted", "rejected"):
        for rec in out.get(key) or []:
            reason = rec.get("reason") or ""
            console.print(Text(f"{key} {rec.get('id')}: {reason}  {_components(rec.get('components'))}"))
    for call in step.calls:
        _show_call(console, call)


def evaluation_breakdown(e: Any) -> str:
    """What one evaluated line's fitness was made of ("return 412.3"; "" where the run did not say)."""
    from lares_agent.runs.slots import SlotRecord, fitness_breakdown

    def num(key: str) -> float:
        value = e.get(key)
        return float(value) if isinstance(value, (int, float)) else math.nan

    grade = e.get("graded_by")
    if not isinstance(grade, str):
        return ""
    graded = SlotRecord.value_graded(grade, num("success"), num("progress_closed"), num("approach_closed"),
                                     num("task_return"))
    return fitness_breakdown(grade, graded, num("complexity_penalty"), fitness=num("fitness"))


def _components(components: Any) -> str:
    return "; ".join(f"{k} = {v}" for k, v in dict(components or {}).items()) or "(no components)"


def _show_call(console: Any, call: Any) -> None:
    from rich.text import Text

    state = "ok" if call.ok else f"failed: {call.error}"
    console.print(Text(f"LLM call #{call.call} (try {call.try_number}, {call.prompt_tokens}+{call.completion_tokens} "
                       f"tokens, {call.seconds:.2f} s): {state}", style="bold"))
    for m in call.messages:
        role = m.get("role", "?")
        limit = _SYSTEM_CHARS if role == "system" else _TEXT_CHARS
        console.print(Text(f"[{role}]\n{_cut(m.get('content'), limit)}"))
    if call.answer is not None:
        console.print(Text(f"[answer]\n{_cut(call.answer)}"))


def _show_lineage(lineage: Any, form: str) -> None:
    from rich.text import Text

    console = _console()
    c = lineage.candidate
    lines = [
        f"candidate {c.id}: {c.verdict}" + (f" ({c.reason})" if c.reason else ""),
        f"round {c.round}, try {c.attempt}, slot {c.slot if c.slot is not None else '-'}, complexity "
        f"{c.complexity if c.complexity is not None else '-'}",
        f"components: {_components(c.components)}",
        f"form: {form}",
        f"rationale: {c.rationale or '-'}",
    ]
    for e in c.evaluations:
        spread = e.get("learner_success")
        each = f" (its learners: {', '.join(f'{v:.2f}' for v in spread)})" if spread else ""
        made = evaluation_breakdown(e)
        ret = e.get("task_return")
        lines.append(f"evaluated at round {e.get('round')}: fitness {e.get('fitness')}"
                     f"{f' ({made})' if made else ''}, success {e.get('success')}{each}"
                     f"{f', task return {ret:.1f}' if isinstance(ret, (int, float)) else ''}")
    chain = " <- ".join([c.id, *(a.id for a in lineage.ancestors)])
    lines.append(f"lineage: {chain}" if lineage.ancestors else "lineage: written from scratch (no parent elite)")
    for a in lineage.ancestors:
        lines.append(f"  {a.id}: {a.verdict}, {_components(a.components)}")
    if lineage.children:
        lines.append(f"children: {', '.join(lineage.children)}")
    if c.critique_id:
        critique = _cut(lineage.critique) if lineage.critique else "(text not in trace)"
        lines.append(f"critique {c.critique_id}: {critique}")
    if lineage.validated_by is not None:
        lines.append(f"verdict step: round {lineage.validated_by.round} validate: {lineage.validated_by.summary}")
    console.print(Text("\n".join(lines)))
    if lineage.call is not None:
        _show_call(console, lineage.call)
    elif lineage.proposed_by is not None:
        console.print(Text("(the LLM call that wrote it is not in llm_calls.jsonl)"))
