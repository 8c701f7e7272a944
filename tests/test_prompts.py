"""Every shipped prompt renders with exactly its variables; personas load; `lares personas` works."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from lares_agent.prompts.loader import (
    DEFAULT_PERSONA,
    PromptError,
    PromptTemplate,
    UnknownPersonaError,
    list_personas,
    list_templates,
    load_persona,
    load_template,
)

REQUIRED_PERSONAS = {"neutral", "strict-coach", "safety-reviewer", "reward-hacking-auditor"}


def test_every_template_renders_with_its_variables_and_no_placeholder_survives() -> None:
    templates = list_templates()
    assert {t.name for t in templates} >= {"system", "analyse", "critique", "propose"}
    for template in templates:
        values = {name: f"<{name.upper()}>" for name in template.variables}
        text = template.render(values)
        for name in template.variables:
            assert f"<{name.upper()}>" in text, (template.ref, name)
        assert not re.search(r"\$[A-Za-z_{]", text), template.ref


def test_render_rejects_missing_and_unused_variables() -> None:
    template = load_template("propose")
    values = {name: "x" for name in template.variables}
    dropped = sorted(values)[0]
    with pytest.raises(PromptError, match=f"missing value.*{dropped}"):
        template.render({k: v for k, v in values.items() if k != dropped})
    with pytest.raises(PromptError, match=r"unused value.*bogus"):
        template.render({**values, "bogus": 1})


def test_values_containing_dollars_and_braces_are_inserted_verbatim() -> None:
    template = PromptTemplate("t", 1, "a $x b")
    assert template.render({"x": '{"c": "$y"}'}) == 'a {"c": "$y"} b'


def test_load_template_picks_the_highest_version_and_unknown_names_fail() -> None:
    assert load_template("system").version == max(t.version for t in list_templates() if t.name == "system")
    with pytest.raises(PromptError, match="no prompt template"):
        load_template("nope")


def test_system_prompt_is_the_only_place_with_few_shot_examples_and_sign_conventions() -> None:
    text = load_template("system").text
    assert "Sign conventions" in text and "$task_examples" in text and text.count('{"components"') >= 1
    assert "$persona" not in text  # the persona ends the user message: one system prefix per run (KV cache)


@pytest.mark.parametrize(("task_name", "approach"), [("button-press-v3", "tcp_to_obj"), ("reach-v3", None)])
def test_system_prompt_asks_for_an_approach_term_only_where_the_task_has_an_object(
    task_name: str, approach: str | None
) -> None:
    from lares_agent.engine.tasks import get_task
    from lares_agent.graphs.prompting import system_text

    task = get_task(task_name)
    assert task.approach_feature == approach
    names = [f.name for f in task.features if f.name != "human_reward"]
    text = system_text(task, names, 4, "own")
    examples = text[text.index("For this task:"):text.index("For a DIFFERENT task")]
    assert examples.count('{"components"') == 2 and task.progress_feature in examples
    if approach:
        assert f"approach component on {approach}" in text
        assert examples.count(approach) == 2  # the small model copies the examples' shape
    else:
        assert "approach component" not in text and "tcp_to_obj" not in examples


def test_task_examples_other_shows_only_the_other_tasks_example() -> None:
    from lares_agent.engine.tasks import get_task
    from lares_agent.graphs.prompting import system_text, task_examples

    task = get_task("door-close-v3")
    names = [f.name for f in task.features if f.name != "human_reward"]
    own, other = system_text(task, names, 4, "own"), system_text(task, names, 4, "other")
    assert task_examples(task.progress_feature, task.approach_feature) in own
    head, tail = own.split("For this task:")
    assert other.startswith(head) and other.endswith(tail.split("For a DIFFERENT task")[1])
    shown = other[len(head):]
    assert shown.count('{"components"') == 1 and "None for this task" in shown  # the puck example alone
    assert "Building blocks" in shown and "hamacher(a, b)" in shown  # the shapes, in placeholders
    named = {f.name for f in task.features} & set(re.findall(r"[a-z_]+", shown.split("For a DIFFERENT")[0]))
    assert named <= {"action_norm", "success"}  # no feature of the task but the ones every task has


OTHER_TASK_NAMES = ("hand_to_puck", "puck_to_goal", "touching")


@pytest.mark.parametrize("task_name", ["reach-v3", "push-v3", "pick-place-v3", "door-close-v3"])
def test_a_scratch_run_by_default_is_shown_the_building_blocks_and_no_example_answer(task_name: str) -> None:
    from lares_agent.engine.tasks import get_task
    from lares_agent.graphs.context import GraphLimits
    from lares_agent.graphs.prompting import BUILDING_BLOCKS, system_text
    from lares_agent.rewards import prompt_features
    from lares_agent.search.config import SearchConfig

    assert SearchConfig().task_examples == GraphLimits().task_examples == "none"
    task = get_task(task_name)
    text = system_text(task, prompt_features(task), 4, GraphLimits().task_examples)
    assert BUILDING_BLOCKS in text
    # the one answer shown is the format line, in placeholders
    assert re.findall(r'\{"components": \{"([^"]*)"', text) == ["<name>"]
    assert '"rationale": "<one short sentence>"' in text
    assert not any(name in text for name in OTHER_TASK_NAMES) and "DIFFERENT task" not in text
    assert system_text(task, prompt_features(task), 4) == text  # the function's default is the runs'
    # "other" is this prompt and the other task's example after it
    other = system_text(task, prompt_features(task), 4, "other")
    assert other.startswith(text) and other[len(text):].startswith("For a DIFFERENT task")
    assert all(name in other[len(text):] for name in OTHER_TASK_NAMES)


def test_with_no_example_shown_no_copy_of_one_is_counted() -> None:
    from lares_agent.engine.tasks import get_task
    from lares_agent.graphs.example_shapes import other_task_shape
    from lares_agent.graphs.prompting import system_text
    from lares_agent.rewards import prompt_features

    task = get_task("push-v3")
    assert other_task_shape(task, system_text(task, prompt_features(task), 4, "none")) == frozenset()


def test_example_kind_masks_numbers_and_sorts_rewards_by_the_examples_terms() -> None:
    from lares_agent.engine.tasks import get_task
    from lares_agent.graphs.example_shapes import example_kind, example_shapes

    examples = example_shapes(get_task("button-press-v3"))
    one = {"approach": "-tcp_to_obj", "progress": "-3.39*obj_to_target", "bonus": "7.75*success"}
    assert example_kind(one, examples) == "example 1"  # the first example with other weights
    # a weight written where the example has none is another term (so copies are, if anything, undercounted)
    assert example_kind({**one, "approach": "-2.5*tcp_to_obj"}, examples) == "other, 2+ example terms"
    assert example_kind({**one, "effort": "-0.01*action_norm"}, examples) == "example 1 + terms"
    assert example_kind({"a": "-tcp_to_obj", "p": "-5*obj_to_target"}, examples) == "other, 2+ example terms"
    assert example_kind({"p": "exp(-obj_to_target/0.2)"}, examples) == "other"


def test_a_copy_of_the_other_tasks_example_is_recognised_in_the_tasks_own_names() -> None:
    from lares_agent.engine.tasks import get_task
    from lares_agent.graphs.example_shapes import other_task_shape, shape
    from lares_agent.graphs.prompting import system_text
    from lares_agent.rewards import parse_candidate, prompt_features

    task = get_task("push-v3")
    other = other_task_shape(task, system_text(task, prompt_features(task), 4, "other"))

    def terms(components: dict[str, str]) -> frozenset[str]:  # canonical, as accepted records hold them
        return shape(dict(parse_candidate({"components": components}, prompt_features(task)).canonical))

    copy = {"reach": "exp(-tcp_to_obj/0.2)", "push": "grasped*(1 - tanh(obj_to_target/0.3))"}
    assert len(terms(copy) & other) == 2  # its two shaping terms with other numbers
    assert not terms({"progress": "-obj_to_target", "approach": "-tcp_to_obj"}) & other


def test_personas_required_set_and_default() -> None:
    personas = {p.name: p for p in list_personas()}
    assert set(personas) >= REQUIRED_PERSONAS
    assert DEFAULT_PERSONA in personas
    for persona in personas.values():
        assert persona.title and persona.summary and len(persona.text) > len(persona.summary)


def test_unknown_persona_suggests_close_names() -> None:
    with pytest.raises(UnknownPersonaError, match="strict-coach"):
        load_persona("strict-coch")


def test_personas_cli_list_and_show() -> None:
    from lares_agent.cli.app import app

    runner = CliRunner()
    listed = runner.invoke(app, ["personas", "list"])
    assert listed.exit_code == 0, listed.output
    for name in REQUIRED_PERSONAS:
        assert name in listed.output
    shown = runner.invoke(app, ["personas", "show", "safety-reviewer"])
    assert shown.exit_code == 0 and load_persona("safety-reviewer").summary in shown.output
    missing = runner.invoke(app, ["personas", "show", "nobody"])
    assert missing.exit_code == 1


def test_elites_carry_their_task_return_and_the_prompt_says_what_it_is() -> None:
    """The reference's feedback gave the environment's return ("human designed expert reward" score); the elites'
    lines and the analysis facts give each elite's, with a note when it is what ranked them."""
    from lares_agent.engine.tasks import get_task
    from lares_agent.graphs.prompting import RETURN_GRADE_NOTE, TASK_RETURN_NOTE, render_elites
    from lares_agent.graphs.state import EliteInfo
    from lares_agent.tools.diagnosis import diagnose, return_facts
    from lares_agent.tools.facts import render_facts

    elite = EliteInfo(id="r1", components={"reach": "-tcp_to_obj"}, fitness=412.29, success=0.0, complexity=3.0,
                      stats={}, task_return=412.3, graded_by="return")
    text = render_elites([elite], 2000)
    assert "- r1 (fitness 412, success 0, task return 412, complexity 3)" in text
    assert text.startswith(f"({TASK_RETURN_NOTE}{RETURN_GRADE_NOTE})")
    on_success = render_elites([EliteInfo(**{**elite, "graded_by": "success", "success": 0.4})], 2000)
    assert TASK_RETURN_NOTE in on_success and RETURN_GRADE_NOTE not in on_success
    without = render_elites([EliteInfo(**{k: v for k, v in elite.items() if k != "task_return"})], 2000)
    assert "task return" not in without  # a task without a human reward: the line as before
    (fact,) = return_facts([elite])
    assert (fact.kind, fact.source, fact.numbers["task_return"], fact.numbers["graded"]) == (
        "task_return", "r1", 412.3, 1.0)
    facts = diagnose([], [elite], {}, get_task("reach-v3"))
    assert "r1: task return 412 per episode" in render_facts(facts)
    assert return_facts([EliteInfo(**{**elite, "task_return": float("nan")})]) == []
