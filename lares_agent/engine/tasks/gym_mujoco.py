"""Gymnasium MuJoCo tasks: Reacher-v5, Pusher-v5 and HalfCheetah-v5.

Velocities are read from MuJoCo when the raw state is captured (`mj_objectVelocity`, world frame), so the
features stay pure functions of one stored row. The human reward is rebuilt from the env's `info` reward
terms, which sum to the step reward (checked in tests), and written as an expression in `human_rewards.py`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium
import numpy as np

from lares_agent.engine.tasks.envs import EpisodeRecorder, recorder_of
from lares_agent.engine.tasks.human_rewards import GYM_HUMAN
from lares_agent.engine.tasks.spec import HUMAN_REWARD, SUCCESS, Feature, TaskSpec, info_float, row_norm

__all__ = [
    "CHEETAH_MIN_STEPS",
    "CHEETAH_SPEED",
    "PUSHER_RADIUS",
    "REACHER_RADIUS",
    "gym_mujoco_specs",
    "make_gym_env",
]

REACHER_RADIUS = 0.02
"""Reacher success (m): fingertip sphere (radius 0.01) and target sphere (0.009) touch."""
PUSHER_RADIUS = 0.05
"""Pusher success (m): object centre within 5 cm of the goal centre in the table plane (goal disc radius 0.08)."""
CHEETAH_SPEED = 4.8
"""HalfCheetah success (m/s): Gymnasium's reward_threshold 4800 over 1000 steps is about 4.8 m/s on average."""
CHEETAH_MIN_STEPS = 100
"""HalfCheetah success needs that average held for at least this many steps (5 s), not one lucky lunge."""


def make_gym_env(env_id: str, seed: int) -> gymnasium.Env:
    """`gymnasium.make(env_id)` with its registered time limit, seeded on the first reset."""
    return EpisodeRecorder(gymnasium.make(env_id, disable_env_checker=True), seed)


def _linear_velocity(env: gymnasium.Env, body: str) -> np.ndarray:
    import mujoco

    model, data = env.unwrapped.model, env.unwrapped.data  # type: ignore[attr-defined]
    out = np.zeros(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, model.body(body).id, out, 0)
    return out[3:].copy()  # [angular, linear] -> linear, world frame


def _body(env: gymnasium.Env, name: str) -> np.ndarray:
    return np.array(env.unwrapped.data.body(name).xpos, dtype=np.float64)  # type: ignore[attr-defined]


# --- Reacher-v5 ------------------------------------------------------------------------------------------
# raw: fingertip xyz 0:3, target xyz 3:6, fingertip velocity 6:9, arm qvel 9:11, reward 11
_REACHER_DIM = 12


def reacher_raw_state(env: gymnasium.Env, obs: Any, info: Any) -> np.ndarray:
    """float64 [12]: fingertip and target positions, fingertip velocity, arm joint velocities, env reward."""
    qvel = env.unwrapped.data.qvel  # type: ignore[attr-defined]
    reward = info_float(info, "reward_dist") + info_float(info, "reward_ctrl")
    return np.concatenate(
        [_body(env, "fingertip"), _body(env, "target"), _linear_velocity(env, "fingertip"), qvel[:2], [reward]]
    )


