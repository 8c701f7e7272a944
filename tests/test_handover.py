"""The hand-over on fresh episodes (engine/loop/handover.py): the top learners by fitness, with the init setting's
learner on the task's own reward, are replayed on episodes no evaluation played, and the best there is the policy
written; its event, its policy file, the report's selected reward and the config options say so."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import flat_config, point_task

from lares_agent.engine import EngineConfig, PolicyArtefact, SACConfig, make_engine, restore_engine
from lares_agent.engine.contracts import UpdateContext
from lares_agent.engine.loop import handover as handover_module
from lares_agent.engine.loop.handover import candidate_slots
from lares_agent.errors import ConfigError
from lares_agent.runs import FINAL_POLICY, RunLayout, RunLog
from lares_agent.runs.handover import HandoverRecord, latest_handover
from lares_agent.runs.selected import selected_reward
from lares_agent.search.config import SearchConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Reward:
    """reward = -scale * dist, serialisable for checkpoints."""

    complexity = 1.0
    expression = None  # nothing written to show the LLM (RewardFunction.expression)

    def __init__(self, scale: float, id: str) -> None:
        self.scale, self.id, self.key = scale, id, f"-{scale:g}*dist"

    def __call__(self, features: Any) -> np.ndarray:
        return -self.scale * np.asarray(features["dist"], np.float64)

    def components(self, features: Any) -> dict[str, np.ndarray]:
        return {"main": self(features)}

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "scale": self.scale}


def load(d: Any) -> Reward:
    return Reward(d["scale"], d["id"])


def propose(ctx: UpdateContext) -> list[Reward]:
    return [Reward(2.0 + ctx.round + slot, f"r{ctx.round}s{slot}") for slot in ctx.refill]


def config(**overrides: Any) -> EngineConfig:
    base: dict[str, Any] = dict(setting="init", population=3, elites=1, total_steps=300, warmup_steps=60,
                                reward_period=120, eval_every=150, eval_episodes=2, update_eval_episodes=2,
                                handover_episodes=3, ts_window=10, buffer_capacity=5000, seed=1, feature_sample=100,
                                sac=SACConfig(hidden=(16, 16), batch_size=16, utd_ratio=0.25))
    base.update(overrides)
    return flat_config(**base)


def rewards() -> list[Reward]:
    return [Reward(1.0, "a"), Reward(3.0, "b"), Reward(0.5, "c")]


def events(engine: Any, kind: str) -> list[dict[str, Any]]:
    return [e for e in engine.events if e["event"] == kind]


def handovers(run: Path) -> list[HandoverRecord]:
    found = [HandoverRecord.from_event(e) for e in RunLog(RunLayout(run)).events.read() if e.event == "handover"]
    return [r for r in found if r is not None]


def test_candidates_are_the_top_of_the_ranking_and_the_kept_human_learner() -> None:
    assert candidate_slots([2, 0, 1, 3], 3, lambda s: True) == [2, 0, 1, 3]
    assert candidate_slots([4, 2, 0, 1, 3, 5], 5, lambda s: True) == [4, 2, 0, 5]  # the human learner added
    assert candidate_slots([4, 2, 0, 1], None, lambda s: s != 2) == [4, 0, 1]  # scratch; quarantined never
    assert candidate_slots([0], None, lambda s: True) == [0]


def test_a_run_replays_its_top_learners_and_logs_each_handover(tmp_path: Path) -> None:
    engine = make_engine(point_task(), config(), rewards(), propose, tmp_path)
    try:
        engine.run()
        final = engine.hand_over(FINAL_POLICY)
        assert final is not None
        path = engine.save_policy(FINAL_POLICY, every_slot=True, handover=final)
        again = engine.hand_over("again")  # nothing learned since: the same choice, not replayed
    finally:
        engine.close()
    updates = events(engine, "reward_update")
    records = handovers(tmp_path)
    assert [r.policy for r in records] == ["round-0001", "round-0002", FINAL_POLICY, "again"]
    assert again is not None and again.seconds == 0.0 and again.candidates == final.candidates
    for update, record in zip(updates, records, strict=False):
        slots = [c.slot for c in record.candidates]
        # the top three by fitness in order, then the learner on the task's own reward if it was not among them
        assert slots[:3] == update["ranking"][:3] and 3 in slots and len(slots) == len(set(slots)) <= 4
        assert record.ranked_first == update["best"] and record.episodes == 3 and record.seconds >= 0
        assert [c.rank for c in record.candidates] == [update["ranking"].index(s) for s in slots]
        assert all(0.0 <= c.success <= 1.0 and math.isfinite(c.task_return) for c in record.candidates)
        policy = PolicyArtefact.load(RunLayout(tmp_path).policy(record.policy))
        assert policy.data["slot"] == record.chosen and policy.data["handover_slots"] == slots
    assert path is not None and PolicyArtefact.load(path).data["slot"] == final.chosen
    carried = HandoverRecord.from_policy(PolicyArtefact.load(path).data)
    assert carried is not None and carried.chosen == final.chosen and carried.candidates[0].rank == 0
    assert [c.success for c in carried.candidates] == [c.success for c in final.candidates]
    assert engine.timing["handover_s"] > 0


class Scripted(PolicyArtefact):
    """A policy file whose actions are scripted by slot: slot ``GOOD`` steers to the goal, every other stands still."""

    GOOD = -1

    def act(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, np.float64).reshape(-1, 4)
        if int(self.data["slot"]) != self.GOOD:
            return np.zeros((len(obs), 2))
        return np.clip((obs[:, 2:4] - obs[:, 0:2]) / 0.1, -1.0, 1.0)


def test_the_best_on_fresh_episodes_is_handed_over_though_not_ranked_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(point_task(), config(total_steps=150, max_rounds=1), rewards(), propose, tmp_path)
    try:
        engine.run()
        ranking = events(engine, "reward_update")[0]["ranking"]
        monkeypatch.setattr(handover_module, "PolicyArtefact", Scripted)
        monkeypatch.setattr(Scripted, "GOOD", ranking[1])
        record = engine.hand_over(FINAL_POLICY)
        assert record is not None
        path = engine.save_policy(FINAL_POLICY, handover=record)
        monkeypatch.setattr(Scripted, "GOOD", -1)  # every policy alike: the exact tie keeps the fitness order
        engine.handover._last = None  # the scripted policies changed though no step was learned: replay again
        tied = engine.hand_over("tied")
    finally:
        engine.close()
    assert record.chosen == ranking[1] != record.ranked_first == ranking[0] and record.changed
    success = {c.slot: c.success for c in record.candidates}
    assert success[ranking[1]] == 1.0 and max(s for slot, s in success.items() if slot != ranking[1]) < 1.0
    assert path is not None and PolicyArtefact.load(path).data["slot"] == ranking[1]
    assert "(handed over; ranked 2nd by fitness)" in record.sentence()
    assert tied is not None and tied.chosen == ranking[0]
    # the report's selected reward, and so `lares export`'s, follow the newest hand-over
    newest = latest_handover(RunLog(RunLayout(tmp_path)).events.read())
    assert newest is not None and newest.policy == "tied"
    chosen = selected_reward(tmp_path)
    assert chosen is not None and chosen.reward_id == engine.rewards[tied.chosen].id
    assert "handed over on 3 fresh episodes" in chosen.why


def test_handover_episodes_0_writes_the_ranked_first_policy_and_trains_the_same(tmp_path: Path) -> None:
    runs = {}
    for n in (0, 3):
        engine = make_engine(point_task(), config(handover_episodes=n), rewards(), propose, tmp_path / str(n))
        try:
            engine.run()
            record = engine.hand_over(FINAL_POLICY)
            engine.save_policy(FINAL_POLICY, handover=record)
        finally:
            engine.close()
        runs[n] = engine
    off = runs[0]
    assert record is not None and events(off, "handover") == [] and "handover_s" not in off.timing
    for update in events(off, "reward_update"):
        data = PolicyArtefact.load(RunLayout(tmp_path / "0").policy(f"round-{update['round']:04d}")).data
        assert data["slot"] == update["best"] and "handover_slots" not in data
    assert PolicyArtefact.load(RunLayout(tmp_path / "0").policy(FINAL_POLICY)).data["slot"] == off.best_slot
    # the replay changes no generator and no learner: both runs trained the same steps
    rows = [[(r.env_steps, [s.success for s in r.slots]) for r in RunLog(RunLayout(tmp_path / str(n))).metrics.read()]
            for n in (0, 3)]
    assert rows[0] == rows[1]
    assert [e["ranking"] for e in events(off, "reward_update")] == \
        [e["ranking"] for e in events(runs[3], "reward_update")]


def test_a_resumed_run_hands_over_as_the_uninterrupted_one(tmp_path: Path) -> None:
    whole = make_engine(point_task(), config(), rewards(), propose, tmp_path / "whole")
    try:
        whole.run()
        expected = whole.hand_over(FINAL_POLICY)
    finally:
        whole.close()
    first = make_engine(point_task(), config(checkpoint_every=200), rewards(), propose, tmp_path / "cut")
    try:
        first.run(until_steps=200)  # round 1 done; stopped at the step-200 checkpoint, before round 2
        ranking = first.handover.ranking
    finally:
        first.close()
    checkpoints = sorted((tmp_path / "cut" / "checkpoints").glob("step-*"))
    again = restore_engine(checkpoints[-1], point_task(), load, propose, tmp_path / "cut")
    try:
        assert again.handover.ranking == ranking is not None  # the ranking the next hand-over starts from
        again.run()
        resumed = again.hand_over(FINAL_POLICY)
    finally:
        again.close()
    assert expected is not None and resumed is not None
    assert dataclasses.replace(resumed, seconds=0.0) == dataclasses.replace(expected, seconds=0.0)


def test_the_option_is_checked_saved_and_read_back() -> None:
    for bad in (-1, math.nan, 2.5, True):
        with pytest.raises(ConfigError, match="handover_episodes"):
            flat_config(handover_episodes=bad)
        with pytest.raises(ConfigError, match="--handover-episodes"):
            SearchConfig(handover_episodes=bad)  # type: ignore[arg-type]
    assert SearchConfig().handover_episodes == 20 and EngineConfig().handover_episodes == 0
    cfg = SearchConfig(handover_episodes=7)
    assert SearchConfig.from_json(cfg.to_json()) == cfg
    engine_cfg = flat_config(handover_episodes=7)
    assert EngineConfig.from_json(engine_cfg.to_json()) == engine_cfg
    # configs and checkpoints from before the option handed over the policy ranked first: they resume so
    old = {k: v for k, v in cfg.to_json().items() if k != "handover_episodes"}
    assert SearchConfig.from_json(old).handover_episodes == 0
    assert EngineConfig.from_json({k: v for k, v in engine_cfg.to_json().items()
                                   if k != "handover_episodes"}).handover_episodes == 0
