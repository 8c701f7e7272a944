"""What a reward-search run is: one frozen config, its JSON form in `config.json`, and its one mapping onto the
engine and LLM configs (`engine_config`, `llm_config`), which also validate it. The options' own checks, run
first, are in `search/config_checks.py`; the presets are in `search/presets.py`."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lares_agent.errors import ConfigError
from lares_agent.llm.config import LLMBackend, LLMConfig
from lares_agent.search.config_checks import config_problems, scratch_problem
from lares_agent.search.cores import background_llm_threads
from lares_agent.search.options import (
    Ablation,
    Analysis,
    Backend,
    BaselineReward,
    Device,
    Fitness,
    Inherit,
    Learner,
    Preset,
    RewardNormalisation,
    Screen,
    Selection,
    Setting,
    Shaping,
    TaskExamples,
)

if TYPE_CHECKING:
    from lares_agent.engine import EngineConfig

COMPLEXITY_LAMBDA = 0.001
"""The complexity penalty, lambda x complexity: it orders only slots equal in fitness and tie-break (engine/loop/
fitness.py), so any lambda > 0 lets the simpler reward win an exact tie; its size is only recorded (it was once
subtracted from the fitness: docs/RESULTS.md, "The complexity penalty's size"). The reference ranks without
complexity (lambda 0); the engine's config keeps that default."""
__all__ = [
    "COMPLEXITY_LAMBDA",
    "SearchConfig",
    "auto_setting",
    "engine_config",
    "llm_config",
    "missing_keys",
    "resolved_for_task",
]


# The keys every `config.json` any lares version wrote holds (the fields of the first SearchConfig that were never
# removed): a config without one of them is a fragment, not a run's configuration (`missing_keys`).
ALWAYS_SAVED: tuple[str, ...] = (
    "task", "setting", "learner", "backend", "ray_address", "population", "elites", "budget", "reward_period",
    "warmup_steps", "eval_every", "eval_episodes", "checkpoint_every", "horizon", "hidden", "batch_size", "utd",
    "anchor_weight", "complexity_lambda", "ts_window", "seed", "persona", "llm_backend", "llm_model", "base_url",
    "temperature", "max_llm_tokens", "retrieval", "max_minutes", "rewards_file", "replay_from", "preset",
)


