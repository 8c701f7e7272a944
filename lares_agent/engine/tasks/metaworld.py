"""MetaWorld v3 tasks (the LaRes benchmark family): env factory, raw state and vectorised features.

One generic feature set serves every task; a `MetaWorldTask` says what "obj" and "target" are and how the
env itself measures progress (which axes, which point), so `obj_to_target` is the distance the env's own
success test uses. The raw state is captured after every step (docs/lares-reference.md §2.5: LaRes reward functions
read tcp, pads, init positions and the goal from the post-step state) and holds copies, never live
references (docs/lares-reference.md §12 item 17).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium
import numpy as np

from lares_agent.engine.tasks.envs import EpisodeRecorder, recorder_of
from lares_agent.engine.tasks.spec import HUMAN_REWARD, SUCCESS, Feature, TaskSpec, info_float, row_norm

__all__ = [
    "HORIZON",
    "MW_DT",
    "STATE_DIM",
    "JointFeature",
    "MetaWorldTask",
    "make_metaworld_env",
    "metaworld_feature_defs",
    "metaworld_features",
    "metaworld_raw_state",
    "metaworld_spec",
]

HORIZON = 150
"""Episode length in env steps, as LaRes (docs/lares-reference.md §9: `--episode-length` 150), truncation only."""
MW_DT = 0.0125
"""Seconds per env step: MuJoCo timestep 0.0025 s x frame skip 5 (checked against `env.unwrapped.dt` in tests)."""
OBS_DIM, ACT_DIM = 39, 4
NEAR_RADIUS = 0.05
"""`near_object` radius (m): the widest of the envs' own near-object thresholds (0.01-0.05 m)."""
GRASP_OPENING = 0.7
"""Gripper opening (0..1) below which fingers around the object count as closed on it (0.45 holding a puck)."""

# raw state layout (float64)
_OBS = slice(0, 39)  # the env observation: hand xyz, opening, objects, previous frame, goal
_TCP = slice(39, 42)  # tcp_center: midpoint of the two fingertips (obs[0:3] is the hand body)
_LPAD = slice(42, 45)
_RPAD = slice(45, 48)
_INIT_TCP = slice(48, 51)
_OBJ_INIT = slice(51, 54)  # obs[4:7] at reset
_TARGET = slice(54, 57)  # env._target_pos
_HEAD = slice(57, 60)  # the point obj_to_target measures from (obj, a site such as the peg head, or obj + offset)
_JOINT, _SUCCESS, _NEAR, _GRASP, _REWARD = 60, 61, 62, 63, 64
STATE_DIM = 65

_AXES = "xyz"
Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class JointFeature:
    """A task-specific feature read from one joint position: value = scale * qpos."""

    joint: str
    name: str
    meaning: str
    unit: str
    scale: float = 1.0


@dataclass(frozen=True)
class MetaWorldTask:
    """How one MetaWorld env maps onto the generic features.

    `obj` names what obs[4:7] is, `target` what env._target_pos is; `target_weights` scale the x, y, z
    differences in `obj_to_target` as the env's own success test does (0 drops an axis); `head_site` or
    `head_offset` move the measured point off obs[4:7] (peg head, hammer head); `reach_offset` moves the point
    `tcp_to_obj` measures to (the dial's push point). `info_distance` names the feature that equals the env's
    `info["obj_to_target"]` (None where the env reports 0 there).
    """

    env_name: str
    obj: str
    target: str
    goal: str
    success_text: str
    progress: str = "obj_to_target"
    target_weights: Vec3 = (1.0, 1.0, 1.0)
    head: str = ""
    head_site: str = ""
    head_offset: Vec3 = (0.0, 0.0, 0.0)
    reach_offset: Vec3 = (0.0, 0.0, 0.0)
    joint: JointFeature | None = None
    info_distance: str | None = "obj_to_target"


def _distance_words(weights: Vec3) -> str:
    used = [(axis, w) for axis, w in zip(_AXES, weights, strict=True) if w]
    if len(used) == 3 and all(w == 1.0 for _, w in used):
        return "distance"
    if len(used) == 1 and used[0][1] == 1.0:
        return f"distance along {used[0][0]}"
    return "distance with " + ", ".join(f"{axis} weighted {w:g}" for axis, w in used)


