"""Evaluation episodes stepped together (engine/rollouts/evaluation.py): every member's episodes run in lock step
with one act call a step, and each MemberEvaluation is the one the episode-at-a-time evaluation gives."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import flat_config, point_task

from lares_agent.engine import MemberEvaluation, SACConfig, make_engine
from lares_agent.engine.contracts import UpdateContext
from lares_agent.engine.learners.factory import make_population
from lares_agent.engine.loop.proposals import PendingUpdate
from lares_agent.engine.rollouts.episodes import EnvPool
from lares_agent.engine.rollouts.evaluation import evaluate_members
from lares_agent.engine.tasks import TaskSpec, get_task
from lares_agent.errors import ConfigError
from lares_agent.rewards import compile_record
from lares_agent.runs import RunLayout, read_jsonl
from lares_agent.search.config import SearchConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Scaled:
    """A raw reward with two components, so component statistics are compared too."""

    id, key, complexity = "s", "s", 1.0
    expression = None  # nothing written to show the LLM (RewardFunction.expression)

    def __call__(self, features: Any) -> np.ndarray:
        return sum(self.components(features).values())  # type: ignore[return-value]

    def components(self, features: Any) -> dict[str, np.ndarray]:
        d = np.asarray(features["dist"], np.float64)
        return {"near": -d, "far": -(d**2)}


def same(a: MemberEvaluation, b: MemberEvaluation) -> None:
    """Every field equal (NaN equal to NaN), the kept rollouts and component statistics included, up to rounding:
    torch may pick another matmul kernel for another row count, which moves the last bits of an action."""
    for field in dataclasses.fields(MemberEvaluation):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if field.name == "rollouts":
            assert len(x) == len(y)
            for rx, ry in zip(x, y, strict=True):
                assert rx.keys() == ry.keys()
                assert all(np.allclose(rx[k], ry[k], rtol=1e-6, atol=1e-9) for k in rx)
        elif field.name == "component_stats":
            assert x.keys() == y.keys()
            assert all(dataclasses.astuple(x[k]) == pytest.approx(dataclasses.astuple(y[k]), rel=1e-6) for k in x)
        elif isinstance(x, float):
            assert x == pytest.approx(y, rel=1e-6, abs=1e-9, nan_ok=True), field.name
        else:
            assert x == y, field.name


def sac_act(task: TaskSpec, members: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    pop = make_population(SACConfig(hidden=(16, 16)), members, task.obs_dim, task.act_dim, 3, device="cpu")
    gen = torch.Generator()
    return lambda obs, m: pop.act(obs, m, True, gen)


def evaluate(task: TaskSpec, act: Callable[[np.ndarray, np.ndarray], np.ndarray], members: list[int], episodes: int,
             max_envs: int, horizon: int | None = None) -> list[MemberEvaluation]:
    pool = EnvPool(task.make_env, 11)
    try:
        return evaluate_members(pool, act, task.raw_state, task.features, members,
                                [Scaled() if i % 2 and "dist" in task.feature_names else None
                                 for i in range(len(members))], episodes,
                                horizon or task.horizon, [100 + 7 * e for e in range(episodes)], task.progress_feature,
                                keep_rollouts=2,
                                approach_feature=task.approach_feature or task.progress_feature, max_envs=max_envs)
    finally:
        pool.close()


def test_every_episode_together_gives_what_one_episode_at_a_time_gives() -> None:
    task = point_task()
    act = sac_act(task, 3)
    members = [2, 0, 1]
    one_at_a_time = evaluate(task, act, members, 5, max_envs=3)
    for max_envs in (15, 7, 100):  # all at once, uneven batches (2, 2, 1 episodes), more room than needed
        for a, b in zip(evaluate(task, act, members, 5, max_envs), one_at_a_time, strict=True):
            same(a, b)
    assert [e.member for e in one_at_a_time] == members
    assert len(one_at_a_time[0].rollouts) == 2 and one_at_a_time[1].component_stats


def test_one_act_call_a_step_over_every_members_episodes() -> None:
    task = point_task()
    inner = sac_act(task, 2)
    rows: list[int] = []

    def act(obs: np.ndarray, m: np.ndarray) -> np.ndarray:
        rows.append(len(m))
        return inner(obs, m)

    evaluate(task, act, [0, 1], 4, max_envs=8)
    assert len(rows) == task.horizon and set(rows) == {8}  # 2 members x 4 episodes, one call a step
    rows.clear()
    evaluate(task, act, [0, 1], 4, max_envs=2)
    assert len(rows) == 4 * task.horizon  # one episode round at a time


def test_copies_share_the_construction_seed_and_are_kept() -> None:
    made: list[int] = []

    def make(seed: int) -> Any:
        made.append(seed)
        return point_task().make_env(seed)

    pool = EnvPool(make, 5)
    first = pool.copies(2, 3)
    assert made == [5, 6, 5, 5, 6, 6]
    assert first[0][0] is pool.get(1)[0]
    again = pool.copies(2, 2)
    assert made == [5, 6, 5, 5, 6, 6] and again[1] == first[1][:2]  # nothing built twice
    pool.close()


@pytest.mark.slow
def test_metaworld_episodes_together_match_one_at_a_time() -> None:
    """MetaWorld draws an episode's goal from its env's construction seed as well as the reset seed: every episode
    runs on an env built like the first."""
    task = get_task("reach-v3")
    act = sac_act(task, 2)
    for a, b in zip(evaluate(task, act, [0, 1], 2, max_envs=4, horizon=25),
                    evaluate(task, act, [0, 1], 2, max_envs=2, horizon=25), strict=True):
        same(a, b)


@pytest.mark.slow
def test_metaworld_members_meet_the_same_goal_for_a_reset_seed() -> None:
    """One policy in two member rows scores the same: MT1 draws its goal list from the env's construction seed, so
    members evaluated on envs of different seeds would be ranked on different tasks."""
    task = get_task("reach-v3")
    same_policy = sac_act(task, 1)
    a, b = evaluate(task, lambda obs, m: same_policy(obs, np.zeros_like(m)), [0, 1], 3, max_envs=6, horizon=25)
    assert a.rollouts[0]["target_x"][0] == b.rollouts[0]["target_x"][0]
    assert a.task_return == b.task_return and a.final_progress == b.final_progress


def test_run_timing_splits_evaluation_relabel_warm_up_and_records(tmp_path: Path) -> None:
    """The wall-time split a run's ``run_end`` records (benchmarks/trial_cost.py reads it)."""
    cfg = flat_config(setting="init", population=2, elites=1, total_steps=90, warmup_steps=30, reward_period=45,
                      eval_every=45, eval_episodes=2, update_eval_episodes=2, handover_episodes=2, buffer_capacity=2000,
                      seed=1, feature_sample=50, sac=SACConfig(hidden=(8, 8), batch_size=8, utd_ratio=0.25))
    task = point_task()
    fixed = [compile_record({"id": f"r{i}", "components": {"near": f"-{i + 1} * dist"}, "rationale": ""}, task)
             for i in range(4)]
    engine = make_engine(task, cfg, fixed[:2], lambda ctx: fixed[2 : 2 + len(ctx.refill)], tmp_path)
    try:
        engine.run()
        timing = engine.timing
    finally:
        engine.close()
    assert {"sim_s", "learn_s", "eval_s", "warmup_s", "relabel_s", "handover_s", "records_s"} <= timing.keys()
    assert 0 < timing["eval_s"] < timing["sim_s"]  # evaluation episodes are part of the episodes' time
    assert min(timing["warmup_s"], timing["relabel_s"], timing["records_s"]) > 0


