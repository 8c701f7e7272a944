"""The reward slots: what every learner trains on at the start of a run, and how many learners a run has.

Settings (one meaning for every learner, the reference's ``with_init``): ``scratch``, every slot's reward is
proposed; ``init``, the K candidates refine the human reward and an extra learner trains on the human reward
throughout, ranked with the slots (its policy may be handed over), never replaced; ``baseline``, one slot on the
human reward and no reward updates. The loop and the populations both count learners so; the update itself is
``LaResEngine._start_update`` / ``_finish_update`` (``loop/engine.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lares_agent.engine.contracts import HumanReward, RewardFunction
from lares_agent.engine.errors import EngineError

__all__ = ["initial_slot_rewards", "learner_count"]


def initial_slot_rewards(
    setting: str, num_slots: int, given: Sequence[RewardFunction], has_human_reward: bool, task_name: str,
    human_complexity: float = 0.0, human_expression: Mapping[str, str] | None = None,
) -> list[RewardFunction]:
    """The reward of every learner at the start of a run: K slots, then the ``init`` setting's extra learner.

    scratch: the K given candidates; init: the K given candidates (the search refines the human reward into them),
    then the human reward for the extra learner (docs/lares-reference.md §1: N LLM learners plus one on the
    environment's reward); baseline: the human reward alone, or the one reward given (the sparse baseline's success
    indicator, search/config.py `baseline_reward`). ``human_complexity``: the complexity of the task's own reward
    expression, which the human reward carries into the ranking (``HumanReward``); ``human_expression``: that
    expression where the search shows it to the LLM (``HumanReward.expression``). Raises EngineError with a
    one-line reason when the count or the task does not fit the setting.
    """
    rewards = list(given)
    if setting in ("init", "baseline") and not has_human_reward:
        raise EngineError(f"setting {setting!r} needs a human reward, task {task_name} has none")
    if setting in ("scratch", "init"):
        if len(rewards) != num_slots:
            raise EngineError(f"setting {setting!r} needs {num_slots} initial rewards, got {len(rewards)}")
        return rewards if setting == "scratch" else [*rewards, HumanReward(human_complexity, human_expression)]
    if len(rewards) > 1:
        raise EngineError(f"setting 'baseline' trains one learner on one reward, got {len(rewards)} initial rewards")
    # one given reward replaces the human one (the sparse success baseline)
    return rewards or [HumanReward(human_complexity, human_expression)]


def learner_count(setting: str, num_slots: int) -> int:
    """Learners of a run: one per slot, plus the extra human-reward learner of the ``init`` setting."""
    return num_slots + (1 if setting == "init" else 0)
