"""`--device`: the SAC/CrossQ population computes where the run asks, and its files load on any machine.

The tests run on the CPU. The plumbing is checked on torch's `meta` device (tensors with shapes and no values,
and the same refusal to mix devices as CUDA's): every tensor an update makes must land there, apart from the host
random draws that are copied over once. A GPU is simulated where only its presence matters (`cuda_available`),
and a file written by a CUDA run is simulated by tagging its tensors "cuda:0" as torch.save would on a GPU.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import flat_config, load_reward, point_task, three_rewards
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine import EngineError, PolicyArtefact, make_engine, restore_engine
from lares_agent.engine.contracts import Batch, UpdateContext
from lares_agent.engine.learners import devices
from lares_agent.engine.learners.actor_critic import ActorCriticPopulation
from lares_agent.engine.learners.crossq import CrossQConfig
from lares_agent.engine.learners.sac import SACConfig
from lares_agent.engine.populations import replay
from lares_agent.engine.setup.config import ReplayConfig
from lares_agent.engine.state.checkpoint import latest_checkpoint, load_checkpoint
from lares_agent.errors import ConfigError
from lares_agent.runs.jsonl import read_jsonl
from lares_agent.search.config import SearchConfig, engine_config
from lares_agent.search.start_checks import device_for_resume

torch.set_num_threads(1)

K, OBS, ACT, B = 3, 5, 2, 8
CONFIGS: dict[str, SACConfig | CrossQConfig] = {
    "sac": SACConfig(hidden=(16, 16), obs_norm=True),
    "crossq": CrossQConfig(actor_hidden=(16,), critic_hidden=(16, 16), obs_norm=True, policy_delay=2,
                           renorm_warmup_steps=1),
}
# The only ops allowed to make floating-point tensors off the device: the members' CPU generators draw the noise
# (randn), which is gathered (stack, view) and copied over in one go, and numpy inputs become tensors (lift_fresh)
# on their way to the device. Integer results may stay on the host (update counts, index lists).
HOST_DRAWS = {"aten.randn.generator", "aten.stack.default", "aten.view.default", "aten.lift_fresh.default"}


class _OffDevice(TorchDispatchMode):
    """Counts every op, and by name the ops with a floating-point result off ``device``."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device, self.ops, self.off = device, 0, collections.Counter[str]()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.device != self.device:
                self.off[str(func)] += 1
        return out


def _batch(rng: np.random.Generator, members: int) -> Batch:
    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    return Batch(obs=normal(members, B, OBS), action=np.tanh(normal(members, B, ACT)), reward=normal(members, B),
                 next_obs=normal(members, B, OBS), terminated=np.zeros((members, B), np.float32),
                 indices=np.zeros((members, B), np.int64))