def test_no_round_hand_overs_leaves_the_learners_and_the_final_choice_alone(tmp_path: Path) -> None:
    """``handover_rounds`` False: only the final policy is replayed on fresh episodes; the run trains alike."""
    task = point_task()
    fixed = [compile_record({"id": f"r{i}", "components": {"near": f"-{i + 1} * dist"}, "rationale": ""}, task)
             for i in range(8)]
    ends = []
    for rounds in (True, False):
        cfg = flat_config(setting="init", population=2, elites=1, total_steps=150, warmup_steps=30, reward_period=45,
                          eval_every=0, eval_episodes=2, update_eval_episodes=2, handover_episodes=2,
                          handover_rounds=rounds, buffer_capacity=2000, seed=1, feature_sample=50,
                          sac=SACConfig(hidden=(8, 8), batch_size=8, utd_ratio=0.25))
        engine = make_engine(task, cfg, fixed[:2], lambda ctx: fixed[2 + ctx.round : 3 + ctx.round],
                             tmp_path / str(rounds))
        try:
            engine.run()
            final = engine.hand_over("final")
            handed = [e["policy"] for e in engine.events if e["event"] == "handover"]
            updates = [(e["round"], e["fitness"]) for e in engine.events if e["event"] == "reward_update"]
            ends.append((updates, final, handed, engine.timing["handover_s"]))
        finally:
            engine.close()
    (updates_on, final_on, handed_on, _), (updates_off, final_off, handed_off, _) = ends
    assert len(updates_on) >= 2 and updates_on == updates_off
    assert handed_on == [f"round-{r:04d}" for r, _ in updates_on] + ["final"] and handed_off == ["final"]
    assert final_on is not None and final_off is not None
    assert final_on.chosen == final_off.chosen and final_on.candidates == final_off.candidates