def reacher_features(raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    """Reacher features of [N] stored steps (pure numpy)."""
    distance = row_norm(raw[:, 0:3] - raw[:, 3:6])
    return {
        "fingertip_to_target": distance,
        "fingertip_speed": row_norm(raw[:, 6:9]),
        "joint_speed": row_norm(raw[:, 9:11]),
        "action_norm": row_norm(action),
        "fingertip_x": raw[:, 0].copy(),
        "fingertip_y": raw[:, 1].copy(),
        "target_x": raw[:, 3].copy(),
        "target_y": raw[:, 4].copy(),
        SUCCESS: (distance <= REACHER_RADIUS).astype(np.float64),
        HUMAN_REWARD: raw[:, 11].copy(),
    }


_REACHER_FEATURES = (
    Feature("fingertip_to_target", "distance from the fingertip to the target", "m"),
    Feature("fingertip_speed", "speed of the fingertip", "m/s"),
    Feature("joint_speed", "norm of the two joint angular velocities", "rad/s"),
    Feature("action_norm", "Euclidean norm of the 2-d torque action (each in [-1, 1])", "1"),
    Feature("fingertip_x", "x coordinate of the fingertip", "m"),
    Feature("fingertip_y", "y coordinate of the fingertip", "m"),
    Feature("target_x", "x coordinate of the target", "m"),
    Feature("target_y", "y coordinate of the target", "m"),
    Feature(SUCCESS, f"1 when fingertip_to_target <= {REACHER_RADIUS} m (the two spheres touch)", "bool"),
)

# --- Pusher-v5 -------------------------------------------------------------------------------------------
# raw: tip xyz 0:3, object xyz 3:6, goal xyz 6:9, tip velocity 9:12, object velocity 12:15, arm qvel 15:22, reward 22
_PUSHER_DIM = 23


def pusher_raw_state(env: gymnasium.Env, obs: Any, info: Any) -> np.ndarray:
    """float64 [23]: tip, object and goal positions, tip and object velocities, arm joint velocities, reward."""
    qvel = env.unwrapped.data.qvel  # type: ignore[attr-defined]
    reward = sum(info_float(info, key) for key in ("reward_dist", "reward_ctrl", "reward_near"))
    return np.concatenate(
        [
            _body(env, "tips_arm"),
            _body(env, "object"),
            _body(env, "goal"),
            _linear_velocity(env, "tips_arm"),
            _linear_velocity(env, "object"),
            qvel[:7],
            [reward],
        ]
    )


def pusher_features(raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    """Pusher features of [N] stored steps (pure numpy)."""
    # the object slides 4.8 cm above the goal disc, so distance to the goal is measured in the table plane
    obj_to_goal = row_norm(raw[:, 3:5] - raw[:, 6:8])
    return {
        "tip_to_obj": row_norm(raw[:, 0:3] - raw[:, 3:6]),
        "obj_to_goal": obj_to_goal,
        "tip_speed": row_norm(raw[:, 9:12]),
        "obj_speed": row_norm(raw[:, 12:15]),
        "joint_speed": row_norm(raw[:, 15:22]),
        "action_norm": row_norm(action),
        "tip_x": raw[:, 0].copy(),
        "tip_y": raw[:, 1].copy(),
        "tip_z": raw[:, 2].copy(),
        "obj_x": raw[:, 3].copy(),
        "obj_y": raw[:, 4].copy(),
        "obj_z": raw[:, 5].copy(),
        "goal_x": raw[:, 6].copy(),
        "goal_y": raw[:, 7].copy(),
        "goal_z": raw[:, 8].copy(),
        SUCCESS: (obj_to_goal <= PUSHER_RADIUS).astype(np.float64),
        HUMAN_REWARD: raw[:, 22].copy(),
    }


_PUSHER_FEATURES = (
    Feature("tip_to_obj", "distance from the arm's fingertips to the object", "m"),
    Feature("obj_to_goal", "distance from the object to the goal in the table plane", "m"),
    Feature("tip_speed", "speed of the arm's fingertips", "m/s"),
    Feature("obj_speed", "speed of the object", "m/s"),
    Feature("joint_speed", "norm of the 7 arm joint angular velocities", "rad/s"),
    Feature("action_norm", "Euclidean norm of the 7-d torque action (each in [-2, 2])", "1"),
    Feature("tip_x", "x coordinate of the fingertips", "m"),
    Feature("tip_y", "y coordinate of the fingertips", "m"),
    Feature("tip_z", "height of the fingertips", "m"),
    Feature("obj_x", "x coordinate of the object", "m"),
    Feature("obj_y", "y coordinate of the object", "m"),
    Feature("obj_z", "height of the object centre", "m"),
    Feature("goal_x", "x coordinate of the goal", "m"),
    Feature("goal_y", "y coordinate of the goal", "m"),
    Feature("goal_z", "height of the goal disc's centre", "m"),
    Feature(SUCCESS, f"1 when obj_to_goal <= {PUSHER_RADIUS} m", "bool"),
)

# --- HalfCheetah-v5 --------------------------------------------------------------------------------------
# raw: qpos 0:9, qvel 9:18, x velocity 18, torso height 19, step 20, x at reset 21, reward 22
_CHEETAH_DIM = 23
_CHEETAH_DT = 0.05


def cheetah_raw_state(env: gymnasium.Env, obs: Any, info: Any) -> np.ndarray:
    """float64 [23]: qpos (with x), qvel, x velocity, torso height, step count, x at reset, env reward."""
    recorder = recorder_of(env)
    data = env.unwrapped.data  # type: ignore[attr-defined]
    x_reset = recorder.reset_qpos[0] if recorder.reset_qpos.size else float(data.qpos[0])
    reward = info_float(info, "reward_forward") + info_float(info, "reward_ctrl")
    head = [info_float(info, "x_velocity"), float(data.body("torso").xpos[2]), float(recorder.episode_step), x_reset]
    return np.concatenate([data.qpos, data.qvel, head, [reward]])


def cheetah_features(raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    """HalfCheetah features of [N] stored steps (pure numpy)."""
    steps = raw[:, 20]
    travelled = raw[:, 0] - raw[:, 21]
    average = np.divide(travelled, steps * _CHEETAH_DT, out=np.zeros_like(travelled), where=steps > 0)
    return {
        "forward_velocity": raw[:, 18].copy(),
        "distance_travelled": travelled,
        "average_velocity": average,
        "speed_shortfall": CHEETAH_SPEED - average,
        "torso_height": raw[:, 19].copy(),
        "torso_angle": raw[:, 2].copy(),
        "angular_velocity": raw[:, 11].copy(),
        "joint_speed": row_norm(raw[:, 12:18]),
        "action_norm": row_norm(action),
        SUCCESS: ((steps >= CHEETAH_MIN_STEPS) & (average >= CHEETAH_SPEED)).astype(np.float64),
        HUMAN_REWARD: raw[:, 22].copy(),
    }


_CHEETAH_FEATURES = (
    Feature("forward_velocity", "forward (+x) velocity of the torso over the last step", "m/s"),
    Feature("distance_travelled", "x distance covered since the start of the episode", "m"),
    Feature("average_velocity", "distance_travelled divided by the time since the start of the episode", "m/s"),
    Feature(
        "speed_shortfall",
        f"{CHEETAH_SPEED} m/s minus average_velocity (progress measure: lower is better, <= 0 is on pace)",
        "m/s",
    ),
    Feature("torso_height", "height of the torso centre above the ground", "m"),
    Feature("torso_angle", "pitch of the torso (0 = level; large values mean flipping over)", "rad"),
    Feature("angular_velocity", "pitch rate of the torso", "rad/s"),
    Feature("joint_speed", "norm of the 6 leg joint angular velocities", "rad/s"),
    Feature("action_norm", "Euclidean norm of the 6-d torque action (each in [-1, 1])", "1"),
    Feature(
        SUCCESS,
        f"1 when average_velocity >= {CHEETAH_SPEED} m/s after at least {CHEETAH_MIN_STEPS} steps",
        "bool",
    ),
)


def gym_mujoco_specs() -> tuple[TaskSpec, ...]:
    """The three Gymnasium MuJoCo tasks (horizons are the registered time limits)."""
    return (
        TaskSpec(
            name="Reacher-v5",
            family="gymnasium",
            description=(
                "Gymnasium Reacher-v5: a two-joint planar arm; the action is the torque of each joint. Move the "
                "fingertip onto a randomly placed target and keep it there, with little effort. Episodes last 50 "
                "steps of 0.02 s."
            ),
            horizon=50,
            feature_defs=_REACHER_FEATURES,
            progress_feature="fingertip_to_target",
            has_human_reward=True,
            success_test=f"fingertip_to_target <= {REACHER_RADIUS} m",
            obs_dim=10,
            act_dim=2,
            state_dim=_REACHER_DIM,
            dt=0.02,
            env_fn=partial(make_gym_env, "Reacher-v5"),
            raw_state_fn=reacher_raw_state,
            feature_fn=reacher_features,
            human_components=GYM_HUMAN['Reacher-v5'],
        ),
        TaskSpec(
            name="Pusher-v5",
            family="gymnasium",
            description=(
                "Gymnasium Pusher-v5: a 7-joint arm on a table; the action is the torque of each joint. Bring the "
                "fingertips to a white cylinder and push it onto the red goal disc. Episodes last 100 steps of 0.05 s."
            ),
            horizon=100,
            feature_defs=_PUSHER_FEATURES,
            progress_feature="obj_to_goal",
            approach_feature="tip_to_obj",
            has_human_reward=True,
            success_test=f"obj_to_goal <= {PUSHER_RADIUS} m",
            obs_dim=23,
            act_dim=7,
            state_dim=_PUSHER_DIM,
            dt=0.05,
            env_fn=partial(make_gym_env, "Pusher-v5"),
            raw_state_fn=pusher_raw_state,
            feature_fn=pusher_features,
            human_components=GYM_HUMAN['Pusher-v5'],
        ),
        TaskSpec(
            name="HalfCheetah-v5",
            family="gymnasium",
            description=(
                "Gymnasium HalfCheetah-v5: a planar two-legged robot; the action is the torque of its 6 leg joints. "
                "Run forward (+x) as fast as possible without flipping over, with little effort. Episodes last "
                "1000 steps of 0.05 s."
            ),
            horizon=1000,
            feature_defs=_CHEETAH_FEATURES,
            progress_feature="speed_shortfall",
            has_human_reward=True,
            success_test=f"average_velocity >= {CHEETAH_SPEED} m/s after >= {CHEETAH_MIN_STEPS} steps",
            obs_dim=17,
            act_dim=6,
            state_dim=_CHEETAH_DIM,
            dt=_CHEETAH_DT,
            env_fn=partial(make_gym_env, "HalfCheetah-v5"),
            raw_state_fn=cheetah_raw_state,
            feature_fn=cheetah_features,
            human_components=GYM_HUMAN['HalfCheetah-v5'],
        ),
    )
