"""Each built-in task's own (human-designed) reward, written in the reward language as named components.

LaRes' "with init" setting shows the LLM the environment's own reward and asks it to refine it; written over the
task's features, that reward is a candidate like any other (validated, compiled, mutated, exported). The
MetaWorld expressions transcribe the v3 envs' default reward functions (`reward_function_version="v2"`,
`compute_reward` in `metaworld/envs/sawyer_*_v3.py`, metaworld 3.1.1) term by term: the same tolerance shapes,
bounds and margins, the same Hamacher products, the same success overrides. An override ("the reward is 10 once
the object is in place") becomes a `success` component plus the other components switched off there, so the
components still add up to the env's reward. `tests/test_human_expressions.py` checks every expression against
the env's own reward on scripted-expert and random states; where a constant stands for something the env
computes (a margin that is the same in every episode, a site corner) the comment at its task says so.
Expressions are text here: the engine never parses rewards.
"""

from __future__ import annotations

__all__ = ["GYM_HUMAN", "METAWORLD_HUMAN"]

Components = tuple[tuple[str, str], ...]


def _long_tail(x: str, upper: float, margin: str, lower: float = 0.0) -> str:
    return f"tolerance({x}, bounds=({lower:g}, {upper:g}), margin={margin}, sigmoid='long_tail')"


def _gaussian(x: str, upper: float, margin: str) -> str:
    return f"tolerance({x}, bounds=(0, {upper:g}), margin={margin}, sigmoid='gaussian')"


def _caging(radius: float, pad: float, xz: float, extra: str = ", high_density=1") -> str:
    return f"gripper_caging(obj_radius={radius:g}, pad_success={pad:g}, xz_success={xz:g}{extra})"


def _grasp_place(caging: str, in_place: str, near: str, bonus: float, done: str) -> Components:
    """hamacher(grasp, in_place), plus `1 + bonus*in_place` once `near` holds, and 10 once `done` holds: the
    shape of pick-place, hand-insert, coffee-push/pull and push-back."""
    return (
        ("grasp_and_place", f"where({done}, 0, hamacher({caging}, {in_place}))"),
        ("carry", f"where(~({done}) & {near}, 1 + {bonus:g}*{in_place}, 0)"),
        ("success", f"10*({done})"),
    )


def _lifted_place(caging: str, in_place: str, near: str, done: str) -> Components:
    """As `_grasp_place`, but a lifted object counts as fully grasped (peg-insert-side, basketball)."""
    return (
        ("grasp_and_place", f"where({done}, 0, hamacher(where({near}, 1, {caging}), {in_place}))"),
        ("carry", f"where(~({done}) & {near}, 1 + 5*{in_place}, 0)"),
        ("success", f"10*({done})"),
    )


def _prism(zero: tuple[float, float, float], one: tuple[float, float, float]) -> str:
    return f"rect_prism(head_rel_x, head_rel_y, head_rel_z, {zero!r}, {one!r})"


_IN_PLACE = _long_tail("obj_to_target", 0.05, "initial_obj_to_target")
_HIGH = _caging(0.015, 0.05, 0.005)

# door-open: the hand must stay above a funnel centred on the door's handle side, then pull the door round
_DOOR_FLOOR = "where(hand_to_obj_xy > 0.12, 0.04*log(Max(hand_to_obj_xy - 0.12, 1e-9)) + 0.4, 0)"
# MetaWorld's `1 if hand_z >= floor else tolerance(floor - hand_z, (0, 0.01), floor/2)` is this one tolerance:
# at or above the floor its argument is <= 0, inside the widened lower bound
_DOOR_ABOVE = _long_tail(f"{_DOOR_FLOOR} - hand_z", 0.01, f"{_DOOR_FLOOR}/2", lower=-1.0)
_DOOR_HAND = "sqrt((hand_x - obj_x)**2 + (hand_y - obj_y - 0.03)**2 + (hand_z - obj_z + 0.01)**2)"
_DOOR_READY = f"hamacher({_DOOR_ABOVE}, {_long_tail(_DOOR_HAND, 0.06, '0.5')})"
_DOOR_OPENED = f"0.2*(door_angle > pi/90) + 0.8*{_long_tail('2*pi/3 - door_angle', 0.5, 'pi/3')}"

# peg-insert-side: in_place is cut where the peg head is inside one of two prisms at the foot of the box's wall
# (MetaWorld's collision-box sites, constant relative to the hole; rounded to 1e-9 m)
_PEG_IN = (f"hamacher({_long_tail('obj_to_target', 0.07, 'initial_obj_to_target')}, hamacher("
           f"{_prism((0.080079598, 0.099912372, 0.03), (0.139920313, -0.100135344, 0.06))}, "
           f"{_prism((0.080079598, 0.099912372, -0.12), (0.11992032, -0.100119417, -0.034))}))")

