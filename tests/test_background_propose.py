"""The reward proposal in the background: the learners train while the hook runs.

A scripted hook that blocks on a `threading.Event` stands in for the LLM round; the engine is the real
`LaResEngine` on the tiny point-mass task with tiny networks.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_lares_engine import Proposer, load_reward, scratch_rewards, tiny_config, tiny_task

from lares_agent.engine import EngineError, HumanReward, LaResEngine, UpdateContext, make_engine, restore_engine
from lares_agent.engine.state.checkpoint import latest_checkpoint, load_checkpoint
from lares_agent.runs.jsonl import read_jsonl

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WAIT_S = 60.0  # hang guard only; nothing is timed against it


class GatedProposer(Proposer):
    """The fixed-candidate hook, held until the test opens the gate (like an LLM round still running)."""

    def __init__(self, hold_s: float = 0.0) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.hold_s = hold_s
        self.thread: str | None = None

    def __call__(self, ctx: UpdateContext) -> Sequence[Any]:
        self.thread = threading.current_thread().name
        self.entered.set()
        if not self.gate.wait(WAIT_S):
            raise TimeoutError("the test never opened the gate")
        time.sleep(self.hold_s)
        return super().__call__(ctx)


class SlowProposer(Proposer):
    def __init__(self, sleep_s: float) -> None:
        super().__init__()
        self.sleep_s = sleep_s

    def __call__(self, ctx: UpdateContext) -> Sequence[Any]:
        time.sleep(self.sleep_s)
        return super().__call__(ctx)


class OverdueProposer(Proposer):
    """The fixed-candidate hook, returning only once the engine has reached the next round's due step (or the
    budget's end) and then ``hold_s`` later: the engine must wait for it however fast or slow its iterations are
    (a fixed sleep raced them on a loaded machine)."""

    def __init__(self, hold_s: float) -> None:
        super().__init__()
        self.hold_s = hold_s
        self.engine: LaResEngine | None = None

    def __call__(self, ctx: UpdateContext) -> Sequence[Any]:
        engine = self.engine
        assert engine is not None
        due = min(ctx.env_steps + engine.config.reward_period, engine.config.total_steps)
        deadline = time.monotonic() + WAIT_S
        while engine.env_steps < due and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(self.hold_s)
        return super().__call__(ctx)


def _until(engine: LaResEngine, condition: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        assert not engine.done, "the budget ran out first"
        engine.step()


def _events(engine: LaResEngine, kind: str) -> list[dict[str, Any]]:
    return [e for e in engine.events if e["event"] == kind]


def test_background_round_installs_later_while_the_learners_train(tmp_path: Path) -> None:
    hook = GatedProposer()
    cfg = tiny_config(total_steps=900, reward_period=300, checkpoint_every=30, propose_in_background=True)
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), hook, run_dir=tmp_path)
    _until(engine, lambda: engine.update_in_flight)
    started = _events(engine, "reward_update_started")
    assert len(started) == 1 and started[0]["background"] is True
    s0 = started[0]["env_steps"]
    before = [fn.id for fn in engine.rewards]
    assert hook.entered.wait(WAIT_S) and hook.thread is not None and hook.thread.startswith("lares-propose")
    # The proposer's sample is a copy: the buffer it came from keeps growing while the round runs.
    ctx = hook.contexts[0] if hook.contexts else None
    assert ctx is None  # the hook has not returned yet
    for _ in range(4):
        engine.step()  # the learners keep training on their current rewards
    assert engine.env_steps > s0 and engine.update_in_flight and engine.round == 0
    assert [fn.id for fn in engine.rewards] == before and not _events(engine, "candidate_accepted")
    # No periodic checkpoint while the round is in flight (checkpoint_every is 30 steps, 4 iterations are more).
    assert all(e["env_steps"] <= s0 for e in _events(engine, "checkpoint"))
    time.sleep(0.3)  # the LLM takes its time; the hook's llm_s counts it, the learners' wait does not
    hook.gate.set()
    _until(engine, lambda: engine.round >= 1)
    accepted = _events(engine, "candidate_accepted")
    assert engine.round == 1 and len(accepted) == len(hook.contexts[0].refill) == 2
    assert all(e["proposed_at"] == s0 < e["installed_at"] for e in accepted)
    update = _events(engine, "reward_update")[0]
    assert update["proposed_at"] == s0 < update["env_steps"] == accepted[0]["installed_at"]
    assert update["llm_s"] >= 0.3 and update["waited_s"] < 0.1
    assert engine.llm_wait["waited_s"] < 0.1 <= engine.llm_wait["llm_s"]
    # Installed at the later step: the round's checkpoint and the new rewards are there.
    assert {fn.id for fn in engine.rewards} >= {e["reward_id"] for e in accepted}
    names = [e["name"] for e in _events(engine, "checkpoint")]
    assert "round-0001" in names
    features = engine.population.buffer.features
    assert not any(np.shares_memory(v, features) for v in hook.contexts[0].feature_sample.values())
    engine.close()


def test_sync_mode_installs_at_the_step_it_started_and_counts_the_wait() -> None:
    hook = SlowProposer(0.2)
    engine = make_engine(tiny_task(), tiny_config(total_steps=300), scratch_rewards(), hook)
    engine.run()
    accepted = _events(engine, "candidate_accepted")
    started = {e["round"]: e["env_steps"] for e in _events(engine, "reward_update_started")}
    assert engine.round == 2 and len(accepted) == 4
    assert all(e["proposed_at"] == e["installed_at"] == started[e["round"]] for e in accepted)
    assert all(e["background"] is False for e in _events(engine, "reward_update_started"))
    wait = engine.llm_wait
    assert wait["llm_s"] >= 0.4 and abs(wait["waited_s"] - wait["llm_s"]) < 0.05


def test_a_due_update_waits_for_the_round_in_flight_and_rounds_never_overlap() -> None:
    hook = OverdueProposer(0.5)
    cfg = tiny_config(total_steps=300, reward_period=45, propose_in_background=True)
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), hook)
    hook.engine = engine
    engine.run()
    starts = {e["round"]: e["env_steps"] for e in _events(engine, "reward_update_started")}
    installs = {e["round"]: e["env_steps"] for e in _events(engine, "reward_update")}
    assert len(installs) == len(starts) >= 3 and not engine.update_in_flight
    for n in range(1, len(installs)):
        assert starts[n] < installs[n] <= starts[n + 1]  # round n+1 started only after round n was installed
        assert starts[n + 1] - starts[n] >= cfg.reward_period  # the cadence counts from each round's start
    assert engine.llm_wait["waited_s"] > 0.25 * len(installs)  # each round came back only once it was due


def test_budget_end_with_a_round_in_flight_waits_and_installs_it(tmp_path: Path) -> None:
    hook = SlowProposer(0.5)
    cfg = tiny_config(total_steps=150, reward_period=120, propose_in_background=True)
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), hook, run_dir=tmp_path)
    engine.run()
    assert engine.done and not engine.update_in_flight and engine.round == 1
    accepted = _events(engine, "candidate_accepted")
    assert len(accepted) == 2 and all(e["installed_at"] >= e["proposed_at"] for e in accepted)
    assert engine.llm_wait["waited_s"] > 0.2  # the end of the run waited for the round
    saved = engine.save_checkpoint()
    assert saved is not None
    state = load_checkpoint(saved)
    assert {r["id"] for r in state["rewards"]} >= {e["reward_id"] for e in accepted}
    engine.close()


def test_stop_with_a_round_in_flight_installs_it_and_ends_cleanly(tmp_path: Path) -> None:
    hook = SlowProposer(0.3)
    cfg = tiny_config(total_steps=600, propose_in_background=True)
    engine = make_engine(tiny_task(), cfg, scratch_rewards(), hook, run_dir=tmp_path)
    steps = engine.run(should_stop=lambda: engine.update_in_flight)  # a signal arrives while the LLM works
    assert steps < cfg.total_steps and engine.round == 1 and not engine.update_in_flight
    assert len(_events(engine, "candidate_accepted")) == 2
    assert engine.save_checkpoint() is not None
    engine.close()


def test_a_kill_while_in_flight_resumes_before_the_round_and_reruns_it(tmp_path: Path) -> None:
    cfg = tiny_config(total_steps=300, checkpoint_every=30, max_rounds=1, propose_in_background=True)
    # The run killed mid-round: its last checkpoint is from before the round started.
    hook = GatedProposer()
    killed = make_engine(tiny_task(), cfg, scratch_rewards(), hook, run_dir=tmp_path / "killed")
    _until(killed, lambda: killed.update_in_flight)
    s0 = _events(killed, "reward_update_started")[0]["env_steps"]
    for _ in range(4):
        killed.step()
    last = latest_checkpoint(tmp_path / "killed" / "checkpoints")
    assert last is not None
    kept = shutil.copytree(last, tmp_path / "kept")
    assert load_checkpoint(kept)["counters"]["env_steps"] <= s0 < killed.env_steps
    hook.gate.set()
    killed.close()

    resumed = restore_engine(kept, tiny_task(), load_reward, Proposer(), tmp_path / "resumed")
    resumed.run()
    whole = make_engine(tiny_task(), cfg, scratch_rewards(), Proposer(), run_dir=tmp_path / "whole")
    whole.run()

    def installs(engine: LaResEngine) -> list[tuple[int, int, str, int]]:
        return [(e["round"], e["slot"], e["reward_id"], e["proposed_at"])
                for e in _events(engine, "candidate_accepted")]

    assert _events(resumed, "reward_update_started")[0]["env_steps"] == s0  # the round reran at its step
    assert installs(resumed) == installs(whole) and len(installs(whole)) == 2
    assert [fn.id for fn in resumed.rewards] == [fn.id for fn in whole.rewards]
    rows = read_jsonl(tmp_path / "resumed" / "events.jsonl")
    assert rows[0]["event"] == "resumed" and sum(r["event"] == "reward_update" for r in rows) == 1
    resumed.close()
    whole.close()


def test_search_config_maps_sync_llm_to_the_engine() -> None:
    from lares_agent.search.config import SearchConfig, engine_config

    assert engine_config(SearchConfig(llm_backend="replay")).propose_in_background is True  # type: ignore[union-attr]
    sync = engine_config(SearchConfig(llm_backend="replay", sync_llm=True))
    assert sync.propose_in_background is False  # type: ignore[union-attr]
    assert SearchConfig.from_json(SearchConfig(sync_llm=True).to_json()).sync_llm is True
    assert SearchConfig.from_json({k: v for k, v in SearchConfig().to_json().items() if k != "sync_llm"}).sync_llm \
        is False


def test_round_0_runs_beside_the_learners_only_with_the_tasks_own_reward_to_train_on() -> None:
    from lares_agent.search.config import SearchConfig
    from lares_agent.search.live_run import round_zero_in_background

    assert round_zero_in_background(SearchConfig(setting="init", llm_backend="replay"))
    assert not round_zero_in_background(SearchConfig(setting="init", llm_backend="replay", sync_llm=True))
    assert not round_zero_in_background(SearchConfig(setting="scratch", llm_backend="replay"))
    assert not round_zero_in_background(SearchConfig(setting="init", llm_backend="replay", learner="es"))


def test_background_rounds_leave_torch_its_cores() -> None:
    import os

    from lares_agent.search.config import SearchConfig, llm_config

    cores = len(os.sched_getaffinity(0))
    assert llm_config(SearchConfig(torch_threads=1)).n_threads == max(1, cores - 1)
    assert llm_config(SearchConfig(torch_threads=1, sync_llm=True)).n_threads is None  # blocking: every core
    assert llm_config(SearchConfig(learner="es")).n_threads is None


def test_round_0_gives_the_local_model_every_core_and_later_rounds_give_it_back() -> None:
    from types import SimpleNamespace

    from lares_agent.llm.local import _threads
    from lares_agent.search.config import SearchConfig
    from lares_agent.search.cores import background_llm_threads, initial_llm_threads
    from lares_agent.search.sweep_spec import SweepSpec

    four = SearchConfig(torch_threads=1, cores=4)
    assert (background_llm_threads(four), initial_llm_threads(four)) == (3, 4)
    assert initial_llm_threads(SearchConfig(sync_llm=True)) is None  # blocking rounds have every core already
    trial = SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares",), cpus_per_trial=1.0).trials()[0]
    one = SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares",), cpus_per_trial=1.0).config(trial)
    assert (one.cores, background_llm_threads(one), initial_llm_threads(one)) == (1, 1, 1)  # a trial's share
    calls: list[tuple[int, int]] = []
    llama = SimpleNamespace(_ctx=SimpleNamespace(set_n_threads=lambda n, b: calls.append((n, b))))
    with _threads(llama, 4, 3):
        assert calls == [(4, 4)]
    assert calls == [(4, 4), (3, 3)]  # the model's own setting again
    with _threads(llama, None, 3), _threads(llama, 3, 3):
        pass
    assert len(calls) == 2
    from helpers import scripted_client

    client = scripted_client([])
    client.kind = "local"
    with client.threads_while(4):
        assert client._kwargs(None, 0.4, 16, 0)["threads"] == 4
    assert "threads" not in client._kwargs(None, 0.4, 16, 0)


def test_init_learners_train_from_step_0_while_round_0_is_written(tmp_path: Path) -> None:
    """With init, every slot trains on the task's own reward from the first step; round 0's rewards arrive later as
    an update without an evaluation, keeping the learners' weights, and the first checkpoint follows the install."""
    hook = GatedProposer()
    cfg = tiny_config(setting="init", total_steps=600, reward_period=300, checkpoint_every=30,
                      propose_in_background=True)
    engine = make_engine(tiny_task(), cfg, [HumanReward()] * 3, hook, run_dir=tmp_path)
    engine.start_round_zero(hook, range(3))
    assert hook.entered.wait(WAIT_S) and engine.update_in_flight
    for _ in range(4):
        engine.step()  # the learners train before round 0 has written anything
    assert engine.env_steps > 0 and engine.round == 0 and all(isinstance(fn, HumanReward) for fn in engine.rewards)
    assert not _events(engine, "checkpoint")  # nothing a resume could start from without redoing round 0
    inherited: list[Any] = []
    engine.population.inherit = lambda slots, best: inherited.append((slots, best))  # type: ignore[method-assign]
    hook.gate.set()
    _until(engine, lambda: not engine.update_in_flight)
    installed = _events(engine, "initial_rewards")
    assert len(installed) == 1 and installed[0]["env_steps"] > 0 and installed[0]["inherited"] == []
    assert installed[0]["replaced"] == {str(s): f"r0s{s}" for s in range(3)}
    assert [fn.id for fn in engine.rewards[:3]] == ["r0s0", "r0s1", "r0s2"]
    assert isinstance(engine.rewards[3], HumanReward)
    assert engine.round == 0 and not _events(engine, "reward_update")  # round 1 comes at its usual step
    assert hook.contexts[0].round == 0 and hook.contexts[0].refill == (0, 1, 2)
    assert next(e["name"] for e in _events(engine, "checkpoint")) == "round-0000"
    assert not inherited  # no learner restarted from another: each keeps what it learnt on the task's own reward
    del engine.population.inherit
    engine.run()
    assert engine.round >= 1 and _events(engine, "reward_update")[0]["proposed_at"] >= cfg.reward_period
    engine.close()


