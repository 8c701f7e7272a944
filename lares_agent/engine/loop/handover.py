"""Which learner's policy a run hands over: the best of its top learners on fresh episodes.

A reward update ranks the slots on a few evaluation episodes (``update_eval_episodes``): enough to steer the search,
too few to choose the one policy a user takes home (5 episodes move a success rate in steps of 20%, and the
learner that topped them may do much worse on other starts: docs/RESULTS.md, "The hand-over on fresh episodes").
So before a policy file is written (each round's ``policies/round-N.pt`` and the final one), the top
``HANDOVER_CANDIDATES`` learners of the newest fitness ranking, with the init setting's learner on the task's own
reward always among them, are replayed on ``EngineConfig.handover_episodes`` deterministic episodes of their own
seed stream (``rollouts/episodes.py``, ``HANDOVER_STREAM``: never an evaluation's), and the best there is handed
over: success rate, then the run's tie-break (``fitness.slot_evaluation``: the task return where the setting may
use it, else the final progress), then the better fitness rank.

Each candidate is replayed as the policy file it would be (``policies/policy_artefact.py``), so the number is the one
``lares eval`` gives the file. Every hand-over of a run plays the same episodes (0..N-1 of the stream): the choice
depends only on the learners, so a resumed run makes it as the uninterrupted one would. The ranking it starts from
is kept in the engine's checkpoints (``state_dict``). A hand-over with nothing learned since the one before (the end
of a run right after its last update) takes that one's choice over without replaying.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lares_agent.engine.contracts import MemberEvaluation, RewardFunction
from lares_agent.engine.policies.policy_artefact import PolicyArtefact, artefact_from_state
from lares_agent.engine.protocols import Population
from lares_agent.engine.rollouts.episodes import HANDOVER_STREAM, EnvPool, episode_seed
from lares_agent.engine.rollouts.evaluation import evaluate_members
from lares_agent.engine.setup.config import EngineConfig
from lares_agent.engine.setup.fitness import slot_evaluation, tie_break
from lares_agent.engine.tasks import TaskSpec
from lares_agent.runs.handover import HandoverCandidate, HandoverRecord

__all__ = ["HANDOVER_CANDIDATES", "HandOver", "candidate_slots"]

HANDOVER_CANDIDATES = 3
"""Learners replayed from the top of the fitness ranking (the init setting's human-reward learner comes on top)."""
_POOL_SEED = 700_000  # the replay's environments' construction seeds, apart from the population's own


def candidate_slots(ranking: Sequence[int], human: int | None, usable: Callable[[int], bool],
                    top: int = HANDOVER_CANDIDATES) -> list[int]:
    """The slots replayed, in fitness order: the ``top`` first usable slots of ``ranking``, then ``human`` (the
    init setting's learner on the task's own reward; None in another setting) when it is usable and not among
    them. A quarantined learner (``usable`` False) is never replayed: its policy is not finite."""
    kept = [s for s in ranking if usable(s)]
    chosen = kept[:top]
    if human is not None and human in kept and human not in chosen:
        chosen.append(human)
    return chosen


class HandOver:
    """The hand-over of one engine: the ranking it starts from, its environments, and its decision."""

    def __init__(self, task: TaskSpec, config: EngineConfig, use_task_return: bool) -> None:
        self.task, self.episodes, self.seed = task, config.handover_episodes, config.seed
        self.horizon = int(config.horizon or task.horizon)
        self.use_task_return = use_task_return
        self.human = config.num_slots if config.setting == "init" else None
        """The init setting's learner on the task's own reward: always a candidate."""
        self.ranking: list[int] | None = None
        """The newest reward update's fitness ranking (None before the first)."""
        self.seconds = 0.0
        """Wall seconds of this session's replays."""
        self._pool: EnvPool | None = None
        self._last: HandoverRecord | None = None

    def order(self, best: int, count: int) -> list[int]:
        """The newest ranking; before the first update, the slot handed over until then (``best``) first, then
        the others by index (nothing ranks them yet)."""
        if self.ranking is not None:
            return list(self.ranking)
        return [best, *(s for s in range(count) if s != best)]

    def decide(self, name: str, state: Mapping[str, Any], population: Population, rewards: Sequence[RewardFunction],
               best: int) -> HandoverRecord | None:
        """Replay the candidates and choose; None when there are fewer than two to choose from (or the option is
        off). ``state``: what ``save_policy`` cuts policy files from; ``rewards``: every ranked learner's reward;
        ``best``: the slot the newest ranking put first."""
        if self.episodes < 1:
            return None
        ranking = self.order(best, len(rewards))
        slots = candidate_slots(ranking, self.human, lambda s: not population.quarantined(s))
        if len(slots) < 2:
            return None
        counters = state.get("counters", {})
        last = self._last
        if last is not None and (last.env_steps, last.round) == (counters.get("env_steps"), counters.get("round")) \
                and [c.slot for c in last.candidates] == slots:
            # nothing learned since (the end of a run right after its last update): the same learners, the same
            # episodes, the same choice; not replayed again
            return dataclasses.replace(last, policy=name, seconds=0.0)
        began = time.monotonic()
        low, high = population.action_box()
        members = population.leaders
        policies = [PolicyArtefact(artefact_from_state(state, members[s], low, high, rewards[s].id, slot=s))
                    for s in slots]
        evals = self._replay(policies)
        scored = [slot_evaluation(ev, rewards[s], 0.0, False) for ev, s in zip(evals, slots, strict=True)]
        # success, then the run's tie-break; the stable sort keeps the fitness order among exact ties
        winner = sorted(range(len(slots)),
                        key=lambda i: (-scored[i].fitness, -tie_break(scored[i], self.use_task_return)))[0]
        seconds = time.monotonic() - began
        self.seconds += seconds
        self._last = HandoverRecord(
            policy=name, episodes=self.episodes,
            candidates=tuple(HandoverCandidate(s, rewards[s].id, ranking.index(s) if self.ranking is not None
                                               else None, ev.success_rate, _finite(ev.task_return),
                                               _finite(ev.final_progress))
                             for s, ev in zip(slots, evals, strict=True)),
            chosen=slots[winner], ranked_first=best, round=int(counters.get("round", 0)),
            env_steps=int(counters.get("env_steps", 0)), seconds=seconds)
        return self._last

    def _replay(self, policies: Sequence[PolicyArtefact]) -> list[MemberEvaluation]:
        """Every policy on the same ``episodes`` deterministic episodes of the hand-over stream, one episode of each
        in lock step at a time: a run hands over a few times, and more envs stepped together would cost more to
        build than they save (docs/RESULTS.md, "Evaluation episodes stepped together")."""
        if self._pool is None:
            self._pool = EnvPool(self.task.make_env, self.seed + _POOL_SEED)
        seeds = [episode_seed(self.seed, HANDOVER_STREAM, e) for e in range(self.episodes)]

        def act(obs: np.ndarray, members: np.ndarray) -> np.ndarray:  # one forward per policy over its rows
            out = np.empty((len(members), self.task.act_dim))
            for m in np.unique(members):
                rows = members == m
                out[rows] = policies[int(m)].act(obs[rows])
            return out

        n = len(policies)
        return evaluate_members(self._pool, act, self.task.raw_state, self.task.features, list(range(n)), [None] * n,
                                self.episodes, self.horizon, seeds, self.task.progress_feature, max_envs=n)

    def state_dict(self) -> dict[str, Any]:
        return {"ranking": None if self.ranking is None else [int(s) for s in self.ranking]}

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        """Restore the ranking (a checkpoint from before the hand-over has none: the next update ranks)."""
        ranking = (state or {}).get("ranking")
        self.ranking = None if ranking is None else [int(s) for s in ranking]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _finite(x: float) -> float:
    return x if math.isfinite(x) else math.nan
