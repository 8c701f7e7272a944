"""A found reward trained alone: `lares baseline --reward-from RUN[:REWARD_ID]` / `--reward-file FILE` and `lares
sweep --methods retrain` (search/found_reward.py).

Refusals are one line, exit 2, before any run folder; a tiny real baseline trains on the given reward (config.json
holds it); the sweep's `retrain` trials take it from `--set`; and (slow) a real search run's handed-over reward is
retrained alone, its metrics' own return that reward's. The rewards are k x Reacher-v5's own (`lares tasks --show
Reacher-v5`: -fingertip_to_target - action_norm**2), so a learner's own return is exactly k x its task return
whatever it learned.
"""

from __future__ import annotations

import json
import math
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, chat_completion, serving
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.errors import ConfigError
from lares_agent.runs import CandidateRow, RunLayout, RunLog, SlotRecord, read_jsonl
from lares_agent.search.config import SearchConfig
from lares_agent.search.found_reward import FoundReward, from_file, from_run
from lares_agent.search.runner import read_config
from lares_agent.search.sweep_spec import SweepSpec, parse_sets

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TRIPLE = {"distance": "-3*fingertip_to_target", "control": "-3*action_norm**2"}  # 3 x the task's own reward
OTHER = {"distance": "-2*fingertip_to_target", "control": "-2*action_norm**2"}
TINY = ["--task", "Reacher-v5", "--learner", "sac", "--budget", "100", "--no-report"]  # no evaluation yet


def lares(*args: str, home: Path) -> Any:
    return CliRunner().invoke(app, list(args), env={"LARES_HOME": str(home), "COLUMNS": "240"})


def only_run(base: Path) -> Path:
    (run,) = [p for p in base.iterdir() if p.is_dir()]
    return run


def searched_run(base: Path) -> Path:
    """A run folder as a search leaves it, without training: config.json and two accepted candidates with
    fitness (no evaluation yet: the handed-over reward is the fittest, `runs/selected.py`)."""
    layout = RunLayout.create(base, "Reacher-v5", "searched")
    SearchConfig(task="Reacher-v5", setting="scratch", population=2, retrieval=False).save(layout.config)
    log = RunLog(layout)
    for rid, components, fitness in (("r0-a", OTHER, 0.2), ("r0-b", TRIPLE, 0.5)):
        log.candidates.append(CandidateRow(id=rid, round=0, slot=0, verdict="accepted", components=components,
                                           rationale="scaled own reward", evaluated=SlotRecord(fitness=fitness)))
    return layout.root


def assert_refused(result: Any, runs: Path, *fragments: str) -> None:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert not runs.exists() or not any(runs.iterdir())  # refused before a run folder exists


# ------------------------------------------------------------------------------------------- refusals
def test_an_unknown_run_an_unknown_id_and_an_invalid_reward_are_refused_before_a_run_folder(tmp_path: Path) -> None:
    runs, source = tmp_path / "runs", searched_run(tmp_path / "src")
    base = ["baseline", *TINY, "--run-dir", str(runs)]
    assert_refused(lares(*base, "--reward-from", str(tmp_path / "nope"), home=tmp_path), runs,
                   "is not a lares run folder")
    assert_refused(lares(*base, "--reward-from", f"{source}:r9-z", home=tmp_path), runs,
                   "no reward 'r9-z'", "known: r0-a, r0-b, human")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"components": {"effort": "-action_norm"}}))  # ignores the progress feature
    assert_refused(lares(*base, "--reward-file", str(bad), home=tmp_path), runs, "refused for task Reacher-v5")
    assert_refused(lares(*base, "--reward-file", str(bad), "--reward-from", str(source), home=tmp_path), runs,
                   "give one")
    assert_refused(lares(*base, "--reward-from", str(source), "--reward", "success", home=tmp_path), runs,
                   "--reward success")
    assert_refused(lares(*base, "--reward-file", str(tmp_path / "none.json"), home=tmp_path), runs, "does not exist")


def test_a_run_gives_its_handed_over_reward_or_the_one_named(tmp_path: Path) -> None:
    source = searched_run(tmp_path)
    handed = from_run(str(source))
    assert handed == FoundReward(tuple(TRIPLE.items()), "r0-b", handed.source, "Reacher-v5")
    assert "the reward it handed over (the candidate of highest fitness" in handed.source
    named = from_run(f"{source}:r0-a")
    assert named.components == tuple(OTHER.items()) and named.reward_id == "r0-a"
    assert from_run(f"{source.name}:human", base=source.parent).is_human  # relative to a base folder


