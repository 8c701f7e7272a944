"""MetaWorld v3 tasks (the LaRes benchmark family): env factory, raw state and vectorised features.

One generic feature set serves every task; a `MetaWorldTask` says what "obj" and "target" are and how the
env itself measures progress (which axes, which point), so `obj_to_target` is the distance the env's own
success test uses. The raw state is captured after every step (docs/lares-reference.md §2.5: LaRes reward functions
read tcp, pads, init positions and the goal from the post-step state) and holds copies, never live
references (docs/lares-reference.md §12 item 17). A task whose own reward is written as an expression
(`human_rewards.py`) also declares the extra features that expression reads (`metaworld_extras.py`).
"""

from __future__ import annotations

import re
from functools import cache, partial
from typing import Any

import gymnasium
import numpy as np

from lares_agent.engine.tasks.envs import EpisodeRecorder, recorder_of
from lares_agent.engine.tasks.human_rewards import METAWORLD_HUMAN
from lares_agent.engine.tasks.metaworld_extras import (
    CAGING_FEATURE_NAMES,
    EXTRA_FEATURE_NAMES,
    RawParts,
    distance_words,
    extra_feature_defs,
    extra_features,
)
from lares_agent.engine.tasks.metaworld_task import JointFeature, MetaWorldTask
from lares_agent.engine.tasks.spec import HUMAN_REWARD, SUCCESS, Feature, TaskSpec, TaskSpecError, info_float, row_norm

__all__ = [
    "HORIZON",
    "MW_DT",
    "STATE_DIM",
    "JointFeature",
    "MetaWorldTask",
    "extra_names",
    "human_components",
    "make_metaworld_env",
    "metaworld_feature_defs",
    "metaworld_features",
    "metaworld_raw_state",
    "metaworld_spec",
]

HORIZON = 150
_GOAL_ATTEMPTS = 3  # MT1's goal draws: see make_metaworld_env
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
_HAND_INIT = slice(65, 68)  # env.hand_init_pos: where the hand (wrist) is sent at reset
_OBJ_INIT_ENV = slice(68, 71)  # env.obj_init_pos, as the env's reward and caging helper read it
_START = slice(71, 74)  # the object's start point as the env's reward margins use it (MetaWorldTask.start)
_INIT_LPAD = slice(74, 77)  # env.init_left_pad / init_right_pad
_INIT_RPAD = slice(77, 80)
STATE_DIM = 80

_AXES = "xyz"


def human_components(task: MetaWorldTask) -> tuple[tuple[str, str], ...] | None:
    """The env's own reward of `task` as named expressions (`human_rewards.py`), None where not written."""
    return METAWORLD_HUMAN.get(task.env_name)


@cache  # features are computed on every step batch; the expressions never change
def extra_names(task: MetaWorldTask) -> tuple[str, ...]:
    """The extra features the task declares: those its own reward expression names (gripper_caging reads the
    caging features)."""
    components = human_components(task) or ()
    words = {word for _, text in components for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)}
    if "gripper_caging" in words:
        if not task.caging:
            raise TaskSpecError(f"task {task.env_name}: its reward uses gripper_caging but it names no caging geometry")
        words |= set(CAGING_FEATURE_NAMES)
    return tuple(name for name in EXTRA_FEATURE_NAMES if name in words)


