"""The sweep table's maths and sections on made-up curves (report/sweep_stats.py, report/sweep_table.py), and an
experiment's targets read from its sweep folder (report/sweep_compare.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lares_agent.errors import LaresError
from lares_agent.report.sweep_compare import Target, load_targets
from lares_agent.report.sweep_stats import bootstrap_interval, mean_std, steps_to_threshold, success_auc
from lares_agent.report.sweep_table import TrialCurve
from lares_agent.runs.sweep_layout import SweepLayout

# The sample-efficiency study's targets, as its folder states them: at least human's final success and area,
# above sparse's final success.
STUDY_TARGETS = Path(__file__).resolve().parents[1] / "experiments" / "sample_efficiency" / "targets.json"
TARGETS = (Target("human", "final_success", False), Target("human", "auc", False),
           Target("sparse", "final_success", True))


def test_bootstrap_interval_contains_the_mean_and_narrows_with_n() -> None:
    rng = np.random.default_rng(0)
    widths = []
    for n in (5, 50, 500):
        values = rng.uniform(0, 1, n)
        low, high = bootstrap_interval(values.tolist(), np.random.default_rng(1))
        assert low <= values.mean() <= high
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2] > 0


def test_bootstrap_interval_is_reproducible_and_degenerate_cases() -> None:
    values = [0.1, 0.5, 0.9, 0.3]
    assert bootstrap_interval(values, np.random.default_rng(7)) == bootstrap_interval(values, np.random.default_rng(7))
    assert bootstrap_interval([0.4], np.random.default_rng(0)) == (0.4, 0.4)
    assert all(math.isnan(v) for v in bootstrap_interval([], np.random.default_rng(0)))
    with pytest.raises(ValueError):
        bootstrap_interval(values, np.random.default_rng(0), level=1.5)


def test_steps_to_threshold_is_the_first_evaluation_at_the_level() -> None:
    steps = [1000, 2000, 3000, 4000, 5000]
    success = [0.0, 0.4, 0.5, 0.3, 0.95]
    assert steps_to_threshold(steps, success, 0.5) == 3000  # reached exactly at 0.5, not after the dip
    assert steps_to_threshold(steps, success, 0.9) == 5000
    assert steps_to_threshold(steps, success, 0.99) is None


def test_area_under_the_curve_is_normalised_by_steps() -> None:
    # a ramp 0 -> 1 over 0..1000, then 1 until 2000: area 500 + 1000 over 2000 steps
    assert success_auc([0, 1000, 2000], [0.0, 1.0, 1.0]) == pytest.approx(0.75)
    assert success_auc([0, 500, 2000], [1.0, 1.0, 1.0]) == pytest.approx(1.0)
    # uneven spacing counts each stretch by its steps: 0 for 100 steps, then 1 for 900
    assert success_auc([0, 100, 101, 1000], [0.0, 0.0, 1.0, 1.0]) == pytest.approx((0.5 + 899) / 1000)
    assert success_auc([300], [0.6]) == pytest.approx(0.6)
    assert math.isnan(success_auc([], []))


def test_mean_std_skips_missing_values() -> None:
    assert mean_std([1.0, 3.0, float("nan")]) == (2.0, 1.0)
    assert all(math.isnan(v) for v in mean_std([]))


def test_shortfalls_name_the_comparisons_lares_lost() -> None:
    from lares_agent.report.sweep_why import shortfalls, why_markdown

    def row(task: str, method: str, final: float, auc: float) -> dict[str, object]:
        return {"task": task, "method": method, "final_success_mean": final, "auc_mean": auc}

    rows = [row("a", "lares", 0.9, 0.5), row("a", "human", 0.8, 0.6), row("a", "sparse", 0.9, 0.1),
            row("b", "lares", 1.0, 0.7), row("b", "human", 1.0, 0.7), row("b", "sparse", 0.0, 0.0),
            row("c", "human", 1.0, 0.9)]
    lost = shortfalls(rows, TARGETS)
    assert lost == {("a", "lares"): ["area under the success curve 0.50 below human's 0.60",
                                     "final success 0.90 not above sparse's 0.90"]}  # b ties human: not a loss
    assert why_markdown(rows[3:], {}, TARGETS) == ""
    assert "### a, lares: area under the success curve 0.50 below human's 0.60" in why_markdown(rows, {}, TARGETS)
    assert shortfalls(rows, ()) == {} and why_markdown(rows, {}, ()) == ""  # no targets: nothing to fall short of


def test_each_arm_of_a_sweep_is_held_to_its_own_targets() -> None:
    from lares_agent.report.sweep_why import shortfalls

    def row(method: str, final: float) -> dict[str, object]:
        return {"task": "a", "method": method, "final_success_mean": final, "auc_mean": final}

    rows = [row("lares-init", 0.7), row("lares-scratch", 0.5), row("human", 0.6), row("sparse", 0.5)]
    targets = (Target("human", "final_success", False, "lares-init"), Target("sparse", "final_success", True,
                                                                            "lares-scratch"))
    assert shortfalls(rows, targets) == {("a", "lares-scratch"): ["final success 0.50 not above sparse's 0.50"]}


def test_progress_and_code_sections_of_a_partial_sweep() -> None:
    from pathlib import Path

    from lares_agent.report.sweep_table import TrialCurve, code_markdown, progress_markdown

    def curve(name: str, finished: bool, steps: tuple[int, ...], code: tuple[str, ...]) -> TrialCurve:
        return TrialCurve("t", "human", 0, finished, steps, tuple(0.0 for _ in steps), 0.0, 1.0, {}, 0,
                          Path(name), code, 50_000)

    done = curve("t-human-s0", True, (25_000, 50_000), ("aaaaaaa",))
    going = curve("t-human-s1", False, (25_000,), ("aaaaaaa", "bbbbbbb"))
    text = progress_markdown([done, going], ["t-human-s2"])
    assert "1 of 3 trials finished." in text and "t-human-s1 (25,000 of 50,000 steps)" in text
    assert "Not started: 1." in text and progress_markdown([done], []) == ""
    code = code_markdown([done, going])
    assert "- `aaaaaaa`: t-human-s0" in code
    assert "- `aaaaaaa` then `bbbbbbb` (resumed on other code): t-human-s1" in code


def test_a_method_keeps_its_colour_in_every_panel() -> None:
    from pathlib import Path

    from lares_agent.report.sweep_table import TrialCurve, success_figure

    def curve(task: str, method: str) -> TrialCurve:
        return TrialCurve(task, method, 0, True, (1, 2), (0.0, 1.0), 0.0, 1.0, {}, 0, Path(f"{task}-{method}"))

    # Task b has no lares trial: its first method is human, which must not take lares' colour.
    fig = success_figure([curve("a", "lares"), curve("a", "human"), curve("b", "human"), curve("b", "sparse")])
    colours = [{line.get_label(): line.get_color() for line in ax.get_lines()} for ax in fig.axes]
    assert colours[0]["human (n=1)"] == colours[1]["human (n=1)"] != colours[0]["lares (n=1)"]
    assert colours[1]["sparse (n=1)"] not in colours[0].values()
    assert all(ax.get_legend() is not None for ax in fig.axes)


def test_bootstrap_difference_resamples_each_side_on_its_own() -> None:
    from lares_agent.report.sweep_stats import bootstrap_difference

    a, b = [0.9, 1.0, 0.8], [0.2, 0.4, 0.3]
    low, high = bootstrap_difference(a, b, np.random.default_rng(0))
    assert low <= np.mean(a) - np.mean(b) <= high and low > 0  # well apart: the interval excludes 0
    assert (low, high) == bootstrap_difference(a, b, np.random.default_rng(0))
    low, high = bootstrap_difference([0.0, 1.0], [0.0, 1.0], np.random.default_rng(0))
    assert low < 0 < high  # the same noisy values on both sides: 0 inside, not a point
    assert bootstrap_difference([0.7], [0.2], np.random.default_rng(0)) == pytest.approx((0.5, 0.5))
    assert all(math.isnan(v) for v in bootstrap_difference([], [0.2], np.random.default_rng(0)))


def test_comparisons_say_ahead_behind_or_noise_and_count_the_targets() -> None:
    from pathlib import Path

    from lares_agent.report.sweep_compare import comparison_markdown, comparisons
    from lares_agent.report.sweep_table import TrialCurve

    def curve(task: str, method: str, seed: int, success: tuple[float, ...], finished: bool = True) -> TrialCurve:
        return TrialCurve(task, method, seed, finished, (0, 1000, 2000), success, 0.0, 1.0, {}, 0,
                          Path(f"{task}-{method}-s{seed}"))

    curves = [
        # a: lares clearly ahead of human; sparse ties lares at 0 -> "level", a settled miss of "above sparse"
        *(curve("a", "lares", s, (0.0, 1.0, 1.0)) for s in range(3)),
        *(curve("a", "human", s, (0.0, 0.0, 0.2)) for s in range(3)),
        curve("b", "lares", 0, (0.0, 0.0, 1.0)), curve("b", "lares", 1, (0.0, 0.0, 0.0)),
        curve("b", "human", 0, (0.0, 0.0, 1.0)), curve("b", "human", 1, (0.0, 0.0, 0.4)),
        curve("b", "sparse", 0, (0.0, 0.0, 0.0)), curve("b", "sparse", 1, (0.0, 0.0, 0.0)),
        curve("b", "sparse", 2, (0.0, 1.0, 1.0), finished=False),  # unfinished: left out
    ]
    rows = {(r["task"], r["other"]): r for r in comparisons(curves, np.random.default_rng(0))}
    assert set(rows) == {("a", "human"), ("b", "human"), ("b", "sparse")}  # a has no sparse trial
    assert rows["a", "human"]["final_success_word"] == rows["a", "human"]["auc_word"] == "ahead"
    assert rows["b", "human"]["final_success_diff"] == pytest.approx(0.5 - 0.7)
    assert rows["b", "human"]["final_success_word"] == "within noise"  # 1 and 0 against 1 and 0.4
    assert rows["b", "sparse"]["seeds"] == "2 vs 2"
    text = comparison_markdown(list(rows.values()), targets=TARGETS)
    assert "| a | human | 3 vs 3 | +80 pts |" in text
    assert "area under the success curve, by the means: 1 of 2 tasks (a). Of the 1 missed" in text
    assert "rules the target out on 0 (none); the others could be chance" in text  # b's loss: within noise
    assert rows["b", "human"]["auc_word"] == "within noise"
    assert "Above sparse's final success, by the means: 1 of 1 tasks (b)." in text
    untargeted = comparison_markdown(list(rows.values()))
    assert "| a | human | 3 vs 3 | +80 pts |" in untargeted and "targets" not in untargeted
    assert comparison_markdown([]) == ""


def test_targets_come_from_the_experiment(tmp_path: Path) -> None:
    assert load_targets(STUDY_TARGETS) == TARGETS
    assert load_targets(tmp_path / "none.json") == ()
    bad = tmp_path / "targets.json"
    for text in ('[{"other": "human"}]', '{"targets": [{"other": "human", "metric": "speed", "strict": false}]}',
                 '{"targets": [{"other": "human", "metric": "auc", "strict": "no"}]}', "not json"):
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(LaresError, match="is not a targets file"):
            load_targets(bad)


def _sweep_of_finished_trials(root: Path, success: Mapping[str, float]) -> SweepLayout:
    """A reach-v3 sweep of one seed whose trial of each method (key) ended at that success, 300 env steps each."""
    from lares_agent.runs import RunLog
    from lares_agent.search.sweep_spec import SweepSpec

    sweep = SweepLayout(root)
    SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=tuple(success)).save(sweep.spec)  # type: ignore[arg-type]
    for method, final in success.items():
        run = sweep.run(f"reach-v3-{method}-s0")
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"task": "reach-v3", "budget": 300}), encoding="utf-8")
        rows = [{"env_steps": steps, "round": 0, "success_best_slot": final * steps / 300} for steps in (150, 300)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        RunLog(run).event("run_end", finished=True, env_steps=300, wall_s=1.0)
    return sweep


def test_the_sweep_report_counts_the_targets_of_its_folder(tmp_path: Path) -> None:
    """`lares report --sweep DIR` judges only by DIR/targets.json: without it the comparison stands alone."""
    from lares_agent.report.sweep_table import write_sweep_report

    sweep = _sweep_of_finished_trials(tmp_path / "sweep", {"lares": 0.4, "human": 0.8})
    write_sweep_report(sweep.root)
    table = (sweep.report / "table.md").read_text(encoding="utf-8")
    assert "## lares against each method" in table and "targets" not in table
    assert "Where the search fell short" not in table

    sweep.targets.write_text(STUDY_TARGETS.read_text(encoding="utf-8"), encoding="utf-8")
    write_sweep_report(sweep.root)
    table = (sweep.report / "table.md").read_text(encoding="utf-8")
    assert "The experiment's targets (`targets.json`):" in table
    assert "at least human's area under the success curve, by the means: 0 of 1 tasks (none)." in table
    assert "### reach-v3, lares: final success 0.40 below human's 0.80" in table


def test_a_sweep_with_both_arms_compares_each_to_the_baselines(tmp_path: Path) -> None:
    from lares_agent.report.sweep_table import write_sweep_report

    sweep = _sweep_of_finished_trials(tmp_path / "sweep", {"lares-init": 0.9, "lares-scratch": 0.4, "human": 0.8})
    sweep.targets.write_text(json.dumps({"targets": [
        {"other": "human", "metric": "final_success", "strict": False, "method": m}
        for m in ("lares-init", "lares-scratch")]}), encoding="utf-8")

    write_sweep_report(sweep.root)
    table = (sweep.report / "table.md").read_text(encoding="utf-8")
    init = table[table.index("## lares-init against each method"):table.index("## lares-scratch against")]
    assert "| reach-v3 | lares-scratch |" in init and "| reach-v3 | human |" in init
    assert "At least human's final success, by the means: 1 of 1 tasks (reach-v3)." in init
    assert "At least human's final success, by the means: 0 of 1 tasks (none)." in table  # the scratch arm's
    assert "| reach-v3 | lares-init | handed over (ours) |" in table  # the scratch arm in the protocols
    assert "### reach-v3, lares-scratch: final success 0.40 below human's 0.80" in table
    assert "### reach-v3, lares-init" not in table


def test_the_search_and_its_controls_are_reported_side_by_side(tmp_path: Path) -> None:
    """lares-init, no-llm, random-edit and human on the same seed: a row each in the table, in the grid's order, and
    the search compared with each of the other three."""
    from lares_agent.report.sweep_table import write_sweep_report

    finals = {"lares-init": 0.9, "no-llm": 0.7, "random-edit": 0.5, "human": 0.8}
    sweep = _sweep_of_finished_trials(tmp_path / "sweep", finals)
    write_sweep_report(sweep.root)
    table = (sweep.report / "table.md").read_text(encoding="utf-8")
    rows = [line for line in table.split("## ")[0].splitlines() if line.startswith("| reach-v3 |")]
    assert [r.split(" | ")[1] for r in rows] == list(finals)
    assert [r.split(" | ")[3].split(" ")[0] for r in rows] == ["90%", "70%", "50%", "80%"]
    versus = table[table.index("## lares-init against each method"):]
    for other in ("no-llm", "random-edit", "human"):
        assert f"| reach-v3 | {other} |" in versus
    assert "| reach-v3 | lares-init |" not in versus.split("##")[1]


def test_an_archived_trial_keeps_its_llm_tokens(tmp_path: Path) -> None:
    """A trial restored from its archive has no llm_calls.jsonl: its tokens are its sessions' run_end usage."""
    import json

    from lares_agent.report.sweep_table import read_trial
    from lares_agent.runs import RunLog

    run = tmp_path / "reach-v3-lares-s0"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task": "reach-v3", "budget": 300}), encoding="utf-8")
    (run / "metrics.jsonl").write_text(json.dumps({"env_steps": 300, "round": 1}) + "\n", encoding="utf-8")
    log = RunLog(run)
    log.event("run_end", env_steps=150, finished=False, wall_s=1.0, llm={"total_tokens": 1000})
    log.event("run_end", env_steps=300, finished=True, wall_s=2.0, llm={"total_tokens": 234})
    archived = read_trial(run, "reach-v3", "lares", 0)
    assert archived is not None and archived.llm_tokens == 1234

    (run / "llm_calls.jsonl").write_text(json.dumps({"prompt_tokens": 10, "completion_tokens": 5}) + "\n",
                                         encoding="utf-8")
    kept = read_trial(run, "reach-v3", "lares", 0)
    assert kept is not None and kept.llm_tokens == 15  # the calls themselves, where they were kept


