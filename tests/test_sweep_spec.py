"""`lares sweep`'s grid and options, checked before any folder or Ray exists (search/sweep_spec.py, cli)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.errors import ConfigError
from lares_agent.search.sweep_spec import SweepSpec, parse_sets


def test_set_values_follow_the_field_types(tmp_path: Path) -> None:
    got = parse_sets(["budget=20_000", "hidden=64x64", "obs-norm=true", "lr=none", "ablations=no-relabel,no-thompson",
                      "rewards_file=r.json", "utd=0.5"], base=tmp_path)
    assert got == {"budget": 20000, "hidden": (64, 64), "obs_norm": True, "lr": None,
                   "ablations": ("no-relabel", "no-thompson"), "rewards_file": str(tmp_path / "r.json"), "utd": 0.5}


@pytest.mark.parametrize(("pair", "match"), [
    ("budgt=100", "did you mean budget"), ("budget", "KEY=VALUE"), ("budget=ten", "not a valid value"),
    ("task=reach-v3", "--tasks"), ("seed=3", "--seeds"),
])
def test_bad_set_pairs_are_one_line_errors(pair: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_sets([pair])


def test_methods_fix_their_settings_and_share_the_options() -> None:
    spec = SweepSpec(tasks=("reach-v3",), seeds=(0, 1), methods=("lares", "human", "sparse"),
                     options={"budget": 900, "population": 2})
    configs = {t.id: spec.config(t) for t in spec.trials()}
    assert list(configs) == ["reach-v3-lares-s0", "reach-v3-human-s0", "reach-v3-sparse-s0", "reach-v3-lares-s1",
                             "reach-v3-human-s1", "reach-v3-sparse-s1"]
    assert configs["reach-v3-lares-s1"].setting == "auto" and configs["reach-v3-lares-s1"].population == 2
    human, sparse = configs["reach-v3-human-s0"], configs["reach-v3-sparse-s0"]
    assert (human.setting, human.population, human.baseline_reward) == ("baseline", 1, "human")
    assert (sparse.setting, sparse.baseline_reward, sparse.budget) == ("baseline", "success", 900)
    assert SweepSpec.from_json(spec.to_json()) == spec


def test_an_ablation_is_a_method_the_search_runs_without_that_part() -> None:
    spec = SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares", "no-relabel", "no-retrieval"),
                     options={"budget": 900})
    configs = {t.id: spec.config(t) for t in spec.trials()}
    assert configs["reach-v3-lares-s0"].ablations == ()
    assert configs["reach-v3-no-relabel-s0"].ablations == ("no-relabel",)
    assert configs["reach-v3-no-retrieval-s0"].setting == "auto"
    assert configs["reach-v3-no-retrieval-s0"].ablations == ("no-retrieval",)
    assert SweepSpec.from_json(spec.to_json()) == spec


def test_the_controls_run_beside_the_search_on_the_same_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    """lares-init, no-llm, random-edit and human on one grid: the two controls are ablations of the search that
    need no LLM backend (only the search's trials check it), and an LLM option none of them reads is refused."""
    import lares_agent.search.runner as runner

    asked: list[str] = []
    monkeypatch.setattr(runner, "check_llm", lambda cfg: asked.append(",".join(cfg.ablations) or "lares"))
    methods = ("lares-init", "no-llm", "random-edit", "human")
    spec = SweepSpec(tasks=("reach-v3",), seeds=(0, 1), methods=methods, options={"budget": 900})  # type: ignore[arg-type]
    configs = spec.check()
    assert [t.method for t in spec.trials()] == list(methods) * 2
    assert configs["reach-v3-random-edit-s1"].ablations == ("random-edit",)
    assert configs["reach-v3-random-edit-s1"].seed == configs["reach-v3-lares-init-s1"].seed == 1
    assert asked == ["lares", "lares"]  # the controls and the learner alone never check an LLM
    assert SweepSpec.from_json(spec.to_json()) == spec
    both = SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=methods, options={"temperature": 0.9})  # type: ignore[arg-type]
    assert set(both.check()) == {f"reach-v3-{m}-s0" for m in methods}  # lares-init reads it
    controls = SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("no-llm", "random-edit"),
                         options={"temperature": 0.9})
    with pytest.raises(ConfigError, match=r"--set temperature: --temperature 0\.9 is for the LLM"):
        controls.check()