# pick-out-of-hole: the same kind of funnel, centred on where the object started
_HOLE_RADIUS = "sqrt((tcp_x - initial_obj_x)**2 + (tcp_y - initial_obj_y)**2)"
_HOLE_FLOOR = f"where({_HOLE_RADIUS} > 0.03, 0.015*log(Max({_HOLE_RADIUS} - 0.03, 1e-9)) + 0.15, 0)"
_HOLE_ABOVE = _long_tail(f"Max({_HOLE_FLOOR} - tcp_z, 0)", 0.01, "0.02")
_HOLE_IN_PLACE = _long_tail("obj_to_target", 0.02, "initial_obj_to_target")

# soccer: past the goal line but beside the goal mouth, in_place is pulled down
_SOCCER_IN = _long_tail("weighted_obj_to_target", 0.07, "obj_to_initial_obj")
_SOCCER_PLACE = (f"where((obj_y > target_y - 0.1) & (abs(obj_x - target_x) > 0.1), "
                 f"clip({_SOCCER_IN} - 2*(obj_y - target_y + 0.1)/(1.1 - target_y), 0, 1), {_SOCCER_IN})")

# hammer: the reward is scaled by how flat the hammer lies; success counts only with a reward above 5
_HAMMER = (f"(2*{_caging(0.015, 0.02, 0.01)} + 6*(0.1*(obj_z > 0.02) + 0.9*{_long_tail('obj_to_target', 0.02, '0.2')}))"
           "*Max(1 - obj_rotation/0.4, 0)")

# coffee-push and coffee-pull: MetaWorld's medium-density caging (caging and a reach term, averaged)
_COFFEE_GRASP = (f"({_caging(0.02, 0.05, 0.05, ', effort=0.7')} + "
                 f"{_long_tail('tcp_to_obj', 0.04, 'abs(initial_tcp_to_obj - 0.04)')})/2")
_COFFEE = _grasp_place(_COFFEE_GRASP, _long_tail("weighted_obj_to_target", 0.05, "initial_obj_to_target"),
                       "(tcp_to_obj < 0.04) & (gripper_opening > 0)", 5, "weighted_obj_to_target < 0.05")