def _state_tensors(pop: ActorCriticPopulation) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor the population keeps between steps, by name (update counts excepted: host by design)."""
    groups: dict[str, list[torch.Tensor]] = {
        "actor": pop.actor, "critic": pop.critic, "critic_target": pop.critic_target or [],
        "actor_running": [*pop._actor.running, pop._actor.steps],
        "critic_running": [*pop._critic.running, pop._critic.steps],
        "anchors": [*pop.anchor_actor, *pop.anchor_critic, pop.anchor_weight],
        "temperature": [pop.log_alpha], "last": [pop.last],
    }
    for name, opt in (("actor_adam", pop.actor_optimizer), ("q_adam", pop.q_optimizer), ("alpha_adam",
                                                                                        pop.a_optimizer)):
        groups[name] = [*opt.exp_avg, *opt.exp_avg_sq, opt.step]
    for name, tensors in groups.items():
        for i, t in enumerate(tensors):
            yield f"{name}[{i}]", t


@pytest.mark.parametrize("kind", ["sac", "crossq"])
def test_every_tensor_of_a_step_lands_on_the_population_device(kind: str) -> None:
    meta = torch.device("meta")
    pop = ActorCriticPopulation(K, OBS, ACT, CONFIGS[kind], seed=0, device=meta, tune_malloc=False)
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)
    pop.observe(rng.standard_normal((20, OBS)))
    with _OffDevice(meta) as spy:
        for deterministic in (False, True):
            actions = pop.act(rng.standard_normal((4, OBS)), np.array([0, 2, 1, 0]), deterministic, gen)
            assert actions.shape == (4, ACT)  # NaN: meta tensors have no values
        assert set(pop.update(_batch(rng, K))) >= {"q_loss", "actor_loss", "alpha"}  # every member
        pop.update(_batch(rng, 2), [2, 0])  # some members (a quarantine): gathered rows, per-row Adam steps
        pop.inherit([1, 2], 0, anchor_weight=1.0)  # the L2 pull joins both losses
        pop.update(_batch(rng, K))
        pop.update(_batch(rng, 2), [1, 2])
        pop.release_anchor([0, 1, 2])
    assert spy.ops > 500
    assert set(spy.off) <= HOST_DRAWS, spy.off
    for name, t in _state_tensors(pop):
        assert t.device == meta, name
    assert pop.updates.tolist() == [3, 4, 4]  # host bookkeeping followed the device work


def _small(**fields: Any) -> Any:
    return flat_config(population=3, elites=1, total_steps=60, warmup_steps=40, reward_period=40, eval_every=0,
                       eval_episodes=1, update_eval_episodes=1, ts_window=5, buffer_capacity=2000, seed=2,
                       checkpoint_every=40, sac=SACConfig(hidden=(16, 16), batch_size=16, utd_ratio=0.25),
                       **fields)


def _refill(ctx: UpdateContext) -> list[Any]:
    return [three_rewards()[slot] for slot in ctx.refill]


def _building_on_cpu(monkeypatch: pytest.MonkeyPatch) -> list[torch.device]:
    """Record the device the replay population asks for, and build it on the CPU (this machine may have no GPU)."""
    asked: list[torch.device] = []
    real = replay.make_population

    def spy(*args: Any, device: str | torch.device = "cpu") -> Any:
        asked.append(torch.device(device))
        return real(*args)

    monkeypatch.setattr(replay, "make_population", spy)
    return asked


def test_the_configured_device_reaches_the_learners(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked = _building_on_cpu(monkeypatch)
    monkeypatch.setattr(devices, "cuda_available", lambda: True)
    for name, expected in (("auto", "cuda"), ("cuda", "cuda"), ("cpu", "cpu")):
        make_engine(point_task(), _small(device=name), three_rewards()).close()
        assert asked[-1] == torch.device(expected), name
    monkeypatch.setattr(devices, "cuda_available", lambda: False)
    engine = make_engine(point_task(), _small(device="auto"), three_rewards(), run_dir=tmp_path)
    try:
        assert asked[-1] == torch.device("cpu")
        engine.run(until_steps=1)
    finally:
        engine.close()
    warmup = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "warmup"]
    assert [e["device"] for e in warmup] == ["cpu"]  # what "auto" became is in the record
    with pytest.raises(EngineError, match="no CUDA GPU"):
        make_engine(point_task(), _small(device="cuda"), three_rewards())


def test_a_run_trained_on_cuda_resumes_and_evaluates_on_the_cpu(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    _building_on_cpu(monkeypatch)
    monkeypatch.setattr(devices, "cuda_available", lambda: True)
    with monkeypatch.context() as gpu_files:  # what torch.save writes for tensors that live on a GPU
        gpu_files.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        engine = make_engine(point_task(), _small(device="cuda"), three_rewards(), _refill, run_dir=tmp_path)
        try:
            engine.run()
            engine.save_policy("final")
        finally:
            engine.close()
    monkeypatch.undo()  # no GPU from here on, and the population is built where it is asked for
    checkpoint = latest_checkpoint(tmp_path / "checkpoints")
    assert checkpoint is not None
    with pytest.raises(RuntimeError, match="CUDA"):  # the files really are tagged for a GPU
        torch.load(checkpoint / "tensors.pt", weights_only=True)
    state = load_checkpoint(checkpoint)  # map_location: every tensor on the CPU
    assert state["config"]["learners"]["device"] == "cuda"
    with pytest.raises(EngineError, match="no CUDA GPU"):
        restore_engine(checkpoint, point_task(), load_reward, _refill)
    resumed = restore_engine(checkpoint, point_task(), load_reward, _refill, device="cpu")
    try:
        assert getattr(resumed.population, "device", None) == torch.device("cpu")
        resumed.run(until_steps=resumed.env_steps + 15)
    finally:
        resumed.close()
    policy = PolicyArtefact.load(tmp_path / "policies" / "final.pt")
    assert np.all(np.abs(policy.act(np.zeros((2, 4), np.float32))) <= 1.0)


def test_search_config_maps_and_keeps_the_device() -> None:
    cfg = SearchConfig(device="auto", learner="crossq", setting="scratch")
    learners = engine_config(cfg).learners
    assert isinstance(learners, ReplayConfig) and learners.device == "auto"  # resolved by the engine, where it runs
    assert SearchConfig.from_json(cfg.to_json()).device == "auto"
    old = {k: v for k, v in SearchConfig().to_json().items() if k != "device"}
    assert SearchConfig.from_json(old).device == "cpu"  # runs from before the option ran on the CPU
    with pytest.raises(ConfigError, match="--device must be one of auto, cpu, cuda"):
        SearchConfig(device="gpu")  # type: ignore[arg-type]


def test_a_resume_without_the_gpu_continues_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    monkeypatch.setattr(devices, "cuda_available", lambda: False)
    assert device_for_resume(SearchConfig(device="cuda"), said.append).device == "cpu"
    assert len(said) == 1 and "continues on the CPU" in said[0]
    for cfg in (SearchConfig(device="auto"), SearchConfig(device="cpu")):
        assert device_for_resume(cfg, said.append) == cfg
    monkeypatch.setattr(devices, "cuda_available", lambda: True)
    assert device_for_resume(SearchConfig(device="cuda"), said.append).device == "cuda"
    assert len(said) == 1


SMALL = ["--task", "Reacher-v5", "--budget", "300", "--reward-period", "150", "--population", "2", "--elites", "1",
         "--no-retrieval", "--no-report", "--handover-episodes", "2"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--device", "cuda"], "torch sees no CUDA GPU here"),
    (["--device", "cuda", "--learner", "es"], "ES policies compute in numpy"),
    (["--device", "gpu"], "--device must be one of auto, cpu, cuda"),
])
def test_a_device_the_run_cannot_use_is_refused_before_the_run_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str], fragment: str
) -> None:
    monkeypatch.setattr(devices, "cuda_available", lambda: False)
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["run", *SMALL, "--run-dir", str(runs), *args])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and fragment in lines[0], result.output
    assert not runs.exists()
