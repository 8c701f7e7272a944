"""One name per setting from the command line to the config: `lares run`'s options are `SearchConfig`'s fields
(`--reward-period` is `reward_period`), `preset_config` takes field names only, and `lares sweep --set` reads the
same names."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import typer.main

from lares_agent.cli import run_cmd
from lares_agent.cli.app import app
from lares_agent.errors import ConfigError
from lares_agent.search.config import SearchConfig
from lares_agent.search.found_reward import REWARD_KEYS
from lares_agent.search.presets import FIELDS, preset_config
from lares_agent.search.sweep_spec import parse_sets

# Fields that are deliberately not `lares run` options, and why.
FIELDS_NOT_OPTIONS = {
    "baseline_reward": "what a baseline trains on: `lares baseline --reward` and `lares sweep --methods sparse`",
    "reward_components": "a found reward a baseline trains on: `lares baseline --reward-from/--reward-file`",
    "reward_id": "the found reward's id: `lares baseline --reward-from/--reward-file`",
    "reward_source": "where the found reward came from: `lares baseline --reward-from/--reward-file`",
}


def _run_options() -> dict[str, Any]:
    """`lares run`'s click options by parameter name (the typer function's argument, the field's name)."""
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    return {p.name: p for p in command.params}


def _dashed(name: str) -> str:
    return "--" + name.replace("_", "-")


def test_every_field_is_a_run_option_of_the_same_name_and_back() -> None:
    options = _run_options()
    shown = {name for name, p in options.items() if not p.hidden}
    assert {f.name for f in dataclasses.fields(SearchConfig)} == FIELDS
    missing = FIELDS - shown - set(FIELDS_NOT_OPTIONS)
    assert not missing, f"SearchConfig fields with no `lares run` option: {sorted(missing)}"
    strays = shown - FIELDS - set(run_cmd.NOT_FIELDS)
    assert not strays, f"`lares run` options that are no SearchConfig field: {sorted(strays)}"
    assert not set(FIELDS_NOT_OPTIONS) & shown and set(FIELDS_NOT_OPTIONS) <= FIELDS
    assert not set(run_cmd.NOT_FIELDS) & FIELDS
    for name in shown & FIELDS:
        assert _dashed(name) in options[name].opts, (name, options[name].opts)


def test_the_old_option_names_are_hidden_and_point_at_a_field_option() -> None:
    options = _run_options()
    assert {name for name, p in options.items() if p.hidden} == set(run_cmd.OLD_NAMES)
    for old, field in run_cmd.OLD_NAMES.items():
        assert options[old].opts == [_dashed(old)] and field in FIELDS and not options[field].hidden
        assert options[field].default is None  # so that an old name given alone is not overridden


def test_a_run_option_default_is_none_or_the_fields_own() -> None:
    """The CLI never changes a config default behind the preset's back: unset options pass None."""
    defaults = {f.name: f.default for f in dataclasses.fields(SearchConfig)}
    options = _run_options()
    for name in FIELDS & set(options):
        assert options[name].default in (None, defaults[name]), name


def _config(args: list[str]) -> SearchConfig:
    """The config `lares run ARGS` starts (the parsed options through `run_overrides`, no run)."""
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    params = command.make_context("run", args).params
    return preset_config(params["preset"], run_cmd.run_overrides(params))


def test_run_options_reach_the_config_under_their_field_names(tmp_path: Path) -> None:
    cfg = _config(["--learner", "crossq", "--hidden", "64x64", "--critic-hidden", "32,32", "--warmup-steps", "300",
                   "--ablations", "no-reflection,no-retrieval", "--personas", "neutral,strict-coach",
                   "--no-retrieval", "--sync-llm", "--llm-backend", "openai", "--llm-model", "m",
                   "--rewards-file", str(tmp_path / "r.json"), "--temperature", "0.2", "--torch-threads", "2"])
    assert (cfg.learner, cfg.hidden, cfg.critic_hidden, cfg.warmup_steps) == ("crossq", (64, 64), (32, 32), 300)
    assert cfg.ablations == ("no-reflection", "no-retrieval") and cfg.personas == ("neutral", "strict-coach")
    assert (cfg.retrieval, cfg.sync_llm, cfg.llm_backend, cfg.llm_model) == (False, True, "openai", "m")
    assert cfg.rewards_file == str(tmp_path / "r.json") and (cfg.temperature, cfg.torch_threads) == (0.2, 2)
    assert _config([]) == preset_config("demo")  # no option: the preset alone


def test_the_old_names_still_work_but_not_beside_the_new_ones() -> None:
    cfg = _config(["--llm", "openai", "--model", "m", "--rewards", "r.json"])
    assert (cfg.llm_backend, cfg.llm_model, Path(cfg.rewards_file or "").name) == ("openai", "m", "r.json")
    with pytest.raises(ConfigError, match="--llm is the old name of --llm-backend"):
        _config(["--llm", "openai", "--llm-backend", "local"])


def test_a_bad_value_of_a_text_option_names_the_option() -> None:
    with pytest.raises(ConfigError, match=r"^--hidden 12a: not a valid value"):
        _config(["--hidden", "12a"])


def test_preset_config_takes_field_names_only() -> None:
    assert preset_config("demo", {"budget": 900, "lr": None}).budget == 900  # None: the preset's value
    with pytest.raises(ConfigError, match="unknown SearchConfig field 'reward_perid'; did you mean reward_period"):
        preset_config("demo", {"reward_perid": 100})
    with pytest.raises(ConfigError, match="preset_config's first argument"):
        preset_config("demo", {"preset": "paper"})


def _sample(hint: Any) -> str:
    """A value of the field's type as text (`lares sweep --set` checks types; ranges and choices come later)."""
    union = isinstance(hint, types.UnionType)
    kind = next(k for k in (typing.get_args(hint) if union else (hint,)) if k is not type(None))
    if typing.get_origin(kind) is tuple:
        return "8x8" if typing.get_args(kind)[0] is int else "a,b"
    return {int: "1", float: "0.5", bool: "true"}.get(kind, "text")


def test_sweep_set_takes_the_run_option_names() -> None:
    """`lares sweep --set NAME=VALUE`: NAME is a `lares run` option without its dashes (dashes or underscores)."""
    hints = typing.get_type_hints(SearchConfig)
    grid = {"task", "seed", "preset"}  # the sweep's own --tasks, --seeds and --preset
    found = set(REWARD_KEYS)  # read from --set reward_from=RUN or reward_file=FILE (tests/test_reward_from.py)
    for name in FIELDS - grid - found:
        assert set(parse_sets([f"{_dashed(name)[2:]}={_sample(hints[name])}"])) == {name}
    for name in grid:
        with pytest.raises(ConfigError, match="give it with"):
            parse_sets([f"{name}=x"])
    for name in found:
        with pytest.raises(ConfigError, match="reward_from=RUN"):
            parse_sets([f"{name}=x"])
