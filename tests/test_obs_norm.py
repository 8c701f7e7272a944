"""Running observation normalisation, and the SAC options it and the LayerNorm critic add (batched == single)."""

from __future__ import annotations

import helpers
import numpy as np
import pytest
import torch

from lares_agent.engine.contracts import Batch
from lares_agent.engine.learners.actor_critic import ActorCriticPopulation
from lares_agent.engine.learners.nets import member_seeds
from lares_agent.engine.learners.obs_norm import ObsNormalizer
from lares_agent.engine.learners.sac import SACConfig, SACLearner

K, OBS, ACT, B = 3, 4, 2, 16
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_batch_by_batch_statistics_equal_all_at_once() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(size=(1000, OBS)) * [1.0, 10.0, 0.01, 3.0] + [0.0, 5.0, -2.0, 1e3]
    norm = ObsNormalizer(OBS)
    for chunk in np.split(data, [1, 7, 300, 301, 999]):
        norm.update(chunk)
    assert norm.count == 1000
    np.testing.assert_allclose(norm.mean, data.mean(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(norm.var, data.var(0), rtol=1e-10)
    out = norm.normalize(torch.as_tensor(data, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(out.mean(0), 0.0, atol=1e-4)
    np.testing.assert_allclose(out.std(0), 1.0, atol=1e-4)


def test_identity_before_data_clipping_frozen_and_non_finite_rows() -> None:
    norm = ObsNormalizer(2, clip=5.0)
    x = torch.tensor([[0.5, -2.0]])
    assert torch.allclose(norm.normalize(x), x)  # mean 0, var 1 before any data
    norm.update(np.array([[0.0, 0.0], [2.0, 2.0], [np.nan, 1.0]]))  # the NaN row is skipped
    assert norm.count == 2
    state = norm.state_dict()
    out = norm.normalize(torch.tensor([[100.0, 1.0]]))
    assert out[0, 0] == 5.0 and out[0, 1] == pytest.approx(0.0, abs=1e-6)  # clipped; the mean maps to 0
    assert norm.state_dict()["count"] == state["count"]  # normalising never changes the statistics
    np.testing.assert_array_equal(norm.state_dict()["m2"], state["m2"])


def test_state_dict_round_trip_and_copy() -> None:
    rng = np.random.default_rng(1)
    norm = ObsNormalizer(OBS)
    norm.update(rng.normal(size=(50, OBS)))
    twin = ObsNormalizer(OBS)
    twin.load_state_dict(norm.state_dict())
    x = torch.as_tensor(rng.normal(size=(3, OBS)), dtype=torch.float32)
    assert torch.equal(norm.normalize(x), twin.normalize(x))
    other = ObsNormalizer(OBS)
    other.copy_from(norm)
    norm.update(rng.normal(size=(5, OBS)))  # the copy is independent afterwards
    assert other.count == 50 and norm.count == 55
    with pytest.raises(ValueError, match="dim"):
        ObsNormalizer(OBS + 1).load_state_dict(norm.state_dict())


def random_batch(rng: np.random.Generator, c: int) -> Batch:
    return helpers.random_batch(rng, c, B, OBS, ACT, terminal_rate=0.0)


@pytest.mark.parametrize("option", ["obs_norm", "critic_layer_norm"])
def test_sac_options_batched_equal_single_learners(option: str) -> None:
    cfg = SACConfig(hidden=(16, 16), batch_size=B, **{option: True})
    rng = np.random.default_rng(2)
    pop = ActorCriticPopulation(K, OBS, ACT, cfg, seed=4)
    learners = [SACLearner(OBS, ACT, cfg, seed=s) for s in member_seeds(4, K)]
    for step in range(4):
        obs = rng.normal(size=(20, OBS)) * 4.0 + 2.0
        pop.observe(obs)
        for learner in learners:
            learner.observe(obs)
        batch = random_batch(rng, K)
        got = pop.update(batch)
        for m, learner in enumerate(learners):
            for key, value in learner.update(batch.column(m)).items():
                assert got[key][m] == pytest.approx(value, rel=1e-4, abs=1e-6), (step, key, m)
    obs = rng.normal(size=(K, OBS)).astype(np.float32)
    acted = pop.act(obs, np.arange(K), True, torch.Generator())
    for m, learner in enumerate(learners):
        np.testing.assert_allclose(acted[m : m + 1], learner.act(obs[m : m + 1], True, torch.Generator()),
                                   rtol=1e-5, atol=1e-6)
    if option == "critic_layer_norm":
        assert any(isinstance(m, torch.nn.LayerNorm) for m in learners[0].qf1.net)
        assert not any(isinstance(m, torch.nn.LayerNorm) for m in learners[0].actor.net)
    else:
        assert pop.obs_norm is not None and pop.obs_norm.count == 80
        twin = ActorCriticPopulation(K, OBS, ACT, cfg, seed=0)
        twin.load_state_dict(pop.state_dict())
        assert twin.obs_norm is not None and twin.obs_norm.count == 80


def test_sac_defaults_unchanged() -> None:
    """Off by default: no normaliser, no LayerNorm (the reference's networks)."""
    learner = SACLearner(OBS, ACT, SACConfig(hidden=(8,)), seed=0)
    assert learner.obs_norm is None
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in learner.qf1.net)
    assert ActorCriticPopulation(1, OBS, ACT, SACConfig(hidden=(8,)), seed=0).state_dict()["obs_norm"] is None