def metaworld_feature_defs(task: MetaWorldTask) -> tuple[Feature, ...]:
    """The features a reward for `task` may use, with meanings that name the task's own object and target."""
    obj, target = task.obj, task.target
    head = task.head or obj
    reach = f"{obj} (its push point, offset {task.reach_offset})" if any(task.reach_offset) else obj
    features = [
        Feature("tcp_to_obj", f"distance from the gripper centre to the {reach}", "m"),
        Feature("obj_to_target", f"{distance_words(task.target_weights)} from the {head} to the {target}", "m"),
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
    features.extend(extra_feature_defs(task, extra_names(task)))
    return tuple(features)


def make_metaworld_env(env_name: str, horizon: int, seed: int) -> gymnasium.Env:
    """`Meta-World/MT1` for one task, truncated at `horizon` steps, never terminated on success.

    MT1's chain is TimeLimit(500) -> AutoTerminateOnSuccess -> RecordEpisodeStatistics -> RandomTaskSelect
    (a new goal variation on every reset) -> Checkpoint. MT1 already builds AutoTerminateOnSuccess switched
    off; it is switched off again explicitly because LaRes always runs to the horizon (docs/lares-reference.md §8-9).
    """
    import metaworld  # noqa: F401  (importing registers the Meta-World/* ids; slow, so only here)
    from metaworld.wrappers import AutoTerminateOnSuccessWrapper

    for attempt in range(_GOAL_ATTEMPTS):
        try:
            env = gymnasium.make(
                "Meta-World/MT1", env_name=env_name, seed=int(seed), max_episode_steps=horizon,
                disable_env_checker=True,
            )
            break
        except AssertionError as exc:
            # MetaWorld 3.1.1 asserts that the 50 goals it draws for MT1 are distinct, and once in a while they are
            # not (seen in CI: "Only generated 49 unique goals, not 50"); a new draw succeeds.
            if "unique goals" not in str(exc) or attempt == _GOAL_ATTEMPTS - 1:
                raise
    current: Any = env
    while current is not None:
        if isinstance(current, AutoTerminateOnSuccessWrapper):
            current.toggle_terminate_on_success(False)
        current = getattr(current, "env", None)
    return EpisodeRecorder(env, seed)


def _start_point(task: MetaWorldTask, sawyer: Any) -> np.ndarray:
    if task.start.startswith("site:"):
        point = sawyer._get_site_pos(task.start.removeprefix("site:"))
    else:
        point = getattr(sawyer, task.start)
    start: np.ndarray = np.asarray(point, dtype=np.float64).reshape(-1)[:3] + np.asarray(task.start_offset)
    return start


def metaworld_raw_state(task: MetaWorldTask, env: gymnasium.Env, obs: Any, info: Any) -> np.ndarray:
    """float64 [80]: obs, tcp, pads, init tcp, init obj, goal, measured point, joint, info flags, env reward, then
    the hand's reset position, the env's obj_init_pos, the reward's start point and the pads' initial positions."""
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
    if task.target_z is not None:
        raw[_TARGET.stop - 1] = task.target_z
    raw[_HEAD] = sawyer._get_site_pos(task.head_site) if task.head_site else o[4:7] + np.asarray(task.head_offset)
    if task.joint is not None:
        raw[_JOINT] = float(sawyer.data.joint(task.joint.joint).qpos[0])
    raw[_SUCCESS] = info_float(info, "success")
    raw[_NEAR] = info_float(info, "near_object")
    raw[_GRASP] = info_float(info, "grasp_success")
    raw[_REWARD] = info_float(info, "unscaled_reward")  # MT1 applies no reward normalisation: equals the step reward
    raw[_HAND_INIT] = sawyer.hand_init_pos
    raw[_OBJ_INIT_ENV] = np.asarray(sawyer.obj_init_pos, dtype=np.float64).reshape(-1)[:3]
    raw[_START] = _start_point(task, sawyer)
    raw[_INIT_LPAD] = sawyer.init_left_pad
    raw[_INIT_RPAD] = sawyer.init_right_pad
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
    names = extra_names(task)
    if names:
        parts = RawParts(obs=obs, tcp=tcp, target=target, head=raw[:, _HEAD], start=raw[:, _START],
                         obj_init=raw[:, _OBJ_INIT_ENV], init_tcp=raw[:, _INIT_TCP], hand_init=raw[:, _HAND_INIT],
                         lpad=lpad, rpad=rpad, init_lpad=raw[:, _INIT_LPAD], init_rpad=raw[:, _INIT_RPAD])
        out.update(extra_features(task, parts, names))
    return out


_OBJECT_FEATURES = ("tcp_to_obj", "grasped", "near_object")


def _object_features(features: tuple[Feature, ...]) -> tuple[str, ...]:
    """The features about the object, for a task whose goal the hand reaches alone: the scene still holds the
    object (reach-v3's puck), but a reward term about it pays for nothing the task asks."""
    return tuple(f.name for f in features if f.name.startswith("obj_") or f.name in _OBJECT_FEATURES)


def metaworld_spec(task: MetaWorldTask) -> TaskSpec:
    """The TaskSpec of one MetaWorld task."""
    hand_only = task.progress.startswith("tcp_")  # reach-v3: the scene's object is not part of the task
    names = (f"'target' is the {task.target}" if hand_only
             else f"'obj' is the {task.obj} and 'target' is the {task.target}")
    starts = "goal positions" if hand_only else "object and goal positions"
    description = (
        f"MetaWorld {task.env_name}: a Sawyer arm above a table; the action moves the hand in x, y, z and "
        f"opens/closes the gripper (all in [-1, 1]). {task.goal} In the features, {names}. Success: "
        f"{task.success_text}. Each episode starts from new {starts} and lasts {HORIZON} steps of {MW_DT} s; it "
        "does not end on success."
    )
    features = metaworld_feature_defs(task)
    return TaskSpec(
        name=task.env_name,
        family="metaworld",
        description=description,
        horizon=HORIZON,
        feature_defs=features,
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
        approach_feature=None if hand_only else "tcp_to_obj",
        human_components=human_components(task),
        offstage_features=_object_features(features) if hand_only else (),
    )
