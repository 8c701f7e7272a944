"""`lares run --tensorboard`: the scalars read back from the event files equal the run's records (metrics rows,
reward updates, LLM calls), and a resumed run writes no step twice.

The expected points are built here from the raw JSON lines, not with the mirror's own functions, so a tag or a
value the mirror gets wrong shows.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import ReacherServer, serving
from helpers import lares_cli
from test_report import make_run

from lares_agent.runs import RunLayout, read_jsonl
from lares_agent.runs.tensorboard import MIRROR_STATE_NAME, TensorBoardMirror, read_scalars

Points = dict[str, dict[int, float]]


def _put(out: Points, tag: str, step: int, value: Any) -> None:
    """The first finite value at a step wins (the mirror writes each tag's steps in increasing order only)."""
    if isinstance(value, (int, float)) and math.isfinite(value) and step not in out.setdefault(tag, {}):
        out[tag][step] = float(value)


def expected(run: Path) -> Points:
    """What the event files must hold: every metrics row, reward update and LLM call attempt of `run`."""
    out: Points = {}
    for row in read_jsonl(run / "metrics.jsonl"):
        step = int(row["env_steps"])
        prefix = "update_eval" if row.get("kind") == "update" else "eval"
        for s in row["slots"]:
            for key in ("success", "task_return", "own_return", "es_fitness"):
                _put(out, f"{prefix}/{key}/slot_{s['slot']}", step, s.get(key))
        for key in ("success", "task_return", "own_return"):
            _put(out, f"{prefix}/{key}/slot_human", step, (row.get("extra") or {}).get(key))
        for key, name in (("success_max", "max"), ("success_mean", "mean"), ("success_best_slot", "ranked_first")):
            _put(out, f"{prefix}/success/{name}", step, row.get(key))
        for name, values in (row.get("losses") or {}).items():
            for i, value in enumerate(values):
                _put(out, f"losses/{name}/learner_{i}", step, value)
        for i, value in enumerate(row.get("alpha") or []):
            _put(out, f"alpha/learner_{i}", step, value)
    for event in read_jsonl(run / "events.jsonl"):
        if event["event"] == "reward_update":
            for slot, value in event["fitness"].items():
                _put(out, f"fitness/slot_{slot}", int(event["env_steps"]), value)
    total = 0
    for n, call in enumerate(read_jsonl(run / "llm_calls.jsonl"), start=1):
        prompt, completion = int(call.get("prompt_tokens") or 0), int(call.get("completion_tokens") or 0)
        total += prompt + completion
        for tag, value in (("prompt_tokens", prompt), ("completion_tokens", completion), ("total_tokens", total)):
            _put(out, f"llm/{tag}", n, value)
    return {tag: points for tag, points in out.items() if points}


def read_back(run: Path) -> Points:
    """The event files' points; a step written twice for one tag fails here."""
    out: Points = {}
    for tag, points in read_scalars(run / "tensorboard").items():
        steps = [step for step, _ in points]
        assert steps == sorted(set(steps)), f"{tag}: steps written twice or out of order: {steps}"
        out[tag] = dict(points)
    return out


def assert_same(got: Points, want: Points) -> None:
    assert sorted(got) == sorted(want)
    for tag, points in want.items():
        assert sorted(got[tag]) == sorted(points), tag
        for step, value in points.items():
            assert got[tag][step] == pytest.approx(value, rel=1e-6, abs=1e-6), (tag, step)  # stored as float32


# ------------------------------------------------------------------------------------ a synthetic run folder
def test_the_scalars_are_the_records(tmp_path: Path) -> None:
    run = make_run(tmp_path, "run1")["path"]  # evaluations with losses, reward updates, LLM calls, a torn line
    with TensorBoardMirror(RunLayout(run)) as mirror:
        pass
    want = expected(run)
    assert {"eval/success/slot_0", "eval/task_return/slot_2", "eval/own_return/slot_1", "losses/q_loss/learner_1",
            "alpha/learner_0", "fitness/slot_1", "llm/total_tokens"} <= set(want)
    assert_same(read_back(run), want)
    assert mirror.written == sum(len(p) for p in want.values())


def test_a_later_session_writes_only_what_is_new(tmp_path: Path) -> None:
    """A resume cuts the logs back to its checkpoint and replays the steps after it: the rows the mirror wrote
    before are not written again (not those before the checkpoint, nor the replayed ones), the new ones are."""
    run = make_run(tmp_path, "run1")["path"]
    rows = read_jsonl(run / "metrics.jsonl")
    first, later = rows[:3], rows[3:]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first))
    TensorBoardMirror(RunLayout(run)).close()
    written = read_back(run)
    assert max(written["eval/success/slot_0"]) == first[-1]["env_steps"]
    # the next session: the cut kept two rows; the third is replayed with another value, then the rest
    replayed = {**first[2], "slots": [{**s, "success": 0.123} for s in first[2]["slots"]]}
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*first[:2], replayed, *later]))
    with TensorBoardMirror(RunLayout(run)) as again:
        pass
    got = read_back(run)
    assert got["eval/success/slot_0"][first[2]["env_steps"]] != pytest.approx(0.123)  # the first value stays
    assert again.written == sum(len(p) for p in expected(run).values()) - sum(len(p) for p in written.values())
    # what the records hold, but for the replayed row's first value
    want = expected(run)
    for s in first[2]["slots"]:
        want[f"eval/success/slot_{s['slot']}"][first[2]["env_steps"]] = s["success"]
    assert_same(got, want)
    with TensorBoardMirror(RunLayout(run)) as idle:
        pass
    assert idle.written == 0 and json.loads((run / "tensorboard" / MIRROR_STATE_NAME).read_text())["last_step"]


