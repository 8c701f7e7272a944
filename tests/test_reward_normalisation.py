"""--reward-normalisation affine|sigmoid|tanh: the one fixed raw -> stored map of a buffer column (ColumnMap)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import FeatureReward, flat_config, point_task
from test_buffer import FnReward
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine import REWARD_NORMALISATIONS, ColumnMap, EngineConfig, ReplayConfig, SACConfig, make_engine
from lares_agent.engine.replay.buffer import ConstantRewardError, ReplayBuffer
from lares_agent.errors import ConfigError
from lares_agent.search.config import SearchConfig, engine_config
from lares_agent.search.options import REWARD_NORMALISATIONS as SEARCH_NORMALISATIONS

OBS, ACT = 3, 2
NAMES = ("dist", "speed")
SQUASHES = ("sigmoid", "tanh")
BOUNDS = {"sigmoid": (0.0, 1.0), "tanh": (-1.0, 1.0)}



SPEED = FnReward("speed", lambda f: np.asarray(f["speed"], np.float64))
SPEED_X100 = FnReward("speed_x100", lambda f: 100.0 * np.asarray(f["speed"], np.float64) + 5.0)
# Heavy-tailed: 1/dist spikes near the goal, the kind of candidate the seed text's sigmoid is for.
INV_DIST = FnReward("inv_dist", lambda f: 1.0 / (np.asarray(f["dist"], np.float64) + 1e-3))


def add_rows(buf: ReplayBuffer, rng: np.random.Generator, n: int, speed_scale: float = 1.0) -> None:
    buf.add(obs=rng.normal(size=(n, OBS)), action=rng.uniform(-1, 1, (n, ACT)), next_obs=rng.normal(size=(n, OBS)),
            terminated=np.zeros(n, bool), truncated=np.zeros(n, bool),
            features={"dist": rng.uniform(0, 2, n), "speed": speed_scale * rng.normal(size=n)})


def filled(n: int = 200, seed: int = 0, columns: int = 3) -> ReplayBuffer:
    buf = ReplayBuffer(1000, OBS, ACT, NAMES, num_columns=columns)
    add_rows(buf, np.random.default_rng(seed), n)
    return buf


def test_the_engine_and_search_names_agree() -> None:
    assert REWARD_NORMALISATIONS == SEARCH_NORMALISATIONS == ("affine", "sigmoid", "tanh")


@pytest.mark.parametrize("kind", SQUASHES)
def test_squash_is_fixed_at_set_time_and_new_rows_use_it(kind: str) -> None:
    buf = filled()
    raw = SPEED(buf.feature_view())
    m = buf.set_column(0, SPEED, reference=None, normalisation=kind)  # type: ignore[arg-type]
    assert m.kind == kind and m.mean == pytest.approx(raw.mean()) and m.std == pytest.approx(raw.std())
    lo, hi = BOUNDS[kind]
    stored = buf.rewards(0).astype(np.float64)
    assert lo < stored.min() and stored.max() < hi  # bounded before any affine match (identity here)
    np.testing.assert_allclose(stored, m.apply(raw), atol=1e-6)
    # Rows on a 50x wider range: the map keeps its set-time mean/std (no drift, §12 item 4) ...
    n0 = len(buf)
    add_rows(buf, np.random.default_rng(1), 300, speed_scale=50.0)
    assert buf.affine(0) == m
    new = buf.rewards(0)[n0:].astype(np.float64)
    np.testing.assert_allclose(new, m.apply(SPEED({k: v[n0:] for k, v in buf.feature_view().items()})), atol=1e-6)
    assert lo <= new.min() and new.max() <= hi and (np.abs(new - (lo + hi) / 2) > 0.45 * (hi - lo)).mean() > 0.5
    # ... and a relabel of the old rows through the same map gives exactly what they hold (one map, both paths).
    old = SPEED({k: v[:n0] for k, v in buf.feature_view().items()})
    np.testing.assert_allclose(buf.rewards(0)[:n0], m.apply(old), atol=1e-6)


@pytest.mark.parametrize("kind", SQUASHES)
def test_the_reference_match_runs_on_the_squashed_values(kind: str) -> None:
    buf = filled()
    buf.set_column(0, SPEED_X100, reference=None)  # the elite: an affine column of wide spread
    m = buf.set_column(1, INV_DIST, reference=0, normalisation=kind)  # type: ignore[arg-type]
    ref, col = buf.rewards(0).astype(np.float64), buf.rewards(1).astype(np.float64)
    assert col.mean() == pytest.approx(ref.mean(), abs=1e-3 * ref.std())
    assert col.std() == pytest.approx(ref.std(), rel=1e-4)
    # Squashed first: the stored column is an affine image of sigmoid/tanh(z), so its range is bounded by that.
    lo, hi = BOUNDS[kind]
    assert col.max() - col.min() <= (hi - lo) * m.scale * (1 + 1e-6)
    np.testing.assert_allclose(col, m.apply(INV_DIST(buf.feature_view())), rtol=1e-5, atol=1e-3)
    # The affine map alone keeps 1/dist's spikes: its largest value sits many standard deviations out.
    buf.set_column(2, INV_DIST, reference=0)
    spike = (buf.rewards(2).max() - ref.mean()) / ref.std()
    squashed = (col.max() - ref.mean()) / ref.std()
    assert spike > 8.0 and squashed < 0.6 * spike  # seed 0: sigmoid 5.1, tanh 4.0 standard deviations


def test_raw_scales_100x_apart_give_the_same_spread_only_when_squashed() -> None:
    for kind in ("affine", *SQUASHES):
        buf = filled()
        buf.set_column(0, SPEED, reference=None, normalisation=kind)  # type: ignore[arg-type]
        buf.set_column(1, SPEED_X100, reference=None, normalisation=kind)  # type: ignore[arg-type]
        ratio = float(buf.rewards(1).std() / buf.rewards(0).std())
        assert ratio == (pytest.approx(100.0, rel=1e-4) if kind == "affine" else pytest.approx(1.0, rel=1e-4))


def test_affine_stays_lares_and_a_constant_squash_is_refused_with_a_reference() -> None:
    buf = filled()
    assert buf.set_column(0, SPEED, reference=None) == ColumnMap()  # the identity, as before
    buf.set_column(1, SPEED_X100, reference=0)
    aff = buf.affine(1)
    assert aff is not None and aff.kind == "affine" and aff.scale == pytest.approx(0.01, rel=1e-4)
    const = FnReward("const", lambda f: np.full(len(f["dist"]), 2.0))
    with pytest.raises(ConstantRewardError):
        buf.set_column(2, const, reference=0, normalisation="sigmoid")
    # the baseline's constant reward without a reference: std 1, every row sigmoid(0)
    m = buf.set_column(2, const, reference=None, allow_constant=True, normalisation="sigmoid")
    assert m.std == 1.0 and np.allclose(buf.rewards(2), 0.5)
    with pytest.raises(ValueError, match="normalisation"):
        buf.set_column(2, SPEED, reference=None, normalisation="softplus")  # type: ignore[arg-type]


def test_state_dict_round_trip_and_old_checkpoints_load_as_affine() -> None:
    buf = filled()
    buf.set_column(0, SPEED, reference=None, normalisation="tanh")
    buf.set_column(1, INV_DIST, reference=0, normalisation="sigmoid")
    state = buf.state_dict()
    assert state["map_kind"] == ["tanh", "sigmoid", None]
    other = ReplayBuffer(1000, OBS, ACT, NAMES, num_columns=3)
    other.load_state_dict(state, [SPEED, INV_DIST, None])
    assert other.affine(0) == buf.affine(0) and other.affine(1) == buf.affine(1) and other.affine(2) is None
    add_rows(buf, np.random.default_rng(4), 20, speed_scale=10.0)
    add_rows(other, np.random.default_rng(4), 20, speed_scale=10.0)
    np.testing.assert_array_equal(buf.rewards(0), other.rewards(0))
    np.testing.assert_array_equal(buf.rewards(1), other.rewards(1))
    # A checkpoint written before ColumnMap: no map_kind / map_stats keys, every map affine.
    old = filled()
    old.set_column(0, SPEED, reference=None)
    old.set_column(1, SPEED_X100, reference=0)
    legacy = {k: v for k, v in old.state_dict().items() if k not in ("map_kind", "map_stats")}
    again = ReplayBuffer(1000, OBS, ACT, NAMES, num_columns=3)
    again.load_state_dict(legacy, [SPEED, SPEED_X100, None])
    assert again.affine(1) == old.affine(1)
    assert again.affine(1) is not None and again.affine(1).kind == "affine"  # type: ignore[union-attr]
    np.testing.assert_array_equal(again.rewards(1), old.rewards(1))


# ---------------------------------------------------------------------------------------------- configs
def test_engine_config_checks_and_round_trips() -> None:
    with pytest.raises(ConfigError, match="unknown reward normalisation 'softplus'"):
        flat_config(reward_normalisation="softplus")  # type: ignore[arg-type]
    cfg = flat_config(reward_normalisation="tanh")
    assert EngineConfig.from_json(cfg.to_json()) == cfg
    assert EngineConfig.from_json(cfg.to_json()).learners.reward_normalisation == "tanh"  # type: ignore[union-attr]


def test_search_config_maps_and_refuses() -> None:
    assert SearchConfig().reward_normalisation == "affine"
    mapped = engine_config(SearchConfig(reward_normalisation="sigmoid"))
    assert isinstance(mapped.learners, ReplayConfig) and mapped.learners.reward_normalisation == "sigmoid"
    with pytest.raises(ConfigError, match="--reward-normalisation must be one of affine, sigmoid, tanh"):
        SearchConfig(reward_normalisation="softmax")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--reward-normalisation tanh applies to the replay-buffer engine"):
        SearchConfig(learner="es", reward_normalisation="tanh")
    assert SearchConfig.from_json({"task": "reach-v3"}).reward_normalisation == "affine"


@pytest.mark.parametrize(("flag", "value"), [("--reward-normalisation", "cubic"), ("--reward-gain", "-3")])
def test_cli_refuses_a_bad_value_in_one_line_before_any_run_folder(tmp_path: Path, flag: str, value: str) -> None:
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["run", "--task", "Reacher-v5", "--budget", "300", "--no-retrieval",
                                      "--no-report", "--run-dir", str(runs), flag, value])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0]
    assert not runs.exists() or not any(runs.iterdir())


# ---------------------------------------------------------------------------------------------- the engine
def test_the_engine_squashes_warmup_and_installed_columns() -> None:
    cfg = flat_config(
        population=2, elites=1, total_steps=60, warmup_steps=60, reward_period=30, eval_every=0,
        eval_episodes=1, update_eval_episodes=1, ts_window=10, buffer_capacity=2000, seed=1, max_rounds=1,
        sac=SACConfig(hidden=(16, 16), batch_size=16, utd_ratio=0.1), feature_sample=50,
        reward_normalisation="tanh",
    )
    rewards: list[Any] = [FeatureReward("dist"), FeatureReward("dist", 40.0)]
    engine = make_engine(point_task(), cfg, rewards, lambda ctx: [FeatureReward("action_norm", 7.0, id="new")
                                                                   for _ in ctx.refill])
    try:
        engine.run(until_steps=30)
        buf = engine.population.buffer
        for j in range(2):  # warm-up columns: tanh with the identity match, so inside (-1, 1) and equal
            m = buf.affine(j)
            assert m is not None and m.kind == "tanh" and m.scale == 1.0
            assert np.all(np.abs(buf.rewards(j)) < 1.0)
        # dist and 40 x dist: one standardised reward, so one stored column (affine: 40x apart)
        np.testing.assert_allclose(buf.rewards(0), buf.rewards(1), atol=1e-5)
        ctx = engine.reward_update()
        assert ctx.refill
        m = buf.affine(ctx.refill[0])
        assert m is not None and m.kind == "tanh"
        col = buf.rewards(ctx.refill[0]).astype(np.float64)
        np.testing.assert_allclose(col, m.apply(FeatureReward("action_norm", 7.0)(buf.feature_view())),
                                   rtol=1e-5, atol=1e-5)
    finally:
        engine.close()
