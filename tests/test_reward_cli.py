"""`lares reward check`: verdict, complexity and canonical form; exit 0 when accepted, 1 with the reason."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import described_task
from typer.testing import CliRunner

from lares_agent.cli import reward_cmd
from lares_agent.cli.app import app
from lares_agent.engine import TaskSpec, random_feature_sample

TOY = described_task("toy-v0", "hand_to_goal", {"hand_to_goal": ("distance", "m"), "speed": ("speed", "m/s"),
                                                 "touching": ("contact", "bool")})


@pytest.fixture
def toy_task(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []

    def load(name: str) -> TaskSpec:
        asked.append(name)
        return TOY

    monkeypatch.setattr(reward_cmd, "_load_task", load)
    return asked


def _run(*args: str):
    return CliRunner().invoke(app, ["reward", "check", *args])


def test_accepted_prints_verdict_complexity_and_canonical(toy_task: list[str]) -> None:
    result = _run("tolerance(hand_to_goal, 0, 0.05, 0.1) + 0.5*touching", "--task", "toy-v0")
    assert result.exit_code == 0, result.output
    assert toy_task == ["toy-v0"]
    assert "accepted" in result.output and "complexity" in result.output
    assert "0.5*touching + tolerance(hand_to_goal, 0.0, 0.05, 0.1, 0.1)" in result.output


def test_rejected_prints_the_reason_and_exits_1(toy_task: list[str]) -> None:
    result = _run("hand_to_gaol + 1", "--task", "toy-v0")
    assert result.exit_code == 1
    assert "rejected: component 'reward': unknown name 'hand_to_gaol'" in result.output
    assert "did you mean 'hand_to_goal'" in result.output


def test_numeric_rejection_names_the_component(toy_task: list[str]) -> None:
    candidate = json.dumps({"components": {"ok": "-hand_to_goal", "bad": "log(speed - 1)"}})
    result = _run(candidate, "--task", "toy-v0")
    assert result.exit_code == 1
    assert "component 'bad' is nan/inf" in result.output


def test_json_output_for_machines(toy_task: list[str]) -> None:
    good = _run("--json", "--states", "256", "--seed", "3", "--task", "toy-v0", "--", "-hand_to_goal + touching")
    assert good.exit_code == 0, good.output
    payload = json.loads(good.output)
    assert payload["accepted"] is True and payload["task"] == "toy-v0" and payload["states"] == 256
    assert payload["canonical"] == {"reward": "-hand_to_goal + touching"} and payload["complexity"] > 0
    assert payload["key"] == "-hand_to_goal + touching"
    assert set(payload["stats"]) == {"reward", "total"}
    bad = _run("--json", "--task", "toy-v0", "speed ** speed")
    assert bad.exit_code == 1
    assert json.loads(bad.output)["reason"].startswith("component 'reward': exponent")


def test_same_seed_same_verdict(toy_task: list[str]) -> None:
    args = ("--json", "--task", "toy-v0", "--seed", "7", "exp(-hand_to_goal) * (1 + speed)")
    first, second = _run(*args), _run(*args)
    assert first.output == second.output
    other = _run("--json", "--task", "toy-v0", "--seed", "8", "exp(-hand_to_goal) * (1 + speed)")
    assert json.loads(other.output)["stats"] != json.loads(first.output)["stats"]


def test_real_task_features() -> None:
    """Against the engine's task registry (reach-v3's declared features), synthetic sample."""
    tasks = pytest.importorskip("lares_agent.engine.tasks")
    progress = tasks.get_task("reach-v3").progress_feature
    result = _run("--json", "--task", "reach-v3", f"exp(-{progress} / 0.1)")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["canonical"] == {"reward": f"exp(-10.0*{progress})"}
    unknown = _run("--task", "reach-v3", "not_a_feature_name")
    assert unknown.exit_code == 1 and "unknown name" in unknown.output


def test_rollout_sample_uses_real_states() -> None:
    """Random-action states from the real env: distances are non-negative and vary."""
    pytest.importorskip("lares_agent.engine.tasks")
    pytest.importorskip("metaworld")
    result = _run("--json", "--task", "reach-v3", "--sample", "rollout", "--states", "200", "--", "-tcp_to_target")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)["stats"]["reward"]
    assert stats["max"] <= 0 and stats["std"] > 0



@pytest.mark.parametrize("states", [10, 40])  # shorter than one episode, and several episodes with a cut one
def test_rollout_sample_is_the_engines_sampler_cut_to_the_asked_states(states: int, tiny_task: TaskSpec) -> None:
    task = tiny_task  # horizon 15
    got = reward_cmd._rollout_sample(task, states, seed=4)
    assert set(got) == {"dist", "action_norm"}  # the reward features only: no success, no human reward
    assert all(v.shape == (states,) for v in got.values())
    engine = random_feature_sample(task, states, seed=4, horizon=min(states, task.horizon))
    assert all(np.array_equal(got[k], engine[k][:states]) for k in got)
    other = reward_cmd._rollout_sample(task, states, seed=5)
    assert not np.array_equal(got["dist"], other["dist"])  # --seed picks the sample


# --- one validator: the CLI says exactly what a search says ---------------------------------------------------
def test_the_cli_and_the_graph_share_one_validator_and_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """`((((action_norm))))` on reach-v3 was accepted by the CLI though a search rejected it: now the CLI
    and the graph's validate node call the same function on the same candidate and give the same verdict."""
    tasks = pytest.importorskip("lares_agent.engine.tasks")
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from lares_agent import rewards
    from lares_agent.graphs import nodes
    from lares_agent.graphs.build import build_graph
    from lares_agent.graphs.context import GraphLimits, RunContext
    from lares_agent.graphs.round import run_round
    from lares_agent.llm.client import LLMClient, LLMConfig

    assert reward_cmd.validate is nodes.validate_candidate is rewards.validate
    calls: list[tuple[str, object, rewards.Verdict]] = []

    def spy(where: str):
        def call(data, task, sample, **kw):
            verdict = rewards.validate(data, task, sample, **kw)
            calls.append((where, data, verdict))
            return verdict
        return call

    monkeypatch.setattr(reward_cmd, "validate", spy("cli"))
    monkeypatch.setattr(nodes, "validate_candidate", spy("graph"))
    task = tasks.get_task("reach-v3")
    sample = rewards.synthetic_sample(task.features, 4096, np.random.default_rng(0))  # the CLI's default states
    bad, good = "((((action_norm))))", f"-{task.progress_feature} - 0.01*action_norm"
    verdicts = []
    for expression in (bad, good):
        calls.clear()
        cli = _run("--json", "--task", "reach-v3", "--", expression)
        answer = json.dumps({"components": {"reward": expression}, "rationale": "r"})
        llm = LLMClient(FakeListChatModel(responses=[answer]), LLMConfig(max_retries=0))
        context = RunContext(llm=llm, task=task, sample=sample, limits=GraphLimits(retry_budget=0))
        result = run_round(build_graph(), {"round": 0, "n_wanted": 1}, "r0", context)
        (cli_call, graph_call) = calls
        assert (cli_call[0], graph_call[0]) == ("cli", "graph")
        assert rewards.parse_candidate(cli_call[1], rewards.allowed_features(task)).canonical == \
            rewards.parse_candidate(graph_call[1], rewards.allowed_features(task)).canonical  # same candidate
        assert cli_call[2] == graph_call[2]  # same verdict: accepted, reason, complexity, canonical, stats, key
        payload = json.loads(cli.output)
        (record,) = result.accepted or result.rejected
        assert (payload["accepted"], payload["reason"]) == (record["accepted"], record["reason"])
        assert cli.exit_code == (0 if record["accepted"] else 1)
        verdicts.append(payload)
    assert not verdicts[0]["accepted"] and verdicts[0]["reason"].startswith("the reward never uses tcp_to_target")
    assert verdicts[1]["accepted"] and verdicts[1]["reason"] == "accepted"
