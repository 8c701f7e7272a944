"""How one MetaWorld env maps onto lares' generic features: `MetaWorldTask` (and `JointFeature`).

A module of its own so the feature modules (`metaworld.py`, `metaworld_extras.py`) can both read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["JointFeature", "MetaWorldTask", "Vec3"]

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class JointFeature:
    """A task-specific feature read from one joint position: value = scale * qpos."""

    joint: str
    name: str
    meaning: str
    unit: str
    scale: float = 1.0


@dataclass(frozen=True)
class MetaWorldTask:
    """How one MetaWorld env maps onto the generic features.

    `obj` names what obs[4:7] is, `target` what env._target_pos is; `target_weights` scale the x, y, z
    differences in `obj_to_target` as the env's own success test does (0 drops an axis); `head_site` or
    `head_offset` move the measured point off obs[4:7] (peg head, hammer head); `reach_offset` moves the point
    `tcp_to_obj` measures to (the dial's push point). `info_distance` names the feature that equals the env's
    `info["obj_to_target"]` (None where the env reports 0 there). `target_z` replaces the target's height where
    the env's reward and success test do (basketball aims above the hoop).

    The rest says how the env's own reward measures things, for the extra features (`metaworld_extras.py`):
    `start` is where the object's start point comes from (an env attribute, or "site:NAME"), plus
    `start_offset`, worded as `start_text`; `reward_weights` are the reward's axis weights for the object-target
    distance where they differ from `target_weights`; `hand_weights` and `hand_offset` weight the hand-object
    error and move the point on the object it measures to; `caging` is the gripper-caging geometry
    ("obj_start": MetaWorld's shared helper, "pad_start": pick-place, soccer and push-back's own), and
    `caging_snap_x` moves the caged point onto the hand's x within that distance (the hammer's handle).
    """

    env_name: str
    obj: str
    target: str
    goal: str
    success_text: str
    progress: str = "obj_to_target"
    target_weights: Vec3 = (1.0, 1.0, 1.0)
    head: str = ""
    head_site: str = ""
    head_offset: Vec3 = (0.0, 0.0, 0.0)
    reach_offset: Vec3 = (0.0, 0.0, 0.0)
    joint: JointFeature | None = None
    info_distance: str | None = "obj_to_target"
    target_z: float | None = None
    start: str = "obj_init_pos"
    start_offset: Vec3 = (0.0, 0.0, 0.0)
    start_text: str = ""
    reward_weights: Vec3 | None = None
    hand_weights: Vec3 = (1.0, 1.0, 1.0)
    hand_offset: Vec3 = (0.0, 0.0, 0.0)
    caging: Literal["", "obj_start", "pad_start"] = ""
    caging_snap_x: float = 0.0
