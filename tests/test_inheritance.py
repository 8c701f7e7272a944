"""No inheritance trap (engine/loop/inheritance.py): a replaced slot's learners copy, and are pulled toward, the
best learner only once it has succeeded; before, they keep their own weights. A broken slot always restarts
from the best, and the ``reward_update`` event says what was decided and why."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from test_lares_engine import FeatureReward, Proposer, scratch_rewards, tiny_config, tiny_task

from lares_agent.engine import EngineConfig, make_engine
from lares_agent.engine.loop.engine import LaResEngine
from lares_agent.engine.loop.inheritance import inheritance, leader_succeeded
from lares_agent.errors import ConfigError
from lares_agent.runs.jsonl import read_jsonl
from lares_agent.runs.slots import SlotRecord
from lares_agent.search.config import SearchConfig, engine_config
from lares_agent.search.options import INHERIT_RULES


def leader(success: float, learners: tuple[float, ...] = ()) -> SlotRecord:
    return SlotRecord(slot=3, reward_id="human", success=success, task_return=1.0, own_return=1.0, final_progress=0.1,
                      complexity=1.0, fitness=success, graded_by="success", learner_success=learners)


def test_the_rule_inherits_only_from_a_leader_that_succeeded() -> None:
    inherit, fields = inheritance("on-success", leader(0.0), {0, 1}, {2})
    assert inherit == [2] and fields["inherited"] == [2] and fields["inherit_skipped"] == [0, 1]
    assert "slot 3" in fields["inherit_reason"] and "no success" in fields["inherit_reason"]
    assert inheritance("on-success", leader(0.2), {0, 1}, {2}) == ([0, 1, 2], {"inherited": [0, 1, 2]})
    assert inheritance("always", leader(0.0), {0, 1}, set()) == ([0, 1], {"inherited": [0, 1]})
    assert inheritance("on-success", leader(0.0), set(), set()) == ([], {"inherited": []})  # nothing skipped
    assert leader_succeeded(leader(0.0, (0.0, 0.2))) and not leader_succeeded(leader(math.nan, (0.0,)))
    with pytest.raises(ValueError, match="unknown inherit rule"):
        inheritance("never", leader(1.0), {0}, set())


def _update(engine: LaResEngine, success: float) -> dict[str, Any]:
    """Run to the first reward update with every learner's evaluated success set to ``success``; its event."""
    engine.run(until_steps=120)
    evaluate: Callable[..., Any] = engine.evaluate_learners
    engine.evaluate_learners = lambda *a, **k: [  # type: ignore[method-assign]
        dataclasses.replace(e, success_rate=success) for e in evaluate(*a, **k)]
    engine.reward_update()
    return next(e for e in engine.events if e["event"] == "reward_update")


def _actors(engine: LaResEngine) -> list[torch.Tensor]:
    return [p.detach().clone() for p in engine.population.learners.actor]


def test_a_leader_without_success_leaves_the_replaced_learner_its_own_weights(tmp_path: Path) -> None:
    hook = Proposer(lambda ctx, slot: FeatureReward("dist", 50.0, 7.0, id=f"new{slot}"))
    engine = make_engine(tiny_task(), tiny_config(total_steps=120, max_rounds=1), scratch_rewards(), hook, tmp_path)
    engine.run(until_steps=120)
    before = _actors(engine)
    event = _update(engine, 0.0)
    ctx, pop = hook.contexts[0], engine.population.learners
    assert event["inherited"] == [] and event["inherit_skipped"] == list(ctx.refill)
    assert f"slot {ctx.best}" in event["inherit_reason"]
    for slot in ctx.refill:
        assert engine.rewards[slot].id == f"new{slot}"  # the new reward is installed and rescaled all the same
        assert engine.population.buffer.affine(slot).scale != 1.0
        assert all(torch.equal(p[slot], b[slot]) for p, b in zip(pop.actor, before, strict=True))
        assert not torch.equal(pop.actor[0][slot], pop.actor[0][ctx.best])
        assert pop.anchor_weight[slot].item() == 0.0  # and no pull toward the leader
    [written] = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "reward_update"]
    assert {k: written[k] for k in ("inherited", "inherit_skipped", "inherit_reason")} == {
        k: event[k] for k in ("inherited", "inherit_skipped", "inherit_reason")}  # in events.jsonl too


def test_a_leader_with_success_is_inherited_with_the_pull() -> None:
    hook = Proposer(lambda ctx, slot: FeatureReward("dist", 50.0, 7.0, id=f"new{slot}"))
    engine = make_engine(tiny_task(), tiny_config(total_steps=120, max_rounds=1), scratch_rewards(), hook)
    event = _update(engine, 0.5)
    ctx, pop = hook.contexts[0], engine.population.learners
    assert event["inherited"] == list(ctx.refill) and "inherit_skipped" not in event
    for slot in ctx.refill:
        assert all(torch.equal(p[slot], p[ctx.best]) for p in pop.actor)
        assert pop.anchor_weight[slot].item() == 1.0


def test_always_keeps_the_references_inheritance() -> None:
    hook = Proposer()
    engine = make_engine(tiny_task(), tiny_config(total_steps=120, max_rounds=1, inherit="always"),
                         scratch_rewards(), hook)
    event = _update(engine, 0.0)
    ctx, pop = hook.contexts[0], engine.population.learners
    assert event["inherited"] == list(ctx.refill) and "inherit_skipped" not in event
    assert all(torch.equal(pop.actor[0][s], pop.actor[0][ctx.best]) for s in ctx.refill)


def test_a_quarantined_slot_restarts_from_the_best_even_without_success() -> None:
    hook = Proposer()
    cfg = tiny_config(total_steps=120, max_rounds=1, population=4, elites=2)
    engine = make_engine(tiny_task(), cfg, [*scratch_rewards(), FeatureReward("dist", 0.5)], hook)
    engine.run(until_steps=120)
    engine.population._quarantine(3, "a test breaks it", engine.env_steps)
    before = _actors(engine)
    event = _update(engine, 0.0)
    ctx, pop = hook.contexts[0], engine.population.learners
    assert 3 in ctx.refill and ctx.best != 3
    kept = [s for s in ctx.refill if s != 3]
    assert event["inherited"] == [3] and event["inherit_skipped"] == kept
    assert all(torch.equal(p[3], p[ctx.best]) for p in pop.actor)  # broken weights are replaced
    assert all(torch.equal(p[s], b[s]) for p, b in zip(pop.actor, before, strict=True) for s in kept)
    assert not engine.population.quarantined_learners


def test_the_option_defaults_maps_and_round_trips() -> None:
    assert INHERIT_RULES == ("on-success", "always")
    assert EngineConfig().inherit == "on-success" and SearchConfig().inherit == "on-success"
    assert engine_config(SearchConfig(inherit="always")).inherit == "always"
    cfg = EngineConfig(inherit="always")
    assert EngineConfig.from_json(cfg.to_json()).inherit == "always"
    old = {k: v for k, v in EngineConfig().to_json().items() if k != "inherit"}
    assert EngineConfig.from_json(old).inherit == "always"  # a checkpoint from before the rule inherited always
    saved = {k: v for k, v in dataclasses.asdict(SearchConfig()).items() if k != "inherit"}
    assert SearchConfig.from_json(saved).inherit == "always"
    assert SearchConfig.from_json(dataclasses.asdict(SearchConfig())).inherit == "on-success"
    with pytest.raises(ConfigError, match="inherit"):
        EngineConfig(inherit="never")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--inherit"):
        SearchConfig(inherit="never")  # type: ignore[arg-type]
