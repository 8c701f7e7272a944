"""The config tree: one error type, choices from one Literal each, SearchConfig valid exactly when the engine
config it maps onto is, and config.json files of earlier versions still load as what they ran."""

from __future__ import annotations

import json
from typing import Any, get_args, get_type_hints

import pytest

from lares_agent.engine.es.strategy import ESConfig
from lares_agent.engine.learners.crossq import CrossQConfig
from lares_agent.engine.learners.sac import SACConfig
from lares_agent.engine.setup import config as engine_cfg
from lares_agent.engine.setup.selection import SelectionConfig
from lares_agent.errors import ConfigError, LaresError
from lares_agent.graphs.context import SCREEN_MODES, GraphLimits
from lares_agent.llm.config import LLM_BACKENDS, LLMConfig
from lares_agent.search import options as search_options
from lares_agent.search import presets
from lares_agent.search.config import SearchConfig, engine_config, llm_config
from lares_agent.search.presets import preset_config


@pytest.mark.parametrize(
    "make",
    [
        lambda: SearchConfig(population=0),
        lambda: engine_cfg.ReplayConfig(warmup_steps=1),
        lambda: engine_cfg.ESPopulationConfig(backend="spark"),
        lambda: SACConfig(utd_ratio=0),
        lambda: ESConfig(population_size=3),
        lambda: SelectionConfig(tournament_size=0),
        lambda: GraphLimits(per_call=0),
        lambda: LLMConfig(max_total_tokens=0),
        lambda: LLMConfig(backend="bogus"),  # type: ignore[arg-type]
        lambda: preset_config("huge"),
    ],
)
def test_every_config_refuses_with_the_one_config_error(make: Any) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    assert isinstance(info.value, LaresError) and isinstance(info.value, ValueError)
    assert "\n" not in str(info.value) and str(info.value).strip()


def test_choices_come_from_one_literal_each_and_match_the_engine() -> None:
    assert search_options.SETTINGS == get_args(search_options.Setting) == ("auto", *engine_cfg.SETTINGS)
    assert search_options.BACKENDS == get_args(search_options.Backend) == engine_cfg.BACKENDS
    assert get_args(get_type_hints(SelectionConfig)["method"]) == search_options.SELECTIONS
    assert get_args(search_options.Learner) == search_options.LEARNERS
    assert tuple(search_options.ABLATIONS) == get_args(search_options.Ablation)
    assert tuple(presets.PRESETS) == search_options.PRESET_NAMES == get_args(search_options.Preset)
    assert get_args(get_type_hints(LLMConfig)["backend"]) == LLM_BACKENDS
    assert search_options.SCREENS == SCREEN_MODES == get_args(get_type_hints(GraphLimits)["screen"])
    hints = get_type_hints(SearchConfig)
    for name, choices in [("setting", search_options.SETTINGS), ("learner", search_options.LEARNERS),
                          ("backend", search_options.BACKENDS), ("selection", search_options.SELECTIONS),
                          ("preset", search_options.PRESET_NAMES), ("llm_backend", LLM_BACKENDS),
                          ("screen", search_options.SCREENS)]:
        assert get_args(hints[name]) == choices, name


@pytest.mark.parametrize("learner", ["sac", "crossq", "es"])
@pytest.mark.parametrize("setting", ["scratch", "init"])
def test_search_config_accepts_exactly_the_population_and_elites_the_engine_accepts(learner: str,
                                                                                   setting: str) -> None:
    learners = engine_cfg.ESPopulationConfig() if learner == "es" else engine_cfg.ReplayConfig()
    for population in range(4):
        for elites in range(-1, 6):
            try:
                engine_cfg.EngineConfig(setting=setting, population=population, elites=elites, learners=learners)
                engine_ok = True
            except ConfigError:
                engine_ok = False
            try:
                cfg = SearchConfig(learner=learner, setting=setting, population=population, elites=elites)  # type: ignore[arg-type]
            except ConfigError:
                assert not engine_ok, (population, elites)
                continue
            assert engine_ok, (population, elites)
            run = engine_config(cfg)
            assert (run.population, run.elites) == (cfg.population, cfg.elites)  # stored is what runs


def test_zero_elites_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match=r"--elites must be between 1 and --population \(3\), not 0: .*inherit"):
        SearchConfig(elites=0)