METAWORLD_HUMAN: dict[str, Components] = {
    "reach-v3": (("reach", f"10*{_long_tail('tcp_to_target', 0.05, 'initial_hand_to_target')}"),),
    "push-v3": (
        ("grasp", f"where(obj_to_target < 0.05, 0, 2*{_HIGH})"),
        ("push", f"where((obj_to_target >= 0.05) & (tcp_to_obj < 0.02) & (gripper_opening > 0), "
                 f"1 + 2*{_HIGH} + 5*{_IN_PLACE}, 0)"),
        ("success", "10*(obj_to_target < 0.05)"),
    ),
    "pick-place-v3": _grasp_place(_HIGH, _IN_PLACE, "(tcp_to_obj < 0.02) & (gripper_opening > 0) & "
                                  "(obj_z - 0.01 > initial_obj_z)", 5, "obj_to_target < 0.05"),
    "button-press-v3": (
        ("reach", f"2*hamacher(Max(gripper_opening, 0), {_long_tail('tcp_to_obj', 0.05, 'obj_to_initial_tcp')})"),
        ("press", f"8*where(tcp_to_obj <= 0.05, {_long_tail('obj_to_target', 0.005, 'initial_obj_to_target')}, 0)"),
    ),
    "button-press-topdown-v3": (
        ("reach", f"5*hamacher(1 - gripper_opening, {_long_tail('tcp_to_obj', 0.01, 'obj_to_initial_tcp')})"),
        ("press", f"5*where(tcp_to_obj <= 0.03, {_long_tail('obj_to_target', 0.005, 'initial_obj_to_target')}, 0)"),
    ),
    # the in-place margin is |0.2 - 0.05|: the env's target is always 0.2 m from the window's start along x
    "window-open-v3": (("open", f"10*hamacher({_long_tail('tcp_to_obj', 0.02, 'abs(initial_tcp_to_obj - 0.02)')}, "
                                f"{_long_tail('obj_to_target', 0.05, '0.15')})"),),
    "window-close-v3": (("close", f"10*hamacher({_gaussian('tcp_to_obj', 0.02, 'abs(initial_tcp_to_obj - 0.02)')}, "
                                  f"{_long_tail('obj_to_target', 0.05, 'abs(initial_obj_to_target - 0.05)')})"),),
    "door-open-v3": (
        ("ready", f"where(obj_to_target <= 0.08, 0, 2*hamacher({_DOOR_READY}, (clip(gripper_command, -1, 1) + 1)/2))"),
        ("open", f"where(obj_to_target <= 0.08, 0, 8*({_DOOR_OPENED}))"),
        ("success", "10*(obj_to_target <= 0.08)"),
    ),
    "door-close-v3": (
        ("hand", "where(obj_to_target < 0.05, 0, "
                 f"3*{_gaussian('tcp_to_target', 0.0125, 'obj_to_initial_hand + 0.1')})"),
        ("close", f"where(obj_to_target < 0.05, 0, 6*{_gaussian('obj_to_target', 0.05, 'initial_obj_to_target')})"),
        ("success", "10*(obj_to_target < 0.05)"),
    ),
    "drawer-open-v3": (
        ("reach", f"5*{_long_tail('hand_to_obj', 0.01, 'initial_tcp_to_obj')}"),
        ("open", f"5*{_long_tail('obj_to_target', 0.02, '0.2')}"),
    ),
    "drawer-close-v3": (
        ("close", "where(obj_to_target <= 0.065, 0, 10*hamacher(hamacher("
                  f"{_gaussian('tcp_to_obj', 0.005, 'abs(initial_tcp_to_obj - 0.005)')}, clip(gripper_command, 0, 1)), "
                  f"{_long_tail('obj_to_target', 0.05, 'abs(initial_obj_to_target - 0.05)')}))"),
        ("success", "10*(obj_to_target <= 0.065)"),
    ),
    "coffee-push-v3": _COFFEE,
    "dial-turn-v3": (("turn", "10*hamacher(hamacher("
                              f"{_gaussian('tcp_to_obj', 0.005, 'abs(initial_tcp_to_obj - 0.005)')}, "
                              f"clip(gripper_command, 0, 1)), "
                              f"{_long_tail('obj_to_target', 0.07, 'abs(initial_obj_to_target - 0.07)')})"),),
    "hammer-v3": (("hammer", f"where((success > 0) & ({_HAMMER} > 5), 10, {_HAMMER})"),),
    "peg-insert-side-v3": _lifted_place(_caging(0.0075, 0.03, 0.005), _PEG_IN,
                                        "(tcp_to_obj < 0.08) & (gripper_opening > 0) & (obj_z - 0.01 > initial_obj_z)",
                                        "obj_to_target <= 0.07"),
    "soccer-v3": (
        ("grasp", f"where(weighted_obj_to_target < 0.07, 0, "
                  f"3*{_caging(0.013, 0.05, 0.005, ', gate=0.95, grip_band=0.023')})"),
        ("place", f"where(weighted_obj_to_target < 0.07, 0, 6.5*{_SOCCER_PLACE})"),
        ("success", "10*(weighted_obj_to_target < 0.07)"),
    ),
    "basketball-v3": _lifted_place(_caging(0.025, 0.06, 0.005),
                                   _long_tail("obj_to_target", 0.08, "initial_obj_to_target"),
                                   "(tcp_to_obj < 0.035) & (gripper_opening > 0) & (obj_z - 0.01 > initial_obj_z)",
                                   "obj_to_target < 0.08"),
    "hand-insert-v3": _grasp_place(_HIGH, _IN_PLACE, "(tcp_to_obj < 0.02) & (gripper_opening > 0)", 7,
                                   "obj_to_target < 0.05"),
    "pick-out-of-hole-v3": (
        ("grasp_and_place", "where(obj_to_target < 0.05, 0, hamacher("
                            f"{_caging(0.015, 0.02, 0.03, ', effort=0.1, high_density=1')}, {_HOLE_IN_PLACE}))"),
        ("lift", "where((obj_to_target >= 0.05) & (tcp_to_obj < 0.04) & (obj_z - 0.02 > initial_obj_z) & "
                 f"(gripper_opening >= 0.33), 1 + 5*hamacher({_HOLE_IN_PLACE}, {_HOLE_ABOVE}), 0)"),
        ("success", "10*(obj_to_target < 0.05)"),
    ),
    "push-back-v3": _grasp_place(
        _caging(0.007, 0.05, 0.01, ", gate=0.95, grip_band=0.01"), _IN_PLACE,
        "(tcp_to_obj < 0.01) & (gripper_opening > 0) & (gripper_opening < 0.55) & "
        "(initial_obj_to_target - obj_to_target > 0.01)", 5, "obj_to_target < 0.05"),
    "coffee-pull-v3": _COFFEE,
    "peg-unplug-side-v3": (
        ("grasp", f"where(obj_to_target <= 0.05, 0, 2*{_caging(0.025, 0.05, 0.005, ', effort=0.8, high_density=1')})"),
        ("pull", "where((obj_to_target > 0.05) & (gripper_opening > 0.5) & (obj_x - initial_obj_x > 0.015) & "
                 f"(tcp_to_obj < 0.035), 1 + 5*{_IN_PLACE}, 0)"),
        ("success", "10*(obj_to_target <= 0.05)"),
    ),
}
"""MetaWorld task name -> the env's own reward as (component, expression) pairs."""

GYM_HUMAN: dict[str, Components] = {
    # Reacher-v5's control weight is 1 in the code (its docs say 0.1)
    "Reacher-v5": (("distance", "-fingertip_to_target"), ("control", "-action_norm**2")),
    # the env measures the object-goal distance in 3-d; obj_to_goal is in the table plane
    "Pusher-v5": (
        ("near", "-0.5*tip_to_obj"),
        ("distance", "-sqrt(obj_to_goal**2 + (obj_z - goal_z)**2)"),
        ("control", "-0.1*action_norm**2"),
    ),
    "HalfCheetah-v5": (("forward", "forward_velocity"), ("control", "-0.1*action_norm**2")),
}
"""Gymnasium task name -> the env's own reward (the sum of its `info` reward terms) as components."""
