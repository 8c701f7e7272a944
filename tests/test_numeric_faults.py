"""Numerical faults after acceptance: a reward that turns NaN on new states, a learner whose actions turn NaN.

Either way the learner is quarantined, its slot is regenerated at the next reward update (by the LLM when a
valid child arrives, otherwise by sharing the best slot's reward), and the run goes on to its budget.

The task is a point mass whose observation carries a clock (steps taken by that env instance): a reward with
`sqrt(0.5 - age)` passes every check while the run is young, then goes NaN on states the run reaches later,
deterministically. The whole stack runs: reward language, GraphProposer, round graph, engine.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from helpers import POINT_FEATURES, PointMass, ScriptedChatModel, flat_config, point_features, point_task

from lares_agent.engine import LaResEngine, SACConfig, StepInfo, make_engine, random_feature_sample
from lares_agent.engine.tasks import Feature
from lares_agent.graphs.build import build_graph
from lares_agent.graphs.context import GraphLimits, RunContext
from lares_agent.llm import LLMClient, LLMConfig
from lares_agent.llm.faults import FaultyChatModel
from lares_agent.rewards import compile_reward, parse_candidate
from lares_agent.runs import RunLayout, RunLog, read_jsonl
from lares_agent.search.proposer import GraphProposer

torch.set_num_threads(1)
AGE_SCALE = 100.0  # age = steps taken by the env instance / AGE_SCALE


class AgingPointMass(PointMass):
    """The shared point mass whose last observation entry counts this env's steps (never reset)."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (5,), np.float32)
        self.steps = 0

    def _obs(self) -> np.ndarray:
        return np.concatenate([super()._obs(), [self.steps / AGE_SCALE]]).astype(np.float32)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.steps += 1
        return super().step(action)


def _features(raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    return {**point_features(raw, action), "age": raw[:, 4].copy()}


AGE = Feature("age", "steps taken by this environment so far, divided by 100", "1")
TASK = point_task(name="aging-point-mass", feature_defs=(*POINT_FEATURES, AGE), obs_dim=5, state_dim=5,
                  env_fn=lambda seed: AgingPointMass(), feature_fn=_features)
NAMES = ("dist", "action_norm", "age")


def child_model() -> ScriptedChatModel:
    """Answers every call with a valid, distinct candidate over the task's features."""
    return ScriptedChatModel(then=lambda call: {"candidates": [{"components": {"reach": f"-{1 + 0.5 * call}*dist"},
                                                                 "rationale": "closer is better"}]})


def _poisoned() -> Any:
    """Finite while every env is younger than 50 steps, NaN afterwards: accepted, then breaks."""
    parsed = parse_candidate({"components": {"reach": "-dist", "clock": "0.1*sqrt(0.5 - age)"}}, NAMES)
    return compile_reward(parsed, "poisoned")


def _run(run_layout: RunLayout, *, fault_rate: float, poison: bool, on_iteration: Any = None) -> LaResEngine:
    model = FaultyChatModel(inner=child_model(), rate=fault_rate, seed=0)
    client = LLMClient(model, LLMConfig(max_retries=0), None, sleep=lambda s: None)
    deps = RunContext(llm=client, task=TASK, limits=GraphLimits(retry_budget=1))
    run = RunLog(run_layout)
    proposer = GraphProposer(build_graph(), deps, run, TASK.name)
    given = [_poisoned()] if poison else []
    sample = random_feature_sample(TASK, 40, seed=0)
    initial = proposer.initial(3, sample, given)  # with every answer faulty: fallback rewards
    cfg = flat_config(population=3, elites=1, total_steps=400, warmup_steps=60, reward_period=120,
                       eval_every=0, eval_episodes=1, update_eval_episodes=2, ts_window=10, buffer_capacity=3000,
                       seed=2, feature_sample=100, sac=SACConfig(hidden=(32, 32), batch_size=32, utd_ratio=0.1))
    engine = make_engine(TASK, cfg, initial, proposer, run_dir=run_layout.root)
    try:
        engine.run(progress=(lambda info: on_iteration(engine, info)) if on_iteration else None)
    finally:
        engine.close()
    return engine


def _events(run_layout: RunLayout) -> list[dict[str, Any]]:
    return read_jsonl(run_layout.events)


def test_reward_that_turns_nan_is_quarantined_and_regenerated(run_layout: RunLayout) -> None:
    engine = _run(run_layout, fault_rate=0.0, poison=True)
    events = _events(run_layout)
    assert engine.done and engine.round >= 2  # the run went on to its budget
    quarantine = [e for e in events if e["event"] == "quarantine" and e["learner"] == 0]
    assert quarantine and "NaN" in quarantine[0]["reason"]
    first_update = next(e for e in events
                        if e["event"] == "reward_update" and e["env_steps"] > quarantine[0]["env_steps"])
    assert first_update["slots"][0]["quarantined"] and first_update["ranking"][-1] == 0  # ranked last: refilled
    new_id = first_update["replaced"]["0"]
    assert new_id != "poisoned" and new_id in {c["id"] for c in read_jsonl(run_layout.candidates)
                                                if c["verdict"] == "accepted" and c["round"] == first_update["round"]}
    assert all(fn.id != "poisoned" for fn in engine.rewards)
    buf = engine.population.buffer
    assert np.isfinite(buf.raw_reward[: len(buf)]).all()  # NaN rows were neutralised
    assert all(torch.isfinite(p).all() for p in engine.population.learners.actor)


def test_nan_reward_without_any_valid_child_shares_the_best_reward(run_layout: RunLayout) -> None:
    engine = _run(run_layout, fault_rate=1.0, poison=True)
    events = _events(run_layout)
    assert engine.done and engine.round >= 2
    shared = [e for e in events if e["event"] == "reward_shared"]
    assert shared and shared[0]["slot"] == 0 and "NaN" in shared[0]["reason"]
    update = next(e for e in events if e["event"] == "reward_update" and e["round"] == shared[0]["round"])
    assert update["replaced"] == {"0": update["slots"][update["best"]]["reward_id"]}
    assert all(fn.id != "poisoned" for fn in engine.rewards)
    # once shared, the slot stays healthy: no later quarantine of learner 0 for its reward
    later = [e for e in events if e["event"] == "quarantine" and e["learner"] == 0
             and e["env_steps"] > update["env_steps"]]
    assert later == []


@pytest.mark.parametrize("fault_rate", [0.0, 1.0])
def test_learner_with_nan_actions_is_quarantined_then_reset(run_layout: RunLayout, fault_rate: float) -> None:
    broken: list[int] = []

    def break_learner(engine: LaResEngine, info: StepInfo) -> None:
        if not broken and info.env_steps >= 45:
            with torch.no_grad():
                for p in engine.population.learners.actor:
                    p[1] = float("nan")  # every actor layer of learner 1: its actions go NaN
            broken.append(info.env_steps)

    engine = _run(run_layout, fault_rate=fault_rate, poison=False, on_iteration=break_learner)
    events = _events(run_layout)
    assert broken and engine.done and engine.round >= 2
    quarantine = [e for e in events if e["event"] == "quarantine" and e["learner"] == 1]
    assert quarantine and "non-finite" in quarantine[0]["reason"]
    update = next(e for e in events if e["event"] == "reward_update" and e["env_steps"] > broken[0])
    assert 1 in update["inherited"] and update["slots"][1]["quarantined"]
    if fault_rate == 0.0:  # a child arrived: the slot got a new reward
        assert "1" in update["replaced"]
    assert all(torch.isfinite(p[1]).all() for p in engine.population.learners.actor)  # reset from the best learner
    assert 1 not in engine.population.quarantined_learners
