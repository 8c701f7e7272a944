"""How close a reward is to the system prompt's own examples for its task, by shape (docs/results-archive.md,
"Sample efficiency on five MetaWorld tasks (50k steps)").

The prompt shows two answers for the task itself (`prompting.task_examples`, with `--task-examples own`), and the
local 1.5B model copies the first one's shape; a result that depends on an example in a prompt has to say so. A
reward's shape is its set of terms with every number masked, so `-3.39*obj_to_target` has the shape of
`-5*obj_to_target` (component names are ignored), while `-2.5*tcp_to_obj` is another term than `-tcp_to_obj`, so
copies are if anything undercounted; the examples are canonicalised by the reward parser first, as candidates are.
The kinds, in `KINDS` order: an example's terms exactly ("example 1"), an example's terms plus others ("example 1
+ terms"), two or more of one example's terms ("other, 2+ example terms"), else "other".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from lares_agent.graphs.context import GraphTask
from lares_agent.graphs.prompting import task_examples
from lares_agent.rewards import allowed_features, parse_candidate

__all__ = ["KINDS", "OTHER_TASK_NAMES", "example_kind", "example_shapes", "other_task_shape", "shape"]

KINDS = ("example 1", "example 1 + terms", "example 2", "example 2 + terms", "other, 2+ example terms", "other")
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])\d+(\.\d*)?([eE][-+]?\d+)?")


def shape(components: Mapping[str, str]) -> frozenset[str]:
    """A reward's terms with their numbers masked (component names ignored)."""
    return frozenset(_NUMBER.sub("N", text.replace(" ", "")) for text in components.values())


def example_shapes(task: GraphTask) -> list[frozenset[str]]:
    """The shapes of the prompt's two examples for ``task``, canonicalised as candidates are."""
    names = allowed_features(task)
    approach = task.approach_feature if task.approach_feature in names else None
    lines = task_examples(task.progress_feature, approach).splitlines()
    return [shape(dict(parse_candidate(json.loads(line), names).canonical)) for line in lines]


OTHER_TASK_NAMES = {"hand_to_puck": "approach", "puck_to_goal": "progress", "touching": "grasped"}
"""The names of the system prompt's example for a different task, and what each is in a MetaWorld task."""


def other_task_shape(task: GraphTask, system: str) -> frozenset[str]:
    """The shape of the example for a different task in the system message `system`, written over `task`'s
    features (its hand-to-object, object-to-goal and contact names mapped to the task's approach, progress and
    `grasped`), so that a copy of it is counted; terms naming something the task lacks are left out. Empty where
    `system` shows no such example (`--task-examples none`, or a shortened prompt): there is nothing to copy."""
    line = next((x for x in system.splitlines() if '"hand_to_puck' in x or "hand_to_puck/" in x), None)
    if line is None:
        return frozenset()
    names = allowed_features(task)
    rename = {"approach": task.approach_feature, "progress": task.progress_feature, "grasped": "grasped"}
    out: set[str] = set()
    for text in json.loads(line)["components"].values():
        for old, role in OTHER_TASK_NAMES.items():
            text = re.sub(rf"\b{old}\b", str(rename[role]), text)
        try:
            out |= shape(dict(parse_candidate({"components": {"t": text}}, names).canonical))
        except ValueError:  # a name the task lacks (reach-v3 has no approach feature)
            continue
    return frozenset(out)


def example_kind(components: Mapping[str, str], examples: Sequence[frozenset[str]]) -> str:
    """Which of `KINDS` a reward (canonical components) is, against ``examples`` (`example_shapes`)."""
    mine = shape(components)
    for i, ex in enumerate(examples, 1):
        if mine == ex:
            return f"example {i}"
    for i, ex in enumerate(examples, 1):
        if ex <= mine:
            return f"example {i} + terms"
    return "other, 2+ example terms" if any(len(mine & ex) >= 2 for ex in examples) else "other"
