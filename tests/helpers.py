"""Small pieces shared by the tests: a point-mass env and task, a scripted chat model, one-feature rewards, batches.

They live in one module so the SAC, ES, Ray, graph and fault tests run on the same toy problem. The env's own
reward and `info` are never read by the engines (features come from the raw state), so every test can use
this one env. The tiny task is a real `TaskSpec` (built by `point_task`, fields overridable), so the tests go
through the same typed seams as a run: `engine.tasks.TaskSpec`, `rewards.RewardTask`, `graphs.GraphTask`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium
import numpy as np
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from lares_agent.engine.contracts import Batch
from lares_agent.engine.setup.config import EngineConfig, ESPopulationConfig, ReplayConfig
from lares_agent.engine.tasks import Feature, TaskSpec
from lares_agent.llm import LLMClient, LLMConfig


# ---------------------------------------------------------------------------------------------- tiny task
class PointMass(gymnasium.Env):
    """2-D point moved by 0.1 * action toward a random goal; success within 0.1 of the goal."""

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(-2.0, 2.0, (4,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.pos = np.zeros(2)
        self.goal = np.zeros(2)

    def _obs(self) -> np.ndarray:
        return np.concatenate([self.pos, self.goal]).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-0.5, 0.5, 2)
        self.goal = self.np_random.uniform(-0.5, 0.5, 2)
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.pos = np.clip(self.pos + 0.1 * np.asarray(action, np.float64), -1.0, 1.0)
        dist = float(np.linalg.norm(self.pos - self.goal))
        return self._obs(), -dist, False, False, {"success": float(dist < 0.1)}


def point_features(raw: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    """Features of a batch of raw states (pos, goal, ...) and actions; the human reward is -distance."""
    dist = np.linalg.norm(raw[:, :2] - raw[:, 2:4], axis=1)
    return {"dist": dist, "action_norm": np.linalg.norm(action, axis=1),
            "success": (dist < 0.1).astype(np.float64), "human_reward": -dist}


def point_env(seed: int) -> PointMass:
    """The task's env factory (module-level, so a spec pickles into worker processes and Ray actors)."""
    return PointMass()


def obs_state(env: gymnasium.Env, obs: np.ndarray, info: Mapping[str, Any]) -> np.ndarray:
    """The raw state is the observation itself."""
    return np.asarray(obs, np.float64)


POINT_FEATURES = (Feature("dist", "distance from point to goal", "m"),
                  Feature("action_norm", "norm of the action", "1"))


def point_task(**overrides: Any) -> TaskSpec:
    """The tiny task: a custom `TaskSpec` around `PointMass`, milliseconds per episode.

    ``overrides`` replace fields (``dataclasses.replace``, so the spec's own checks run again): a horizon, a
    name, or, for graph and validator tests that never step the env, another feature list and progress feature.
    """
    spec = TaskSpec(
        name="point-mass", family="custom", description="move the point to the goal", horizon=15,
        feature_defs=POINT_FEATURES, progress_feature="dist", has_human_reward=True, success_test="dist < 0.1",
        obs_dim=4, act_dim=2, state_dim=4, dt=0.1, env_fn=point_env, raw_state_fn=obs_state,
        feature_fn=point_features,
    )
    return dataclasses.replace(spec, **overrides) if overrides else spec


def described_task(name: str, progress: str, features: Mapping[str, tuple[str, str]], **overrides: Any) -> TaskSpec:
    """A task as the prompts and the validator see it: ``features`` maps a name to (meaning, unit).

    Its env is the point mass (graph and validator tests never step it).
    """
    defs = tuple(Feature(n, meaning, unit) for n, (meaning, unit) in features.items())
    return point_task(name=name, feature_defs=defs, progress_feature=progress, **overrides)


# ---------------------------------------------------------------------------------------------- engine configs
def flat_config(es: bool = False, **fields: Any) -> EngineConfig:
    """An ``EngineConfig`` from one flat set of fields: each goes to the loop's config or to its ``learners``
    config (``ReplayConfig``, or ``ESPopulationConfig`` with ``es``), whichever has a field of that name; ES's
    own strategy config is ``es_config``. A name neither has is a TypeError, as for a dataclass."""
    kind = ESPopulationConfig if es else ReplayConfig
    own = {f.name for f in dataclasses.fields(kind)}
    learner_fields = {k: v for k, v in fields.items() if k in own or k == "es_config"}
    if "es_config" in learner_fields:
        learner_fields["es"] = learner_fields.pop("es_config")
    loop = {k: v for k, v in fields.items() if k not in learner_fields and k != "es_config"}
    return EngineConfig(**loop, learners=kind(**learner_fields))


# ---------------------------------------------------------------------------------------------- chat model
class ScriptedChatModel(BaseChatModel):
    """A chat model answering from ``script`` in call order; keeps every prompt and every call's options.

    An item that is an exception is raised, a dict or list is sent as JSON, a string as it is. Once the script
    is used up, ``then(call_number)`` answers (1-based), or else the last item repeats. ``usage`` (prompt,
    completion tokens) is reported on every answer when given.
    """

    script: list[Any] = Field(default_factory=list)
    then: Callable[[int], Any] | None = None
    usage: tuple[int, int] | None = None
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    options: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> int:
        return len(self.seen)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        self.options.append(dict(kwargs))
        if self.calls > len(self.script) and self.then is not None:
            item = self.then(self.calls)
        else:
            item = self.script[min(self.calls, len(self.script)) - 1]
        if isinstance(item, BaseException):
            raise item
        text = item if isinstance(item, str) else json.dumps(item)
        meta = None
        if self.usage is not None:
            p, c = self.usage
            meta = {"input_tokens": p, "output_tokens": c, "total_tokens": p + c}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text, usage_metadata=meta))])


