"""The MetaWorld v3 tasks of the LaRes benchmark family, each with what its object and target are.

The last six complete the list of tasks LaRes runs "with init" (from the env's own reward).

Distances, weights and thresholds are those of the envs' own `evaluate_state` / `compute_reward` (metaworld
3.1.1), so `obj_to_target` is exactly what the env's success test thresholds; tests check this against
`info["obj_to_target"]` and the joint signs against scripted expert rollouts.
"""

from __future__ import annotations

from lares_agent.engine.tasks.metaworld import JointFeature, MetaWorldTask

__all__ = ["METAWORLD_TASKS"]

_DOOR_ANGLE = JointFeature(
    "doorjoint", "door_angle", "how far the door is swung open from closed (0 = closed, about 1.6 = wide open)",
    "rad", -1.0,
)

METAWORLD_TASKS: tuple[MetaWorldTask, ...] = (
    MetaWorldTask(
        "reach-v3",
        obj="puck on the table (not part of this task)",
        target="goal point in the air",
        goal="Move the gripper to the goal point.",
        success_text="tcp_to_target <= 0.05 m",
        progress="tcp_to_target",
        info_distance="tcp_to_target",
    ),
    MetaWorldTask(
        "push-v3",
        obj="puck",
        target="goal spot on the table",
        goal="Push the puck across the table to the goal spot.",
        success_text="obj_to_target <= 0.05 m",
        caging="obj_start",
    ),
    MetaWorldTask(
        "pick-place-v3",
        obj="puck",
        target="goal point (often in the air)",
        goal="Grasp the puck, lift it and carry it to the goal point.",
        success_text="obj_to_target <= 0.07 m",
        caging="pad_start",
    ),
    MetaWorldTask(
        "button-press-v3",
        obj="front face of the button (it is pressed in along +y)",
        target="fully pressed button position",
        goal="Press the button on the front of the box straight in, along +y.",
        success_text="obj_to_target (y only) <= 0.02 m",
        target_weights=(0.0, 1.0, 0.0),
        start="site:buttonStart",
        start_text="button's front face",
    ),
    MetaWorldTask(
        "button-press-topdown-v3",
        obj="top face of the button (it is pressed down along -z)",
        target="fully pressed button position",
        goal="Press the button on top of the box straight down.",
        success_text="obj_to_target (z only) <= 0.024 m",
        target_weights=(0.0, 0.0, 1.0),
        start="site:buttonStart",
        start_text="button's top face",
    ),
    MetaWorldTask(
        "window-open-v3",
        obj="window handle",
        target="handle position with the window slid open (0.2 m along +x)",
        goal="Slide the window open by pushing its handle along +x.",
        success_text="obj_to_target (x only) <= 0.05 m",
        target_weights=(1.0, 0.0, 0.0),
        start="window_handle_pos_init",
    ),
    MetaWorldTask(
        "window-close-v3",
        obj="window handle",
        target="handle position with the window closed",
        goal="Slide the open window shut by pushing its handle along -x.",
        success_text="obj_to_target (x only) <= 0.05 m",
        target_weights=(1.0, 0.0, 0.0),
        start="window_handle_pos_init",
        start_text="handle's reference point (the env records it 0.2 m along +x of the open handle)",
    ),
    MetaWorldTask(
        "door-open-v3",
        obj="door handle",
        target="handle position with the door swung open",
        goal="Pull the door open by its handle (the door swings about a vertical hinge).",
        success_text="obj_to_target (x only) <= 0.08 m",
        target_weights=(1.0, 0.0, 0.0),
        joint=_DOOR_ANGLE,
        info_distance=None,
        hand_offset=(-0.05, 0.0, 0.0),
    ),
    MetaWorldTask(
        "door-close-v3",
        obj="door handle",
        target="handle position with the door closed",
        goal="Push the open door shut.",
        success_text="obj_to_target <= 0.08 m",
        joint=_DOOR_ANGLE,
        start_text="door's base (the env's obj_init_pos)",
    ),
    MetaWorldTask(
        "drawer-open-v3",
        obj="drawer handle",
        target="handle position with the drawer pulled open (0.2 m along -y)",
        goal="Pull the drawer open by its handle.",
        success_text="obj_to_target <= 0.03 m",
        start="_target_pos",
        start_offset=(0.0, 0.2, 0.0),
        start_text="handle of the closed drawer",
        hand_weights=(3.0, 3.0, 1.0),
    ),
    MetaWorldTask(
        "drawer-close-v3",
        obj="drawer handle",
        target="handle position with the drawer closed",
        goal="Push the open drawer shut.",
        success_text="obj_to_target <= 0.065 m",
    ),
    MetaWorldTask(
        "coffee-push-v3",
        obj="mug",
        target="goal spot under the coffee machine",
        goal="Push (or carry) the mug across the table to the spot under the coffee machine.",
        success_text="obj_to_target <= 0.07 m",
        reward_weights=(2.0, 2.0, 1.0),
        caging="obj_start",
    ),
    MetaWorldTask(
        "dial-turn-v3",
        obj="marker on the dial's rim (it moves as the dial turns)",
        target="marker position with the dial turned far enough",
        goal="Turn the dial by pushing its knob sideways.",
        success_text="obj_to_target <= 0.07 m",
        reach_offset=(0.05, 0.02, 0.09),
        start="dial_push_position",
        start_text="knob's push point",
        joint=JointFeature(
            "knob_Joint_1", "dial_angle", "how far the dial has been turned from its start", "rad", -1.0
        ),
    ),
    MetaWorldTask(
        "hammer-v3",
        obj="hammer handle",
        target="head of the nail sticking out of the box",
        goal="Grasp the hammer, lift it and drive the nail into the box with the hammer head.",
        success_text="nail_depth > 0.09 m",
        head="hammer head",
        head_offset=(0.16, 0.06, 0.0),
        joint=JointFeature(
            "NailSlideJoint", "nail_depth", "how far the nail has been driven in (success above 0.09)", "m"
        ),
        info_distance=None,
        caging="obj_start",
        caging_snap_x=0.07,
    ),
    MetaWorldTask(
        "peg-insert-side-v3",
        obj="peg (its grasp point)",
        target="hole in the side of the box",
        goal="Grasp the peg, lift it and insert its head sideways into the hole in the box.",
        success_text="obj_to_target (peg head, y and z weighted 2) <= 0.07 m",
        target_weights=(1.0, 2.0, 2.0),
        head="peg head",
        head_site="pegHead",
        start="peg_head_pos_init",
        start_text="peg head",
        caging="obj_start",
    ),
    MetaWorldTask(
        "soccer-v3",
        obj="soccer ball",
        target="goal mouth",
        goal="Push the ball along the table into the goal.",
        success_text="obj_to_target <= 0.07 m",
        reward_weights=(3.0, 1.0, 1.0),
        caging="pad_start",
    ),
    # LaRes' "with init" tasks beyond the from-scratch set (yeshenpy/LaRes LaRes_with_init.py)
    MetaWorldTask(
        "basketball-v3",
        obj="basketball",
        target="point 0.3 m high above the hoop",
        goal="Grasp the ball, lift it and bring it over the hoop.",
        success_text="obj_to_target (z weighted 2) <= 0.08 m",
        target_weights=(1.0, 1.0, 2.0),
        target_z=0.3,
        caging="obj_start",
    ),
    MetaWorldTask(
        "hand-insert-v3",
        obj="block",
        target="goal point inside the hole in the table",
        goal="Grasp the block and put it into the hole in the table.",
        success_text="obj_to_target <= 0.05 m",
        caging="obj_start",
    ),
    MetaWorldTask(
        "pick-out-of-hole-v3",
        obj="peg standing in a hole in the table",
        target="goal point above the table",
        goal="Grasp the peg, lift it out of the hole and carry it to the goal point.",
        success_text="obj_to_target <= 0.07 m",
        caging="obj_start",
    ),
    MetaWorldTask(
        "push-back-v3",
        obj="puck",
        target="goal spot on the table, nearer the robot",
        goal="Push the puck back across the table (towards the robot) to the goal spot.",
        success_text="obj_to_target <= 0.07 m",
        caging="pad_start",
    ),
    MetaWorldTask(
        "coffee-pull-v3",
        obj="mug",
        target="goal spot on the table in front of the coffee machine",
        goal="Pull (or carry) the mug out from under the coffee machine to the goal spot.",
        success_text="obj_to_target <= 0.07 m",
        reward_weights=(2.0, 2.0, 1.0),
        caging="obj_start",
    ),
    MetaWorldTask(
        "peg-unplug-side-v3",
        obj="peg's outer end (the peg is plugged into the side of a box)",
        target="point 0.15 m out from the box along +x",
        goal="Grasp the peg and pull it out of the box sideways, along +x.",
        success_text="obj_to_target <= 0.07 m",
        caging="obj_start",
    ),
)
