"""Your own task from the command line: Gymnasium's InvertedPendulum-v5 (not built into lares).

    lares run --task examples.inverted_pendulum:task --llm openai --base-url http://127.0.0.1:8080/v1

`--task package.module:function` imports this module (from the folder lares runs in, or PYTHONPATH) and calls
`task()`, which returns a `TaskSpec`: the env factory, the features a reward may read (name, meaning, unit), how
each is computed from a raw state recorded after every step, and the success test. The reference is recorded in
config.json; `lares resume`, `report`, `eval` and `export` import the module again only when given the same
`--task` (a run folder alone never imports code), and `lares tasks --show` takes the reference too.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from lares_agent.engine.tasks import HUMAN_REWARD, SUCCESS, EpisodeRecorder, Feature, TaskSpec, recorder_of

ENV_ID = "InvertedPendulum-v5"
DT = 0.04  # 2 MuJoCo steps of 0.02 s per env step
UPRIGHT = 0.2  # rad: the env ends the episode once the pole leans further
BALANCED_STEPS = 100  # success: upright for 100 steps (4 s)

# raw state: cart position 0, pole angle 1, cart velocity 2, pole angular velocity 3, steps since reset 4, reward 5
STATE_DIM = 6

FEATURES = (
    Feature("pole_angle", "angle of the pole from upright (positive leans toward +x)", "rad"),
    Feature("pole_tilt", "absolute angle of the pole from upright (the episode ends above 0.2)", "rad"),
    Feature("pole_angular_velocity", "angular velocity of the pole", "rad/s"),
    Feature("cart_position", "position of the cart on its rail (0 = centre, rail ends at +-1)", "m"),
    Feature("cart_velocity", "velocity of the cart", "m/s"),
    Feature("action_norm", "absolute force on the cart (action in [-3, 3])", "1"),
    Feature("time_balanced", "time since the start of the episode with the pole up", "s"),
    Feature(SUCCESS, f"1 once the pole has stayed within {UPRIGHT} rad for {BALANCED_STEPS} steps", "bool"),
)


def make_env(seed: int) -> gymnasium.Env:
    """The env, wrapped in lares' EpisodeRecorder (seeding and the step count the raw state records)."""
    return EpisodeRecorder(gymnasium.make(ENV_ID, disable_env_checker=True), seed)


def raw_state(env: gymnasium.Env, obs: Any, info: Any) -> np.ndarray:
    """float64 [6] captured right after each reset and step."""
    data = env.unwrapped.data  # type: ignore[attr-defined]
    reward = 0.0 if info.get("reward_survive") is None else float(info["reward_survive"])
    steps = float(recorder_of(env).episode_step)
    return np.array([data.qpos[0], data.qpos[1], data.qvel[0], data.qvel[1], steps, reward], dtype=np.float64)


def features(raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    """All features of N stored steps at once (pure numpy)."""
    tilt = np.abs(raw[:, 1])
    steps = raw[:, 4]
    return {
        "pole_angle": raw[:, 1].copy(),
        "pole_tilt": tilt,
        "pole_angular_velocity": raw[:, 3].copy(),
        "cart_position": raw[:, 0].copy(),
        "cart_velocity": raw[:, 2].copy(),
        "action_norm": np.abs(action[:, 0]),
        "time_balanced": steps * DT,
        SUCCESS: ((steps >= BALANCED_STEPS) & (tilt <= UPRIGHT)).astype(np.float64),
        HUMAN_REWARD: raw[:, 5].copy(),
    }


def task() -> TaskSpec:
    """The task `--task examples.inverted_pendulum:task` names."""
    return TaskSpec(
        name="InvertedPendulum-v5",
        family="custom",
        description=(
            "Gymnasium InvertedPendulum-v5: a cart on a rail carries a hinged pole; the action is the force on the "
            f"cart. Keep the pole upright (the episode ends once it leans more than {UPRIGHT} rad) and the cart "
            "near the centre. Episodes last up to 1000 steps of 0.04 s."
        ),
        horizon=1000,
        feature_defs=FEATURES,
        progress_feature="pole_tilt",
        has_human_reward=True,
        success_test=f"pole within {UPRIGHT} rad for {BALANCED_STEPS} steps",
        obs_dim=4,
        act_dim=1,
        state_dim=STATE_DIM,
        dt=DT,
        env_fn=make_env,
        raw_state_fn=raw_state,
        feature_fn=features,
    )