def scripted_client(script: Sequence[Any], record_path: Path | None = None, **model: Any) -> LLMClient:
    """An `LLMClient` over a `ScriptedChatModel` answering ``script`` (``model``: its other fields): no retries,
    no back-off sleep, a record file only where ``record_path`` is given. The model is ``client.chat_model``."""
    chat = ScriptedChatModel(script=list(script), **model)
    return LLMClient(chat, LLMConfig(max_retries=0), record_path, sleep=lambda s: None)


# ---------------------------------------------------------------------------------------------- rewards
class FeatureReward:
    """reward = -scale * feature, serialisable for checkpoints."""

    expression = None  # nothing written to show the LLM (RewardFunction.expression)

    def __init__(self, feature: str, scale: float = 1.0, id: str | None = None) -> None:
        self.feature, self.scale = feature, scale
        self.id = id or f"neg-{feature}-{scale:g}"
        self.key = f"-{scale:g}*{feature}"  # the reward's identity (rewards.reward_key in a real run)
        self.complexity = 1.0

    def __call__(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        return -self.scale * np.asarray(features[self.feature], np.float64)

    def components(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"main": self(features)}

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "feature": self.feature, "scale": self.scale,
                "components": {"main": f"-{self.scale:g}*{self.feature}"}}


def load_reward(d: Mapping[str, Any]) -> FeatureReward:
    return FeatureReward(d["feature"], d["scale"], d["id"])


def three_rewards() -> list[FeatureReward]:
    """A population of three distinct rewards over the tiny task's features."""
    return [FeatureReward("dist"), FeatureReward("action_norm"), FeatureReward("dist", 2.0)]


def final_state(engine: Any) -> dict[str, Any]:
    """Run ``engine`` to its budget and return its state; the engine is closed either way."""
    try:
        engine.run()
        return engine.state_dict()
    finally:
        engine.close()


# ---------------------------------------------------------------------------------------------- batches
def random_transitions(rng: np.random.Generator, lead: tuple[int, ...], obs_dim: int,
                       act_dim: int) -> dict[str, np.ndarray]:
    """obs, action, reward, next_obs of shape ``lead + (...)`` as float32, drawn in that order from ``rng``."""
    return {
        "obs": rng.normal(size=(*lead, obs_dim)).astype(np.float32),
        "action": rng.uniform(-1, 1, (*lead, act_dim)).astype(np.float32),
        "reward": rng.normal(size=lead).astype(np.float32),
        "next_obs": rng.normal(size=(*lead, obs_dim)).astype(np.float32),
    }


def random_batch(rng: np.random.Generator, columns: int, batch_size: int, obs_dim: int, act_dim: int,
                 terminal_rate: float = 0.2) -> Batch:
    """A population minibatch: ``columns`` reward columns of ``batch_size`` random transitions, a
    ``terminal_rate`` share of them terminal (at 0, nothing more is drawn from ``rng``)."""
    lead = (columns, batch_size)
    transitions = random_transitions(rng, lead, obs_dim, act_dim)
    terminated = (rng.random(lead) < terminal_rate) if terminal_rate > 0 else np.zeros(lead)
    return Batch(**transitions, terminated=terminated.astype(np.float32), indices=np.zeros(lead, np.int64))


def assert_real_gif(path: Path, max_bytes: int = 2_000_000) -> list[np.ndarray]:
    """The frames of a GIF that shows something: several frames, not all alike, none of one colour, and small
    enough for a report page. A blank or frozen video from a GL driver that draws nothing fails here."""
    from PIL import Image

    assert path.is_file() and path.read_bytes()[:6] in (b"GIF87a", b"GIF89a"), path
    assert path.stat().st_size < max_bytes, f"{path} is {path.stat().st_size} bytes"
    with Image.open(path) as gif:
        frames = []
        for i in range(gif.n_frames):
            gif.seek(i)
            frames.append(np.asarray(gif.convert("RGB")))
    assert len(frames) > 1
    assert all(int(f.min()) != int(f.max()) for f in frames), "a frame of one colour"
    assert len({f.tobytes() for f in frames}) > 1, "every frame is the same: nothing moved"
    return frames


def lares_cli(*args: str, home: Path) -> Any:
    """`lares ARGS` in this process with its own case store (`LARES_HOME`), a wide screen and no API key."""
    from typer.testing import CliRunner

    from lares_agent.cli.app import app

    return CliRunner().invoke(app, list(args), env={"LARES_HOME": str(home), "COLUMNS": "240", "OPENAI_API_KEY": ""})


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """A script of experiments/ or benchmarks/ (no package) imported as a module."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unpacked_study(study: str, dest: Path) -> Path:
    """A study's raw runs (`experiments/<study>/runs.tar.xz`) unpacked under `dest`, as `experiments/raw.py unpack
    STUDY DEST` does; `dest` then holds the study's `runs/` folders. A study whose archive is in the history
    (`IN_HISTORY`) skips the test on a clone without that commit (a shallow one, or a copy without .git)."""
    raw = load_script(Path(__file__).resolve().parents[1] / "experiments" / "raw.py", "experiments_raw")
    try:
        data = raw.archive_bytes(study)
    except SystemExit as exc:
        pytest.skip(str(exc))
    raw.unpack(data, dest)
    return dest
