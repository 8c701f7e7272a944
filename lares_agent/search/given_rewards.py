"""The rewards a run is given rather than proposes: the user's `--rewards-file` candidates, each through the one
validator, and the success indicator that the sparse baseline trains on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lares_agent.engine import RewardFunction, TaskSpec
from lares_agent.errors import LaresError
from lares_agent.runs.input_files import check_input_file
from lares_agent.runs.oserrors import run_file_error

if TYPE_CHECKING:
    from lares_agent.rewards import CompiledReward

__all__ = ["load_rewards_file", "success_reward"]


def success_reward(task: TaskSpec) -> RewardFunction:
    """The task's success indicator as the one reward of the sparse baseline. Compiled without the validator on
    purpose: the validator refuses a reward that ignores the progress feature, which is what sparse means."""
    from lares_agent.rewards import compile_record

    return compile_record({"id": "success", "components": {"success": "success"},
                           "rationale": "the task's success indicator alone (sparse baseline)"}, task)


def load_rewards_file(path: Path, task: TaskSpec, state_only: bool = False) -> list[CompiledReward]:
    """Candidates given by the user (`--rewards-file FILE`): a JSON list of `{"components": ..., "rationale": ...}`
    (or of bare expression strings); each goes through the one validator, on the sample `lares reward check`
    uses by default (synthetic states, seed 0), so that command says why one is refused; a bad one stops the run.
    `state_only` (`--shaping potential`: they are potentials): one reading the step's action is refused."""
    from lares_agent.rewards import CheckConfig, synthetic_sample, validate

    try:
        check_input_file(path, "--rewards-file")  # no device, pipe or huge file (runs/input_files.py)
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LaresError(f"--rewards-file {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise LaresError(f"--rewards-file {path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise LaresError(f"--rewards-file {path} is nested too deeply to be a list of candidates") from None
    except UnicodeDecodeError as exc:
        raise LaresError(f"--rewards-file {path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise run_file_error("read the --rewards-file", path, exc) from None
    if isinstance(data, dict):
        data = data.get("candidates", [data])
    if not isinstance(data, list) or not data:
        raise LaresError(f"--rewards-file {path} must hold a JSON list of candidates")
    sample = synthetic_sample(task.features, 4096, np.random.default_rng(0))
    out: list[CompiledReward] = []
    for i, item in enumerate(data):
        verdict = validate(item, task, sample, id=f"given-{i}", config=CheckConfig(state_only=state_only))
        if verdict.reward is None:
            raise LaresError(f"--rewards-file candidate {i} rejected: {verdict.reason}")
        out.append(verdict.reward)
    return out
