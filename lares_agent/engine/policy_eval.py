"""Roll a saved policy out: deterministic episodes on seeded resets, and a video where MuJoCo can render
(`lares eval`).

The episodes go through the engine's own evaluation (`rollouts.evaluation.evaluate_members`), so success and
task return mean what they mean in the run's metrics: an episode succeeds if the success flag is set at any
step, the task return is the sum of the task's own reward (NaN where it has none).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from lares_agent.engine.contracts import MemberEvaluation
from lares_agent.engine.errors import EngineError
from lares_agent.engine.policy_artefact import PolicyArtefact
from lares_agent.engine.rollouts.episodes import EVAL_STREAM, EnvPool, episode_seed, seeded_reset, to_env_action
from lares_agent.engine.rollouts.evaluation import evaluate_members
from lares_agent.engine.tasks import TaskSpec

__all__ = ["VideoError", "evaluate_policy", "record_video"]


class VideoError(EngineError):
    """A requested video could not be written; the message is one line saying why and what to do."""


def _check_dims(policy: PolicyArtefact, env: Any, task: TaskSpec) -> None:
    obs_dim = int(np.prod(env.observation_space.shape or (1,)))
    want = int(policy.data["actor.0.weight"].shape[0])
    if obs_dim != want:
        raise EngineError(f"the policy takes {want} observations but task {task.name} gives {obs_dim}; "
                          f"it was trained on {policy.task} (pass --task {policy.task})")


def evaluate_policy(task: TaskSpec, policy: PolicyArtefact, episodes: int, seed: int,
                    horizon: int | None = None) -> MemberEvaluation:
    """``episodes`` deterministic episodes, episode e reset with the evaluation seed (seed, e)."""
    if episodes < 1:
        raise EngineError(f"--episodes must be >= 1, got {episodes}")
    pool = EnvPool(task.make_env, seed)
    try:
        _check_dims(policy, pool.get(1)[0], task)
        seeds = [episode_seed(seed, EVAL_STREAM, e) for e in range(episodes)]
        (result,) = evaluate_members(pool, lambda obs, _m: policy.act(obs), task.raw_state, task.features, [0],
                                     [None], episodes, int(horizon or task.horizon), seeds, task.progress_feature)
    finally:
        pool.close()
    return result


def record_video(task: TaskSpec, policy: PolicyArtefact, path: Path, seed: int, horizon: int | None = None,
                 fps: int = 30) -> int:
    """One deterministic episode (the first evaluation seed) rendered off screen into ``path`` (.gif or .mp4);
    returns the number of frames. Raises `VideoError` with one line when this machine cannot do it."""
    suffix = path.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise VideoError(f"--video {path}: write a .gif or an .mp4 file")
    try:
        import imageio.v2 as imageio
    except ImportError:
        raise VideoError("--video needs the imageio package (pip install imageio)") from None
    if suffix == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise VideoError(f"--video {path}: an .mp4 needs the imageio-ffmpeg package; write a .gif instead")
    env = task.make_env(seed)
    try:
        _check_dims(policy, env, task)
        base = env.unwrapped
        if not hasattr(base, "mujoco_renderer"):
            raise VideoError(f"task {task.name} has no MuJoCo renderer; no video written")
        base.render_mode = "rgb_array"  # MuJoCo envs render off screen in this mode (their renderer exists)
        obs, _ = seeded_reset(env, episode_seed(seed, EVAL_STREAM, 0))
        frames: list[Any] = []
        try:
            for _ in range(int(horizon or task.horizon)):
                frames.append(np.asarray(env.render()))
                action = to_env_action(policy.act(np.asarray(obs, np.float32).ravel()[None])[0], env.action_space)
                obs, _, terminated, truncated, _ = env.step(action.astype(env.action_space.dtype, copy=False))
                if terminated or truncated:
                    break
            frames.append(np.asarray(env.render()))
        except Exception as exc:  # GL missing or unusable: the renderer's errors vary by backend
            cause = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise VideoError(f"MuJoCo cannot render off screen here ({type(exc).__name__}: {cause}); try "
                             "MUJOCO_GL=egl or MUJOCO_GL=osmesa, or run without --video") from None
    finally:
        env.close()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".gif":
            imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
        else:
            imageio.mimsave(path, frames, fps=fps)
    except Exception as exc:  # a full disk, a folder that cannot be made, an encoder failing
        raise VideoError(f"cannot write {path} ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})") from None
    return len(frames)