def test_a_baseline_source_gives_its_own_reward_and_a_sparse_one_is_refused(tmp_path: Path) -> None:
    human = RunLayout.create(tmp_path, "Reacher-v5", "human")
    SearchConfig(task="Reacher-v5", setting="baseline", population=1).save(human.config)
    found = from_run(str(human.root))
    assert found.is_human and "a baseline on it" in found.source
    runs = tmp_path / "runs"
    result = lares("baseline", "--learner", "sac", "--budget", "100", "--no-report", "--reward-from",
                   str(human.root), "--run-dir", str(runs), home=tmp_path)
    assert result.exit_code == 0, result.output
    assert "note: the task's own reward, handed over by run" in result.output
    assert "training on the task's own reward, as `lares baseline --reward human`" in result.output
    cfg = read_config(RunLayout(only_run(runs)))
    assert (cfg.task, cfg.baseline_reward, cfg.reward_components, cfg.reward_source) == (
        "Reacher-v5", "human", (), found.source)
    sparse = RunLayout.create(tmp_path, "Reacher-v5", "sparse")
    SearchConfig(task="Reacher-v5", setting="baseline", population=1, baseline_reward="success").save(sparse.config)
    with pytest.raises(ConfigError, match="sparse baseline"):
        from_run(str(sparse.root))


def test_the_file_formats_a_user_has(tmp_path: Path) -> None:
    def write(name: str, data: object) -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return path

    exported = from_file(write("e.json", {"id": "r3-x", "task": "Reacher-v5", "components": TRIPLE, "complexity": 4}))
    assert (exported.components, exported.reward_id, exported.task) == (tuple(TRIPLE.items()), "r3-x", "Reacher-v5")
    assert from_file(write("l.json", [{"components": TRIPLE}])).components == tuple(TRIPLE.items())
    assert from_file(write("c.json", {"candidates": [{"components": TRIPLE}]})).reward_id == "given"
    assert from_file(write("h.json", {"id": "human", "components": TRIPLE})).reward_id == "given"  # never "human"
    bare = (("reward", "-fingertip_to_target"),)
    assert from_file(write("s.json", json.dumps("-fingertip_to_target"))).components == bare
    assert from_file(write("r.txt", "-fingertip_to_target\n")).components == bare
    with pytest.raises(ConfigError, match="holds 2 candidates"):
        from_file(write("two.json", [{"components": TRIPLE}, {"components": OTHER}]))
    with pytest.raises(ConfigError, match="python export"):
        from_file(write("m.py", '"""Reward."""\nimport numpy as np\n\ndef reward(features):\n    return 0\n'))
    with pytest.raises(ConfigError, match="not valid JSON"):
        from_file(write("broken.json", "{"))