def test_seeds_evaluated_at_other_steps_are_plotted_to_the_end() -> None:
    """Two seeds that never evaluate at the same step still give a curve over the whole run, each seed at its
    newest evaluation (the intersection of their steps was empty here)."""
    from lares_agent.report.sweep_table import TrialCurve, _aligned, success_figure

    def curve(seed: int, steps: tuple[int, ...], success: tuple[float, ...]) -> TrialCurve:
        return TrialCurve("t", "lares", seed, True, steps, success, success[-1], 1.0, {}, 0, Path(f"t-lares-s{seed}"))

    a = curve(0, (100, 250, 400, 550), (0.0, 0.2, 0.6, 1.0))
    b = curve(1, (150, 300, 450, 600), (0.0, 0.0, 1.0, 1.0))
    grid, values = _aligned([a, b])
    assert grid.tolist() == [150, 250, 300, 400, 450, 550]
    assert values.tolist() == [[0.0, 0.2, 0.2, 0.6, 0.6, 1.0], [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]]
    line = success_figure([a, b]).axes[0].get_lines()[0]
    assert line.get_xdata()[-1] == 550 and line.get_ydata()[-1] == 1.0


def _protocol_curve(method: str, seed: int, success: tuple[float, ...], best: tuple[float, ...],
                    replay: float | None) -> TrialCurve:
    from lares_agent.report.sweep_table import TrialCurve

    return TrialCurve("t", method, seed, True, (0, 1000, 2000), success, 0.0, 1.0, {}, 0, Path(f"t-{method}-s{seed}"),
                      best=best, replay=replay)


