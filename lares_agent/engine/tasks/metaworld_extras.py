"""The MetaWorld features that the envs' own rewards read beyond the generic set: starting distances, the hand,
the finger pads.

MetaWorld's v2 rewards use the episode's own starting distances as tolerance margins, weight some axes, read the
hand (wrist) rather than the gripper centre in places, and cage the object between the two finger pads. To write
those rewards as expressions over features, the features must exist; each is defined once here with a generic
name, and a task declares only the ones its own reward uses (so no prompt lists a feature nobody needs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from lares_agent.engine.tasks.metaworld_task import MetaWorldTask
from lares_agent.engine.tasks.spec import Feature, row_norm

__all__ = [
    "CAGING_FEATURE_NAMES",
    "EXTRA_FEATURE_NAMES",
    "RawParts",
    "caging_features",
    "caging_point",
    "distance_words",
    "extra_feature_defs",
    "extra_features",
]

_AXES = "xyz"
CAGING_FEATURE_NAMES = (
    "left_pad_gap", "right_pad_gap", "left_pad_ref_gap", "right_pad_ref_gap", "tcp_to_obj_xz",
    "initial_tcp_to_obj_xz",
)  # fmt: skip
"""The features the language's `gripper_caging` reads (with `gripper_command`, which every MetaWorld task has)."""


@dataclass(frozen=True)
class RawParts:
    """The [N, 3] blocks of stored raw states the extra features are computed from."""

    obs: np.ndarray  # [N, 39]
    tcp: np.ndarray
    target: np.ndarray
    head: np.ndarray  # the point obj_to_target measures from
    start: np.ndarray  # the object's start point as the env's reward margins use it
    obj_init: np.ndarray  # the env's own obj_init_pos
    init_tcp: np.ndarray
    hand_init: np.ndarray  # the env's hand_init_pos (the hand's reset target)
    lpad: np.ndarray
    rpad: np.ndarray
    init_lpad: np.ndarray
    init_rpad: np.ndarray


def distance_words(weights: tuple[float, float, float]) -> str:
    """How a distance with these axis weights reads in a feature's meaning ("distance along x", ...)."""
    used = [(axis, w) for axis, w in zip(_AXES, weights, strict=True) if w]
    if len(used) == 3 and all(w == 1.0 for _, w in used):
        return "distance"
    if len(used) == 1 and used[0][1] == 1.0:
        return f"distance along {used[0][0]}"
    return "distance with " + ", ".join(f"{axis} weighted {w:g}" for axis, w in used)


def _reward_weights(task: MetaWorldTask) -> tuple[float, float, float]:
    return task.reward_weights or task.target_weights


def _meanings(task: MetaWorldTask) -> dict[str, tuple[str, str]]:
    """name -> (meaning, unit) of every extra feature, worded for this task's object and target."""
    obj, target = task.obj, task.target
    head = task.head or obj
    start = task.start_text or obj
    hand = "the hand (the wrist, above the gripper centre)"
    at_start = "at the start of the episode"
    offset = f" (a point offset {task.hand_offset} from it)" if any(task.hand_offset) else ""
    signed = task.caging == "pad_start"
    hand_words, reward_words = distance_words(task.hand_weights), distance_words(_reward_weights(task))
    meanings = {
        "initial_tcp_to_obj": (f"{hand_words} from the gripper centre to the {start} {at_start}", "m"),
        "initial_obj_to_target": (f"{reward_words} from the {start} {at_start} to the {target}", "m"),
        "initial_hand_to_target": (f"distance from the hand's reset position to the {target}", "m"),
        "obj_to_initial_tcp": (f"distance from the {obj} to where the gripper centre was {at_start}", "m"),
        "obj_to_initial_hand": (f"distance from the {obj} to the hand's reset position", "m"),
        "obj_to_initial_obj": (f"{reward_words} from the {obj} to where it was {at_start}", "m"),
        "weighted_obj_to_target": (f"{reward_words} from the {head} to the {target}", "m"),
        "hand_to_obj": (f"{hand_words} from {hand} to the {obj}{offset}", "m"),
        "hand_to_obj_xy": (f"horizontal (x-y) distance from {hand} to the {obj}{offset}", "m"),
        "obj_rotation": (f"distance of the {obj}'s orientation quaternion from (1, 0, 0, 0), 0 when unrotated", "1"),
        "left_pad_gap": (
            f"left finger pad's y minus the {obj}'s y (the fingers close along y)" if signed
            else f"y distance between the left finger pad and the {obj} (the fingers close along y)", "m"),
        "right_pad_gap": (
            f"the {obj}'s y minus the right finger pad's y" if signed
            else f"y distance between the right finger pad and the {obj}", "m"),
        "left_pad_ref_gap": (
            f"y distance between the {obj} and the left finger pad's position {at_start}" if signed
            else f"y distance between the left finger pad and the {obj}'s position {at_start}", "m"),
        "right_pad_ref_gap": (
            f"y distance between the {obj} and the right finger pad's position {at_start}" if signed
            else f"y distance between the right finger pad and the {obj}'s position {at_start}", "m"),
        "tcp_to_obj_xz": (f"distance from the gripper centre to the {obj} in the x-z plane", "m"),
        "initial_tcp_to_obj_xz": (f"x-z distance from the gripper centre to the {obj} {at_start}", "m"),
    }
    for axis in _AXES:
        meanings[f"head_rel_{axis}"] = (f"{axis} of the {head} minus {axis} of the {target}", "m")
        meanings[f"hand_{axis}"] = (f"{axis} coordinate of {hand}", "m")
        meanings[f"initial_obj_{axis}"] = (f"{axis} coordinate of the {obj} {at_start}", "m")
    return meanings


