"""Task registry: features from stored raw states agree with what the simulators report.

MetaWorld rollouts use the package's scripted expert policies so that success, grasps and joint motion
actually happen; each env is made once per module (about 0.7 s each).
"""

from __future__ import annotations

import dataclasses
import pickle
import warnings

import gymnasium
import numpy as np
import pytest

from lares_agent.engine.tasks import (
    HUMAN_REWARD,
    SUCCESS,
    DuplicateTaskError,
    Feature,
    TaskRegistry,
    TaskShapeError,
    TaskSpec,
    TaskSpecError,
    UnknownTaskError,
    get_task,
    list_tasks,
    register_task,
    unregister_task,
)
from lares_agent.engine.tasks.metaworld import HORIZON
from lares_agent.engine.tasks.metaworld_catalog import METAWORLD_TASKS
from lares_agent.errors import LaresError

MW_NAMES = [t.env_name for t in METAWORLD_TASKS]
GYM_NAMES = ["Reacher-v5", "Pusher-v5", "HalfCheetah-v5"]
REQUIRED = [
    "reach-v3", "push-v3", "pick-place-v3", "button-press-v3", "button-press-topdown-v3", "window-open-v3",
    "window-close-v3", "door-open-v3", "door-close-v3", "drawer-open-v3", "drawer-close-v3", "coffee-push-v3",
    "dial-turn-v3", "hammer-v3", "peg-insert-side-v3", "soccer-v3", *GYM_NAMES,
]  # fmt: skip
MW_GENERIC = [
    "tcp_to_obj", "obj_to_target", "tcp_to_target", "tcp_height", "obj_height", "obj_lift", "gripper_opening",
    "tcp_speed", "obj_speed", "action_norm", "grasped", "near_object", "success",
    "tcp_x", "tcp_y", "tcp_z", "obj_x", "obj_y", "obj_z", "target_x", "target_y", "target_z",
]  # fmt: skip
MW_STEPS = 120


def _rollout(spec: TaskSpec, steps: int, seed: int, policy=None) -> dict:
    """raw states (reset row first), actions (zeros at reset), step rewards (NaN at reset), infos, flags."""
    env = spec.make_env(seed)
    obs, info = env.reset()
    raws, actions, rewards = [spec.raw_state(env, obs, info)], [np.zeros(spec.act_dim)], [np.nan]
    infos, ends = [info], []
    for _ in range(steps):
        action = np.clip(policy.get_action(obs), -1, 1) if policy else env.action_space.sample()
        obs, reward, terminated, truncated, info = env.step(action)
        raws.append(spec.raw_state(env, obs, info))
        actions.append(np.asarray(action, dtype=np.float64))
        rewards.append(float(reward))
        infos.append(info)
        ends.append((terminated, truncated))
        if terminated or truncated:
            obs, info = env.reset()
    return {
        "env": env, "raw": np.array(raws), "action": np.array(actions), "reward": np.array(rewards),
        "info": infos, "ends": ends, "obs": obs,
    }  # fmt: skip


@pytest.fixture(scope="module")
def mw_rollouts() -> dict[str, dict]:
    from metaworld.policies import ENV_POLICY_MAP

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the expert policies warn that their gains exceed the action range
        return {name: _rollout(get_task(name), MW_STEPS, 0, ENV_POLICY_MAP[name]()) for name in MW_NAMES}


@pytest.fixture(scope="module")
def gym_rollouts() -> dict[str, dict]:
    return {name: _rollout(get_task(name), 120, 3) for name in GYM_NAMES}


def _steps(roll: dict) -> slice:
    return slice(1, len(roll["raw"]))  # rows after a step (row 0 is the reset state)


# --- registry ------------------------------------------------------------------------------------------------
def test_builtin_tasks_are_all_listed_with_valid_specs():
    names = [spec.name for spec in list_tasks()]
    assert set(REQUIRED) <= set(names) and len(names) >= 19
    for spec in list_tasks():
        assert spec.progress_feature in spec.feature_names
        assert SUCCESS in spec.output_names and spec.output_names[-1] == HUMAN_REWARD
        assert all(f.meaning and f.unit for f in spec.features)
    for name in MW_NAMES:
        spec = get_task(name)
        assert spec.horizon == HORIZON and spec.family == "metaworld"
        assert set(MW_GENERIC) <= set(spec.feature_names)


