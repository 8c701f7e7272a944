"""Task registry: env factories, named scalar reward features, success tests and human rewards.

`get_task("push-v3")` gives a `TaskSpec`; `list_tasks()` all of them; `register_task(spec)` adds a user env.
Importing this package is cheap: MetaWorld and MuJoCo are imported only when an env is made.
"""

from __future__ import annotations

from lares_agent.engine.tasks.envs import EpisodeRecorder, recorder_of
from lares_agent.engine.tasks.registry import (
    DuplicateTaskError,
    TaskRegistry,
    UnknownTaskError,
    UntrustedTaskError,
    allow_task_reference,
    builtin_specs,
    default_registry,
    get_task,
    list_tasks,
    register_task,
    resolve_task,
    unregister_task,
)
from lares_agent.engine.tasks.spec import (
    HUMAN_REWARD,
    SUCCESS,
    Feature,
    FeatureView,
    TaskError,
    TaskShapeError,
    TaskSpec,
    TaskSpecError,
)

__all__ = [
    "HUMAN_REWARD",
    "SUCCESS",
    "DuplicateTaskError",
    "EpisodeRecorder",
    "Feature",
    "FeatureView",
    "TaskError",
    "TaskRegistry",
    "TaskShapeError",
    "TaskSpec",
    "TaskSpecError",
    "UnknownTaskError",
    "UntrustedTaskError",
    "allow_task_reference",
    "builtin_specs",
    "default_registry",
    "get_task",
    "list_tasks",
    "recorder_of",
    "register_task",
    "resolve_task",
    "unregister_task",
]