@pytest.mark.parametrize("learner", ["sac", "crossq"])
def test_options_that_do_not_apply_to_the_gradient_learners_are_refused(learner: str) -> None:
    with pytest.raises(ConfigError, match="--selection tournament applies to the ES learner"):
        SearchConfig(selection="tournament", learner=learner)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--backend ray runs the ES learner"):
        SearchConfig(backend="ray", learner=learner)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--critic-hidden sets CrossQ's critics"):
        SearchConfig(critic_hidden=(64,), learner="sac")
    with pytest.raises(ConfigError, match="--critic-layer-norm applies to SAC's critics"):
        SearchConfig(critic_layer_norm=True, learner="crossq")
    es_run = engine_config(SearchConfig(learner="es", selection="tournament", tournament_size=3))
    assert isinstance(es_run.learners, engine_cfg.ESPopulationConfig)
    assert (es_run.selection.method, es_run.selection.tournament_size) == ("tournament", 3)


def test_engine_only_ranges_are_checked_when_the_search_config_is_made() -> None:
    with pytest.raises(ConfigError, match="warmup_steps must be >= 2"):
        SearchConfig(warmup_steps=1)
    with pytest.raises(ConfigError, match="population_size must be an even number"):
        SearchConfig(learner="es", es_population=5)
    with pytest.raises(ConfigError, match="horizon must be >= 1"):
        SearchConfig(horizon=0)


def test_the_mapping_renames_once_for_both_learners() -> None:
    cfg = SearchConfig(population=4, elites=2, budget=1_234, reward_period=600, eval_episodes=3, horizon=40,
                       complexity_lambda=0.5, seed=9, es_population=8, hidden=(16,), utd=0.5, init_alpha=1.0)
    sac = engine_config(cfg)
    es = engine_config(SearchConfig.from_json({**cfg.to_json(), "learner": "es"}))
    for run in (sac, es):
        assert (run.population, run.elites, run.total_steps, run.eval_episodes, run.update_eval_episodes,
                run.horizon, run.complexity_lambda, run.seed) == (4, 2, 1_234, 3, 3, 40, 0.5, 9)
    assert isinstance(sac.learners, engine_cfg.ReplayConfig) and isinstance(es.learners, engine_cfg.ESPopulationConfig)
    assert sac.reward_period == 600 and es.reward_period == 600 and es.learners.es.population_size == 8
    replay = sac.learners
    assert replay.sac.hidden == (16,) and replay.sac.utd_ratio == 0.5 and replay.sac.init_log_alpha == 0.0
    assert sac.learner == "sac" and replay.crossq == CrossQConfig()  # the other learner's config stays default
    crossq = engine_config(SearchConfig.from_json({**cfg.to_json(), "learner": "crossq", "batch_size": 64,
                                                   "obs_norm": True}))
    replay = crossq.learners
    assert isinstance(replay, engine_cfg.ReplayConfig) and crossq.learner == "crossq"
    assert (replay.crossq.actor_hidden, replay.crossq.critic_hidden) == ((16,), CrossQConfig().critic_hidden)
    assert (replay.crossq.batch_size, replay.crossq.utd_ratio, replay.crossq.init_log_alpha) == (64, 0.5, 0.0)
    assert replay.crossq.obs_norm and replay.sac == SACConfig() and replay.learner_config is replay.crossq
    wide = SearchConfig(learner="crossq", critic_hidden=(64, 64, 64))
    assert engine_config(wide).learners.crossq.critic_hidden == (64, 64, 64)  # type: ignore[union-attr]
    assert SearchConfig.from_json(json.loads(json.dumps(wide.to_json()))) == wide
    llm = llm_config(SearchConfig(llm_backend="openai", llm_model="m", max_llm_tokens=100, temperature=0.2))
    assert (llm.backend, llm.model, llm.max_total_tokens, llm.temperature) == ("openai", "m", 100, 0.2)


def test_config_json_of_earlier_versions_loads_as_what_it_ran() -> None:
    old = {**SearchConfig().to_json(), "extra": {"note": "dead field"}, "elites": 0, "selection": "tournament"}
    cfg = SearchConfig.from_json(json.loads(json.dumps(old)))
    assert not hasattr(cfg, "extra")
    assert cfg.elites == 1 and cfg.selection == "truncation"  # what `max(1, elites)` and SAC ran
    baseline = SearchConfig.from_json({**old, "setting": "baseline", "population": 1})
    assert baseline.elites == 1 and engine_config(baseline).num_slots == 1
    es = SearchConfig.from_json({**old, "learner": "es", "elites": 2})
    assert es.selection == "tournament"  # ES did run tournament selection
    assert SearchConfig.from_json(cfg.to_json()) == cfg


