"""What each reward update of the grid's LaRes trials saw and did: the "why" behind a task where LaRes loses.

Offline, from a grid's records (no training). Per trial: each update's env steps and grade, each slot's reward
(the task's own, an LLM answer, or a numeric child), its success, the share of the start distance its policies
closed to the object (approach) and to the goal (progress), task return and fitness, the slot ranked first,
and what replaced the others; for each LLM answer, the components it added, dropped or changed against the reward it
was written from; at the end, the reward whose learner the trial handed over. With `--summary`, one row per
trial instead: where the reward ranked first at each update came from, and the one handed over.

    python experiments/evidence/updates.py runs/evidence-C/runs --pattern 'door-close-v3-lares-*'
    python experiments/evidence/updates.py experiments/init_grid/runs --pattern '*-v3-[lnr]*' --summary
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from lares_agent.engine.tasks import get_task
from lares_agent.graphs.fillers import CRITIQUE_EDIT
from lares_agent.rewards import RewardRejected, allowed_features, human_components, parse_candidate
from lares_agent.rewards.validate import structure_key_of
from lares_agent.runs import RewardUpdateRecord
from lares_agent.runs.reader import Candidate, RunData, read_run
from lares_agent.runs.selected import HUMAN_REWARD_ID, selected_reward

HERE = Path(__file__).resolve().parent
CHILD = "numeric child of "  # how graphs/fillers.py opens a numeric child's rationale
EDITS = ("random edit of ", "random reward: ")  # and a random-edit control's edit or draw (rewards/edits.py)


def maker(candidate: Candidate) -> str:
    """Who made a candidate, read from how its rationale opens: "child" (a numeric child), "random edit" (the
    random-edit control), "critique edit" (the critique-edit control) or "LLM"."""
    for prefix, made in ((CHILD, "child"), (EDITS, "random edit"), (CRITIQUE_EDIT, "critique edit")):
        if candidate.rationale.startswith(prefix):
            return made
    return "LLM"


def kind(candidate: Candidate | None, reward_id: str) -> str:
    """Where a slot's reward came from: the task's own, or its maker (`maker`) and the reward it was made from."""
    if reward_id == HUMAN_REWARD_ID:
        return "own"
    if candidate is None:
        return "?"
    made = maker(candidate)
    parent = "own" if candidate.parent_id == HUMAN_REWARD_ID else candidate.parent_id
    if made == "LLM":
        return "LLM" + (f", from {parent}" if parent else "")
    return f"{made} of {parent or ('none' if made == 'random edit' else '?')}"


def origin(data: RunData, reward_id: str) -> str:
    """A reward's source through its numeric children: the task's own, an LLM answer, a random edit or the critique's
    edit, and ", tuned" where the reward is a numeric child (of a child ...) of it; "?" where the records break the
    lineage."""
    tuned, seen = False, set()
    while reward_id != HUMAN_REWARD_ID:
        candidate = data.candidate(reward_id)
        if candidate is None or reward_id in seen:
            return "?"
        made = maker(candidate)
        if made != "child":
            return ("edit" if made == "random edit" else made) + (", tuned" if tuned else "")
        if candidate.parent_id is None:
            return "?"
        seen.add(reward_id)
        tuned, reward_id = True, candidate.parent_id
    return "own" + (", tuned" if tuned else "")


def summary_row(path: Path) -> str:
    """One markdown row: the trial, the origin of the reward ranked first at each update, and of the one handed
    over."""
    data = read_run(path)
    ranked = []
    for update in (RewardUpdateRecord.from_event(e) for e in data.events if e.event == "reward_update"):
        rewards = {slot.slot: slot.reward_id for slot in update.slots}
        if update.best in rewards:
            ranked.append(origin(data, rewards[update.best]))
    chosen = selected_reward(path, data)
    return f"| {path.name} | {'; '.join(ranked) or '–'} | {origin(data, chosen.reward_id) if chosen else '–'} |"


def canonical(components: Mapping[str, str], task: str) -> Mapping[str, str]:
    """Components in the language's canonical form (so `2*d` and `d*2` are one text); as written if they do not
    parse."""
    try:
        return dict(parse_candidate({"components": dict(components), "rationale": ""},
                                    allowed_features(get_task(task))).canonical)
    except (RewardRejected, KeyError, ValueError):
        return components


def _form(name: str, components: Mapping[str, str]) -> str:
    return structure_key_of({name: components[name]})


def changes(before: Mapping[str, str], after: Mapping[str, str], task: str) -> str:
    """The components an answer added, dropped and rewrote against the reward it was written from."""
    before, after = canonical(before, task), canonical(after, task)
    added = [n for n in after if n not in before]
    dropped = [n for n in before if n not in after]
    changed = [n + (" (constants)" if _form(n, after) == _form(n, before) else "")
               for n in after if n in before and after[n] != before[n]]
    parts = [f"+{', +'.join(added)}" if added else "", f"-{', -'.join(dropped)}" if dropped else "",
             f"~{', ~'.join(changed)}" if changed else ""]
    return " ".join(p for p in parts if p) or "no component changed"


def _num(value: float, digits: int = 2) -> str:
    return "–" if not math.isfinite(value) else f"{value:.{digits}f}"


def own_components(data: RunData) -> Mapping[str, str]:
    """The task's own reward as the run's first refinements saw it (empty where the run never showed it)."""
    try:
        return dict(human_components(get_task(data.task)) or ())
    except (KeyError, ValueError):
        return {}


def trial_report(path: Path) -> str:
    """Markdown: one row per update and slot, then the LLM answers' changes, then what was handed over."""
    data = read_run(path)
    own = own_components(data)
    lines = [f"### {path.name}", "",
             "| update | env steps | slot | reward | from | graded by | success | approach closed | progress closed "
             "| task return | fitness | |",
             "|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|---|"]
    for event in data.events:
        if event.event != "reward_update":
            continue
        update = RewardUpdateRecord.from_event(event)
        for slot in update.slots:
            mark = "ranked first" if slot.slot == update.best else (
                f"replaced by {update.replaced[slot.slot]}" if slot.slot in update.replaced else "kept")
            lines.append(
                f"| {update.round} | {update.env_steps:,} | {slot.slot} | {slot.reward_id} | "
                f"{kind(data.candidate(slot.reward_id), slot.reward_id)} | {slot.graded_by or '–'} | "
                f"{_num(slot.success)} | {_num(slot.approach_closed)} | {_num(slot.progress_closed)} | "
                f"{_num(slot.task_return, 0)} | {_num(slot.fitness, 3)} | {mark} |")
    answers = [c for c in data.candidates if c.accepted and c.components and maker(c) != "child"]
    if answers:
        lines += ["", "Rewards installed that are no numeric child: LLM answers, or a control's edits (against the "
                  "reward each was written from):", ""]
        for c in answers:
            parent = data.candidate(c.parent_id) if c.parent_id else None
            before = own if c.parent_id == HUMAN_REWARD_ID else (parent.components if parent is not None else {})
            diff = changes(before, c.components, data.task) if before else "written from scratch"
            lines.append(f"- round {c.round}, {c.id} ({maker(c)}): {diff}")
    chosen = selected_reward(path, data)
    lines += ["", f"Handed over: {chosen.reward_id} ({chosen.why})" if chosen else "Handed over: nothing yet", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=Path, default=HERE / "runs", help="folder of trial folders")
    parser.add_argument("--pattern", default="*-lares-*", help="trial folders to read (a glob)")
    parser.add_argument("--summary", action="store_true", help="one row per trial: the origin of each first place")
    args = parser.parse_args(argv)
    trials = sorted(p for p in args.runs.glob(args.pattern) if (p / "events.jsonl").is_file())
    if not trials:
        print(f"no trial folder matching {args.pattern!r} with an events.jsonl under {args.runs}", file=sys.stderr)
        return 1
    if args.summary:
        print("| trial | ranked first at each update | handed over |\n|---|---|---|")
        print("\n".join(summary_row(t) for t in trials))
    else:
        print("\n".join(trial_report(t) for t in trials))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