def test_unknown_task_names_suggest_close_matches():
    with pytest.raises(UnknownTaskError) as err:
        get_task("reach-v2")
    assert "reach-v3" in err.value.suggestions and "reach-v3" in str(err.value)
    assert isinstance(err.value, LookupError) and isinstance(err.value, LaresError)
    with pytest.raises(UnknownTaskError) as err:
        get_task("halfcheetah")
    assert err.value.suggestions[0] == "HalfCheetah-v5"
    with pytest.raises(UnknownTaskError) as err:
        get_task("zzzz")
    assert err.value.suggestions == () and "did you mean" not in str(err.value)


# --- a user task: a 1-d point that should reach 0 -------------------------------------------------------------
class PointEnv(gymnasium.Env):
    """x' = x + 0.1 a; observation [x]; no reward of its own is used by the task."""

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(-10.0, 10.0, (1,), np.float64)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.x = 0.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = float(self.np_random.uniform(-1, 1))
        return np.array([self.x]), {}

    def step(self, action):
        self.x += 0.1 * float(np.clip(action[0], -1, 1))
        return np.array([self.x]), 0.0, False, False, {}


def make_point(seed: int) -> gymnasium.Env:
    return gymnasium.wrappers.TimeLimit(PointEnv(), 20)


def point_raw(env, obs, info) -> np.ndarray:
    return np.asarray(obs, dtype=np.float64)


