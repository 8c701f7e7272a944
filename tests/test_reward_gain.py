"""--reward-gain: a starting reward scaled on the warm-up buffer so that it pays a chosen amount more at the goal
(progress and approach distances 0, success 1) than at the stored states; the task's own reward and the sparse
baseline are taken as they are."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import FeatureReward, flat_config, point_task
from test_buffer import FnReward

from lares_agent.engine import EngineConfig, HumanReward, ReplayConfig, SACConfig, make_engine
from lares_agent.engine.replay.buffer import ReplayBuffer
from lares_agent.engine.replay.reward_gain import GAIN_SCALE_BOUNDS, gain_scale, goal_features, goal_gain, start_scale
from lares_agent.errors import ConfigError
from lares_agent.runs import RunLayout, read_jsonl
from lares_agent.search.config import SearchConfig, engine_config
from lares_agent.search.option_checks import ignored_options

TASK = point_task(approach_feature="action_norm")  # a second feature to stand for the approach distance

# Pays for progress and approach, and a speed cost the goal does not fix.
SMALL = FnReward("small", lambda f: 0.1 * (1 - np.asarray(f["dist"]) / 2) - 0.02 * np.asarray(f["action_norm"])
                 - 0.01 * np.asarray(f["speed"]) ** 2)


def rows(n: int = 400, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"dist": rng.uniform(0.5, 2.0, n), "action_norm": rng.uniform(0.0, 1.0, n),
            "speed": rng.uniform(0.0, 1.0, n), "success": np.zeros(n), "next:dist": rng.uniform(0.5, 2.0, n)}


def test_the_goal_zeroes_progress_and_approach_and_sets_success() -> None:
    f = rows()
    goal = goal_features(f, TASK)
    assert np.all(goal["dist"] == 0) and np.all(goal["next:dist"] == 0) and np.all(goal["action_norm"] == 0)
    assert np.all(goal["success"] == 1)
    np.testing.assert_array_equal(goal["speed"], f["speed"])  # what the goal does not fix keeps its value
    assert np.all(f["dist"] > 0) and np.all(f["success"] == 0)  # the rows themselves are not changed
    without_approach = goal_features(f, point_task())
    np.testing.assert_array_equal(without_approach["action_norm"], f["action_norm"])


def test_the_gain_is_what_the_reward_pays_more_at_the_goal() -> None:
    f = rows()
    expected = np.mean(0.05 * np.asarray(f["dist"]) + 0.02 * np.asarray(f["action_norm"]))
    assert goal_gain(SMALL, f, TASK) == pytest.approx(expected)
    assert gain_scale(goal_gain(SMALL, f, TASK), 3.0) == pytest.approx(3.0 / expected)
    # a reward that pays more away from the goal, or nothing for it, keeps its scale; a tiny gain is capped
    assert gain_scale(goal_gain(FeatureReward("dist", -1.0), f, TASK), 10.0) == 1.0
    assert gain_scale(0.0, 10.0) == 1.0 and gain_scale(float("nan"), 10.0) == 1.0
    assert gain_scale(1e-6, 10.0) == GAIN_SCALE_BOUNDS[1] and gain_scale(1e6, 10.0) == GAIN_SCALE_BOUNDS[0]


def test_the_tasks_own_reward_and_no_target_keep_the_reward_as_it_is() -> None:
    f = {**rows(), "human_reward": np.ones(400)}
    assert start_scale(HumanReward(), f, TASK, 10.0) == (1.0, None)
    assert start_scale(SMALL, f, TASK, None) == (1.0, None)
    scale, record = start_scale(SMALL, f, TASK, 10.0)
    assert record is not None and record["reward_id"] == "small" and record["scale"] == scale > 1


def test_the_buffer_multiplies_a_column_without_a_reference() -> None:
    buf = ReplayBuffer(1000, 2, 2, ("dist", "action_norm", "speed", "success"), num_columns=2)
    rng = np.random.default_rng(1)
    f = rows(200, 1)
    buf.add(obs=rng.normal(size=(200, 2)), action=rng.uniform(-1, 1, (200, 2)), next_obs=rng.normal(size=(200, 2)),
            terminated=np.zeros(200, bool), truncated=np.zeros(200, bool),
            features={k: v for k, v in f.items() if not k.startswith("next:")})
    m = buf.set_column(0, SMALL, reference=None, scale=4.0)
    assert m.scale == 4.0 and m.shift == 0.0
    np.testing.assert_allclose(buf.rewards(0), 4.0 * SMALL(buf.feature_view()), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="scale"):
        buf.set_column(1, SMALL, reference=0, scale=2.0)  # the reference decides the scale then
    with pytest.raises(ValueError, match="scale"):
        buf.set_column(1, SMALL, reference=None, scale=0.0)


def _engine_config(**fields: Any) -> EngineConfig:
    return flat_config(population=2, elites=1, total_steps=60, warmup_steps=60, reward_period=30, eval_every=0,
                       eval_episodes=1, update_eval_episodes=1, ts_window=10, buffer_capacity=2000, seed=1,
                       max_rounds=1, sac=SACConfig(hidden=(16, 16), batch_size=16, utd_ratio=0.1),
                       feature_sample=50, **fields)


@pytest.mark.parametrize("setting", ["scratch", "init"])
def test_the_engine_scales_the_starting_rewards_to_the_gain(setting: str, run_layout: RunLayout) -> None:
    rewards: list[Any] = [FeatureReward("dist", 0.1), FeatureReward("dist", 5.0)]  # 50x apart as written
    engine = make_engine(point_task(), _engine_config(reward_gain=3.0, setting=setting), rewards,
                         run_dir=run_layout.root)
    try:
        engine.run(until_steps=1)
        buf = engine.population.buffer
        warmup = next(e for e in read_jsonl(run_layout.events) if e["event"] == "warmup")  # as the record keeps it
        n = warmup["steps"]
        view = buf.feature_view(n)
        for j in range(2):  # each column now pays 3 more at the goal than at the warm-up states, on average
            m = buf.affine(j)
            assert m is not None and m.shift == 0.0 and m.scale < GAIN_SCALE_BOUNDS[1]
            gain = np.mean(m.scale * rewards[j](goal_features(view, point_task())) - buf.rewards(j)[:n])
            assert gain == pytest.approx(3.0, rel=1e-3)
        np.testing.assert_allclose(buf.rewards(0), buf.rewards(1), rtol=1e-4, atol=1e-5)
        # every written reward is recorded, not the init setting's own
        assert [e["reward_id"] for e in warmup["reward_gain"]] == [r.id for r in rewards]
        if setting == "init":
            human = buf.affine(2)
            assert human is not None and human.scale == 1.0
    finally:
        engine.close()


def test_configs_check_map_and_round_trip_the_gain() -> None:
    with pytest.raises(ConfigError, match="reward_gain must be a positive number"):
        flat_config(reward_gain=-1.0)
    cfg = flat_config(reward_gain=10.0)
    assert EngineConfig.from_json(cfg.to_json()) == cfg
    assert EngineConfig.from_json(flat_config().to_json()).learners.reward_gain is None  # type: ignore[union-attr]
    for given in (SearchConfig(reward_gain=10.0), SearchConfig(setting="baseline", reward_gain=10.0,
                                                                reward_components=(("r", "-obj_to_target"),))):
        learners = engine_config(given).learners
        assert isinstance(learners, ReplayConfig) and learners.reward_gain == 10.0
    sparse = engine_config(SearchConfig(setting="baseline", baseline_reward="success", reward_gain=10.0)).learners
    assert isinstance(sparse, ReplayConfig) and sparse.reward_gain is None  # 1 per successful step, as defined
    assert "reward_gain" in ignored_options(SearchConfig(setting="baseline", reward_gain=10.0))
    assert "reward_gain" not in ignored_options(SearchConfig(reward_gain=10.0))
    with pytest.raises(ConfigError, match="--reward-gain must be a positive number"):
        SearchConfig(reward_gain=0.0)
    with pytest.raises(ConfigError, match="--reward-gain scales the replay buffer"):
        SearchConfig(learner="es", reward_gain=10.0)

