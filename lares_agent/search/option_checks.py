"""No silent options: the `lares run` settings that would do nothing, or less than their name says, checked before
a run folder exists.

`SearchConfig` refuses what cannot run; this module is about what runs but ignores an option. Where an option
would be ignored outright (`--base-url` with `--llm-backend replay`) or would quietly become another option
(`--selection pareto` with `--elites 1` is truncation), the run is refused in one line naming the options
(`ConfigError`, exit 2): the user asked for something the run would not do. Where the combination is a legitimate
experiment that merely skips part of the search (`--elites` equal to `--population`, a `--reward-period` past the
budget, more `--rewards-file` candidates than slots), it runs with a one-line warning that says what it skips.
`--preset paper` gets the list of what it still does differently from the reference, each with its flag.

A run's own `config.json` given to `--config` is a record of a run that was valid: a value it holds that a flag
typed on the command line makes useless (its `base_url` under `--llm-backend replay`) is dropped with a note,
not refused, so that any run can be replayed or moved with a flag or two.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lares_agent.errors import ConfigError
from lares_agent.runs.input_files import check_input_file
from lares_agent.search.config import SearchConfig
from lares_agent.search.options import LLM_FREE_ABLATIONS

__all__ = ["converted_options", "ignored_options", "option_warnings", "paper_differences", "refuse_silent_options",
           "setting_notes"]


@dataclass(frozen=True)
class _Ignored:
    """An option that the run would ignore: `field` is set but `ignored(cfg)` says nothing reads it."""

    field: str
    deciders: tuple[str, ...]  # the options that make it useless
    ignored: Callable[[SearchConfig], bool]
    why: Callable[[SearchConfig], str]


_IGNORED: tuple[_Ignored, ...] = (
    _Ignored("base_url", ("llm_backend",), lambda c: c.base_url is not None and c.llm_backend != "openai",
             lambda c: f"--base-url applies to --llm-backend openai; --llm-backend {c.llm_backend} never calls it"),
    _Ignored("replay_from", ("llm_backend",), lambda c: c.replay_from is not None and c.llm_backend != "replay",
             lambda c: f"--replay-from applies to --llm-backend replay; --llm-backend {c.llm_backend} does not read "
                       "it"),
    _Ignored("llm_context", ("llm_backend",), lambda c: c.llm_context is not None and c.llm_backend == "replay",
             lambda c: "--llm-context sizes prompts for a model's context; --llm-backend replay calls no model"),
    _Ignored("ray_address", ("backend",), lambda c: c.ray_address is not None and c.backend != "ray",
             lambda c: f"--ray-address applies to --backend ray; --backend {c.backend} runs in this process"),
    _Ignored("personas", ("analysis",), lambda c: bool(c.personas) and c.analysis == "facts",
             lambda c: "--personas votes on the defects the critics' LLM calls add, and --analysis facts makes no "
                       "such call: add --analysis llm, or leave --personas out"),
    _Ignored("personas", ("ablations",), lambda c: bool(c.personas) and "no-reflection" in c.ablations,
             lambda c: "--personas critique in the critique step, which --ablations no-reflection removes"),
    _Ignored("reward_gain", ("setting", "baseline_reward"),
             lambda c: c.reward_gain is not None and c.setting == "baseline" and not c.reward_components,
             lambda c: "--reward-gain scales the rewards a search writes or a found reward (--reward-from, "
                       f"--reward-file); --reward {c.baseline_reward} alone is taken as it is"),
    _Ignored("device", ("learner",), lambda c: c.device != "cpu" and c.learner == "es",
             lambda c: f"--device {c.device} places --learner sac or crossq; ES policies compute in numpy on the "
                       "CPU: leave --device out"),
)


# The options that only the LLM reads (its backend, how it is asked, what it is shown): a control in which it writes
# no reward (LLM_FREE_ABLATIONS) refuses each one set to other than its default.
_LLM_OPTIONS = ("llm_backend", "llm_model", "base_url", "replay_from", "temperature", "max_llm_tokens",
                "llm_timeout", "llm_context", "persona", "personas", "analysis", "task_examples",
                "candidates_per_slot")
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(SearchConfig)}


def _llm_free(cfg: SearchConfig) -> str | None:
    """The ablation of `cfg` in which the LLM writes no reward, if any."""
    return next((a for a in cfg.ablations if a in LLM_FREE_ABLATIONS), None)


def _shown(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _llm_option(name: str) -> _Ignored:
    flag = "--" + name.replace("_", "-")
    return _Ignored(name, ("ablations",),
                    lambda c: _llm_free(c) is not None and getattr(c, name) != _DEFAULTS[name],
                    lambda c: f"{flag} {_shown(getattr(c, name))} is for the LLM, and --ablations {_llm_free(c)} "
                              f"asks it for no reward: leave {flag} out")


_IGNORED += tuple(_llm_option(name) for name in _LLM_OPTIONS)


def ignored_options(cfg: SearchConfig) -> dict[str, str]:
    """Each option `cfg` sets that the run would ignore, with why (what `refuse_silent_options` refuses)."""
    return {rule.field: rule.why(cfg) for rule in _IGNORED if rule.ignored(cfg)}


def refuse_silent_options(cfg: SearchConfig, typed: Collection[str] = (), from_file: Collection[str] = (),
                          source: str = "--config") -> tuple[SearchConfig, list[str]]:
    """`cfg` unchanged, or with the `from_file` values that an option in `typed` (given on the command line)
    makes useless reset to their defaults, and a note for each; a `ConfigError` naming the options for every
    other option the run would ignore or turn into another. `typed` and `from_file` hold field names."""
    problems: list[str] = []
    notes: list[str] = []
    for rule in _IGNORED:
        if not rule.ignored(cfg):
            continue
        if rule.field in from_file and rule.field not in typed and any(d in typed for d in rule.deciders):
            notes.append(f"{source} sets {rule.field}, left out: {rule.why(cfg)}")
            reset: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(SearchConfig)
                                     if f.name == rule.field}
            cfg = dataclasses.replace(cfg, **reset)
        else:
            problems.append(rule.why(cfg))
    problems += converted_options(cfg)
    if problems:
        raise ConfigError("; ".join(dict.fromkeys(problems)))
    return cfg, notes


def converted_options(cfg: SearchConfig) -> list[str]:
    """One line for each option that the run would quietly turn into another: refused by `lares run` and, for
    every trial, by `lares sweep` (`SweepSpec.check`), however the option was given."""
    if cfg.selection == "pareto" and cfg.elites == 1 and cfg.setting != "baseline":
        return ["--selection pareto with --elites 1 keeps the candidate of best fitness, which is --selection "
                "truncation: give --elites 2 or more, or leave --selection out"]
    return []


def setting_notes(cfg: SearchConfig) -> list[str]:
    """A line where `--setting auto` runs scratch on a task that has its own reward: the reward is code, not an
    expression (`config.auto_setting`), so the LLM could not be shown it."""
    if cfg.setting != "auto":
        return []
    from lares_agent.engine.tasks import get_task

    task = get_task(cfg.task)
    if not task.has_human_reward or task.human_components is not None:
        return []
    return [f"--setting auto runs scratch: task {task.name} has its own reward, but not written as an expression, "
            "so init could not show it to the LLM (--setting init keeps a learner on it beside the search)"]


def option_warnings(cfg: SearchConfig) -> list[str]:
    """One line for each legitimate setting that skips part of the search: no reward update in the budget,
    every candidate surviving each update, starting candidates beyond the slots, a pre-screen with nothing to
    choose from, the task's example answers where the task's own reward takes their place (a warning, not a
    refusal: a run recorded before the default changed holds ``own``, and its config.json must run again)."""
    if cfg.setting == "baseline":
        return []
    out: list[str] = []
    k, e = cfg.population, cfg.elites
    if cfg.reward_period >= cfg.budget:
        out.append(f"--reward-period {cfg.reward_period:,} is not below --budget {cfg.budget:,}: no reward update "
                   "happens before the run ends, so the initial rewards train to the end")
    elif e == k and _setting(cfg) == "init":
        what = "one LLM candidate beside the task's own reward" if k == 1 else f"--elites {e} equals --population {k}"
        out.append(f"{what}: an LLM candidate is rewritten only when the task's own reward's learner ranks above it")
    elif k == 1:
        out.append("--population 1: one reward candidate, nothing to select or replace; the LLM writes it once and "
                   "it trains to the end")
    elif e == k:
        out.append(f"--elites {e} equals --population {k}: every candidate survives each reward update, so the LLM "
                   f"writes no reward after the initial {k}")
    if cfg.setting == "init" and not _shows_own_reward(cfg):
        out.append(f"--setting init on task {cfg.task}: its own reward is not written as an expression, so the LLM "
                   "is shown none (round 0's prompt is the scratch one); only the learner kept on that reward is "
                   "init's")
    if cfg.task_examples == "own" and _setting(cfg) == "init":
        out.append("--task-examples own shows example answers for the task from scratch only; in the init setting "
                   "the prompt shows the task's own reward instead, so it shows what --task-examples other does")
    if cfg.designer_features and _setting(cfg) == "init":
        out.append("--designer-features offers the designer's features from scratch; the init setting offers them "
                   "anyway (the task's own reward, which it refines, reads them)")
    if cfg.screen != "order" and cfg.candidates_per_slot <= 1 and cfg.numeric_children == 0:
        out.append(f"--screen {cfg.screen} with one LLM candidate per free slot and no numeric children: every valid "
                   "candidate fills a slot, so the screen has nothing to choose (--candidates-per-slot 2)")
    given = _count_candidates(cfg.rewards_file)
    if given is not None and given > k:
        out.append(f"--rewards-file {cfg.rewards_file} holds {given:,} candidates for {k} slot(s) (--population): "
                   f"the first {k} start the run, {given - k:,} are dropped")
    return out


def paper_differences(cfg: SearchConfig) -> list[str]:
    """What a `--preset paper` run still does that the reference does not (docs/lares-reference.md), one line
    each: what it does, what the reference does, and the flags that make it the reference's. Empty for another
    preset, or once every difference is turned off."""
    if cfg.preset != "paper" or cfg.setting == "baseline":
        return []
    out: list[str] = []
    if cfg.task_examples != "none":  # "own" shows its answers for the task only from scratch
        own = cfg.task_examples == "own" and _setting(cfg) == "scratch"
        shown = "two example answers for this task and one" if own else "an example answer"
        out.append(f"{shown} for a different task in the system prompt (reference: none): --task-examples none")
    if cfg.candidates_per_slot > 1 or cfg.numeric_children > 0:
        out.append(f"{cfg.candidates_per_slot:g} LLM candidate(s) per free slot and {cfg.numeric_children} numeric "
                   "children of the elites (reference: one LLM candidate per slot): --candidates-per-slot 1 "
                   "--numeric-children 0")
    if cfg.screen != "order":
        out.append(f"the {cfg.screen} picks which valid candidates fill the slots (reference: no screen): "
                   "--screen order")
    if cfg.complexity_lambda > 0:
        out.append("the simpler reward wins an exact tie of fitness and tie-break (reference: complexity plays no "
                   "part): --complexity-lambda 0")
    if cfg.inherit != "always":
        out.append("a replaced reward's learner starts from the best learner only once that one has succeeded "
                   "(reference: always): --inherit always")
    if cfg.handover_episodes > 0:
        out.append(f"the policy handed over is the best of the top learners replayed on {cfg.handover_episodes} fresh "
                   "episodes (reference: the one ranked first at the last update): --handover-episodes 0")
    if cfg.learner != "es" and not cfg.sync_llm:
        out.append("reward rounds run in the background while the learners train (reference: they wait): "
                   "--sync-llm")
    if cfg.retrieval and "no-retrieval" not in cfg.ablations:
        out.append("accepted rewards of earlier runs retrieved into the prompt (reference: no memory): "
                   "--no-retrieval")
    if cfg.llm_backend == "local":
        out.append("the local model (reference: gpt-4o-mini): --llm-backend openai --llm-model gpt-4o-mini")
    return out


def _setting(cfg: SearchConfig) -> str:
    """init or scratch: "auto" resolved against the task (only loaded when the setting is "auto")."""
    if cfg.setting != "auto":
        return cfg.setting
    from lares_agent.engine.tasks import get_task
    from lares_agent.search.config import auto_setting

    task = get_task(cfg.task)
    return auto_setting(task.has_human_reward, task.human_components is not None)


def _shows_own_reward(cfg: SearchConfig) -> bool:
    """Whether the task's own reward is an expression the init prompt can show (loads the task)."""
    from lares_agent.engine.tasks import get_task

    return get_task(cfg.task).human_components is not None


def _count_candidates(path: str | None) -> int | None:
    """How many candidates a `--rewards-file` holds, read as `given_rewards.load_rewards_file` reads it; None where it
    cannot be read (that function says why, before the run starts)."""
    if not path:
        return None
    try:
        check_input_file(Path(path), "--rewards-file")  # a device or pipe would never finish reading
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if isinstance(data, dict):
        data = data.get("candidates", [data])
    return len(data) if isinstance(data, list) else None
