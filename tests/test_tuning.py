"""Numeric children by TPE (`rewards/tuning.py`): the elite's structure kept, constants within the range, drawn
toward the constants whose measured fitness was high; and the measurements a run rebuilds from candidates.jsonl."""

from __future__ import annotations

import math
import re

from lares_agent.engine.tasks import get_task
from lares_agent.rewards import parse_candidate
from lares_agent.rewards.tuning import STARTUP_TRIALS, constants_label, tuned_children
from lares_agent.rewards.validate import structure_key
from lares_agent.runs import CandidateRow, SlotRecord
from lares_agent.search.proposer import measured_rewards

TASK = get_task("door-close-v3")
ELITE = {"reach": "-0.5*tcp_to_obj", "close": "-obj_to_target"}
BEST = 0.6  # the log-ratio to the elite's constant where the synthetic fitness peaks


def _weight(components: dict[str, str]) -> float:
    (number,) = re.findall(r"-?\d+\.?\d*(?:e-?\d+)?", components["reach"])
    return float(number)


def _measured(n: int) -> list[tuple[dict[str, str], float]]:
    """`n` rewards of the elite's structure, their weights spread over the range, fitness peaked at BEST."""
    out = []
    for i in range(n):
        x = -0.95 + 1.9 * i / (n - 1)
        out.append(({"reach": f"{-0.5 * math.exp(x):.4g}*tcp_to_obj", "close": "-obj_to_target"}, -(x - BEST) ** 2))
    return out


def test_children_keep_the_structure_and_stay_in_range() -> None:
    children, trials = tuned_children(ELITE, TASK, 4, [], seed=3)
    assert trials == 0 and len(children) == 4 and len({tuple(sorted(c.items())) for c in children}) == 4
    own = structure_key(parse_candidate({"components": ELITE}, TASK.feature_names))
    for child in children:
        assert structure_key(parse_candidate({"components": child}, TASK.feature_names)) == own
        assert abs(math.log(_weight(child) / -0.5)) <= 1.0 + 1e-2  # within a factor e (3 digits kept)
    assert tuned_children(ELITE, TASK, 4, [], seed=3)[0] == children  # seeded: a resumed round draws the same


def test_the_optimiser_draws_where_the_measured_fitness_was_high() -> None:
    learned, trials = tuned_children(ELITE, TASK, 6, _measured(16), seed=0)
    assert trials == 16
    blind, _ = tuned_children(ELITE, TASK, 6, [], seed=0)
    def miss(children: list[dict[str, str]]) -> float:
        return sum(abs(math.log(_weight(c) / -0.5) - BEST) for c in children) / len(children)
    assert miss(learned) < 0.3 < miss(blind)


def test_only_rewards_of_the_same_structure_are_trials() -> None:
    other = [({"reach": "-0.7*tcp_to_obj**2", "close": "-obj_to_target"}, 1.0),  # another form
             ({"reach": "0.5*tcp_to_obj", "close": "-obj_to_target"}, 1.0),  # the constant's sign differs
             ({"reach": "-9*tcp_to_obj", "close": "-obj_to_target"}, 1.0),  # out of range
             ({"reach": "-0.6*tcp_to_obj", "close": "-obj_to_target"}, math.nan)]  # not measured
    assert tuned_children(ELITE, TASK, 2, other, seed=1)[1] == 0
    assert tuned_children({"close": "-obj_to_target"}, TASK, 2, [], seed=1) == ([], 0)  # nothing to tune


def test_a_run_rebuilds_its_measurements_from_the_candidate_log() -> None:
    rows = [CandidateRow(id="a", round=0, slot=0, verdict="accepted", components=dict(ELITE)),
            CandidateRow(id="b", round=0, slot=1, verdict="rejected", components={"x": "1"}),
            CandidateRow(id="a", round=1, slot=0, verdict="evaluated", evaluated=SlotRecord(fitness=0.25)),
            CandidateRow(id="human", round=1, slot=2, verdict="evaluated", evaluated=SlotRecord(fitness=0.5)),
            CandidateRow(id="b", round=1, slot=1, verdict="evaluated", evaluated=SlotRecord(fitness=0.1))]
    assert measured_rewards(rows, None) == [(ELITE, 0.25)]
    assert measured_rewards(rows, {"own": "-obj_to_target"}) == [(ELITE, 0.25), ({"own": "-obj_to_target"}, 0.5)]


def test_a_child_is_said_to_be_drawn_by_tpe_only_from_the_start_up_trials_on() -> None:
    assert constants_label(STARTUP_TRIALS).startswith(f"constants by TPE over {STARTUP_TRIALS} measured")
    for trials in range(STARTUP_TRIALS):
        label = constants_label(trials)
        assert "TPE over" not in label and label.startswith("constants drawn at random within exp(+-1)")
        assert f"({trials} of the {STARTUP_TRIALS} measured" in label