def test_the_two_settings_are_two_arms_of_one_sweep() -> None:
    spec = SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares-init", "lares-scratch", "human"),
                     options={"budget": 900, "reward_period": 300})
    configs = {t.id: spec.config(t) for t in spec.trials()}
    init, scratch = configs["reach-v3-lares-init-s0"], configs["reach-v3-lares-scratch-s0"]
    assert (init.setting, scratch.setting, configs["reach-v3-human-s0"].setting) == ("init", "scratch", "baseline")
    assert init.reward_period == scratch.reward_period == 300
    with pytest.raises(ConfigError, match="lares-scratch fix the setting"):
        SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares", "lares-scratch"), options={"setting": "init"})


def test_the_potential_arm_writes_a_potential_from_scratch_beside_the_additive_arm() -> None:
    spec = SweepSpec(tasks=("door-close-v3",), seeds=(0,), methods=("lares-scratch", "lares-potential", "sparse"),
                     options={"budget": 900, "reward_period": 300})
    configs = {t.id: spec.config(t) for t in spec.trials()}
    additive, potential = configs["door-close-v3-lares-scratch-s0"], configs["door-close-v3-lares-potential-s0"]
    assert (additive.setting, additive.shaping) == ("scratch", "additive")
    assert (potential.setting, potential.shaping) == ("scratch", "potential")
    assert set(spec.check()) == set(configs)  # the potential arm passes `lares run`'s own checks
    with pytest.raises(ConfigError, match="lares-potential fix the shaping"):
        SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares-potential",), options={"shaping": "additive"})


def test_bad_grids_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown method"):
        SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares", "random"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="twice"):
        SweepSpec(tasks=("reach-v3", "reach-v3"), seeds=(0,))


def test_a_bad_option_stops_the_sweep_before_its_folder_exists(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    result = CliRunner().invoke(app, ["sweep", "--tasks", "reach-v3", "--methods", "human", "--set", "budget=-5",
                                      "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "budget" in result.output and not out.exists()
    result = CliRunner().invoke(app, ["sweep", "--tasks", "reach-v3,no-such-task", "--methods", "human",
                                      "--out", str(out)])
    assert result.exit_code != 0 and "no-such-task" in result.output and not out.exists()


def test_an_option_no_trial_reads_is_refused_and_one_some_trial_reads_is_not(tmp_path: Path) -> None:
    """`--set ray_address=...` without --backend ray is read by no trial: refused before the folder exists, as
    `lares run` refuses it; an option one method reads and another ignores is the sweep's to set."""
    out = tmp_path / "sweep"
    result = CliRunner().invoke(app, ["sweep", "--tasks", "reach-v3", "--methods", "lares,human", "--set",
                                      "ray_address=auto", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "--set ray_address: --ray-address applies to --backend ray" in " ".join(result.output.split())
    assert not out.exists()
    (tmp_path / "record").mkdir()
    (tmp_path / "record" / "llm_calls.jsonl").write_text("")
    replay = {"llm_backend": "replay", "replay_from": str(tmp_path / "record"), "analysis": "llm"}
    spec = SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares", "no-reflection"),
                     options={**replay, "personas": ("neutral", "strict-coach")})  # no-reflection has no critique
    assert set(spec.check()) == {"reach-v3-lares-s0", "reach-v3-no-reflection-s0"}
    alone = SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("no-reflection",),
                      options={**replay, "personas": ("neutral", "strict-coach")})
    with pytest.raises(ConfigError, match="--set personas"):
        alone.check()


def test_without_ray_the_sweep_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real = builtins.__import__

    def no_ray(name: str, *args: object, **kwargs: object) -> object:
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_ray)
    result = CliRunner().invoke(app, ["sweep", "--tasks", "reach-v3", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "pip install 'lares-agent[ray]'" in result.output and len(result.output.strip().splitlines()) == 1