def point_features(raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    distance = np.abs(raw[:, 0])
    return {"distance": distance, "effort": np.abs(action[:, 0]), SUCCESS: (distance < 0.05).astype(float)}


def point_spec(name: str = "point-v0", progress: str = "distance") -> TaskSpec:
    return TaskSpec(
        name=name, family="custom", description="Move the point to 0.", horizon=20,
        feature_defs=(Feature("distance", "|x|", "m"), Feature("effort", "|action|", "1")),
        progress_feature=progress, has_human_reward=False, success_test="distance < 0.05", obs_dim=1, act_dim=1,
        state_dim=1, dt=1.0, env_fn=make_point, raw_state_fn=point_raw, feature_fn=point_features,
    )  # fmt: skip


def test_user_task_registers_runs_and_reports_no_human_reward():
    registry = TaskRegistry()
    registry.register(point_spec())
    spec = registry.get("point-v0")
    with pytest.raises(DuplicateTaskError):
        registry.register(point_spec())
    roll = _rollout(spec, 5, 0)
    feats = spec.features(roll["raw"], roll["action"])
    assert list(feats) == ["distance", "effort", SUCCESS, HUMAN_REWARD]
    np.testing.assert_allclose(feats["distance"], np.abs(roll["raw"][:, 0]))
    assert np.isnan(feats[HUMAN_REWARD]).all()
    register_task(point_spec("point-test-v0"))
    try:
        assert get_task("point-test-v0").family == "custom"
        assert "point-test-v0" in [s.name for s in list_tasks()]
    finally:
        unregister_task("point-test-v0")
    with pytest.raises(UnknownTaskError):
        get_task("point-test-v0")


def test_bad_specs_and_shapes_are_rejected_with_a_reason():
    with pytest.raises(TaskSpecError, match="progress feature"):
        point_spec(progress="speed")
    with pytest.raises(TaskSpecError, match="approach feature 'hand'"):
        dataclasses.replace(point_spec(), approach_feature="hand")
    with pytest.raises(TaskSpecError, match="identifier"):
        Feature("obj-to-target", "bad name", "m")
    spec = point_spec()
    with pytest.raises(TaskShapeError, match=r"raw must be \[N, 1\]"):
        spec.compute_features(np.zeros(3), np.zeros((3, 1)))
    with pytest.raises(TaskShapeError, match="action must be"):
        spec.compute_features(np.zeros((3, 1)), np.zeros((2, 1)))


def test_specs_pickle_and_feature_view_is_a_callable_tuple():
    spec = get_task("push-v3")
    copy = pickle.loads(pickle.dumps(spec))
    raw, action = np.random.default_rng(0).normal(size=(4, spec.state_dim)), np.ones((4, spec.act_dim))
    a, b = spec.features(raw, action), copy.compute_features(raw, action)
    assert all(np.array_equal(a[k], b[k]) for k in spec.output_names)
    assert tuple(spec.features) == spec.feature_defs and isinstance(spec.features[0], Feature)
    assert pickle.loads(pickle.dumps(spec.features)) == spec.feature_defs


# --- MetaWorld -----------------------------------------------------------------------------------------------
@pytest.mark.slow  # steps every MetaWorld env with its expert (the shared rollouts take ~20 s)
@pytest.mark.parametrize("name", MW_NAMES)
def test_metaworld_features_match_the_env(name, mw_rollouts):
    spec, roll, task = get_task(name), mw_rollouts[name], next(t for t in METAWORLD_TASKS if t.env_name == name)
    env = roll["env"]
    shapes = (*env.observation_space.shape, *env.action_space.shape, env.unwrapped.dt)
    assert (spec.obs_dim, spec.act_dim, spec.dt) == shapes
    raw, action, s = roll["raw"], roll["action"], _steps(roll)
    feats = spec.features(raw, action)
    assert list(feats) == list(spec.output_names)
    assert all(v.shape == (len(raw),) and np.isfinite(v).all() for v in feats.values())
    infos = roll["info"][s]
    np.testing.assert_array_equal(feats[SUCCESS][s], [float(i["success"]) for i in infos])
    np.testing.assert_allclose(feats[HUMAN_REWARD][s], roll["reward"][s], rtol=1e-12)
    if task.info_distance:  # the distance the env's success test thresholds
        np.testing.assert_allclose(feats[task.info_distance][s], [i["obj_to_target"] for i in infos], atol=1e-9)
    # obs[18:21] is the previous hand position: speeds equal finite differences of consecutive stored rows
    hand = raw[:, 0:3]
    np.testing.assert_allclose(feats["tcp_speed"][s], np.linalg.norm(np.diff(hand, axis=0), axis=1) / spec.dt)
    assert feats["tcp_speed"][s].max() > 0.05  # the expert moved
    rows = [spec.features(raw[i : i + 1], action[i : i + 1]) for i in range(len(raw))]
    for key in spec.output_names:  # vectorised == row by row
        np.testing.assert_array_equal(feats[key], np.concatenate([r[key] for r in rows]))


@pytest.mark.slow  # steps every MetaWorld env with its expert (the shared rollouts take ~20 s)
def test_metaworld_experts_reach_success_and_joint_features_track_it(mw_rollouts):
    solved = [n for n in MW_NAMES
              if get_task(n).features(mw_rollouts[n]["raw"], mw_rollouts[n]["action"])[SUCCESS].any()]
    assert len(solved) >= 12, solved  # the scripted experts solve most seeds within 120 steps
    door = get_task("door-open-v3").features(mw_rollouts["door-open-v3"]["raw"], mw_rollouts["door-open-v3"]["action"])
    np.testing.assert_array_equal(door[SUCCESS] > 0, door["obj_to_target"] <= 0.08)
    assert door["door_angle"][0] == pytest.approx(0.0, abs=1e-3) and door["door_angle"].max() > 1.0
    roll = mw_rollouts["hammer-v3"]
    hammer = get_task("hammer-v3").features(roll["raw"], roll["action"])
    np.testing.assert_array_equal(hammer[SUCCESS][1:] > 0, hammer["nail_depth"][1:] > 0.09)


@pytest.mark.slow  # steps every MetaWorld env with its expert (the shared rollouts take ~20 s)
def test_grasped_follows_the_fingers(mw_rollouts):
    roll = mw_rollouts["pick-place-v3"]
    feats = get_task("pick-place-v3").features(roll["raw"], roll["action"])
    env_grasp = np.array([i["grasp_success"] for i in roll["info"][1:]]) > 0
    assert env_grasp.any() and (feats["grasped"][1:][env_grasp] == 1).all()
    assert feats["obj_lift"][1:][env_grasp].min() > 0.02  # the env's grasp test includes a 2 cm lift
    reach = mw_rollouts["reach-v3"]
    assert get_task("reach-v3").features(reach["raw"], reach["action"])["grasped"].sum() == 0  # fingers stay open


def test_metaworld_runs_to_the_horizon_and_varies_the_goal():
    spec = get_task("reach-v3")
    env = spec.make_env(5)
    targets = []
    for _ in range(2):
        obs, info = env.reset()
        targets.append(spec.raw_state(env, obs, info)[54:57])
        for t in range(1, HORIZON + 1):
            obs, _, terminated, truncated, info = env.step(np.zeros(4))
            assert not terminated and truncated == (t == HORIZON)
    assert not np.allclose(targets[0], targets[1])


# --- Gymnasium MuJoCo ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", GYM_NAMES)
def test_gym_features_shapes_and_human_reward(name, gym_rollouts):
    spec, roll = get_task(name), gym_rollouts[name]
    env = roll["env"]
    shapes = (*env.observation_space.shape, *env.action_space.shape, env.unwrapped.dt)
    assert (spec.obs_dim, spec.act_dim, spec.dt) == shapes
    assert spec.horizon == env.spec.max_episode_steps
    feats = spec.features(roll["raw"], roll["action"])
    assert list(feats) == list(spec.output_names)
    assert all(v.shape == (len(roll["raw"]),) and np.isfinite(v).all() for v in feats.values())
    after_step = [i for i in range(1, len(roll["raw"])) if roll["info"][i]]  # rows after a step
    np.testing.assert_allclose(feats[HUMAN_REWARD][after_step], roll["reward"][after_step], rtol=1e-6, atol=1e-6)
    rows = [spec.features(roll["raw"][i : i + 1], roll["action"][i : i + 1]) for i in range(len(roll["raw"]))]
    for key in spec.output_names:
        np.testing.assert_array_equal(feats[key], np.concatenate([r[key] for r in rows]))


def test_gym_distances_match_the_env_reward_terms(gym_rollouts):
    roll = gym_rollouts["Reacher-v5"]
    feats, s = get_task("Reacher-v5").features(roll["raw"], roll["action"]), _steps(roll)
    np.testing.assert_allclose(feats["fingertip_to_target"][s], [-i["reward_dist"] for i in roll["info"][s]], atol=1e-9)
    tip = roll["raw"][:, 0:3]  # instantaneous speed (MuJoCo) follows the step-averaged one
    fd = np.linalg.norm(np.diff(tip, axis=0), axis=1) / 0.02
    in_episode = [i for i in range(len(fd)) if i == 0 or roll["ends"][i - 1] == (False, False)]  # not across resets
    assert np.corrcoef(fd[in_episode], feats["fingertip_speed"][1:][in_episode])[0, 1] > 0.8
    roll = gym_rollouts["Pusher-v5"]
    feats, s = get_task("Pusher-v5").features(roll["raw"], roll["action"]), _steps(roll)
    np.testing.assert_allclose(feats["tip_to_obj"][s], [-i["reward_near"] / 0.5 for i in roll["info"][s]], atol=1e-9)
    dz = roll["raw"][s, 5] - roll["raw"][s, 8]
    np.testing.assert_allclose(np.hypot(feats["obj_to_goal"][s], dz), [-i["reward_dist"] for i in roll["info"][s]])
    roll = gym_rollouts["HalfCheetah-v5"]
    feats, s = get_task("HalfCheetah-v5").features(roll["raw"], roll["action"]), _steps(roll)
    np.testing.assert_allclose(feats["forward_velocity"][s], [i["x_velocity"] for i in roll["info"][s]])
    x = np.array([i["x_position"] for i in roll["info"]])
    np.testing.assert_allclose(feats["distance_travelled"], x - x[0], atol=1e-12)


def test_gym_success_tests():
    reacher = get_task("Reacher-v5")
    raw = np.zeros((2, reacher.state_dim))
    raw[:, 3:6] = [0.1, 0.0, 0.01]
    raw[0, 0:3], raw[1, 0:3] = [0.11, 0.0, 0.01], [0.15, 0.0, 0.01]
    assert reacher.features(raw, np.zeros((2, 2)))[SUCCESS].tolist() == [1.0, 0.0]
    cheetah = get_task("HalfCheetah-v5")
    raw = np.zeros((3, cheetah.state_dim))
    raw[:, 20] = [200, 200, 50]  # steps since reset
    raw[:, 0] = [200 * 0.05 * 5.0, 200 * 0.05 * 4.0, 50 * 0.05 * 6.0]  # x: 5, 4 and 6 m/s on average
    feats = cheetah.features(raw, np.zeros((3, 6)))
    assert feats[SUCCESS].tolist() == [1.0, 0.0, 0.0]
    np.testing.assert_allclose(feats["average_velocity"], [5.0, 4.0, 6.0])