def metaworld_feature_defs(task: MetaWorldTask) -> tuple[Feature, ...]:
    """The features a reward for `task` may use, with meanings that name the task's own object and target."""
    obj, target = task.obj, task.target
    head = task.head or obj
    reach = f"{obj} (its push point, offset {task.reach_offset})" if any(task.reach_offset) else obj
    features = [
        Feature("tcp_to_obj", f"distance from the gripper centre to the {reach}", "m"),
        Feature("obj_to_target", f"{_distance_words(task.target_weights)} from the {head} to the {target}", "m"),
        Feature("tcp_to_target", f"distance from the gripper centre to the {target}", "m"),
        Feature("tcp_height", "height of the gripper centre above the table", "m"),
        Feature("obj_height", f"height of the {obj} above the table", "m"),
        Feature("obj_lift", f"height of the {obj} above its height at the start of the episode", "m"),
        Feature("gripper_opening", "distance between the fingers, 0 closed .. 1 fully open", "1"),
        Feature("tcp_speed", "speed of the gripper", "m/s"),
        Feature("obj_speed", f"speed of the {obj}", "m/s"),
        Feature("action_norm", "Euclidean norm of the 4-d action (3 motion commands and the gripper command)", "1"),
        Feature("gripper_command", "gripper part of the action: +1 closes the fingers, -1 opens them", "1"),
        Feature(
            "grasped", f"1 when the {obj} sits between the two finger pads and the gripper is closed on it", "bool"
        ),
        Feature("near_object", f"1 when tcp_to_obj <= {NEAR_RADIUS} m", "bool"),
        Feature(SUCCESS, f"1 when the task's success test holds: {task.success_text}", "bool"),
    ]
    if task.joint is not None:
        features.append(Feature(task.joint.name, task.joint.meaning, task.joint.unit))
    for prefix, what in (("tcp", "gripper centre"), ("obj", obj), ("target", target)):
        features.extend(Feature(f"{prefix}_{axis}", f"{axis} coordinate of the {what}", "m") for axis in _AXES)
    return tuple(features)


def make_metaworld_env(env_name: str, horizon: int, seed: int) -> gymnasium.Env:
    """`Meta-World/MT1` for one task, truncated at `horizon` steps, never terminated on success.

    MT1's chain is TimeLimit(500) -> AutoTerminateOnSuccess -> RecordEpisodeStatistics -> RandomTaskSelect
    (a new goal variation on every reset) -> Checkpoint. MT1 already builds AutoTerminateOnSuccess switched
    off; it is switched off again explicitly because LaRes always runs to the horizon (docs/lares-reference.md §8-9).
    """
    import metaworld  # noqa: F401  (importing registers the Meta-World/* ids; slow, so only here)
    from metaworld.wrappers import AutoTerminateOnSuccessWrapper

    env = gymnasium.make(
        "Meta-World/MT1", env_name=env_name, seed=int(seed), max_episode_steps=horizon, disable_env_checker=True
    )
    current: Any = env
    while current is not None:
        if isinstance(current, AutoTerminateOnSuccessWrapper):
            current.toggle_terminate_on_success(False)
        current = getattr(current, "env", None)
    return EpisodeRecorder(env, seed)


def metaworld_raw_state(task: MetaWorldTask, env: gymnasium.Env, obs: Any, info: Any) -> np.ndarray:
    """float64 [65]: obs, tcp, pads, init tcp, init obj, goal, measured point, joint, info flags, env reward."""
    recorder = recorder_of(env)
    sawyer: Any = env.unwrapped
    o = np.asarray(obs, dtype=np.float64).reshape(-1)
    raw = np.zeros(STATE_DIM, dtype=np.float64)
    raw[_OBS] = o
    raw[_TCP] = sawyer.tcp_center
    raw[_LPAD] = sawyer.get_body_com("leftpad")
    raw[_RPAD] = sawyer.get_body_com("rightpad")
    raw[_INIT_TCP] = sawyer.init_tcp
    raw[_OBJ_INIT] = recorder.reset_obs[4:7]
    raw[_TARGET] = sawyer._target_pos
    raw[_HEAD] = sawyer._get_site_pos(task.head_site) if task.head_site else o[4:7] + np.asarray(task.head_offset)
    if task.joint is not None:
        raw[_JOINT] = float(sawyer.data.joint(task.joint.joint).qpos[0])
    raw[_SUCCESS] = info_float(info, "success")
    raw[_NEAR] = info_float(info, "near_object")
    raw[_GRASP] = info_float(info, "grasp_success")
    raw[_REWARD] = info_float(info, "unscaled_reward")  # MT1 applies no reward normalisation: equals the step reward
    return raw