def missing_keys(data: dict[str, Any]) -> list[str]:
    """The `ALWAYS_SAVED` keys `data` lacks. Loading such a config would give every absent setting its default
    silently (a different run, and with the default LLM backend the local model loaded and called)."""
    return [key for key in ALWAYS_SAVED if key not in data]


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Everything needed to start (and later resume) a run; saved verbatim as `config.json`.

    Valid exactly when the engine and LLM configs it maps onto are (`__post_init__` builds both): what
    `config.json` says is what runs. A field's `lares run` option is its name with dashes (`--reward-period`,
    `--retrieval/--no-retrieval`; tests/test_cli_options.py), but for `baseline_reward` (`lares baseline
    --reward`) and the `reward_*` fields (`lares baseline --reward-from`); the engine's names are in
    `engine_config`. `hidden`, `batch_size`, `utd` and `init_alpha` apply to whichever gradient learner runs
    (`hidden`: SAC's actor and critics, CrossQ's actor); `critic_hidden` sets CrossQ's critics (None: CrossQ's
    default, 2x256) and `critic_layer_norm` SAC's; `lr` the learner's Adam rate (None: the learner's default).
    """

    task: str = "reach-v3"
    setting: Setting = "auto"  # "auto" is resolved against the task (`resolved_for_task`)
    learner: Learner = "sac"  # the dataclass defaults are SAC-tuned; `presets.preset_config` picks the demo learner
    backend: Backend = "local"
    ray_address: str | None = None
    population: int = 3
    elites: int = 1
    budget: int = 15_000  # counted env steps (warm-up excluded, as in LaRes)
    reward_period: int = 5_000
    warmup_steps: int = 1_000
    eval_every: int = 1_500
    eval_episodes: int = 5
    eval_at_updates: bool = True  # EngineConfig.eval_at_updates: False leaves out an evaluation an update repeats
    # Fresh episodes on which the top learners by fitness are replayed before a policy is handed over (each round's
    # and the final one; EngineConfig.handover_episodes, engine/loop/handover.py); 0: the ranked-first one's
    handover_episodes: int = 20
    handover_rounds: bool = True  # EngineConfig.handover_rounds: each round's policy file chosen on them too
    checkpoint_every: int = 2_000
    horizon: int | None = None  # None: the task's own horizon
    hidden: tuple[int, ...] = (128, 128)
    critic_hidden: tuple[int, ...] | None = None  # CrossQ's critic widths (None: its default); SAC uses `hidden`
    batch_size: int = 128
    utd: float = 1.0  # learner updates per env step, per learner
    init_alpha: float = 0.1  # initial temperature; the reference's 1.0 needs ~1e5 steps to decay on small rewards
    lr: float | None = None  # Adam learning rate of the gradient learner; None: its own (SAC 3e-4, CrossQ 1e-3)
    obs_norm: bool = False  # running observation normalisation (SAC and CrossQ)
    critic_layer_norm: bool = False  # LayerNorm in SAC's critics (CrossQ's critics batch-renormalise already)
    anchor_weight: float = 1.0
    complexity_lambda: float = COMPLEXITY_LAMBDA
    fitness: Fitness = "auto"  # EngineConfig.fitness; "auto" is resolved against the task (`resolved_for_task`)
    inherit: Inherit = "on-success"  # EngineConfig.inherit: when replaced learners start from the best learner
    ts_window: int = 50
    es_population: int = 16  # ES perturbations per generation (--learner es)
    selection: Selection = "truncation"  # "tournament": ES only; "pareto": any learner
    tournament_size: int = 2
    torch_threads: int = 1  # 0: torch's default; 1 is as fast for these small networks and never oversubscribes
    cores: int = 0  # cores the run may use (0: every core this process may run on); a sweep gives its trials' share
    seed: int = 0
    persona: str = "neutral"
    llm_backend: LLMBackend = "local"
    llm_model: str | None = None
    base_url: str | None = None
    temperature: float = 0.4
    max_llm_tokens: int | None = None
    llm_timeout: float | None = None  # seconds one LLM attempt may take (local: of generation); None: the backend's
    # tokens a prompt plus its answer may take (LLMConfig.context; the local model loads with it); None: the local
    # model's own (4096), 2048 for a server (the default of llama.cpp's)
    llm_context: int | None = None
    retrieval: bool = True
    max_minutes: float | None = None
    rewards_file: str | None = None
    replay_from: str | None = None
    preset: Preset = "demo"
    ablations: tuple[Ablation, ...] = ()  # names from ABLATIONS; () is full LaRes
    # What the baseline learner trains on: the task's own reward, or its success indicator alone (the sparse
    # baseline of `lares sweep --methods sparse`).
    baseline_reward: BaselineReward = "human"
    # Or a found reward the baseline trains on alone (`lares baseline --reward-from/--reward-file`, `lares sweep
    # --methods retrain`; search/found_reward.py): (name, expression) pairs, its id in the records, its origin.
    reward_components: tuple[tuple[str, str], ...] = ()
    reward_id: str | None = None
    reward_source: str | None = None
    sync_llm: bool = False  # True: the learners wait for each reward round's LLM calls, as the reference (ES always)
    # LLM candidates asked per free slot. One: the numeric children already give the screen (`screen`) a surplus to
    # choose from, and each further LLM candidate costs an LLM call.
    candidates_per_slot: float = 1.0
    screen: Screen = "verifier"  # GraphLimits.screen: which valid candidates fill the slots (the verifier's best)
    numeric_children: int = 2  # numeric children of the elites per propose pass (constants perturbed)
    analysis: Analysis = "facts"  # GraphLimits.analysis: "facts" calls no LLM in analyse/critique
    task_examples: TaskExamples = "none"  # GraphLimits.task_examples: "none" shows no example answer (reference)
    designer_features: bool = False  # GraphLimits.designer_features: from scratch, also offer the designer's features
    # What the LLM writes (GraphLimits.shaping): "additive", the reward itself; "potential", a Phi of the state that
    # shapes the base reward (success from scratch, the task's own with init) as gamma*Phi(s') - Phi(s)
    # (engine/replay/potential.py, search/potentials.py; SAC/CrossQ only)
    shaping: Shaping = "additive"
    personas: tuple[str, ...] = ()  # the critic ensemble (--personas a,b); () : `persona` critiques alone
    reward_normalisation: RewardNormalisation = "affine"  # ReplayConfig.reward_normalisation (SAC/CrossQ only)
    reward_gain: float | None = None  # ReplayConfig.reward_gain (SAC/CrossQ only); never the sparse success reward
    learners_per_reward: int = 1  # ReplayConfig.learners_per_reward (SAC/CrossQ only)
    tensorboard: bool = False  # scalars in <run>/tensorboard/, mirrored from the records (runs/tensorboard.py)
    device: Device = "cpu"  # ReplayConfig.device (SAC/CrossQ only; option_checks refuses it for ES)

    def __post_init__(self) -> None:
        # every option's own check, each naming its flag (search/config_checks.py)
        problems = config_problems(self)
        if problems:
            raise ConfigError("; ".join(problems))
        # raises ConfigError on what only the engine checks (e.g. warmup_steps, horizon); "auto" is checked as
        # scratch, which the engine checks as it checks init (only the task decides between them; the controls
        # that need init were checked by config_problems)
        engine_config(self if self.setting != "auto" else dataclasses.replace(
            self, setting="scratch", ablations=tuple(a for a in self.ablations if not scratch_problem((a,)))))
        llm_config(self)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["hidden"] = list(self.hidden)
        data["critic_hidden"] = None if self.critic_hidden is None else list(self.critic_hidden)
        data["ablations"] = list(self.ablations)
        data["personas"] = list(self.personas)
        data["reward_components"] = [list(p) for p in self.reward_components]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchConfig:
        """A saved config; keys this version does not know (e.g. the removed `extra`) are ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        # Files written before the options were checked against the engine: `elites` 0 ran as 1, and the SAC
        # learner ignored `selection`; load them as what ran.
        if kwargs.get("elites") == 0:
            kwargs["elites"] = 1
        if kwargs.get("learner", "sac") != "es" and kwargs.get("selection") == "tournament":
            kwargs.pop("selection", None)
        # Runs from before the fitness rule was an option graded by success, then progress: resume them so.
        kwargs.setdefault("fitness", "success-then-progress")
        # Runs from before --inherit let every replaced learner inherit the best one: resume them so.
        kwargs.setdefault("inherit", "always")
        # Runs from before the hand-over on fresh episodes handed over the policy ranked first: resume them so.
        kwargs.setdefault("handover_episodes", 0)
        # Runs from before --task-examples was an option were shown answers for their own task: resume them so.
        kwargs.setdefault("task_examples", "own")
        # Runs from before --screen had a boolean --prescreen (the proxy's choice), else took proposal order: resume
        # them so.
        kwargs.setdefault("screen", "proxy" if data.get("prescreen") is True else "order")
        # Scratch runs from before --designer-features was an option were offered the designer's features: resume
        # them so (init offers them in any case).
        if kwargs.get("setting") == "scratch":
            kwargs.setdefault("designer_features", True)
        for key in ("hidden", "critic_hidden", "ablations", "personas"):
            if kwargs.get(key) is not None:
                kwargs[key] = tuple(kwargs[key])
        if kwargs.get("reward_components") is not None:
            kwargs["reward_components"] = tuple(tuple(p) for p in kwargs["reward_components"])
        return cls(**kwargs)

    def save(self, path: Path) -> None:
        """`config.json`: the format marker (`runs/marker.py`), then `to_json()`."""
        from lares_agent.runs import atomic_write_text, marked

        atomic_write_text(path, json.dumps(marked(self.to_json()), indent=2))


def engine_config(cfg: SearchConfig) -> EngineConfig:
    """The engine's view of a search config: the loop's settings and, in ``learners``, what learns (a
    ``ReplayConfig`` for SAC/CrossQ, an ``ESPopulationConfig`` for ES).

    The one place a search setting changes its name (search / CLI name -> engine name): `budget` ->
    `total_steps`, `eval_episodes` -> `eval_episodes` and `update_eval_episodes`, `sync_llm` -> not
    `propose_in_background` (ES always waits), `selection`, `tournament_size` -> `selection.method`,
    `selection.tournament_size`; SAC: `hidden`, `batch_size`, `utd`, `init_alpha`, `obs_norm`, `critic_layer_norm`
    -> `sac.hidden`, `sac.batch_size`, `sac.utd_ratio`, `sac.init_log_alpha` (its log), `sac.obs_norm`,
    `sac.critic_layer_norm`; CrossQ: `hidden` -> `crossq.actor_hidden`, `critic_hidden` -> `crossq.critic_hidden`
    (None: CrossQ's default), and the same for the others; `lr` -> `sac.lr` or `crossq.lr`; the ablations ->
    `relabel`, `thompson`, `scale_to_best`, `anchor_weight` 0; `device` -> `device` (SAC/CrossQ; ES computes in
    numpy); ES: `es_population` -> `es.population_size`.
    """
    from lares_agent.engine import (
        CrossQConfig,
        EngineConfig,
        ESConfig,
        ESPopulationConfig,
        ReplayConfig,
        SACConfig,
        SelectionConfig,
    )

    if cfg.setting == "auto":  # the engine runs one setting: the task decides ("auto" in `resolved_for_task`)
        from lares_agent.engine.tasks import get_task

        task = get_task(cfg.task)
        cfg = dataclasses.replace(cfg, setting=auto_setting(task.has_human_reward, task.human_components is not None))
    learners: ReplayConfig | ESPopulationConfig
    if cfg.learner == "es":
        learners = ESPopulationConfig(es=ESConfig(population_size=cfg.es_population), backend=cfg.backend,
                                      ray_address=cfg.ray_address)
    else:
        common: dict[str, Any] = dict(batch_size=cfg.batch_size, utd_ratio=cfg.utd, obs_norm=cfg.obs_norm,
                                      init_log_alpha=math.log(cfg.init_alpha))
        if cfg.lr is not None:
            common["lr"] = cfg.lr
        if cfg.learner == "crossq":
            critic = CrossQConfig.critic_hidden if cfg.critic_hidden is None else cfg.critic_hidden  # the default
            chosen: dict[str, Any] = {"crossq": CrossQConfig(actor_hidden=cfg.hidden, critic_hidden=critic, **common)}
        else:
            chosen = {"sac": SACConfig(hidden=cfg.hidden, critic_layer_norm=cfg.critic_layer_norm, **common)}
        learners = ReplayConfig(
            learner=cfg.learner, **chosen, learners_per_reward=cfg.learners_per_reward,
            warmup_steps=cfg.warmup_steps, ts_window=cfg.ts_window,
            buffer_capacity=max(cfg.budget + cfg.warmup_steps + 1_000, 10_000) if cfg.budget < 1_000_000 else 1_000_000,
            anchor_weight=0.0 if "no-constraint" in cfg.ablations else cfg.anchor_weight,
            scale_to_best="no-scaling" not in cfg.ablations, relabel="no-relabel" not in cfg.ablations,
            thompson="no-thompson" not in cfg.ablations, reward_normalisation=cfg.reward_normalisation,
            # a baseline on the task's own or the success reward takes it as it is (option_checks says so)
            reward_gain=None if cfg.setting == "baseline" and not cfg.reward_components else cfg.reward_gain,
            device=cfg.device,
        )
    return EngineConfig(
        setting=cfg.setting, population=cfg.population, elites=cfg.elites, total_steps=cfg.budget,
        reward_period=cfg.reward_period, eval_every=cfg.eval_every, eval_episodes=cfg.eval_episodes,
        update_eval_episodes=cfg.eval_episodes, handover_episodes=cfg.handover_episodes,
        handover_rounds=cfg.handover_rounds, eval_at_updates=cfg.eval_at_updates,
        checkpoint_every=cfg.checkpoint_every,
        complexity_lambda=cfg.complexity_lambda, fitness=cfg.fitness, inherit=cfg.inherit, horizon=cfg.horizon,
        seed=cfg.seed,
        selection=SelectionConfig(method=cfg.selection, tournament_size=cfg.tournament_size),
        propose_in_background=cfg.learner != "es" and not cfg.sync_llm, learners=learners,
    )


def auto_setting(has_human_reward: bool, has_expression: bool) -> Setting:
    """What `--setting auto` runs on a task: init where the task's own reward is written as an expression (the
    paper's main setting, and the common case of a user with a reward that almost works: the LLM is shown it),
    else scratch. A reward that is only code (`TaskSpec.human_components` None, e.g. examples/inverted_pendulum.py)
    cannot be shown, so its init round 0 would be the scratch prompt: auto says so and runs scratch
    (`option_checks.setting_notes`)."""
    return "init" if has_human_reward and has_expression else "scratch"


def resolved_for_task(cfg: SearchConfig, has_human_reward: bool, has_expression: bool = True) -> SearchConfig:
    """`cfg` with its "auto" choices resolved against the task. The setting: `auto_setting`.
    The fitness rule (`engine/setup/fitness.py::fitness_rule`): success-then-return for a task with a human reward,
    in both settings, else success-then-progress. `start_run` saves the result, so config.json says what ran; the
    engine resolves the fitness rule the same way for callers that build an `EngineConfig` themselves. A choice the
    task cannot run (init or success-then-return without a human reward) is refused in one line naming the option,
    before any run folder is made (`runner.check_start`).
    """
    from lares_agent.engine.setup.fitness import fitness_rule

    if cfg.fitness == "success-then-return" and not has_human_reward:
        raise ConfigError(f"--fitness success-then-return grades the task's own (human) reward, and task {cfg.task!r} "
                          "has none; use --fitness success-then-progress (or leave the default, auto)")
    if cfg.setting == "init" and not has_human_reward:
        raise ConfigError(f"--setting init refines the task's own (human) reward, and task {cfg.task!r} has none; "
                          "use --setting scratch (or leave the default, auto)")
    setting = cfg.setting if cfg.setting != "auto" else auto_setting(has_human_reward, has_expression)
    scratch = scratch_problem(cfg.ablations) if setting == "scratch" else None
    if scratch:
        raise ConfigError(f"task {cfg.task!r}: {scratch}")
    rule = fitness_rule(cfg.fitness, has_human_reward)
    if (setting, rule) == (cfg.setting, cfg.fitness):
        return cfg
    return dataclasses.replace(cfg, setting=setting, fitness=rule)


def llm_config(cfg: SearchConfig) -> LLMConfig:
    """The LLM client's view: `llm_backend` -> `backend`, `llm_model` -> `model`, `max_llm_tokens` ->
    `max_total_tokens`, `llm_timeout` -> `timeout_s`, `llm_context` -> `context` (and the local model's `n_ctx`)."""
    local = cfg.llm_context is not None and cfg.llm_backend == "local"
    return LLMConfig(backend=cfg.llm_backend, model=cfg.llm_model, base_url=cfg.base_url,
                     temperature=cfg.temperature, max_total_tokens=cfg.max_llm_tokens, seed=cfg.seed,
                     n_threads=background_llm_threads(cfg), timeout_s=cfg.llm_timeout, context=cfg.llm_context,
                     n_ctx=cfg.llm_context if local and cfg.llm_context else LLMConfig.n_ctx)
