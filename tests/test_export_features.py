"""`lares export` of a built-in task carries lares' own feature code: `LaresRewardWrapper(env)` needs no user
code, and in a Python where lares cannot be imported it gives the rewards and features lares computes itself on
the same seeded steps (Reacher, HalfCheetah and MetaWorld tasks with caging, a joint and a site-measured head)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine.tasks import get_task
from lares_agent.engine.tasks.feature_code import feature_code
from lares_agent.rewards import allowed_features, compile_reward, human_record, parse_candidate

TASKS = ("Reacher-v5", "HalfCheetah-v5", "pick-place-v3", "hammer-v3", "peg-insert-side-v3")
SEED, STEPS, RESET_AT = 3, 24, 12  # two episodes: the second starts from an unseeded reset

# A user's script: the exported files beside it, lares blocked, the env made with gymnasium alone.
USER_SCRIPT = '''
import json, os, sys
sys.modules["lares_agent"] = None  # an editable install would still find it: block it outright
sys.path[:] = [os.getcwd()] + [p for p in sys.path if p and not os.path.isdir(os.path.join(p, "lares_agent"))]
import importlib
import gymnasium
import numpy as np

plan = json.load(open("plan.json"))
out = {}
for item in plan["tasks"]:
    module = importlib.import_module(item["module"])
    if item["family"] == "metaworld":
        import metaworld  # noqa: F401  (registers Meta-World/MT1)
        env = gymnasium.make("Meta-World/MT1", env_name=item["task"], seed=plan["seed"])
    else:
        env = gymnasium.make(item["task"])
    env = module.LaresRewardWrapper(env)  # no features_fn: the module's own feature code
    env.reset(seed=plan["seed"])
    rewards, env_rewards, features, baseline = [], [], [], 0.0
    for t, action in enumerate(item["actions"]):
        if t == plan["reset_at"]:
            env.reset()
        obs, reward, terminated, truncated, info = env.step(np.asarray(action, dtype=env.action_space.dtype))
        baseline += 0.1 * (reward - baseline)  # the "training": a running reward baseline, nothing heavy
        rewards.append(reward)
        env_rewards.append(float(info["env_reward"]))
        features.append(module.env_features(env, obs, info, np.asarray(action, dtype=np.float64)))
    loaded = {m.split(".")[0] for m, v in sys.modules.items() if v is not None}
    out[item["task"]] = {"rewards": rewards, "env_rewards": env_rewards, "features": features,
                         "lares_loaded": "lares_agent" in loaded}
json.dump(out, open("out.json", "w"))
'''


def _actions(task: str) -> np.ndarray:
    spec = get_task(task)
    space = spec.make_env(0).action_space
    assert isinstance(space, gymnasium.spaces.Box)
    rng = np.random.default_rng(7)
    low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    return rng.uniform(low, high, size=(STEPS, spec.act_dim)).astype(np.float32)


def _in_project(task: str, actions: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """lares' own features and the compiled reward on the same seeded steps."""
    spec = get_task(task)
    env = spec.make_env(SEED)
    env.reset()
    raws = []
    for t, action in enumerate(actions):
        if t == RESET_AT:
            env.reset()
        obs, _, _, _, info = env.step(action)
        raws.append(spec.raw_state(env, obs, info))
    env.close()
    features = spec.compute_features(np.stack(raws), actions.astype(np.float64))
    parsed = parse_candidate(human_record(spec), allowed_features(spec))  # type: ignore[arg-type]
    return features, compile_reward(parsed)(features)


@pytest.mark.slow  # real MuJoCo envs in a second interpreter
def test_the_exported_wrapper_needs_no_user_code_and_equals_lares_without_lares(tmp_path: Path) -> None:
    runner = CliRunner()
    plan: dict[str, object] = {"seed": SEED, "reset_at": RESET_AT, "tasks": []}
    actions = {task: _actions(task) for task in TASKS}
    for i, task in enumerate(TASKS):
        out = tmp_path / f"reward_{i}.py"
        result = runner.invoke(app, ["export", "--human", "--task", task, "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert "lares_agent" not in out.read_text() and "def env_features(" in out.read_text()
        plan["tasks"].append({"task": task, "module": out.stem, "family": get_task(task).family,  # type: ignore[attr-defined]
                              "actions": actions[task].tolist()})
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "train.py").write_text(USER_SCRIPT)
    subprocess.run([sys.executable, "-I", "train.py"], cwd=tmp_path, check=True, timeout=300)
    got = json.loads((tmp_path / "out.json").read_text())
    for task in TASKS:
        features, expected = _in_project(task, actions[task])
        run = got[task]
        assert not run["lares_loaded"]
        np.testing.assert_allclose(run["rewards"], expected, rtol=1e-6, atol=1e-9, err_msg=task)
        np.testing.assert_allclose(run["rewards"], run["env_rewards"], rtol=1e-5, atol=1e-6, err_msg=task)
        assert np.ptp(expected) > 0, task  # the steps exercise the reward, not a constant
        for name, values in features.items():
            column = [step[name] for step in run["features"]]
            np.testing.assert_allclose(column, values, rtol=1e-9, atol=1e-12, equal_nan=True,
                                       err_msg=f"{task}: {name}")


def test_feature_code_is_printed_from_the_engine_functions() -> None:
    """The printed code is the engine's own source (so it cannot drift) and a user task gets none."""
    import inspect

    from lares_agent.engine.tasks.metaworld_extras import caging_features
    from lares_agent.engine.tasks.spec import row_norm

    code = feature_code(get_task("pick-place-v3"))
    assert code is not None
    assert inspect.getsource(caging_features) in code and inspect.getsource(row_norm) in code
    assert "TASK_ARGS = (MetaWorldTask(env_name='pick-place-v3'" in code and "lares_agent" not in code
    assert feature_code(get_task("reach-v3")) is not None


def test_feature_code_that_redefines_a_reward_name_is_refused() -> None:
    from lares_agent.rewards.export import python_module
    from lares_agent.rewards.limits import RewardRejected

    parsed = parse_candidate("-fingertip_to_target", get_task("Reacher-v5").feature_names)
    with pytest.raises(RewardRejected, match="redefines reward"):
        python_module(parsed, [], reward_id="r", task="Reacher-v5", feature_code="def reward(x):\n    return x\n")