def metaworld_features(task: MetaWorldTask, raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    """All features of [N] stored steps at once (pure numpy)."""
    obs = raw[:, _OBS]
    obj, tcp, target = obs[:, 4:7], raw[:, _TCP], raw[:, _TARGET]
    lpad, rpad = raw[:, _LPAD], raw[:, _RPAD]
    opening = obs[:, 3]
    tcp_to_obj = row_norm(tcp - (obj + np.asarray(task.reach_offset)))
    # MetaWorld closes its fingers along y: the object is held when it lies between the pads in y, level with
    # the fingertips, and the fingers have closed (the envs' own grasp flags are task-specific or constant).
    between = (obj[:, 1] > np.minimum(lpad[:, 1], rpad[:, 1])) & (obj[:, 1] < np.maximum(lpad[:, 1], rpad[:, 1]))
    level = (np.abs(tcp[:, 2] - obj[:, 2]) <= 0.03) & (np.abs(tcp[:, 0] - obj[:, 0]) <= 0.05)
    out = {
        "tcp_to_obj": tcp_to_obj,
        "obj_to_target": row_norm((raw[:, _HEAD] - target) * np.asarray(task.target_weights)),
        "tcp_to_target": row_norm(tcp - target),
        "tcp_height": tcp[:, 2].copy(),
        "obj_height": obj[:, 2].copy(),
        "obj_lift": obj[:, 2] - raw[:, _OBJ_INIT][:, 2],
        "gripper_opening": opening.copy(),
        # obs[18:36] is the previous frame of obs[0:18], so speeds need no second raw state
        "tcp_speed": row_norm(obs[:, 0:3] - obs[:, 18:21]) / MW_DT,
        "obj_speed": row_norm(obs[:, 4:7] - obs[:, 22:25]) / MW_DT,
        "action_norm": row_norm(action),
        "gripper_command": action[:, 3].copy(),
        "grasped": (between & level & (opening < GRASP_OPENING)).astype(np.float64),
        "near_object": (tcp_to_obj <= NEAR_RADIUS).astype(np.float64),
        SUCCESS: (raw[:, _SUCCESS] > 0.5).astype(np.float64),
        HUMAN_REWARD: raw[:, _REWARD].copy(),
    }
    if task.joint is not None:
        out[task.joint.name] = task.joint.scale * raw[:, _JOINT]
    for prefix, points in (("tcp", tcp), ("obj", obj), ("target", target)):
        for i, axis in enumerate(_AXES):
            out[f"{prefix}_{axis}"] = points[:, i].copy()
    return out


def metaworld_spec(task: MetaWorldTask) -> TaskSpec:
    """The TaskSpec of one MetaWorld task."""
    description = (
        f"MetaWorld {task.env_name}: a Sawyer arm above a table; the action moves the hand in x, y, z and "
        f"opens/closes the gripper (all in [-1, 1]). {task.goal} In the features, 'obj' is the {task.obj} and "
        f"'target' is the {task.target}. Success: {task.success_text}. Each episode starts from new object and "
        f"goal positions and lasts {HORIZON} steps of {MW_DT} s; it does not end on success."
    )
    return TaskSpec(
        name=task.env_name,
        family="metaworld",
        description=description,
        horizon=HORIZON,
        feature_defs=metaworld_feature_defs(task),
        progress_feature=task.progress,
        has_human_reward=True,
        success_test=task.success_text,
        obs_dim=OBS_DIM,
        act_dim=ACT_DIM,
        state_dim=STATE_DIM,
        dt=MW_DT,
        env_fn=partial(make_metaworld_env, task.env_name, HORIZON),
        raw_state_fn=partial(metaworld_raw_state, task),
        feature_fn=partial(metaworld_features, task),
        approach_feature=None if task.progress.startswith("tcp_") else "tcp_to_obj",  # reach-v3 has no object
    )
