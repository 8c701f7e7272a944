"""Which learners restart from the best learner at a reward update (docs/DESIGN.md, "The loop's rules").

The reference lets every replaced slot's learners copy the best learner and pulls them toward it with an L2 term
(docs/lares-reference.md §7). That gives a new reward a head start only when the best learner can do something:
while it has never succeeded, every replaced learner restarts from a policy that never solved the task and is
held near it, so a reward that would learn alone never gets the chance inside the population (window-close-v3
from scratch: docs/RESULTS.md, "No inheritance trap"). ``EngineConfig.inherit``:

    "on-success" (default): replaced slots inherit, and are pulled toward, the leader only when it succeeded in
                            the update's evaluation (its slot's success rate, or any of its learners', > 0);
                            otherwise they keep their own weights (their new reward column is installed and
                            scaled all the same) and no pull.
    "always":               every replaced slot inherits, as the reference.

Under either rule a broken (quarantined) slot restarts from the best: its own weights are non-finite.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from lares_agent.engine.contracts import INHERIT_RULES, InheritRule
from lares_agent.runs.slots import SlotRecord

__all__ = ["inheritance", "leader_succeeded"]


def leader_succeeded(leader: SlotRecord) -> bool:
    """Whether the best slot's policy succeeded in the update's evaluation: the slot's success rate (the mean of
    its healthy learners) or any one learner's, so a slot whose leader alone succeeded counts."""
    rates = [leader.success, *leader.learner_success]
    return any(math.isfinite(r) and r > 0 for r in rates)


def inheritance(rule: InheritRule | str, leader: SlotRecord, replaced: Collection[int],
                broken: Collection[int]) -> tuple[list[int], dict[str, Any]]:
    """(the slots whose learners restart from the best learner, sorted; the ``reward_update`` event's fields on
    the decision). The fields hold ``inherited`` and, where replaced slots kept their weights,
    ``inherit_skipped`` (those slots) and ``inherit_reason``."""
    if rule not in INHERIT_RULES:
        raise ValueError(f"unknown inherit rule {rule!r}; choose one of {', '.join(INHERIT_RULES)}")
    if rule == "always" or leader_succeeded(leader):
        inherit = sorted(set(replaced) | set(broken))
        return inherit, {"inherited": inherit}
    inherit = sorted(broken)
    skipped = sorted(set(replaced) - set(broken))
    fields: dict[str, Any] = {"inherited": inherit}
    if skipped:
        fields["inherit_skipped"] = skipped
        fields["inherit_reason"] = (f"the leader (slot {leader.slot}) had no success in this update's evaluation: "
                                    "replaced learners keep their own weights, with no pull toward it")
    return inherit, fields