def test_both_protocols_differ_where_the_best_learner_is_not_handed_over() -> None:
    """A LaRes population whose best learner succeeds while the policy it hands over does not: behind the human
    reward by our protocol, ahead by the paper's, each with its own interval of the difference."""
    from lares_agent.report.sweep_protocols import OURS, PAPER, protocol_comparisons, protocol_means, protocols_markdown
    from lares_agent.report.sweep_stats import bootstrap_difference

    curves = [
        *(_protocol_curve("lares", s, (0.0, 0.0, 0.0), (0.0, 1.0, 1.0), 0.1 * s) for s in range(3)),
        *(_protocol_curve("human", s, (0.0, 0.5, 0.5), (0.0, 0.5, 0.5), 0.5) for s in range(2)),
        _protocol_curve("human", 2, (0.0, 0.5, 0.5), (0.0, 0.5, 0.5), None),  # not replayed: left out of ours
    ]
    means = {r["method"]: r for r in protocol_means(curves)}
    assert means["lares"]["replay_mean"] == pytest.approx(0.1) and means["lares"]["auc_mean"] == 0.0
    assert means["lares"]["best_final_mean"] == 1.0 and means["lares"]["best_auc_mean"] == pytest.approx(0.75)
    assert (means["human"]["runs"], means["human"]["replayed"]) == (3, 2)

    rows = {r["protocol"]: r for r in protocol_comparisons(curves, np.random.default_rng(7))}
    ours, paper = rows[OURS], rows[PAPER]
    assert ours["seeds"] == "3 vs 2" and paper["seeds"] == "3 vs 3"
    assert ours["final_diff"] == pytest.approx(0.1 - 0.5) and paper["final_diff"] == pytest.approx(0.5)
    assert ours["auc_diff"] == pytest.approx(-0.375) and paper["auc_diff"] == pytest.approx(0.375)
    assert (ours["auc_word"], paper["final_word"], paper["auc_word"]) == ("behind", "ahead", "ahead")
    # the same draws as bootstrap_difference in the same order: ours (final, area), then the paper's
    rng = np.random.default_rng(7)
    expected = [bootstrap_difference(a, b, rng) for a, b in (([0.0, 0.1, 0.2], [0.5, 0.5]), ([0.0] * 3, [0.375] * 3),
                                                            ([1.0] * 3, [0.5] * 3), ([0.75] * 3, [0.375] * 3))]
    assert [(r[f"{k}_low"], r[f"{k}_high"]) for r in (ours, paper) for k in ("final", "auc")] == expected
    assert -0.5 <= ours["final_low"] < ours["final_high"] <= -0.3 + 1e-9  # 0, 10 and 20% against 50% every time

    text = protocols_markdown(curves, np.random.default_rng(7), episodes=[30])
    assert "| t | lares | 3 | 10% | 0.000 | 100% | 0.750 |" in text
    assert "| t | human | 3 | 50% (2 seeds) | 0.375 | 50% | 0.375 |" in text
    assert f"{OURS}: success on 30 fresh episodes" in text
    assert f"| t | human | {PAPER} | 3 vs 3 | +50 pts | [+50 pts, +50 pts] | ahead | +0.375 |" in text
    assert protocols_markdown([], np.random.default_rng(0)) == ""
    unreplayed = protocols_markdown([replace(c, replay=None) for c in curves], np.random.default_rng(0))
    assert "none given: `--replay FILE`" in unreplayed and f"| t | human | {OURS} | 0 vs 0 | n/a | [n/a, n/a] | n/a |" \
        in unreplayed


