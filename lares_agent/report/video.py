"""The report's video: one episode of the policy the run hands over, as a small GIF beside ``index.html``.

The curves say how often the policy succeeds; the video shows how (a reach that overshoots and comes back, a
gripper that never closes). It is the episode `lares eval RUN` plays first (seed 0), rendered off screen by
engine/policies/video.py. A machine that cannot render still gets its report, with one line saying why there is no
video.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lares_agent.engine.errors import EngineError
from lares_agent.errors import LaresError
from lares_agent.runs import FINAL_POLICY, RunLayout
from lares_agent.runs.coerce import as_int
from lares_agent.runs.reader import RunData

__all__ = ["VIDEO_NAME", "ReportVideo", "handed_over_policy", "policy_video"]

VIDEO_NAME = "policy.gif"
_SEED = 0  # `lares eval`'s default seed: the video is the first episode it scores
_EVERY = 2  # every 2nd step, 160 pixels: a 150-step episode is a GIF of a few hundred kB


@dataclass(frozen=True)
class ReportVideo:
    """The GIF's file name relative to the page (None when none was written) and the sentence under it, or the
    sentence saying why there is none."""

    file: str | None
    caption: str


def handed_over_policy(run: Path) -> Path | None:
    """The policy file the run hands over: ``final`` once the run ended, before that the newest round's (what
    `lares eval RUN` plays); None before the first reward update."""
    layout = RunLayout(run)
    final = layout.policy(FINAL_POLICY)
    if final.is_file():
        return final
    rounds = sorted(layout.policies.glob(f"round-*{final.suffix}")) if layout.policies.is_dir() else []
    return rounds[-1] if rounds else None


def policy_video(data: RunData, out: Path) -> ReportVideo | None:
    """Render the handed-over policy's episode into ``out/policy.gif``; None when the run has no policy yet.

    A stale GIF is removed first, so a failed render never leaves an older policy's video on the page.
    """
    gif = out / VIDEO_NAME
    gif.unlink(missing_ok=True)
    path = handed_over_policy(data.path)
    if path is None:
        return None
    from lares_agent.engine import PolicyArtefact, get_task, record_video

    try:
        policy = PolicyArtefact.load(path)
        horizon = as_int(data.config.get("horizon"))
        task = get_task(data.task if data.task != "?" else policy.task)
        clip = record_video(task, policy, gif, seed=_SEED, horizon=horizon or None, every=_EVERY)
    except (LaresError, EngineError, OSError) as exc:  # the report is written all the same, saying why
        return ReportVideo(None, f"No video of {path.name}: {exc}")
    outcome = (f"success flag first set at step {clip.success_step}" if clip.success_step is not None
               else "no success in this episode")
    return ReportVideo(gif.name, (
        f"{policy.summary()}, from policies/{path.name}: one deterministic episode on {task.name} (seed {_SEED}, "
        f"the first `lares eval` plays), {clip.steps} steps, {outcome}; one frame every {_EVERY} steps, rendered "
        f"off screen (MUJOCO_GL={clip.backend}). `lares eval {data.path} --video FILE.gif` writes it again."))