EXTRA_FEATURE_NAMES: tuple[str, ...] = (
    "initial_tcp_to_obj", "initial_obj_to_target", "initial_hand_to_target", "obj_to_initial_tcp",
    "obj_to_initial_hand", "obj_to_initial_obj", "weighted_obj_to_target", "hand_to_obj", "hand_to_obj_xy",
    "obj_rotation", "head_rel_x", "head_rel_y", "head_rel_z",
    "hand_x", "hand_y", "hand_z", "initial_obj_x", "initial_obj_y", "initial_obj_z", *CAGING_FEATURE_NAMES,
)  # fmt: skip
"""Every extra feature a MetaWorld task may declare, in the order they are listed."""


def extra_feature_defs(task: MetaWorldTask, names: tuple[str, ...]) -> tuple[Feature, ...]:
    """The declared `Feature`s of `names` (a subset of EXTRA_FEATURE_NAMES), in the canonical order; each is the
    designer's (`Feature.designer`): it exists because the task's own reward reads it, so which task has one
    follows its designer's reward, and a search from scratch is not offered it."""
    meanings = _meanings(task)
    return tuple(Feature(name, *meanings[name], designer=True) for name in EXTRA_FEATURE_NAMES if name in names)


def caging_point(task: MetaWorldTask, parts: RawParts) -> np.ndarray:
    """The object point the caging features measure: the object, with x moved onto the hand's x where they are
    within `caging_snap_x` (MetaWorld's hammer: its handle is not a sphere)."""
    point = parts.obs[:, 4:7].copy()
    if task.caging_snap_x > 0:
        hand_x = parts.obs[:, 0]
        near = np.abs(point[:, 0] - hand_x) < task.caging_snap_x
        point[near, 0] = hand_x[near]
    return point


def caging_features(task: MetaWorldTask, parts: RawParts) -> dict[str, np.ndarray]:
    """The features `gripper_caging` reads: each pad's y gap to the caged point and the gap its margin starts
    from, and the gripper centre's x-z distance to that point, now and at the start."""
    point = caging_point(task, parts)
    y = point[:, 1]
    lpad_y, rpad_y = parts.lpad[:, 1], parts.rpad[:, 1]
    if task.caging == "pad_start":  # pick-place, soccer, push-back: signed gaps, margins from the pads' start
        gaps = (lpad_y - y, y - rpad_y, np.abs(y - parts.init_lpad[:, 1]), np.abs(y - parts.init_rpad[:, 1]))
    else:  # MetaWorld's shared helper: unsigned gaps, margins from the object's start
        start_y = parts.obj_init[:, 1]
        gaps = (np.abs(lpad_y - y), np.abs(rpad_y - y), np.abs(lpad_y - start_y), np.abs(rpad_y - start_y))
    xz = [0, 2]
    return {
        **dict(zip(("left_pad_gap", "right_pad_gap", "left_pad_ref_gap", "right_pad_ref_gap"), gaps, strict=True)),
        "tcp_to_obj_xz": row_norm(parts.tcp[:, xz] - point[:, xz]),
        "initial_tcp_to_obj_xz": row_norm(parts.obj_init[:, xz] - parts.init_tcp[:, xz]),
    }


def extra_features(task: MetaWorldTask, parts: RawParts, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The extra features `names` of [N] stored steps (pure numpy; `caging_features` computes the pad features,
    on the object point `caging_point` gives)."""
    obs = parts.obs
    obj, hand = obs[:, 4:7], obs[:, 0:3]
    w_reward = np.asarray(_reward_weights(task))
    w_hand = np.asarray(task.hand_weights)
    compute: Mapping[str, Callable[[], np.ndarray]] = {
        "initial_tcp_to_obj": lambda: row_norm((parts.start - parts.init_tcp) * w_hand),
        "initial_obj_to_target": lambda: row_norm((parts.start - parts.target) * w_reward),
        "initial_hand_to_target": lambda: row_norm(parts.hand_init - parts.target),
        "obj_to_initial_tcp": lambda: row_norm(obj - parts.init_tcp),
        "obj_to_initial_hand": lambda: row_norm(parts.hand_init - obj),
        "obj_to_initial_obj": lambda: row_norm((obj - parts.obj_init) * w_reward),
        "weighted_obj_to_target": lambda: row_norm((parts.head - parts.target) * w_reward),
        "hand_to_obj": lambda: row_norm((obj + np.asarray(task.hand_offset) - hand) * w_hand),
        "hand_to_obj_xy": lambda: row_norm((obj + np.asarray(task.hand_offset) - hand)[:, :2]),
        "obj_rotation": lambda: row_norm(obs[:, 7:11] - np.array([1.0, 0.0, 0.0, 0.0])),
    }
    out: dict[str, np.ndarray] = {}
    for name in names:
        if name in compute:
            out[name] = compute[name]()
        elif name.startswith("head_rel_") and name[-1] in _AXES and len(name) == 10:
            out[name] = parts.head[:, _AXES.index(name[-1])] - parts.target[:, _AXES.index(name[-1])]
        elif name.startswith("hand_") and name[-1] in _AXES and len(name) == 6:
            out[name] = hand[:, _AXES.index(name[-1])].copy()
        elif name.startswith("initial_obj_") and name[-1] in _AXES and len(name) == 13:
            out[name] = parts.obj_init[:, _AXES.index(name[-1])].copy()
    if any(name in CAGING_FEATURE_NAMES for name in names):
        caging = caging_features(task, parts)
        out.update({name: caging[name] for name in names if name in caging})
    return out