# ------------------------------------------------------------------------------------------- a real run
@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`lares baseline --reward-file` on an exported candidate: 100 SAC steps on Reacher-v5."""
    base = tmp_path_factory.mktemp("given")
    given = base / "reward.json"
    given.write_text(json.dumps({"id": "r2-t", "task": "Reacher-v5", "components": TRIPLE, "rationale": "x3"}))
    result = lares("baseline", *TINY[2:], "--reward-file", str(given), "--run-dir", str(base / "runs"), home=base)
    assert result.exit_code == 0, result.output
    assert "reward given: reward r2-t in file" in result.output  # the last screen says what it trained on
    assert "selected reward r2-t (slot 0): distance = -3*fingertip_to_target; control = -3*action_norm**2" \
        in result.output
    return only_run(base / "runs")


def test_the_baseline_holds_the_given_reward_in_its_config(trained: Path) -> None:
    cfg = read_config(RunLayout(trained))  # what `lares resume` reads: no source file needed
    assert (cfg.task, cfg.setting, cfg.reward_id) == ("Reacher-v5", "baseline", "r2-t")
    assert cfg.reward_components == tuple(TRIPLE.items()) and "reward.json" in str(cfg.reward_source)
    warmup = [e for e in read_jsonl(RunLayout(trained).events) if e.get("event") == "warmup"]
    assert warmup and warmup[0]["rewards"] == ["r2-t"]  # the learner's one reward


def test_a_retrain_of_a_retrain_keeps_the_reward_and_export_reads_it(trained: Path, tmp_path: Path) -> None:
    result = lares("export", str(trained), "--format", "json", home=tmp_path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["components"] == {"distance": "-3*fingertip_to_target",
                                                       "control": "-3*action_norm**2"}
    runs = tmp_path / "runs"
    result = lares("baseline", "--learner", "sac", "--budget", "100", "--no-report", "--seed", "7", "--reward-from",
                   str(trained), "--run-dir", str(runs), home=tmp_path)  # the task comes from the run
    assert result.exit_code == 0, result.output
    cfg = read_config(RunLayout(only_run(runs)))
    assert (cfg.task, cfg.seed, cfg.reward_id, cfg.reward_components) == ("Reacher-v5", 7, "r2-t",
                                                                           tuple(TRIPLE.items()))
    assert f"reward r2-t of run {trained}" in str(cfg.reward_source)


# ------------------------------------------------------------------------------------------- the sweep
def test_a_retrain_sweep_takes_the_reward_from_set(tmp_path: Path) -> None:
    source = searched_run(tmp_path)
    options = parse_sets(["budget=900", f"reward_from={source.name}"], base=tmp_path)  # made absolute
    assert options["reward_components"] == tuple(TRIPLE.items()) and str(source) in options["reward_source"]
    spec = SweepSpec(tasks=("Reacher-v5",), seeds=(10, 11, 12), methods=("retrain", "human"), options=options)
    configs = spec.check()
    retrain, human = configs["Reacher-v5-retrain-s10"], configs["Reacher-v5-human-s10"]
    assert (retrain.setting, retrain.reward_id, retrain.reward_components) == ("baseline", "r0-b",
                                                                               tuple(TRIPLE.items()))
    assert (human.setting, human.reward_components, human.reward_source) == ("baseline", (), None)
    assert SweepSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec  # sweep.json keeps the reward
    given = tmp_path / "r.json"
    given.write_text(json.dumps({"components": OTHER}))
    assert parse_sets(["reward-file=r.json"], base=tmp_path)["reward_components"] == tuple(OTHER.items())
    with pytest.raises(ConfigError, match="method retrain trains a found reward"):
        SweepSpec(tasks=("Reacher-v5",), seeds=(0,), methods=("retrain",), options={"budget": 900})
    with pytest.raises(ConfigError, match="add it to --methods"):
        SweepSpec(tasks=("Reacher-v5",), seeds=(0,), methods=("human",), options=options)
    with pytest.raises(ConfigError, match="give one"):
        parse_sets([f"reward_from={source}", "reward_file=r.json"], base=tmp_path)
    with pytest.raises(ConfigError, match="no reward 'nope'"):
        parse_sets([f"reward_from={source}:nope"])
    bad = SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("retrain",), options=options)
    with pytest.raises(ConfigError, match="trial reach-v3-retrain-s0: the reward to train"):
        bad.check()  # Reacher's features on reach-v3: refused before the sweep folder exists


# ------------------------------------------------------------------------------- from a real search run
KS = (2, 3, 4, 5, 6, 7)  # the proposals: k x the task's own reward


class ScaledOwnRewards(FakeOpenAI):
    """Proposes k x Reacher's own reward, k = 2, 3, ... in turn; a sentence to any other node."""

    def __init__(self) -> None:
        super().__init__()
        self.proposals = 0

    def answer(self, path: str, headers: Message, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        text = "The arm overshoots."
        if "# Step: propose" in str(body["messages"][-1]["content"]):
            with self.lock:
                k = KS[self.proposals % len(KS)]
                self.proposals += 1
            text = json.dumps({"candidates": [{"components": scaled(k), "rationale": f"{k} x own"}]})
        return 200, chat_completion(text, body.get("model", "fake"), 50, 10)


def scaled(k: int) -> dict[str, str]:
    return {"distance": f"-{k}*fingertip_to_target", "control": f"-{k}*action_norm**2"}


@pytest.mark.slow  # a search and a baseline with one evaluation: about a minute
def test_a_search_runs_handed_over_reward_retrained_alone(tmp_path: Path) -> None:
    with serving(ScaledOwnRewards()) as server:
        result = lares("run", "--task", "Reacher-v5", "--budget", "300", "--reward-period", "150", "--population",
                       "2", "--elites", "1", "--setting", "scratch", "--numeric-children", "0", "--no-retrieval",
                       "--no-report", "--llm-backend", "openai", "--llm-model", "fake", "--base-url", server.url,
                       "--run-dir", str(tmp_path / "src"), home=tmp_path)
    assert result.exit_code == 0, result.output
    source = only_run(tmp_path / "src")
    from lares_agent.runs.selected import selected_reward

    chosen = selected_reward(source)
    assert chosen is not None and chosen.reward_id != "human"
    rows = [r for r in read_jsonl(RunLayout(source).candidates) if r["id"] == chosen.reward_id and r.get("components")]
    components = rows[-1]["components"]
    (k,) = [k for k in KS if scaled(k) == components]
    runs = tmp_path / "runs"
    result = lares("baseline", "--learner", "sac", "--budget", "1500", "--seed", "9", "--no-report",
                   "--reward-from", str(source), "--run-dir", str(runs), home=tmp_path)
    assert result.exit_code == 0, result.output
    assert f"reward given: reward {chosen.reward_id} of run {source}, the reward it handed over" in result.output
    run = RunLayout(only_run(runs))
    cfg = read_config(run)
    assert (cfg.task, cfg.reward_id, dict(cfg.reward_components)) == ("Reacher-v5", chosen.reward_id, components)
    metrics = read_jsonl(run.metrics)
    assert metrics  # one evaluation at 1,500 steps
    for row in metrics:
        (slot,) = row["slots"]
        assert slot["reward_id"] == chosen.reward_id
        assert math.isclose(slot["own_return"], k * slot["task_return"], rel_tol=1e-6)  # that reward's return
    others = [r["id"] for r in read_jsonl(RunLayout(source).candidates)
              if r.get("verdict") == "accepted" and r["id"] != chosen.reward_id]
    if others:  # any accepted candidate by id
        assert from_run(f"{source}:{others[0]}").reward_id == others[0]