def test_an_overdue_round_0_is_trained_on_for_a_period_before_round_1_ranks_it(tmp_path: Path) -> None:
    """A round 0 slower than a period is waited for when round 1 would be due, and round 1 then counts its period
    from that install: ranked at once, round 0's rewards would be replaced before any learner trained on them."""
    hook = OverdueProposer(hold_s=0.05)
    cfg = tiny_config(setting="init", total_steps=900, reward_period=300, propose_in_background=True)
    engine = make_engine(tiny_task(), cfg, [HumanReward()] * 3, hook, run_dir=tmp_path)
    hook.engine = engine
    engine.start_round_zero(hook, range(3))
    engine.run()
    (installed,) = _events(engine, "initial_rewards")
    first = _events(engine, "reward_update_started")[1]  # [0] is round 0's, at step 0
    assert installed["env_steps"] >= cfg.reward_period  # overdue: the learners waited for it at the due step
    assert first["round"] == 1 and first["env_steps"] >= installed["env_steps"] + cfg.reward_period
    engine.close()


def test_round_0_starts_only_at_step_0() -> None:
    engine = make_engine(tiny_task(), tiny_config(setting="init", propose_in_background=True),
                         [HumanReward()] * 3, Proposer())
    engine.step()
    with pytest.raises(EngineError, match="step 0"):
        engine.start_round_zero(Proposer(), range(3))
    engine.close()
