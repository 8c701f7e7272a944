"""One deterministic episode of a saved policy, rendered off screen into a small GIF (or an MP4): what `lares eval
--video` writes and what the report shows of the policy a run hands over.

Headless MuJoCo needs an OpenGL backend chosen before its first rendering context exists, and the choice cannot
be undone in the same process: PyOpenGL fixes its platform (EGL or OSMesa) when it is first imported. So the
backends are tried in a child process first (`gl_backend`), EGL then OSMesa, and only the one that really drew a
non-blank image is set in ``MUJOCO_GL`` here. A machine where none works gets one line naming the Debian packages
that make EGL work (``make system-deps`` installs them).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lares_agent.engine.errors import EngineError
from lares_agent.engine.policies.policy_eval import check_policy_fits
from lares_agent.engine.rollouts.episodes import EVAL_STREAM, episode_seed, seeded_reset, to_env_action
from lares_agent.engine.tasks import TaskSpec
from lares_agent.errors import LaresError
from lares_agent.runs.oserrors import run_file_error

if TYPE_CHECKING:
    from lares_agent.engine.policies.policy_artefact import PolicyArtefact

__all__ = ["GL_PACKAGES", "Video", "VideoError", "gl_backend", "record_video"]

# What each MUJOCO_GL backend needs on Debian; the first is the one `make system-deps` installs.
GL_PACKAGES: dict[str, str] = {
    "egl": "libegl1 libegl-mesa0 libgl1-mesa-dri",
    "osmesa": "libosmesa6",
    "glfw": "a display (DISPLAY) and libglfw3",
}
_HEADLESS = ("egl", "osmesa")
_SUCCESS = "success"  # the feature every task computes (rollouts.evaluation.SUCCESS_FEATURE)

# Draws a red sphere with MuJoCo's own renderer; exit 0 only if the image is not one colour.
_PROBE = """
import mujoco
m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><light pos="0 0 2"/>'
                                   '<geom type="sphere" size=".2" rgba="1 0 0 1"/></worldbody></mujoco>')
d = mujoco.MjData(m)
mujoco.mj_forward(m, d)
r = mujoco.Renderer(m, 32, 32)
r.update_scene(d)
img = r.render()
r.close()
raise SystemExit(0 if img.min() != img.max() else 3)
"""

_chosen: str | None = None
_refused: str | None = None


class VideoError(EngineError):
    """A requested video could not be written; the message is one line saying why and what to do."""


@dataclass(frozen=True)
class Video:
    """What was written: the file, its frames, the episode's steps and the first step with the success flag."""

    path: Path
    frames: int
    steps: int
    success_step: int | None
    backend: str


def _one_line(text: str, limit: int = 160) -> str:
    return " ".join(text.split())[-limit:]


def _probe(backend: str) -> str | None:
    """None when ``backend`` draws here (tried in a child process), else why not in a few words."""
    env = {**os.environ, "MUJOCO_GL": backend}
    if backend in _HEADLESS:  # PyOpenGL's platform of the same name; GLFW leaves PyOpenGL its default
        env["PYOPENGL_PLATFORM"] = backend
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {_one_line(str(exc))}"
    if done.returncode == 0:
        return None
    if done.returncode == 3:
        return "it drew a blank image"
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    return _one_line(lines[-1] if lines else f"exit code {done.returncode}")


def gl_backend() -> str:
    """The MUJOCO_GL backend this process renders with, set in ``os.environ`` before any context exists.

    A ``MUJOCO_GL`` the user set is kept as it is. Otherwise EGL, then OSMesa, then (with a display) GLFW is
    probed; the answer is remembered for the process because PyOpenGL cannot switch platforms once loaded.
    """
    global _chosen, _refused
    if os.environ.get("MUJOCO_GL"):
        return os.environ["MUJOCO_GL"]
    if _chosen is not None:
        os.environ["MUJOCO_GL"] = _chosen
        return _chosen
    if _refused is not None:
        raise VideoError(_refused)
    platform = os.environ.get("PYOPENGL_PLATFORM", "").lower()
    candidates = [platform] if platform in _HEADLESS else [*_HEADLESS, *(["glfw"] if os.environ.get("DISPLAY") else [])]
    why: list[str] = []
    for backend in candidates:
        reason = _probe(backend)
        if reason is None:
            _chosen = backend
            os.environ["MUJOCO_GL"] = backend
            return backend
        why.append(f"{backend}: {reason}")
    fix = (f"install Debian's {GL_PACKAGES['egl']} (`make system-deps` as root), or {GL_PACKAGES['osmesa']} for "
           "MUJOCO_GL=osmesa") if "egl" in candidates else f"install Debian's {GL_PACKAGES[candidates[0]]}"
    _refused = f"MuJoCo cannot render off screen here ({'; '.join(why)}); {fix}"
    raise VideoError(_refused)


def _writer(path: Path) -> str:
    """The file kind, refused early (before any rendering) when this machine cannot write it."""
    suffix = path.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise VideoError(f"--video {path}: write a .gif or an .mp4 file")
    if suffix == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise VideoError(f"--video {path}: an .mp4 needs the imageio-ffmpeg package; write a .gif instead")
    return suffix