def test_a_line_still_being_written_waits(tmp_path: Path) -> None:
    run = make_run(tmp_path, "run1", rounds=1)["path"]  # its metrics end in a torn line
    mirror = TensorBoardMirror(RunLayout(run))
    mirror.poll()
    with (run / "metrics.jsonl").open("a") as fh:  # the torn line is mended by the next writer, then one more row
        fh.write("\n" + json.dumps({"kind": "eval", "env_steps": 5000, "round": 1, "slots": [
            {"slot": 0, "reward_id": "x", "success": 0.5, "task_return": None}]}) + "\n")
    mirror.close()
    got = read_back(run)
    assert got["eval/success/slot_0"][5000] == 0.5 and 5000 not in got.get("eval/task_return/slot_0", {})


# ------------------------------------------------------------------------------------ a real run and its resume
TINY = ["--task", "Reacher-v5", "--budget", "450", "--reward-period", "150", "--population", "2", "--elites", "1",
        "--no-report", "--no-retrieval", "--seed", "4", "--learner", "crossq", "--eval-every", "150",
        "--handover-episodes", "2"]


Server = ReacherServer


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving(Server()) as srv:
        yield srv


lares = lares_cli


def _rows(path: Path, keep: Any) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in read_jsonl(path) if keep(r)))


@pytest.mark.slow
def test_a_run_and_its_resume_write_every_record_once(server: Server, tmp_path: Path) -> None:
    result = lares("run", *TINY, "--tensorboard", "--llm", "openai", "--model", "fake", "--base-url", server.url,
                   "--run-dir", str(tmp_path / "runs"), home=tmp_path)
    assert result.exit_code == 0, result.output
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert json.loads((run / "config.json").read_text())["tensorboard"] is True
    want = expected(run)
    assert {"eval/success/slot_0", "update_eval/success/slot_1", "losses/q_loss/learner_0", "fitness/slot_0",
            "llm/prompt_tokens"} <= set(want)
    assert_same(read_back(run), want)

    # Killed after round 0's checkpoint, when the mirror had written round 0's rows only; no graph trace, so the
    # resume asks the LLM for round 1 again and its calls are new rows.
    killed = tmp_path / "killed" / run.name
    shutil.copytree(run, killed)
    RunLayout(killed).trace.unlink()
    for checkpoint in (killed / "checkpoints").iterdir():
        if checkpoint.is_dir() and checkpoint.name != "round-0000":
            shutil.rmtree(checkpoint)
    _rows(killed / "events.jsonl", lambda e: e["event"] != "run_end")
    early = tmp_path / "early" / run.name  # what the killed session's mirror had seen
    shutil.copytree(killed, early, ignore=shutil.ignore_patterns("tensorboard", "checkpoints", "policies"))
    _rows(early / "metrics.jsonl", lambda r: r["round"] == 0)
    _rows(early / "events.jsonl", lambda e: (e.get("round") or 0) == 0)
    TensorBoardMirror(RunLayout(early)).close()
    shutil.rmtree(killed / "tensorboard")
    shutil.copytree(early / "tensorboard", killed / "tensorboard")
    calls_before = len(read_jsonl(killed / "llm_calls.jsonl"))

    resumed = lares("resume", str(killed), "--no-report", home=tmp_path)
    assert resumed.exit_code == 0, resumed.output
    assert len(read_jsonl(killed / "llm_calls.jsonl")) > calls_before  # the resume's own calls are mirrored too
    assert_same(read_back(killed), expected(killed))

