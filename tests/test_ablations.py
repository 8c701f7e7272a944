"""Ablation switches: each one, when set, changes exactly the behaviour it names.

relabel=False leaves old buffer rows as they were, thompson=False ignores successes, scale_to_best=False and
anchor_weight=0 skip the scaling and the L2 pull, GraphLimits.reflect=False skips analyse/critique,
GraphLimits.llm_proposals=False asks the LLM nothing, and the search config maps every ablation name onto those
switches. The engine tests use a 2-D point mass (no MuJoCo, milliseconds per episode).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
import torch
from helpers import described_task, flat_config, point_task

from lares_agent.engine import LaResEngine, ReplayConfig, SACConfig, UpdateContext, make_engine
from lares_agent.engine.populations.thompson import ThompsonSampler
from lares_agent.engine.replay.buffer import ReplayBuffer
from lares_agent.errors import LaresError
from lares_agent.graphs.build import build_graph
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.graphs.round import run_round
from lares_agent.graphs.routing import route_start
from lares_agent.llm.client import LLMClient
from lares_agent.rewards import parse_candidate
from lares_agent.rewards.validate import structure_key
from lares_agent.search.config import SearchConfig, engine_config, resolved_for_task
from lares_agent.search.live_run import asks_llm, reflects, slot_edits, uses_retrieval
from lares_agent.search.option_checks import refuse_silent_options
from lares_agent.search.options import ABLATIONS
from lares_agent.tools.trajectory import Rollout

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------------- fixtures
class Linear:
    """reward = -scale * feature + offset."""

    complexity = 1.0
    expression = None  # nothing written to show the LLM (RewardFunction.expression)

    def __init__(self, feature: str, scale: float, offset: float = 0.0, id: str = "") -> None:
        self.feature, self.scale, self.offset = feature, scale, offset
        self.id = id or f"{feature}-{scale:g}-{offset:g}"
        self.key = self.id  # the reward's identity (rewards.reward_key in a real run)

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        return -self.scale * np.asarray(features[self.feature], np.float64) + self.offset

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"main": self(features)}

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id}


def run_to_first_update(**overrides: Any) -> tuple[LaResEngine, UpdateContext, dict[int, np.ndarray]]:
    """A tiny engine run up to its first reward update; returns it, the update and the pre-update columns."""
    cfg = flat_config(
        population=3, elites=1, total_steps=120, warmup_steps=60, reward_period=120, eval_every=0,
        eval_episodes=2, update_eval_episodes=2, ts_window=10, buffer_capacity=2000, seed=3, max_rounds=1,
        sac=SACConfig(hidden=(16, 16), batch_size=16, utd_ratio=0.1), feature_sample=50, **overrides,
    )
    rewards = [Linear("dist", 1.0), Linear("dist", 3.0, 1.0), Linear("action_norm", 0.1)]

    def propose(ctx: UpdateContext) -> Sequence[Any]:
        return [Linear("dist", 50.0, 7.0, id=f"new{s}") for s in ctx.refill]

    engine = make_engine(point_task(), cfg, rewards, propose)
    engine.run(until_steps=120)
    before = {j: engine.population.buffer.rewards(j).astype(np.float64) for j in range(3)}
    ctx = engine.reward_update()
    return engine, ctx, before


# ---------------------------------------------------------------------------------------------- relabel
def test_buffer_without_relabel_keeps_old_rows_and_labels_new_rows_with_the_new_function() -> None:
    rng = np.random.default_rng(0)
    feats = {"x": rng.uniform(0, 1, 40)}
    buf = ReplayBuffer(100, 1, 1, ("x",), 2)
    buf.add(np.zeros((40, 1)), np.zeros((40, 1)), np.zeros((40, 1)), np.zeros(40), np.zeros(40), feats)
    buf.set_column(0, Linear("x", 1.0), reference=None)
    buf.set_column(1, Linear("x", 2.0, 0.5), reference=None)
    old = buf.rewards(1).astype(np.float64)
    new_fn = Linear("x", -10.0, 3.0)
    affine = buf.set_column(1, new_fn, reference=0, relabel=False)
    np.testing.assert_allclose(buf.rewards(1), old, atol=1e-5)  # old rows: old values, under the new map
    more = {"x": rng.uniform(0, 1, 5)}
    buf.add(np.zeros((5, 1)), np.zeros((5, 1)), np.zeros((5, 1)), np.zeros(5), np.zeros(5), more)
    stored_x = buf.features[40:45, 0].astype(np.float64)
    expected = new_fn({"x": stored_x}) * affine.scale + affine.shift
    np.testing.assert_allclose(buf.rewards(1)[40:], expected, rtol=1e-5, atol=1e-5)
    # The default relabels the old rows with the new function: they change.
    buf.set_column(1, new_fn, reference=0)
    assert not np.allclose(buf.rewards(1)[:40], old, atol=1e-3)


def test_engine_without_relabel_leaves_refilled_columns_old_rows_unchanged() -> None:
    engine, ctx, before = run_to_first_update(relabel=False)
    for slot in ctx.refill:
        assert engine.rewards[slot].id == f"new{slot}"
        np.testing.assert_allclose(engine.population.buffer.rewards(slot), before[slot], atol=1e-4)
    engine.close()
    relabelled, ctx2, before2 = run_to_first_update()
    assert any(not np.allclose(relabelled.population.buffer.rewards(s), before2[s], atol=1e-3) for s in ctx2.refill)
    relabelled.close()


# ---------------------------------------------------------------------------------------------- Thompson
def test_uniform_selection_ignores_successes_thompson_follows_them() -> None:
    ts = ThompsonSampler(3, window=50)
    for _ in range(50):
        ts.record_many([0, 1, 2], [True, False, False])
    rng = np.random.default_rng(0)
    ts_first = [ts.select(3, rng)[0] for _ in range(300)]
    uniform_first = [ts.select_uniform(3, rng)[0] for _ in range(300)]
    assert np.bincount(ts_first, minlength=3)[0] > 280  # TS trusts the successful arm
    counts = np.bincount(uniform_first, minlength=3)
    assert counts.min() > 70  # uniform: each arm leads about a third of the time
    sizes = [len(ts.select_uniform(3, rng)) for _ in range(300)]
    assert set(sizes) <= {1, 2, 3} and np.mean(sizes) > 1.5  # K draws, distinct winners
    ts.block(1)
    assert all(1 not in ts.select_uniform(3, rng) for _ in range(50))


def test_engine_without_thompson_never_calls_thompson_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> list[int]:
        raise AssertionError("Thompson selection used with thompson=False")

    monkeypatch.setattr(ThompsonSampler, "select", refuse)
    engine, _, _ = run_to_first_update(thompson=False)
    assert engine.env_steps >= 120
    engine.close()
    with pytest.raises(AssertionError, match="Thompson selection used"):
        run_to_first_update()


# ---------------------------------------------------------------------------------------------- scaling, constraint
def test_without_scaling_a_new_column_keeps_its_own_scale() -> None:
    engine, ctx, _ = run_to_first_update(scale_to_best=False)
    ref = engine.population.buffer.rewards(ctx.best).astype(np.float64)
    for slot in ctx.refill:
        assert engine.population.buffer.affine(slot).scale == 1.0 and engine.population.buffer.affine(slot).shift == 0.0
        col = engine.population.buffer.rewards(slot).astype(np.float64)
        assert col.std() > 5 * ref.std()  # 50 * dist is far wider than the best elite's column
    engine.close()
    scaled, ctx2, _ = run_to_first_update()
    ref2 = scaled.population.buffer.rewards(ctx2.best).astype(np.float64)
    for slot in ctx2.refill:
        assert scaled.population.buffer.rewards(slot).astype(np.float64).std() == pytest.approx(ref2.std(), rel=1e-3)
    scaled.close()


def test_without_constraint_inherited_learners_get_no_pull() -> None:
    # the reference's inheritance, so that the refilled learners inherit whether or not the best one succeeded
    engine, ctx, _ = run_to_first_update(anchor_weight=0.0, inherit="always")
    assert all(float(engine.population.learners.anchor_weight[s]) == 0.0 for s in ctx.refill)
    engine.close()
    anchored, ctx2, _ = run_to_first_update(inherit="always")
    assert all(float(anchored.population.learners.anchor_weight[s]) == 1.0 for s in ctx2.refill)
    anchored.close()


# ---------------------------------------------------------------------------------------------- graph
GRAPH_TASK = described_task("reach-v3", "tcp_to_goal", {"tcp_to_goal": ("gripper to goal", "m"),
                                                      "success": ("goal reached", "bool")},
                            description="Move the gripper to the goal.", horizon=150)


def test_graph_without_reflection_goes_straight_to_propose(scripted_llm: Callable[..., LLMClient]) -> None:
    good = json.dumps({"components": {"approach": "-2*tcp_to_goal", "bonus": "5*success"}, "rationale": "t"})
    elite = {"id": "e1", "components": {"d": "-tcp_to_goal"}, "fitness": 0.5, "success": 0.5, "complexity": 2.0,
             "stats": {}}
    rng = np.random.default_rng(0)
    sample = {"tcp_to_goal": rng.uniform(0, 0.5, 64), "success": rng.integers(0, 2, 64).astype(float)}
    t = np.arange(10.0)
    round_input = {"round": 1, "elites": [elite], "rollout_ids": ["p0"], "n_wanted": 1}
    steps = {}
    for reflect, script in ((False, [good]), (True, ["it stalls", "too flat", good])):
        llm = scripted_llm(script)
        rollout = Rollout({"tcp_to_goal": 0.3 - 0.01 * t, "success": 0 * t}, {"d": -(0.3 - 0.01 * t)})
        deps = RunContext(llm=llm, task=GRAPH_TASK, sample=sample, rollouts={"p0": rollout},
                          limits=GraphLimits(reflect=reflect, analysis="llm"))  # the script answers analyse/critique
        result = run_round(build_graph(), round_input, f"r-{reflect}", deps)
        assert len(result.accepted) == 1
        steps[reflect] = [s["node"] for s in result.steps]
    assert steps[False] == ["propose", "validate"]
    assert steps[True] == ["analyse", "critique", "propose", "validate"]
    assert route_start({"n_wanted": 1, "elites": [elite]}, reflect=False) == "propose"
    assert route_start({"n_wanted": 0}, reflect=False) == "__end__"


def test_graph_without_the_llm_fills_every_slot_with_numeric_children(scripted_llm: Callable[..., LLMClient]) -> None:
    human = {"approach": "-2.0*tcp_to_goal", "bonus": "5.0*success"}
    elite = {"id": "human", "components": human, "stats": {}}
    rng = np.random.default_rng(0)
    sample = {"tcp_to_goal": rng.uniform(0, 0.5, 64), "success": rng.integers(0, 2, 64).astype(float)}
    good = json.dumps({"components": {"approach": "-3*tcp_to_goal"}, "rationale": "t"})
    for asks in (True, False):
        llm = scripted_llm([good])
        deps = RunContext(llm=llm, task=GRAPH_TASK, sample=sample, human_reward=human,
                          limits=GraphLimits(reflect=False, llm_proposals=asks, numeric_children=0))
        result = run_round(build_graph(), {"round": 0, "elites": [elite], "n_wanted": 2}, f"init-{asks}", deps)
        calls = llm.chat_model.calls  # type: ignore[attr-defined]
        if asks:  # the switch is what keeps the LLM out: with it on, the same round asks
            assert calls >= 1
            continue
        assert calls == 0
        assert len(result.accepted) == 2
        assert all(r.get("origin") == "child" and r.get("parent_id") == "human" for r in result.accepted)
        assert all(set(r["components"]) == set(human) and r["components"] != human for r in result.accepted)


def test_graph_with_random_edits_fills_every_slot_with_edits_and_asks_nothing(
        scripted_llm: Callable[..., LLMClient]) -> None:
    human = {"approach": "-2.0*tcp_to_goal", "bonus": "5.0*success"}
    elite = {"id": "human", "components": human, "stats": {}}
    rng = np.random.default_rng(0)
    sample = {"tcp_to_goal": rng.uniform(0, 0.5, 64), "success": rng.integers(0, 2, 64).astype(float)}
    own = structure_key(parse_candidate({"components": human}, ["tcp_to_goal", "success"]))

    def edit_round(seed: int) -> tuple[Any, LLMClient]:
        llm = scripted_llm(["never read"])
        deps = RunContext(llm=llm, task=GRAPH_TASK, sample=sample, human_reward=human,
                          limits=GraphLimits(reflect=False, llm_proposals=False, edits="random",
                                             numeric_children=0, seed=seed))
        return run_round(build_graph(), {"round": 0, "elites": [elite], "n_wanted": 3}, f"edit-{seed}", deps), llm

    result, llm = edit_round(0)
    assert llm.chat_model.calls == 0  # type: ignore[attr-defined]
    assert len(result.accepted) == 3
    for rec in result.accepted:
        assert rec["origin"] == "edit" and rec["parent_id"] == "human"
        assert rec["rationale"].startswith("random edit of human: ")
        assert structure_key(parse_candidate({"components": rec["components"]}, ["tcp_to_goal", "success"])) != own
    assert all(r.get("reason") for r in result.rejected)  # an edit the validator refuses keeps its reason
    assert [r["components"] for r in edit_round(0)[0].accepted] == [r["components"] for r in result.accepted]
    assert [r["components"] for r in edit_round(1)[0].accepted] != [r["components"] for r in result.accepted]
    with pytest.raises(LaresError, match="llm_proposals=False"):
        GraphLimits(edits="random")


def test_random_edits_from_scratch_draw_rewards_that_open_on_progress(scripted_llm: Callable[..., LLMClient]) -> None:
    rng = np.random.default_rng(0)
    sample = {"tcp_to_goal": rng.uniform(0, 0.5, 64), "success": rng.integers(0, 2, 64).astype(float)}
    llm = scripted_llm(["never read"])
    deps = RunContext(llm=llm, task=GRAPH_TASK, sample=sample,
                      limits=GraphLimits(reflect=False, llm_proposals=False, edits="random", numeric_children=0))
    result = run_round(build_graph(), {"round": 0, "n_wanted": 2}, "scratch", deps)
    assert llm.chat_model.calls == 0  # type: ignore[attr-defined]
    assert len(result.accepted) == 2
    for rec in result.accepted:
        assert rec["origin"] == "edit" and rec.get("parent_id") is None
        assert rec["rationale"].startswith("random reward: drew ")
        assert "tcp_to_goal" in rec["components"]["progress"] and 1 <= len(rec["components"]) <= 3


def test_an_edit_made_without_the_llm_is_never_counted_as_the_llms(tmp_path: Any) -> None:
    """`llm_health` counts the LLM's accepted rewards and their children, not an edit made at random or the
    critique's edit (nor their children): a control's records hold no LLM candidate, and its report does not blame
    the LLM for it."""
    from lares_agent.runs import CandidateRow, RunLayout, RunLog, llm_health

    log = RunLog(RunLayout.create(tmp_path, "point-mass", "run"))
    for row in (CandidateRow(id="llm", round=0, slot=0, verdict="accepted", components={"a": "-dist"}),
                CandidateRow(id="kid", round=1, slot=1, verdict="accepted", origin="child", parent_id="llm"),
                CandidateRow(id="edit", round=1, slot=2, verdict="accepted", origin="edit", parent_id="llm"),
                CandidateRow(id="edit-kid", round=2, slot=2, verdict="accepted", origin="child", parent_id="edit"),
                CandidateRow(id="rule", round=2, slot=0, verdict="accepted", origin="rule", parent_id="llm")):
        log.candidates.append(row)
    health = llm_health(log)
    assert health.accepted == 2 and health.edits == 2  # llm and its child; the edit and the critique's edit


@pytest.mark.parametrize("control", ["no-llm", "critique-edit"])
def test_the_controls_that_change_the_tasks_own_reward_need_one(control: str) -> None:
    with pytest.raises(LaresError, match=f"--ablations {control} .* from scratch there is none"):
        SearchConfig(setting="scratch", ablations=(control,))
    with pytest.raises(LaresError, match=control):  # "auto" is scratch on a task without its own reward
        resolved_for_task(SearchConfig(ablations=(control,)), has_human_reward=False)
    assert resolved_for_task(SearchConfig(ablations=(control,)), has_human_reward=True).setting == "init"


# ---------------------------------------------------------------------------------------------- search config
def test_search_config_maps_every_ablation_onto_its_switch() -> None:
    full = SearchConfig()
    ecfg = engine_config(full).learners
    assert isinstance(ecfg, ReplayConfig)
    assert (ecfg.relabel, ecfg.thompson, ecfg.scale_to_best, ecfg.anchor_weight) == (True, True, True, 1.0)
    assert uses_retrieval(full) and reflects(full) and asks_llm(full)
    expected = {
        "no-relabel": lambda c, s: not c.relabel,
        "no-thompson": lambda c, s: not c.thompson,
        "no-scaling": lambda c, s: not c.scale_to_best,
        "no-constraint": lambda c, s: c.anchor_weight == 0.0,
        "no-reflection": lambda c, s: not reflects(s),
        "no-retrieval": lambda c, s: not uses_retrieval(s),
        "no-llm": lambda c, s: not asks_llm(s) and slot_edits(s) == "none",
        "random-edit": lambda c, s: slot_edits(s) == "random" and not asks_llm(s),
        "critique-edit": lambda c, s: slot_edits(s) == "critique" and not asks_llm(s) and reflects(s),
    }
    assert set(expected) == set(ABLATIONS)
    for name, check in expected.items():
        cfg = SearchConfig(ablations=(name,))
        assert check(engine_config(cfg).learners, cfg), name
        others = [n for n in expected if n != name]
        assert not any(expected[n](engine_config(cfg).learners, cfg) for n in others), name  # only its own switch
        assert SearchConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg


def test_unknown_or_misplaced_ablations_are_refused() -> None:
    with pytest.raises(LaresError, match="unknown ablation"):
        SearchConfig(ablations=("no-everything",))
    with pytest.raises(LaresError, match="--learner sac or crossq"):
        SearchConfig(learner="es", ablations=("no-relabel",))


def test_the_controls_without_the_llm_refuse_its_options_and_each_other() -> None:
    """no-llm, random-edit and critique-edit write no reward with the LLM: an option only the LLM reads is refused by
    name, not ignored; random-edit runs from scratch too, and the controls are one or another."""
    for control in ("no-llm", "random-edit", "critique-edit"):
        plain = SearchConfig(setting="init", ablations=(control,))
        assert refuse_silent_options(plain) == (plain, [])
        for field, value, flag in (("llm_model", "qwen", "--llm-model qwen"), ("temperature", 0.9, "--temperature"),
                                   ("persona", "terse", "--persona terse"), ("llm_backend", "openai",
                                                                             "--llm-backend openai")):
            cfg = dataclasses.replace(plain, **{field: value})
            with pytest.raises(LaresError, match=f"{flag}.* is for the LLM, and --ablations {control} asks it"):
                refuse_silent_options(cfg)
        assert refuse_silent_options(dataclasses.replace(plain, temperature=0.9, ablations=()))[1] == []
    # a --config file's LLM settings give way to an ablation typed now, with a note
    cfg, notes = refuse_silent_options(SearchConfig(ablations=("random-edit",), llm_model="qwen"),
                                       typed={"ablations"}, from_file={"llm_model"})
    assert cfg.llm_model is None and "llm_model" in notes[0]
    assert SearchConfig(setting="scratch", ablations=("random-edit",)).setting == "scratch"
    assert resolved_for_task(SearchConfig(ablations=("random-edit",)), has_human_reward=False).setting == "scratch"
    with pytest.raises(LaresError, match="give one"):
        SearchConfig(ablations=("no-llm", "random-edit"))
    with pytest.raises(LaresError, match=r"random-edit and critique-edit .*give one"):
        SearchConfig(ablations=("random-edit", "critique-edit"))
    with pytest.raises(LaresError, match="removes the critique"):
        SearchConfig(setting="init", ablations=("critique-edit", "no-reflection"))
