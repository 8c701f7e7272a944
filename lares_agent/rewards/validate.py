"""The one validator of a reward candidate: what the graph, `lares reward check` and the search layer all apply.

In order, the first failure is the reason (one line, sent back to the LLM instead of the reference's silent
unbounded regeneration loop, docs/lares-reference.md §12 item 28):

1. parse and the language limits (`parse_candidate`), the text size included;
2. the complexity cap;
3. duplicate of a reward already taken (by `reward_key`, so `2*d` and `d*2` match);
4. progress use: a reward that ignores the task's main progress measure cannot guide it;
5. approach term, where the task names one: without it no learner gets a signal until the object happens to be
   touched (no button-press reward of a 10k-step sitting used `tcp_to_obj`, docs/results-archive.md);
6. numeric checks on the sample (`check_numeric`);
7. poles and domains over the features' declared ranges (`domains.py`): `1/tcp_to_target` has its pole at the
   goal, which no sample of early states shows;
8. progress sign on the sample: a wrong-signed distance term is the small model's most common mistake
   (docs/feasibility.md §4.2), and terms that cancel leave the reward blind to progress. Where the intent is
   clear (a component grows with the distance on every sample while another pays for closing it) the component
   is negated, also where the reward as a whole passes, and the repaired reward checked again from the start;
   its verdict's first warning says so;
9. the sign rule for every component and every additive term of one: a component that pays more as the progress
   or the approach distance grows (the rule of 8's repair), or holds a term that does, and that no repair fixed is
   rejected, whatever the rest of the reward pays (8 and 9 live in `sign_rules.py`)
   (`2*tcp_to_obj - 2*obj_to_target` on hammer-v3 pays the hand for leaving the hammer, and a refinement of its
   own reward once held it beside the designer's terms). The tasks' own rewards pass it (tests/
   test_approach_check.py checks every built-in one).

After 1, a candidate that names a feature the task marks as its designer's (`TaskSpec.designer_features`) is
rejected where `CheckConfig.designer_features` is off (the scratch setting, docs/scratch-features.md), and one that
reads the step's action (`rewards.task.ACTION_FEATURES`) where `CheckConfig.state_only` is on: a potential
(`--shaping potential`, engine/replay/potential.py) is a function of the state.

Between 5 and 6, a term that reads only features the task declares offstage (reach-v3's puck) is rejected: the
object is in the scene but not in the task, so such a term is constant on the robot's runs and pays nothing (a
reach-v3 run once handed over `bonus = grasped*(...)` with `grasped` 0 on every step). Other constant terms are
warnings (`check_numeric`): a success or grasp bonus is constant on early states and still right.

Checks 1-5 do not depend on the sample; 6-8 do, and 3 depends on what the population already holds.

A task may carry its own (human-designed) reward as an expression (`TaskSpec.human_components`), which the "with
init" setting hands the LLM to refine. The designer's reward is the reference, not a candidate to correct: the
complexity cap leaves it `human_headroom` times its own complexity (so refinements can add terms), and the
heuristic rules are advice (warnings), not rejections, where the task's own reward breaks them too. Rules 4 and 5
(which features a reward reads) for every candidate of the task: the designer's reward shows the rule does not hold
for it, e.g. MetaWorld's door-close reward reaches for the goal rather than the handle, so it never reads the
approach feature. Rule 8 (the progress sign on the sample) for that reward and its numeric children, the rewards of
its structure (`structure_key`): a gated reward can look flat on a sample of states that never open its gate, which
says more about the sample than about a new reward's terms.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from lares_agent.rewards.candidate import CandidateData, ParsedReward, parse_candidate, reward_key
from lares_agent.rewards.compile import compile_reward
from lares_agent.rewards.complexity import ComplexityWeights
from lares_agent.rewards.domains import domain_reason
from lares_agent.rewards.limits import Limits, RewardRejected
from lares_agent.rewards.numeric import NumericThresholds, check_numeric
from lares_agent.rewards.sign_rules import (
    component_sign_reason,
    distances,
    progress_monotonicity,
    sign_reason,
    sign_verdict,
    wrong_signed,
)
from lares_agent.rewards.task import (
    RewardTask,
    action_features,
    allowed_features,
    designer_features,
    human_components,
    offstage_features,
)
from lares_agent.rewards.verdict import Verdict

__all__ = ["CheckConfig", "human_reference", "record_key", "structure_key", "structure_key_of", "validate"]


@dataclass(frozen=True)
class CheckConfig:
    """What a candidate must satisfy besides parsing: a complexity cap, progress use and sign, the approach term."""

    complexity_cap: float = 60.0
    require_progress_use: bool = True  # a reward that ignores the main progress measure cannot guide the task
    require_progress_sign: bool = True
    require_approach_use: bool = True  # progress cannot move before the hand reaches the object
    human_headroom: float = 1.5  # the cap is at least this times the task's own reward's complexity
    repair_sign: bool = True  # negate a component that only grows with the progress distance (module docstring)
    # False (from scratch): a candidate naming a feature made to write the task's own reward is rejected
    designer_features: bool = True
    # True (a potential, `--shaping potential`): a candidate reading the step's action is rejected
    state_only: bool = False
    limits: Limits = field(default_factory=Limits)
    weights: ComplexityWeights = field(default_factory=ComplexityWeights)
    thresholds: NumericThresholds = field(default_factory=NumericThresholds)


def record_key(record: Mapping[str, object], task: RewardTask, limits: Limits = Limits()) -> str | None:
    """The `reward_key` of a record's components (an elite as the search layer reports it), or None when they do
    not parse (the task's own reward has no expression)."""
    components = record.get("components")
    if not isinstance(components, Mapping) or not components:
        return None
    try:
        return reward_key(parse_candidate({"components": dict(components)}, allowed_features(task), limits))
    except (RewardRejected, ValueError, TypeError):
        return None


@lru_cache(maxsize=64)
def _reference(components: tuple[tuple[str, str], ...], features: tuple[str, ...], limits: Limits,
               weights: ComplexityWeights) -> ParsedReward | None:
    try:
        return parse_candidate({"components": dict(components)}, features, limits, weights)
    except RewardRejected:
        return None


def _human_parsed(task: RewardTask, config: CheckConfig) -> ParsedReward | None:
    components = human_components(task)
    if components is None:
        return None
    return _reference(components, allowed_features(task), config.limits, config.weights)


def human_reference(task: RewardTask, config: CheckConfig = CheckConfig()) -> tuple[str, float] | None:
    """(reward_key, complexity) of the task's own reward expression; None where it has none (or it does not parse
    over the task's features, which the task tests rule out for the built-in tasks)."""
    parsed = _human_parsed(task, config)
    return None if parsed is None else (reward_key(parsed), parsed.complexity)


def _cap_reason(parsed: ParsedReward, key: str, taken: Collection[str], cap: float) -> str | None:
    """Checks 2-3: the complexity cap and duplicates."""
    if parsed.complexity > cap:
        return f"complexity {parsed.complexity:.1f} exceeds the cap {cap:g}: use fewer or simpler terms"
    if key in taken:
        return "duplicate of a candidate already in the population"
    return None


def _use_reasons(used: Collection[str], task: RewardTask, config: CheckConfig) -> list[str]:
    """Checks 4-5: the reasons a reward reading `used` ignores the progress or the approach feature (empty: it
    uses both)."""
    progress, approach = task.progress_feature, task.approach_feature
    reasons = []
    if config.require_progress_use and progress not in used:
        reasons.append(f"the reward never uses {progress}, the task's main progress measure: add a term that "
                       f"grows as {progress} shrinks")
    if config.require_approach_use and approach and approach not in used:
        reasons.append(f"the reward never uses {approach}: {progress} cannot change before the robot reaches the "
                       f"object, so add an approach term such as -w*{approach} or w*exp(-{approach}/s)")
    return reasons


def _offstage_reason(parsed: ParsedReward, task: RewardTask) -> str | None:
    """The first term that reads only offstage features (`rewards.task.offstage_features`), as a reason."""
    hidden = offstage_features(task)
    for name, expr in parsed.components.items():
        used = {str(s) for s in expr.free_symbols}
        if used and used <= hidden:
            return (f"component '{name}' reads only {', '.join(sorted(used))}, which belong(s) to an object that is "
                    f"not part of this task: it pays nothing for {task.progress_feature}; drop it")
    return None


def _designer_reason(parsed: ParsedReward, task: RewardTask) -> str | None:
    """The first component that reads a designer's feature (`rewards.task.designer_features`), as a reason."""
    return _reads(parsed, designer_features(task), ": made to write the task's own reward (the designer's features), "
                  "which a reward from scratch does not use; use the listed features")


def _action_reason(parsed: ParsedReward, task: RewardTask) -> str | None:
    """The first component that reads the step's action (`rewards.task.action_features`), as a reason."""
    return _reads(parsed, action_features(task), ", which the action sets: a potential is a function of the state "
                  "alone; use the state's features")


def _reads(parsed: ParsedReward, names: frozenset[str] | set[str], why: str) -> str | None:
    """The first component that reads any of `names`, as a reason: the names read, then `why`."""
    for name, expr in parsed.components.items():
        used = sorted({str(s) for s in expr.free_symbols} & names)
        if used:
            return f"component '{name}' reads {', '.join(used)}{why}"
    return None


def _repaired(parsed: ParsedReward, task: RewardTask, sample: Mapping[str, np.ndarray], id: str | None,
              taken: Collection[str], config: CheckConfig) -> Verdict | None:
    """The candidate with its wrong-signed components negated, if that version passes every check (its verdict
    says what was changed); None where no component is clearly wrong-signed or the repair still fails. A repair,
    not a rejection, where the intent is clear: the term names the distance the reward must close (the progress
    or the approach distance). Also where the reward as a whole has the right sign: a bigger term can hide a small
    one that still pays for moving away (a refinement of reach-v3's own reward once added
    `tcp_to_target = tcp_to_target`, docs/RESULTS.md)."""
    features = distances(task, sample)
    flipped: dict[str, str] = {}
    for feature in features:
        flipped.update({name: feature for name in wrong_signed(parsed, sample, feature) if name not in flipped})
    if not flipped:
        return None
    components = {n: f"-({t})" if n in flipped else t for n, t in parsed.canonical.items()}
    fixed = validate({"components": components, "rationale": parsed.rationale}, task, sample, id=id, taken=taken,
                     config=dataclasses.replace(config, repair_sign=False))
    if not fixed.accepted:
        return None
    notes = "; ".join(f"negated {', '.join(repr(n) for n in flipped if flipped[n] == f)}, which grew with {f} "
                      "(lower is better)" for f in features if f in flipped.values())
    return dataclasses.replace(fixed, warnings=(f"repaired: {notes}", *fixed.warnings))


def structure_key_of(canonical: Mapping[str, str]) -> str:
    """A reward's form with its constants left out, from its canonical components: the task's own reward and its
    numeric children share it."""
    return "; ".join(f"{name} = {_NUMBER.sub('c', text)}" for name, text in sorted(canonical.items()))


def structure_key(parsed: ParsedReward) -> str:
    """`structure_key_of` a parsed reward."""
    return structure_key_of(parsed.canonical)


_NUMBER = re.compile(r"(?<![A-Za-z_0-9])\d+(?:\.\d*)?(?:e[-+]?\d+)?")


def _human_breaks_sign(human: ParsedReward | None, parsed: ParsedReward, sample: Mapping[str, np.ndarray],
                       progress: str) -> bool:
    """Whether ``parsed`` has the structure of the task's own reward, which fails check 8 on this sample too."""
    if human is None or structure_key(parsed) != structure_key(human):
        return False
    try:
        return sign_reason(compile_reward(human, "human"), sample, progress) is not None
    except (RewardRejected, ValueError, TypeError, ArithmeticError, KeyError):
        return False


def validate(
    data: CandidateData,
    task: RewardTask,
    sample: Mapping[str, np.ndarray],
    *,
    id: str | None = None,
    taken: Collection[str] = (),
    config: CheckConfig = CheckConfig(),
) -> Verdict:
    """Run every check on a candidate; `verdict.reward` is the compiled reward (named `id`) when accepted.

    `taken` holds the `reward_key`s a new reward must differ from (the elites, this round's accepted ones).
    Never raises on bad candidate text: rejections are data, the graph's critique reads the reason. The task's
    own reward expression is judged as the module docstring says.
    """
    try:
        parsed = parse_candidate(data, allowed_features(task), config.limits, config.weights)
    except RewardRejected as exc:
        return Verdict(False, exc.reason)
    except (ValueError, TypeError, RecursionError) as exc:  # defensive: a parser bug must not crash a round
        return Verdict(False, f"unparseable candidate ({type(exc).__name__})")
    key = reward_key(parsed)
    canonical = dict(parsed.canonical)
    if not config.designer_features:
        reason = _designer_reason(parsed, task)
        if reason is not None:
            return Verdict(False, reason, parsed.complexity, canonical, key=key)
    if config.state_only:
        reason = _action_reason(parsed, task)
        if reason is not None:
            return Verdict(False, reason, parsed.complexity, canonical, key=key)
    human_parsed = _human_parsed(task, config)
    human = None if human_parsed is None else (reward_key(human_parsed), human_parsed.complexity)
    advice: list[str] = []  # rules the task's own reward breaks too: warnings, not rejections
    human_uses = set(_use_reasons(human_parsed.features_used, task, config)) if human_parsed is not None else set()

    def reject(reason: str, numeric: Verdict | None = None) -> Verdict:
        stats = numeric.stats if numeric is not None else {}
        return Verdict(False, reason, parsed.complexity, canonical, stats, key=key)

    cap = config.complexity_cap if human is None else max(config.complexity_cap, config.human_headroom * human[1])
    reason = _cap_reason(parsed, key, taken, cap)
    if reason is not None:
        return reject(reason)
    uses = _use_reasons(parsed.features_used, task, config)
    binding = [r for r in uses if r not in human_uses]
    if binding:
        return reject(binding[0])
    advice.extend(uses)
    reason = _offstage_reason(parsed, task)
    if reason is not None:
        return reject(reason)
    try:
        reward = compile_reward(parsed, id)
        numeric = check_numeric(reward, sample, config.thresholds)
        if not numeric.accepted:
            return reject(numeric.reason, numeric)
        reason = domain_reason(parsed, task.features, sample, config.thresholds.max_abs)
        if reason is not None:
            return reject(reason, numeric)
        progress = task.progress_feature
        if config.require_progress_sign and progress in sample:
            rises, falls = progress_monotonicity(reward, sample, progress)
            reason = sign_verdict(rises, falls, progress)
            if reason is not None:
                designers = _human_breaks_sign(human_parsed, parsed, sample, progress)
            else:  # the designer's form is the reference: it and its numeric children keep their terms' signs
                designers = human_parsed is not None and structure_key(parsed) == structure_key(human_parsed)
            blind = reason is not None and rises <= falls  # terms that cancel, or a threshold alone: the fix is a
            # new term, not a sign
            repaired = None if designers or blind or not config.repair_sign else _repaired(
                parsed, task, sample, id, taken, config)
            if repaired is not None:
                return repaired
            if reason is not None and not designers:
                return reject(reason, numeric)
            advice.extend([reason] if reason is not None else [])
        if config.require_progress_sign:
            reason = component_sign_reason(parsed, task, sample)
            if reason is not None:
                return reject(reason, numeric)
    except RewardRejected as exc:
        return reject(exc.reason)
    except (ValueError, TypeError, ArithmeticError, KeyError) as exc:
        return reject(f"evaluation failed on the sample states ({type(exc).__name__})")
    warnings = numeric.warnings + tuple(f"the task's own reward breaks this rule too: {text}" for text in advice)
    return Verdict(True, "accepted", parsed.complexity, canonical, numeric.stats, warnings, key, reward)
