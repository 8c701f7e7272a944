"""`lares eval RUN [--policy best|final|slot N|PATH] [--episodes N] [--seed S] [--task T] [--video FILE] [--json]`:
roll a run's policy out and print its success and return."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from lares_agent.cli.out_paths import check_out_path
from lares_agent.cli.task_option import allow_typed_task, refuse_untrusted_task
from lares_agent.errors import LaresError
from lares_agent.runs.handover import HandoverRecord

_SLOT = re.compile(r"^slot(?:-|[\s:=]*)(\d+)$")  # slot 2, slot=2, slot:2, slot-2 (as policies/slot-2.pt)
_NEGATIVE_SLOT = re.compile(r"^slot[\s:=]+-\s*\d+$")  # slot -1, slot=-1


def resolve_policy(run: Path | None, which: str) -> tuple[Any, Path | str]:
    """The policy `--policy` names and where it came from (a file, or `checkpoint <name> slot N`)."""
    from lares_agent.engine import PolicyArtefact
    from lares_agent.runs import FINAL_POLICY, RunLayout

    if _NEGATIVE_SLOT.match(which.strip().lower()):
        raise LaresError(f"--policy {which!r}: a slot is numbered from 0 (`slot 0`, `slot 1`, ...)")
    slot = _SLOT.match(which.strip().lower())
    if which not in ("best", "final") and slot is None:
        return PolicyArtefact.load(Path(which)), Path(which)
    if run is None:
        raise LaresError(f"--policy {which} needs a run folder")
    layout = RunLayout.open(run)
    if slot is not None:
        path = layout.slot_policy(int(slot.group(1)))
        if path.is_file():  # written at the end of a run; before that, the newest checkpoint has every slot
            return PolicyArtefact.load(path), path
        return _from_checkpoint(layout, int(slot.group(1)))
    final = layout.policy(FINAL_POLICY)
    if final.is_file():
        return PolicyArtefact.load(final), final
    if which == "final":
        raise LaresError(f"{run} has no final policy yet ({final} is missing: the run did not end); "
                         "pass --policy best for the newest one")
    rounds = sorted(layout.policies.glob(f"round-*{final.suffix}")) if layout.policies.is_dir() else []
    if rounds:
        return PolicyArtefact.load(rounds[-1]), rounds[-1]
    return _from_checkpoint(layout, None)


def _from_checkpoint(layout: Any, slot: int | None) -> tuple[Any, str]:
    """A slot's policy (None: the ranked-first slot) built from the newest engine checkpoint."""
    from lares_agent.engine import (
        PolicyArtefact,
        artefact_from_state,
        get_task,
        latest_checkpoint,
        load_checkpoint,
        slot_member,
    )

    checkpoint = latest_checkpoint(layout.checkpoints)
    if checkpoint is None:
        raise LaresError(f"{layout.root} has no policy file and no checkpoint yet; nothing to evaluate")
    state = load_checkpoint(checkpoint)
    chosen = int(state["counters"]["best_slot"]) if slot is None else slot
    env = get_task(str(state["task"])).make_env(0)
    try:
        box: Any = env.action_space
        low, high = box.low, box.high
    finally:
        env.close()
    rewards = state.get("rewards") or []
    reward_id = str(rewards[chosen].get("id", "?")) if 0 <= chosen < len(rewards) else "?"
    data = artefact_from_state(state, slot_member(state, chosen), low, high, reward_id, slot=chosen)
    return PolicyArtefact(data), f"checkpoint {checkpoint.name}, slot {chosen}"


def _number(x: float, fmt: str) -> str:
    return "n/a" if not math.isfinite(x) else format(x, fmt)


def eval_command(
    run: Annotated[Path | None, typer.Argument(help="run directory (runs/<run-id>); optional with --policy PATH")]
    = None,
    policy: Annotated[str, typer.Option(
        "--policy", help="best (the policy the run hands over: final, else the newest round), final, 'slot N' "
                         "(policies/slot-N.pt, else the newest checkpoint), or a policy file PATH")] = "best",
    episodes: Annotated[int, typer.Option(help="Deterministic episodes to play.")] = 10,
    seed: Annotated[int, typer.Option(help="Seed of the episodes' resets.")] = 0,
    task: Annotated[str | None, typer.Option(help="Task to play on (default: the run's, from config.json).")] = None,
    video: Annotated[Path | None, typer.Option(
        help="Write the first episode as a .gif or .mp4 (MuJoCo off screen, 160 px, every 2nd step).")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")] = False,
) -> None:
    """Roll the run's policy out (deterministic actions, seeded resets) and print success rate, task return
    and episode length."""
    from lares_agent.engine import VideoError, evaluate_policy, get_task, record_video

    if episodes < 1:
        raise LaresError(f"--episodes must be >= 1, got {episodes}")
    if video is not None:
        check_out_path(video, "--video")  # before the episodes; no folder is made for it
    # a task module only where named now (cli/task_option.py): --task is the task to play on, else the run's
    allow_typed_task(task)
    if run is not None and task is None:
        refuse_untrusted_task(run, None, "evaluate its policy")
    loaded, source = resolve_policy(run, policy)
    horizon = None
    name = task
    if run is not None:
        from lares_agent.runs import RunLayout
        from lares_agent.search.runner import read_config

        cfg = read_config(RunLayout.open(run))
        name, horizon = task or cfg.task, cfg.horizon
    spec = get_task(name or loaded.task)
    result = evaluate_policy(spec, loaded, episodes, seed, horizon)
    out: dict[str, Any] = {
        "policy": str(source), "learner": loaded.learner, "trained_task": loaded.task, "task": spec.name,
        "reward_id": loaded.reward_id, "slot": loaded.data["slot"], "env_steps": loaded.data["env_steps"],
        "round": loaded.data["round"], "episodes": episodes, "seed": seed, "success_rate": result.success_rate,
        "task_return": None if not math.isfinite(result.task_return) else result.task_return,
        "episode_length": result.episode_length,
    }
    handover = HandoverRecord.from_policy(loaded.data)  # how the run chose it on fresh episodes, if it did
    if handover is not None:
        out["handover"] = {"episodes": handover.episodes, "ranked_first": handover.ranked_first,
                           "candidates": [{"slot": c.slot, "reward_id": c.reward_id, "rank": c.rank,
                                           "success": c.success if math.isfinite(c.success) else None}
                                          for c in handover.candidates]}
    video_error = None
    if video is not None:
        try:
            clip = record_video(spec, loaded, video, seed, horizon)  # picks MuJoCo's GL backend itself
            out["video"], out["video_frames"], out["video_gl"] = str(video), clip.frames, clip.backend
        except VideoError as exc:
            video_error = str(exc)
            out["video_error"] = video_error
    if as_json:
        typer.echo(json.dumps(out))
    else:
        typer.echo(f"policy: {loaded.summary()}")
        typer.echo(f"  from {source}")
        if handover is not None:
            typer.echo(f"  handed over by its run {handover.sentence()}")
        typer.echo(f"{spec.name}, {episodes} deterministic episodes (seed {seed}): "
                   f"success {result.success_rate:.0%}, task return {_number(result.task_return, '.2f')} (mean), "
                   f"episode length {result.episode_length:.1f}")
        if "video" in out:
            typer.echo(f"video: {video} ({out['video_frames']} frames, MUJOCO_GL={out['video_gl']})")
    if video_error is not None:
        typer.echo(f"error: no video written: {video_error}", err=True)
        raise typer.Exit(1)