def test_no_round_hand_overs_needs_hand_overs() -> None:
    with pytest.raises(ConfigError, match="--no-handover-rounds"):
        SearchConfig(handover_episodes=0, handover_rounds=False)


def test_no_eval_at_updates_leaves_out_the_evaluation_an_update_repeats(tmp_path: Path) -> None:
    """``eval_at_updates`` False: where a periodic evaluation and a reward update's fall on one env step, only the
    update's row is written; every other row and the run's training stay."""
    task = point_task()
    fixed = [compile_record({"id": f"r{i}", "components": {"near": f"-{i + 1} * dist"}, "rationale": ""}, task)
             for i in range(8)]
    rows = []
    for at_updates in (True, False):
        cfg = flat_config(setting="init", population=2, elites=1, total_steps=270, warmup_steps=30, reward_period=90,
                          eval_every=45, eval_episodes=2, update_eval_episodes=2, eval_at_updates=at_updates,
                          buffer_capacity=2000, seed=1, feature_sample=50,
                          sac=SACConfig(hidden=(8, 8), batch_size=8, utd_ratio=0.25))
        run = tmp_path / str(at_updates)
        engine = make_engine(task, cfg, fixed[:2], lambda ctx: fixed[2 + ctx.round : 3 + ctx.round], run)
        try:
            engine.run()
        finally:
            engine.close()
        rows.append([(r["kind"], r["env_steps"]) for r in read_jsonl(RunLayout(run).metrics)])
    every, fewer = rows
    updates = [s for kind, s in every if kind == "update"]
    assert len(updates) >= 2 and [s for kind, s in fewer if kind == "update"] == updates
    left_out = [s for s in updates if ("eval", s) in every]
    assert left_out and [r for r in every if not (r[0] == "eval" and r[1] in left_out)] == fewer


def test_an_update_follows_after_an_overdue_proposal_and_never_while_one_may_still_return() -> None:
    """What ``eval_at_updates`` False asks before leaving an evaluation out, with a proposal in flight: it depends
    on env steps only (an overdue one is waited for and installed first), never on whether the LLM has returned."""
    task = point_task()
    fixed = [compile_record({"id": f"r{i}", "components": {"near": f"-{i + 1} * dist"}, "rationale": ""}, task)
             for i in range(3)]
    cfg = flat_config(setting="init", population=2, elites=1, total_steps=1000, warmup_steps=30, reward_period=100,
                      eval_at_updates=False, max_rounds=3, sac=SACConfig(hidden=(8, 8)))
    engine = make_engine(task, cfg, fixed[:2])
    try:
        c = engine.counters

        def in_flight(round_: int, at: int) -> None:
            ctx = UpdateContext(round=round_, env_steps=at, setting="init", slots=(), ranking=(), elites=(),
                                refill=(), rewards=(), rollouts={}, feature_sample={})
            engine.proposals.pending = PendingUpdate(ctx, (), 0)

        c.env_steps, c.round, c.last_update_steps = 150, 1, 100
        assert not engine._update_follows()  # 50 steps since the last update
        c.env_steps = 200
        assert engine._update_follows()
        in_flight(2, 120)
        assert not engine._update_follows()  # it may return before the next update is due: none follows
        c.env_steps = 220
        assert engine._update_follows()  # overdue: installed, then the next update (round 3) at this step
        in_flight(3, 120)
        assert not engine._update_follows()  # after its install the rounds are spent
        in_flight(0, 0)  # round 0, overdue: installed here, and round 1 is due a period after its install
        c.round, c.last_update_steps = 0, 0
        assert not engine._update_follows()
        c.env_steps = 1000
        assert not engine._update_follows()  # the budget is spent: no next step
    finally:
        engine.proposals.pending = None
        engine.close()