def test_presets_name_their_learner() -> None:
    # The demo's learner is one constant (switched after measurement, docs/RESULTS.md); the paper stays SAC.
    assert preset_config("demo").learner == presets.DEMO_LEARNER
    for learner in ("crossq", "sac"):  # the demo values each learner gets: the defaults unless measured otherwise
        cfg = preset_config("demo", {"learner": learner})
        expected = {**{"batch_size": SearchConfig().batch_size, "init_alpha": SearchConfig().init_alpha},
                    **presets.DEMO_LEARNER_VALUES.get(learner, {})}
        assert (cfg.batch_size, cfg.init_alpha) == (expected["batch_size"], expected["init_alpha"])
    paper = preset_config("paper")
    assert paper.learner == "sac" and engine_config(paper).learners.sac.hidden == (256, 256, 256)  # type: ignore[union-attr]
    assert preset_config("paper", {"learner": "crossq"}).learner == "crossq"  # an option still overrides the preset


@pytest.mark.parametrize(("task", "window"), [("window-close-v3", 500), ("button-press-v3", 50),
                                              ("button-press-topdown-v3", 500), ("coffee-pull-v3", 20),
                                              ("soccer-v3", 100), ("reach-v3", 1000), ("HalfCheetah-v5", 1000)])
def test_paper_preset_takes_the_reference_thompson_window_of_each_task(task: str, window: int) -> None:
    cfg = preset_config("paper", {"task": task})
    assert cfg.ts_window == window and engine_config(cfg).learners.ts_window == window  # type: ignore[union-attr]
    assert preset_config("paper", {"task": task, "ts_window": 7}).ts_window == 7  # an explicit value still wins


def test_paper_preset_keeps_each_tasks_horizon_and_the_reference_values() -> None:
    from lares_agent.engine.tasks import get_task

    cheetah = preset_config("paper", {"task": "HalfCheetah-v5"})
    assert cheetah.horizon is None and engine_config(cheetah).horizon is None  # the task's own: 1000 steps
    assert get_task("HalfCheetah-v5").horizon == 1000 and get_task("push-v3").horizon == 150
    paper = engine_config(preset_config("paper", {"task": "push-v3"}))
    sac = paper.learners
    assert sac.sac.lr == 3e-4 and sac.sac.init_log_alpha == 0.0 and sac.sac.batch_size == 128  # type: ignore[union-attr]
    assert (paper.population, paper.elites, paper.total_steps, paper.reward_period) == (5, 3, 1_000_000, 200_000)
    assert (sac.warmup_steps, paper.eval_every, paper.eval_episodes) == (10_000, 10_000, 20)  # type: ignore[union-attr]
    assert preset_config("paper").temperature == 1.0


def test_lr_reaches_the_learner_and_is_checked() -> None:
    assert engine_config(SearchConfig(lr=1e-3)).learners.sac.lr == 1e-3  # type: ignore[union-attr]
    assert engine_config(SearchConfig(learner="crossq", lr=5e-4)).learners.crossq.lr == 5e-4  # type: ignore[union-attr]
    assert engine_config(SearchConfig()).learners.sac.lr == 3e-4  # type: ignore[union-attr]  # the learner's default
    with pytest.raises(ConfigError, match="--lr must be a positive number"):
        SearchConfig(lr=0.0)
    with pytest.raises(ConfigError, match="--lr sets the Adam rate"):
        SearchConfig(learner="es", lr=1e-3)
    assert SearchConfig.from_json(SearchConfig(lr=2e-4).to_json()).lr == 2e-4


def test_the_llm_time_limit_reaches_the_client_and_a_bad_one_is_refused() -> None:
    assert llm_config(SearchConfig(llm_timeout=600.0)).call_timeout_s == 600.0
    assert llm_config(SearchConfig()).call_timeout_s == 120.0  # the local model's default
    with pytest.raises(ConfigError, match="--llm-timeout must be a positive number"):
        SearchConfig(llm_timeout=0.0)


def test_a_run_saved_before_screen_resumes_with_the_screen_it_had() -> None:
    """The verifier screens by default now; a run saved before --screen resumes with its proxy or proposal order."""
    assert SearchConfig().screen == "verifier" and SearchConfig().to_json()["screen"] == "verifier"
    saved = SearchConfig().to_json()
    saved.pop("screen")
    assert SearchConfig.from_json({**saved, "prescreen": True}).screen == "proxy"
    assert SearchConfig.from_json({**saved, "prescreen": False}).screen == "order"
    assert SearchConfig.from_json(saved).screen == "order"
    with pytest.raises(ConfigError, match="--screen"):
        SearchConfig(screen="best")  # type: ignore[arg-type]
