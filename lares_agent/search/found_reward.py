"""A found reward trained alone: `lares baseline --reward-from RUN[:REWARD_ID]` / `--reward-file FILE` and
`lares sweep --methods retrain`.

Eureka-style papers retrain a found reward on fresh seeds to tell a good reward from a lucky seed. Here the
learner trains alone on the reward (the baseline setting, no LLM), which is resolved once, when the run is
configured, into `SearchConfig.reward_components` (with `reward_id` and a `reward_source` line): config.json then
holds what the learner trains on, so `lares resume`, the report and a sweep's later trials never read the source
run again. The reward goes through the one validator (`rewards.validate`) against the run's task before a run
folder exists, on the sample `lares reward check` and `--rewards-file` use.

The reward a run handed over is the one `lares export` writes by default (`runs/selected.py`). When that is
the task's own reward (the init setting's kept learner ranked first), the retrain trains on it, as `lares baseline
--reward human` does, and says so: a researcher retraining "what the best seed handed over" gets exactly that.
The reward is taken as it is written (or scaled to `reward_gain`, as a search's starting rewards are, where that is
set): a search rescales a new reward to its best elite's scale on the buffer, and a learner alone has no elite.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lares_agent.errors import ConfigError
from lares_agent.runs import NotARunError, RunLayout
from lares_agent.runs.input_files import check_input_file
from lares_agent.runs.reader import RunData, read_run
from lares_agent.runs.selected import selected_reward

if TYPE_CHECKING:
    from lares_agent.engine import RewardFunction, TaskSpec
    from lares_agent.search.config import SearchConfig

__all__ = ["HUMAN_ID", "REWARD_KEYS", "FoundReward", "found_rewards", "from_file", "from_run",
           "given_components", "notes", "resolve", "trained_on"]

HUMAN_ID = "human"  # the task's own reward in a run's records (engine.contracts.HumanReward.id)
DEFAULT_ID = "given"  # a file's reward without an id of its own
REWARD_KEYS = ("reward_components", "reward_id", "reward_source")  # the SearchConfig fields a found reward sets
_SHOWN_IDS = 8


@dataclass(frozen=True)
class FoundReward:
    """A reward to train alone: components as (name, expression) pairs (empty: the task's own reward), its id in
    the new run's records, one line on where it came from, and the task it was found on (None: not known)."""

    components: tuple[tuple[str, str], ...]
    reward_id: str
    source: str
    task: str | None = None

    @property
    def is_human(self) -> bool:
        return not self.components

    def overrides(self) -> dict[str, object]:
        """The SearchConfig values that make a baseline train on this reward."""
        return {"reward_components": self.components, "reward_id": None if self.is_human else self.reward_id,
                "reward_source": self.source, "baseline_reward": "human"}


def _pairs(components: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(components, Mapping) or not components:
        raise ConfigError(f'{where}: needs "components": {{"name": "expression", ...}}')
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in components.items()):
        raise ConfigError(f"{where}: each component maps a name to an expression, both text")
    return tuple((k, v) for k, v in components.items())


def _own_id(reward_id: object) -> str:
    """An id for the new run's records; never the task's own reward's, which marks a policy as trained on it."""
    text = str(reward_id).strip() if isinstance(reward_id, str) else ""
    return text if text and text != HUMAN_ID else DEFAULT_ID


# ------------------------------------------------------------------------------------------- from a run
def split_reward_from(text: str, base: Path | None = None) -> tuple[Path, str | None]:
    """`RUN[:REWARD_ID]` as (run folder, against `base` when relative; id or None); a folder whose own name holds
    a colon is taken whole."""
    where = base or Path.cwd()
    whole = where / Path(text).expanduser()
    if whole.is_dir() or ":" not in text:
        return whole, None
    run, _, reward_id = text.rpartition(":")
    return where / Path(run).expanduser(), reward_id.strip() or None


def from_run(text: str, base: Path | None = None) -> FoundReward:
    """The reward `--reward-from RUN[:REWARD_ID]` names (RUN relative to `base`, default the working folder):
    REWARD_ID's expression in the run's candidates (or `human`), or without an id the reward the run handed over.
    ConfigError (one line) for a folder that is no run, an unknown id (a few known ids listed) or a run that holds
    no reward yet."""
    path, reward_id = split_reward_from(text, base)
    layout = RunLayout(path)
    flag = f"--reward-from {text}"
    if not layout.is_run():
        raise ConfigError(f"{flag}: {path} is not a lares run folder (no config.json, metrics.jsonl or events.jsonl)")
    try:
        data = read_run(path)
    except NotARunError as exc:
        raise ConfigError(f"{flag}: {exc.reason}") from None
    root = path.resolve()
    task = data.task if data.task != "?" else None
    own = _baseline_reward(data.config)  # a baseline's one reward, from its config
    if reward_id is None:
        return _handed_over(root, data, own, task, flag)
    if reward_id == HUMAN_ID:
        return FoundReward((), HUMAN_ID, f"the task's own reward (named by id in run {root})", task)
    candidate = data.candidate(reward_id)
    if candidate is not None and candidate.components:
        pairs = _pairs(candidate.components, f"{flag}: reward {reward_id}")
        return FoundReward(pairs, _own_id(reward_id), f"reward {reward_id} of run {root}", task)
    if own is not None and own[0] == reward_id and own[1]:
        return FoundReward(own[1], reward_id, f"reward {reward_id} of run {root} (it trained on it alone)", task)
    known = sorted(c.id for c in data.by_id.values() if c.components and c.accepted)
    known += sorted(c.id for c in data.by_id.values() if c.components and not c.accepted)
    if own is not None and own[1]:
        known.insert(0, own[0])
    shown = ", ".join([*known[:_SHOWN_IDS], HUMAN_ID]) + (f" and {len(known) - _SHOWN_IDS} more"
                                                          if len(known) > _SHOWN_IDS else "")
    raise ConfigError(f"{flag}: run {path} has no reward {reward_id!r} with an expression (known: {shown}; "
                      f"`lares report {path}` lists them)")


def _baseline_reward(config: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """(id, components) of the one reward a baseline run trained on (components empty: the task's own or its
    success indicator, `baseline_reward` says which); None for a search."""
    if config.get("setting") != "baseline":
        return None
    pairs = config.get("reward_components") or ()
    if pairs:
        components = tuple((str(p[0]), str(p[1])) for p in pairs)
        return str(config.get("reward_id") or DEFAULT_ID), components
    return ("success" if config.get("baseline_reward") == "success" else HUMAN_ID), ()


def _handed_over(root: Path, data: RunData, own: tuple[str, tuple[tuple[str, str], ...]] | None, task: str | None,
                 flag: str) -> FoundReward:
    """The reward of the policy the run handed over (`runs/selected.py`, what `lares export` writes)."""
    if own is not None:
        reward_id, components = own
        if components:
            return FoundReward(components, reward_id, f"reward {reward_id} of run {root} (the reward it trained on "
                               "alone)", task)
        if reward_id == "success":
            raise ConfigError(f"{flag}: that run is a sparse baseline (the task's success indicator alone), which "
                              "no validator accepts as a found reward; use `lares baseline --reward success`")
        return FoundReward((), HUMAN_ID, f"the task's own reward, handed over by run {root} (a baseline on it)", task)
    chosen = selected_reward(root, data)
    if chosen is None:
        raise ConfigError(f"{flag}: run {root} holds no reward yet (no accepted candidate, no evaluation); give "
                          "RUN:REWARD_ID, or let the run train first")
    if chosen.reward_id == HUMAN_ID:
        return FoundReward((), HUMAN_ID, f"the task's own reward, handed over by run {root} ({chosen.why})", task)
    candidate = data.candidate(chosen.reward_id)
    if candidate is None or not candidate.components:
        raise ConfigError(f"{flag}: run {root} handed over reward {chosen.reward_id}, whose expression its "
                          "candidates.jsonl does not hold")
    pairs = _pairs(candidate.components, f"{flag}: reward {chosen.reward_id}")
    return FoundReward(pairs, _own_id(chosen.reward_id),
                       f"reward {chosen.reward_id} of run {root}, the reward it handed over ({chosen.why})", task)


# ------------------------------------------------------------------------------------------ from a file
def from_file(path: Path) -> FoundReward:
    """The one candidate in `--reward-file FILE`: a JSON candidate `{"components": {...}, "rationale": ...}` (what
    `lares export --format json` writes, its `id` and `task` kept), a `--rewards-file` list holding one, a JSON
    string, or a text file holding one bare expression (one component, "reward")."""
    flag = f"--reward-file {path}"
    try:
        check_input_file(path, "--reward-file")  # no device, pipe or huge file (runs/input_files.py)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{flag} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{flag} cannot be read as text ({exc})") from None
    root = path.resolve()
    stripped = text.strip()
    if "def reward(" in text and "import numpy" in text:
        raise ConfigError(f"{flag} is a python export, which is not read back; write the candidate with `lares "
                          "export RUN --format json` and give that")
    if path.suffix.lower() != ".json" and stripped[:1] not in ("{", "[", '"'):
        if not stripped or "\n" in stripped:
            raise ConfigError(f"{flag}: a text file holds one reward expression on one line (or give a JSON "
                              'candidate {"components": {...}})')
        return FoundReward((("reward", stripped),), DEFAULT_ID, f"the expression in file {root}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{flag} is not valid JSON ({exc})") from None
    if isinstance(data, dict) and "candidates" in data and "components" not in data:
        data = data["candidates"]
    if isinstance(data, list):
        if len(data) != 1:
            raise ConfigError(f"{flag} holds {len(data)} candidates; a learner alone trains on one: keep one in the "
                              "file")
        data = data[0]
    if isinstance(data, str):
        return FoundReward((("reward", data),), DEFAULT_ID, f"the expression in file {root}")
    if not isinstance(data, dict):
        raise ConfigError(f'{flag}: needs a JSON candidate {{"components": {{"name": "expression", ...}}}}')
    reward_id = _own_id(data.get("id"))
    task = data.get("task") if isinstance(data.get("task"), str) else None
    named = f"reward {data['id']} in" if isinstance(data.get("id"), str) else "the candidate in"
    return FoundReward(_pairs(data.get("components"), flag), reward_id, f"{named} file {root}", task)


def resolve(reward_from: str | None, reward_file: Path | None, baseline_reward: str = "human") -> FoundReward | None:
    """The reward of `--reward-from` or `--reward-file` (None when neither is given); one of them, and not with
    `--reward success`, which chooses the baseline's reward too."""
    if reward_from is not None and reward_file is not None:
        raise ConfigError("--reward-from and --reward-file each name the reward to train: give one")
    if (reward_from is not None or reward_file is not None) and baseline_reward != "human":
        raise ConfigError(f"--reward {baseline_reward} and --reward-from/--reward-file each choose the baseline's "
                          "reward: give one")
    if reward_from is not None:
        return from_run(reward_from)
    return from_file(reward_file) if reward_file is not None else None


def notes(found: FoundReward, task: str) -> list[str]:
    """What to say before the learner starts: a handed-over task's own reward, a reward found on another task."""
    out = []
    if found.is_human:
        out.append(f"{found.source}: training on the task's own reward, as `lares baseline --reward human`")
    if found.task is not None and found.task != task:
        out.append(f"the reward was found on task {found.task}; it trains on task {task} here")
    return out


# ------------------------------------------------------------------------------------------ the run's use
def found_rewards(cfg: SearchConfig, task: TaskSpec) -> list[RewardFunction]:
    """The compiled found reward of a baseline config, checked by the one validator against `task` (ConfigError
    with its reason); empty when the config trains on the task's own reward or its success indicator."""
    if not cfg.reward_components:
        return []
    from lares_agent.rewards import synthetic_sample, validate

    record = {"components": {str(name): str(expr) for name, expr in cfg.reward_components}}
    sample = synthetic_sample(task.features, 4096, np.random.default_rng(0))  # `lares reward check`'s default
    verdict = validate(record, task, sample, id=cfg.reward_id or DEFAULT_ID)
    if verdict.reward is None:
        raise ConfigError(f"the reward to train ({cfg.reward_source or 'reward_components'}) is refused for task "
                          f"{task.name}: {verdict.reason}")
    return [verdict.reward]


def given_components(config: Mapping[str, Any], reward_id: str) -> dict[str, str] | None:
    """The components of `reward_id` when it is the found reward a baseline's config.json says it trained on (its
    candidates.jsonl holds none), else None: for the last screen and `lares export` of such a run."""
    pairs = config.get("reward_components") or ()
    if config.get("setting") != "baseline" or not pairs or (config.get("reward_id") or DEFAULT_ID) != reward_id:
        return None
    return {str(p[0]): str(p[1]) for p in pairs}


def trained_on(config: Mapping[str, Any]) -> str | None:
    """One line on the reward a baseline's learner trained on when it was given one (a run's config.json, or
    `SearchConfig.to_json()`); None otherwise."""
    source = config.get("reward_source")
    if config.get("setting") != "baseline" or not source:
        return None
    pairs = config.get("reward_components") or ()
    if not pairs:
        return str(source)  # "the task's own reward, handed over by run ..."
    expression = "; ".join(f"{p[0]} = {p[1]}" for p in pairs)
    return f"{config.get('reward_id') or DEFAULT_ID} ({expression}), from {source}"
