"""What learns in a LaRes loop, and the one place that picks it: ``make_engine`` / ``restore_engine``.

``replay.py``: SAC or CrossQ learners on one shared replay buffer (the paper's); ``es.py``: one OpenAI-ES policy
per slot. Both implement ``protocols.Population``, which is all ``loop/engine.py`` sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from lares_agent.engine.contracts import LoadReward, ProposeFn, RewardFunction
from lares_agent.engine.errors import EngineError
from lares_agent.engine.loop.engine import LaResEngine
from lares_agent.engine.populations.es import ESPopulation, make_backend
from lares_agent.engine.populations.replay import ReplayPopulation
from lares_agent.engine.protocols import Population
from lares_agent.engine.setup.config import EngineConfig, ESPopulationConfig
from lares_agent.engine.setup.slots import initial_slot_rewards
from lares_agent.engine.state.checkpoint import load_checkpoint
from lares_agent.engine.state.log import EngineLog
from lares_agent.engine.state.schema import check_state, rewards_from_state
from lares_agent.engine.tasks import TaskSpec

__all__ = ["ESPopulation", "ReplayPopulation", "make_engine", "restore_engine"]

_ES_SEED = 31337
"""Mixed into the run seed for the ES loop's generator (elite selection), apart from the learners' streams."""


def _build(task: TaskSpec, config: EngineConfig, rewards: Sequence[RewardFunction], propose: ProposeFn | None,
           run_dir: str | Path | None) -> LaResEngine:
    log = EngineLog(run_dir)
    population: Population
    if isinstance(config.learners, ESPopulationConfig):
        rng = np.random.default_rng(np.random.SeedSequence([config.seed, _ES_SEED]))
        population = ESPopulation(task, config, make_backend(task, rewards, config), log.event)
    else:
        # The loop and the replay population share one generator: TS, minibatches, feature samples, elites.
        rng = np.random.default_rng(np.random.SeedSequence(config.seed).spawn(4)[0])
        population = ReplayPopulation(task, config, rng, log.event)
    return LaResEngine(task, config, population, rewards, rng=rng, log=log, propose=propose)


def make_engine(
    task: TaskSpec,
    config: EngineConfig,
    initial_rewards: Sequence[RewardFunction] = (),
    propose: ProposeFn | None = None,
    run_dir: str | Path | None = None,
    *,
    human_complexity: float = 0.0,
    human_expression: Mapping[str, str] | None = None,
) -> LaResEngine:
    """A new engine over ``task``. ``initial_rewards``: scratch and init -> K candidates (init adds the human-reward
    learner); baseline -> none, or the one reward it trains on. ``propose`` is called at every reward update;
    ``run_dir`` receives ``metrics.jsonl``, ``events.jsonl``, ``checkpoints/`` and ``policies/`` (None: nothing is
    written, events are kept in ``engine.events``). ``human_complexity``: the complexity of the task's own reward
    expression, the human reward's in the ranking (the engine parses no rewards; the search layer measures it);
    ``human_expression``: that expression where the search shows it to the LLM (``HumanReward.expression``)."""
    rewards = initial_slot_rewards(config.setting, config.num_slots, initial_rewards, task.has_human_reward,
                                   task.name, human_complexity, human_expression)
    return _build(task, config, rewards, propose, run_dir)


def restore_engine(
    checkpoint: str | Path,
    task: TaskSpec,
    load_reward: LoadReward | None = None,
    propose: ProposeFn | None = None,
    run_dir: str | Path | None = None,
    *,
    learner: str | None = None,
    backend: str | None = None,
    device: str | None = None,
    human_expression: Mapping[str, str] | None = None,
) -> LaResEngine:
    """Rebuild an engine from a checkpoint directory (or a ``checkpoints/`` root: its latest).

    ``load_reward(dict)`` rebuilds each saved candidate from its ``to_json()``; the human reward is rebuilt here,
    with ``human_expression`` (``make_engine``'s: a checkpoint does not keep it).
    ``learner``: the kind the caller expects (a state of another kind is refused in one line; None takes the
    saved one). ``backend`` may switch an ES run between 'local' and 'ray' (the state is the same). ``device`` moves
    SAC/CrossQ learners to another device (the state is kept in host memory, so it loads on any; None keeps the
    saved one; ignored by ES, which has none). Logging continues in ``run_dir`` (metrics lines after the checkpoint
    may repeat; a ``resumed`` event marks where).
    """
    state = load_checkpoint(checkpoint)
    check_state(state, learner or str(state.get("learner")), task.name)
    data = dict(state["config"])
    if backend is not None:
        if data.get("learners", {}).get("kind") != "es":
            raise EngineError("only an ES run has a backend to switch")
        data["learners"] = {**data["learners"], "backend": backend}
    if device is not None and data.get("learners", {}).get("kind", "sac") != "es":
        data["learners"] = {**data.get("learners", {}), "device": device}
    config = EngineConfig.from_json(data)
    engine = _build(task, config, rewards_from_state(state, load_reward, human_expression), propose, run_dir)
    engine.load_state_dict(state)
    engine.log.event({"event": "resumed", "env_steps": engine.env_steps, "round": engine.round})
    return engine
