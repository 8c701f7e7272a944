"""experiments/evidence/retrain.py: each (task, arm)'s best replayed seed is picked, its sweep is started or
continued, a source run's interval decides whether the fresh seeds reproduce it, and its Ray cluster is its own."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest
from helpers import load_script

from lares_agent.search.sweep_spec import SweepSpec

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "evidence" / "retrain.py"


def _script() -> ModuleType:
    return load_script(SCRIPT)


GRID = SweepSpec(tasks=("door-close-v3", "drawer-open-v3"), seeds=(0, 1, 2),
                 methods=("lares-scratch", "lares-init", "human"),
                 options={"budget": 50000, "reward_period": 10000})


def test_the_fresh_seeds_follow_the_grids_highest() -> None:
    script = _script()
    assert script.fresh_seeds(GRID) == [3, 4, 5]
    assert script.fresh_seeds(SweepSpec(tasks=GRID.tasks, seeds=(0, 1, 2, 3), methods=GRID.methods)) == [4, 5, 6]


def test_the_best_replayed_seed_of_each_search_arm_is_picked_lower_seed_on_ties() -> None:
    success = {"door-close-v3-lares-init-s0": 1.0, "door-close-v3-lares-init-s1": 1.0,
               "door-close-v3-lares-scratch-s2": 0.4, "door-close-v3-lares-scratch-s0": 0.1,
               "door-close-v3-human-s1": 1.0, "drawer-open-v3-lares-init-s2": 0.0}
    picked = _script().best_seeds(GRID, success)
    assert [(e["task"], e["method"], e["trial"]) for e in picked] == [
        ("door-close-v3", "lares-scratch", "door-close-v3-lares-scratch-s2"),
        ("door-close-v3", "lares-init", "door-close-v3-lares-init-s0"),
        ("drawer-open-v3", "lares-init", "drawer-open-v3-lares-init-s2"),
    ]  # human is no search arm; drawer-open-v3's scratch arm has no replayed trial
    own = {"door-close-v3-lares-init-s0": True}  # it handed over the task's own reward: s1's found one is retrained
    assert _script().best_seeds(GRID, success, own)[1]["trial"] == "door-close-v3-lares-init-s1"


def test_a_found_reward_that_restates_the_tasks_own_is_the_tasks_own() -> None:
    from lares_agent.engine.tasks import get_task
    from lares_agent.search.found_reward import FoundReward

    is_own = _script().is_own
    ((name, own),) = get_task("window-close-v3").human_components or ()
    assert is_own(FoundReward((), "human", "run"), "window-close-v3")
    assert is_own(FoundReward((("renamed", own),), "nit-s1-r4-a1-1", "run"), "window-close-v3")
    assert not is_own(FoundReward(((name, own.replace("10*", "12*", 1)),), "nit-s2", "run"), "window-close-v3")


def test_wilson_interval_matches_known_values() -> None:
    wilson = _script().wilson
    lo, hi = wilson(15, 30)
    assert lo == pytest.approx(0.3315, abs=1e-3) and hi == pytest.approx(0.6685, abs=1e-3)
    assert wilson(30, 30)[1] == 1.0 and wilson(30, 30)[0] == pytest.approx(0.8865, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0)


def test_fresh_seeds_reproduce_a_source_when_their_mean_reaches_its_interval() -> None:
    reproduced = _script().reproduced
    assert reproduced([0.4, 0.3, 0.35], 0.5, 30)  # 35% >= 33%, the lower end for 15 of 30
    assert not reproduced([0.4, 0.2, 0.3], 0.5, 30)
    assert reproduced([1.0, 1.0, 1.0], 0.5, 30)  # above the interval counts


def test_a_new_retrain_sweep_gets_the_grids_options_and_a_started_one_resumes(tmp_path: Path) -> None:
    script = _script()
    retrain_plan = {"grid": "/g", "preset": "demo", "options": script.alone_options(GRID), "seeds": [3, 4, 5]}
    entry = {"task": "door-close-v3", "method": "lares-init", "trial": "door-close-v3-lares-init-s0"}
    folder = script.folder_of(tmp_path, entry)
    args = script.sweep_args(entry, retrain_plan, folder)
    assert args[:7] == ["sweep", "--tasks", "door-close-v3", "--seeds", "3,4,5", "--methods", "retrain"]
    assert "budget=50000" in args and "reward_from=/g/runs/door-close-v3-lares-init-s0" in args
    assert args[-2:] == ["--out", str(tmp_path / "door-close-v3-lares-init")]
    folder.mkdir()
    GRID.save(folder / "sweep.json")
    assert script.sweep_args(entry, retrain_plan, folder) == ["sweep", "--resume", str(folder)]


def test_a_reward_not_retrained_yet_reads_not_run(tmp_path: Path) -> None:
    retrain_plan = {"episodes": 30, "replay_seed": 2000, "seeds": [3, 4, 5], "rewards": [
        {"task": "door-close-v3", "method": "lares-init", "trial": "door-close-v3-lares-init-s0", "success": 0.5,
         "reward_id": "human", "own_reward": True}]}
    text = _script().table(retrain_plan, tmp_path, None)
    assert "| door-close-v3 | lares-init | door-close-v3-lares-init-s0 (the task's own) | 50% [33%, 67%] | - | - " \
           "| not run | - |" in text


def test_the_tasks_own_reward_on_the_fresh_seeds_is_one_sweep_read_beside_every_found_reward(tmp_path: Path) -> None:
    script = _script()
    retrain_plan = {"grid": "/g", "preset": "demo", "options": {"budget": 50000}, "seeds": [3, 4, 5],
                    "episodes": 30, "replay_seed": 2000, "rewards": [
                        {"task": "door-close-v3", "method": "lares-scratch", "trial": "door-close-v3-lares-scratch-s2",
                         "success": 1.0, "reward_id": "tch", "own_reward": False},
                        {"task": "door-close-v3", "method": "lares-init", "trial": "door-close-v3-lares-init-s0",
                         "success": 1.0, "reward_id": "human", "own_reward": True},
                        {"task": "drawer-open-v3", "method": "lares-init", "trial": "drawer-open-v3-lares-init-s0",
                         "success": 0.0, "reward_id": "nit", "own_reward": False}]}
    human = tmp_path / script.HUMAN
    args = script.sweep_args(None, retrain_plan, human)
    assert args[:7] == ["sweep", "--tasks", "door-close-v3,drawer-open-v3", "--seeds", "3,4,5", "--methods", "human"]
    assert not any(a.startswith("reward_from=") for a in args) and args[-1] == str(human)
    human.mkdir()
    SweepSpec(tasks=("door-close-v3", "drawer-open-v3"), seeds=(3, 4, 5), methods=("human",),
              options={"budget": 50000}).save(human / "sweep.json")
    found = script.folder_of(tmp_path, retrain_plan["rewards"][0])
    found.mkdir()
    # the table reads a sweep's trials, whatever trains them (a retrain spec would need a real source run)
    SweepSpec(tasks=("door-close-v3",), seeds=(3, 4, 5), methods=("sparse",)).save(found / "sweep.json")
    csv = tmp_path / "replays.csv"  # replays already kept: nothing is played again (no policy files here)
    kept = {"human-fresh/door-close-v3-human-s3": 1, "human-fresh/door-close-v3-human-s5": 0,
            "door-close-v3-lares-scratch/door-close-v3-sparse-s3": 0}
    csv.write_text("trial,episodes,seed,success\n" + "".join(f"{k},30,2000,{v}\n" for k, v in kept.items()),
                   encoding="utf-8")
    # the records of two trials: their success curves' areas (no records: "-")
    _finished_run(human / "runs" / "door-close-v3-human-s3", {1000: 0.0, 2000: 1.0, 3000: 1.0})
    _finished_run(found / "runs" / "door-close-v3-sparse-s3", {1000: 0.0, 2000: 0.0, 3000: 0.5})
    text = script.table(retrain_plan, tmp_path, csv)
    assert "| 100% [89%, 100%] | 0%, -, - | 0% [0%, 0%] | no so far (1 of 3 seeds) | 100%, -, 0% " \
           "| 0.125, -, - (0.125) | 0.750, -, - (0.750) |" in text
    assert "(the task's own) | 100% [89%, 100%] | 100%, -, 0% | 50% [0%, 100%] | no so far (2 of 3 seeds) " \
           "| 100%, -, 0% | 0.750, -, - (0.750) |" in text  # its retraining is that sweep itself
    assert "| drawer-open-v3 | lares-init | drawer-open-v3-lares-init-s0 (nit) | 0% [0%, 11%] | - | - | not run | - " \
           "| - | - |" in text


def _finished_run(run: Path, success: dict[int, float]) -> None:
    """A learner-alone trial's records: its periodic evaluations (one slot) and a finished run_end."""
    from lares_agent.runs import RunLog

    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"task": "door-close-v3", "budget": max(success)}), encoding="utf-8")
    rows = [{"kind": "eval", "env_steps": step, "round": 0, "best_slot": 0,
             "slots": [{"slot": 0, "reward_id": "human", "success": value, "task_return": 1.0}]}
            for step, value in success.items()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    RunLog(run).event("run_end", env_steps=max(success), finished=True, wall_s=1.0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_stops_the_cluster_it_started_and_leaves_another_running(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`ray stop` would end every Ray process of the machine (a grid beside the retraining): run owns its cluster.
    Under an empty home folder, as on a machine where Ray never ran (no token file there)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    script = _script()
    ray = str(Path(sys.executable).with_name("ray"))
    env = script.cluster_env()  # the other cluster's own token
    other_port, own_port = _free_port(), _free_port()
    address_file = Path("/tmp/ray/ray_current_cluster")  # Ray's record of the last `ray start` of this machine
    before = address_file.read_text() if address_file.is_file() else None
    temp = tempfile.TemporaryDirectory(prefix="ray-")  # not tmp_path: Ray's socket paths must stay short
    other = subprocess.Popen(script.ray_head(ray, other_port, 1, temp.name), stdout=subprocess.DEVNULL,
                             stderr=subprocess.STDOUT, env=env)
    try:
        script._wait_for_cluster(ray, f"127.0.0.1:{other_port}", other, env)
        assert script.run({"rewards": []}, tmp_path / "out", cpus=1, port=own_port) == 0
        with pytest.raises(ConnectionRefusedError):  # its GCS is gone (`ray status` would retry for 40 s)
            socket.create_connection(("127.0.0.1", own_port), timeout=5).close()
        assert other.poll() is None
        assert subprocess.run([ray, "status", f"--address=127.0.0.1:{other_port}"], capture_output=True,
                              env=env).returncode == 0
        assert (address_file.read_text() if address_file.is_file() else None) == before  # later ray.init()s unmisled
    finally:
        other.terminate()
        other.wait(timeout=120)
        temp.cleanup()


def test_a_plan_for_a_task_the_grid_lacks_is_refused(tmp_path: Path) -> None:
    from lares_agent.runs.sweep_layout import SweepLayout

    layout = SweepLayout(tmp_path / "grid")
    layout.root.mkdir()
    GRID.save(layout.spec)
    with pytest.raises(SystemExit, match="no task reach-v3 in its sweep"):
        _script().plan(layout.root, tmp_path / "replay.csv", 30, 2000, ["reach-v3"])