def test_the_sweep_report_reads_the_best_learner_and_the_replays(tmp_path: Path) -> None:
    """The best learner comes from every slot's success, each learner of a slot and the with-init human-reward
    learner; the replays from final_policies.py's file (its line with the most episodes)."""
    from lares_agent.report.sweep_protocols import read_replay
    from lares_agent.report.sweep_table import read_trial, write_sweep_report
    from lares_agent.runs import RunLog
    from lares_agent.search.sweep_spec import SweepSpec

    sweep = SweepLayout(tmp_path / "sweep")
    SweepSpec(tasks=("reach-v3",), seeds=(0,), methods=("lares", "human")).save(sweep.spec)
    slot = {"reward_id": "r", "task_return": 1.0}
    lares_rows = [  # the ranked slot 0 never succeeds; slot 1, one of its learners, or the human learner does
        {"env_steps": 150, "round": 0, "best_slot": 0, "success_best_slot": 0.0, "success_max": 0.4,
         "slots": [{**slot, "slot": 0, "success": 0.0}, {**slot, "slot": 1, "success": 0.4}]},
        {"env_steps": 300, "round": 1, "best_slot": 0, "success_best_slot": 0.0, "success_max": 0.2,
         "slots": [{**slot, "slot": 0, "success": 0.0}, {**slot, "slot": 1, "success": 0.2,
                                                           "learner_success": [0.0, 0.6]}],
         "extra": {"success": 0.8}},
    ]
    human_rows = [{"env_steps": s, "round": 0, "best_slot": 0, "success_best_slot": 0.5, "success_max": 0.5,
                   "slots": [{**slot, "slot": 0, "success": 0.5}]} for s in (150, 300)]
    for method, rows in (("lares", lares_rows), ("human", human_rows)):
        run = sweep.run(f"reach-v3-{method}-s0")
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"task": "reach-v3", "budget": 300}), encoding="utf-8")
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        RunLog(run).event("run_end", finished=True, env_steps=300, wall_s=1.0)
    lares = read_trial(sweep.run("reach-v3-lares-s0"), "reach-v3", "lares", 0)
    assert lares is not None and lares.success == (0.0, 0.0) and lares.best == (0.4, 0.8)

    replay = tmp_path / "final_policies.csv"
    replay.write_text("trial,episodes,seed,success\nreach-v3-lares-s0,30,2000,0.1\nreach-v3-lares-s0,5,1,0.9\n"
                      "reach-v3-human-s0,30,2000,0.5\n", encoding="utf-8")
    assert read_replay(replay) == {"reach-v3-lares-s0": (30, 0.1), "reach-v3-human-s0": (30, 0.5)}
    write_sweep_report(sweep.root, replay=replay)
    table = (sweep.report / "table.md").read_text(encoding="utf-8")
    assert "| reach-v3 | lares | 1 | 10% | 0.000 | 80% | 0.600 |" in table
    assert "| reach-v3 | human | best learner (paper) | 1 vs 1 | +30 pts | [+30 pts, +30 pts] | ahead |" in table
    csv_head = (sweep.report / "table.csv").read_text(encoding="utf-8").splitlines()[0]
    assert "replay_success_mean" in csv_head and "best_final_success_mean" in csv_head

    replay.write_text("trial,success\nreach-v3-lares-s0,0.1\n", encoding="utf-8")
    with pytest.raises(LaresError, match="is not a replay file"):
        read_replay(replay)