def _prepare(env: Any, task: TaskSpec, size: int) -> None:
    """The env's MuJoCo renderer set to draw ``size`` x ``size`` frames off screen, without shadows and reflections
    (software GL spends most of its time on them, and a 160-pixel frame does not show them)."""
    base = env.unwrapped
    renderer = getattr(base, "mujoco_renderer", None)
    if renderer is None:
        raise VideoError(f"task {task.name} has no MuJoCo renderer; no video written")
    base.render_mode = "rgb_array"  # MuJoCo envs render off screen in this mode (their renderer exists)
    visual = base.model.vis.global_
    visual.offwidth, visual.offheight = max(int(visual.offwidth), size), max(int(visual.offheight), size)
    renderer.width = renderer.height = size


def _plain_scene(renderer: Any) -> None:
    import mujoco

    viewer = getattr(renderer, "viewer", None)
    scene = getattr(viewer, "scn", None)
    if scene is not None:  # gymnasium's private viewer: if it changes, frames keep their shadows, nothing breaks
        scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0


def _episode(task: TaskSpec, policy: PolicyArtefact, env: Any, seed: int, horizon: int, every: int,
             ) -> tuple[list[np.ndarray], int, int | None]:
    """The frames (the reset, every ``every``-th step, the last), the steps played and the first success step."""
    obs, info = seeded_reset(env, episode_seed(seed, EVAL_STREAM, 0))
    env.render()  # makes the viewer, whose scene flags exist only from now on
    _plain_scene(env.unwrapped.mujoco_renderer)
    frames = [np.asarray(env.render())]
    raws, actions = [], []
    steps = 0
    for steps in range(1, horizon + 1):  # after the loop: the episode's length
        action = to_env_action(policy.act(np.asarray(obs, np.float32).ravel()[None])[0], env.action_space)
        obs, _, terminated, truncated, info = env.step(action.astype(env.action_space.dtype, copy=False))
        raws.append(task.raw_state(env, obs, info))
        actions.append(action)
        done = terminated or truncated or steps == horizon
        if steps % every == 0 or done:
            frames.append(np.asarray(env.render()))
        if done:
            break
    success = task.features(np.asarray(raws), np.asarray(actions, np.float64))[_SUCCESS] > 0.5
    first = int(np.argmax(success)) + 1 if bool(np.any(success)) else None
    return frames, steps, first


def _save(frames: list[np.ndarray], path: Path, suffix: str, frame_ms: int) -> None:
    """Written to a temporary name first: a failed write never leaves half a video under the real one."""
    tmp = path.with_name(f".{path.stem}.tmp{suffix}")  # the encoder goes by the suffix
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".gif":
            from PIL import Image  # matplotlib's own dependency

            images = [Image.fromarray(f) for f in frames]
            images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=frame_ms, loop=0)
        else:
            import imageio.v2 as imageio

            imageio.mimsave(tmp, [*frames], fps=1000 / frame_ms)
        os.replace(tmp, path)
    except OSError as exc:  # a full disk, a read-only file system, a folder that cannot be made: in words
        tmp.unlink(missing_ok=True)
        raise VideoError(str(run_file_error("write", path, exc))) from None
    except Exception as exc:  # an encoder failing
        tmp.unlink(missing_ok=True)
        raise VideoError(f"cannot write {path} ({type(exc).__name__}: {_one_line(str(exc))})") from None


def record_video(task: TaskSpec, policy: PolicyArtefact, path: Path, seed: int = 0, horizon: int | None = None,
                 size: int = 160, every: int = 2) -> Video:
    """One deterministic episode (the first evaluation seed, so the first episode `lares eval` scores) rendered
    off screen into ``path`` (.gif or .mp4): ``size`` pixels square, every ``every``-th step, played at the
    simulation's speed or slower. Raises `VideoError` with one line when this machine cannot do it, or when
    every frame came out one colour (a GL driver that draws nothing)."""
    suffix = _writer(path)
    if every < 1 or size < 16:
        raise VideoError(f"a video needs every >= 1 and size >= 16, got every={every}, size={size}")
    env = task.make_env(seed)
    try:
        check_policy_fits(policy, env, task)
        _prepare(env, task, size)
        backend = gl_backend()
        try:
            frames, steps, success_step = _episode(task, policy, env, seed, int(horizon or task.horizon), every)
        except (EngineError, LaresError):  # the policy or the task, not the renderer
            raise
        except Exception as exc:  # GL missing or unusable: the renderer's errors vary by backend
            raise VideoError(f"MuJoCo cannot render off screen with MUJOCO_GL={backend} here ({type(exc).__name__}: "
                             f"{_one_line(str(exc)) or '-'}); it needs {GL_PACKAGES.get(backend, 'a working GL')}"
                             ) from None
        fps = float(env.metadata.get("render_fps") or 30)
    finally:
        env.close()
    if all(int(f.min()) == int(f.max()) for f in frames):
        raise VideoError(f"MuJoCo rendered only blank frames with MUJOCO_GL={backend}; no video written")
    _save(frames, path, suffix, max(40, round(1000 * every / fps)))  # <= 25 a second: a 2 s episode stays watchable
    return Video(path, len(frames), steps, success_step, backend)
