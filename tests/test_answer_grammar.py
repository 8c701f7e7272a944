"""The reward language as a llama.cpp grammar (`rewards/grammar.py`): llama.cpp's own grammar engine accepts every
task's own reward written as an answer and refuses the small models' usual mistakes, and the local model decoding
under it writes only answers that parse."""

from __future__ import annotations

import ctypes
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lares_agent.engine.tasks import get_task, list_tasks
from lares_agent.llm.models import KNOWN_MODELS, ensure_model, parts_installed
from lares_agent.rewards import (
    RewardRejected,
    allowed_features,
    answer_grammar,
    human_components,
    parse_candidate,
    scale_bounds,
)
from lares_agent.rewards.grammar import SCALE_BOUNDS

SPEC = KNOWN_MODELS["qwen2.5-coder-0.5b"]
FEATURES = ["tcp_to_obj", "obj_to_target", "tcp_to_obj_xy", "grasped", "initial_obj_to_target"]


def _answer(components: dict[str, str]) -> str:
    return json.dumps({"components": components, "rationale": "reach, then close the door"})


def test_the_grammar_names_only_identifiers_and_at_least_one_component() -> None:
    text = answer_grammar(FEATURES, 3)
    (line,) = [rule for rule in text.splitlines() if rule.startswith("feature ::= ")]
    assert sorted(line.removeprefix("feature ::= ").split(" | ")) == sorted(f'"{f}"' for f in FEATURES)
    assert "(sep component){0,2}" in text
    with pytest.raises(ValueError, match="identifiers"):
        answer_grammar(["tcp to obj"], 3)
    with pytest.raises(ValueError, match="at least 1"):
        answer_grammar(FEATURES, 0)


def test_fixed_components_need_known_features_and_room() -> None:
    with pytest.raises(ValueError, match="among the features"):
        answer_grammar(FEATURES, 3, progress="door_angle")
    with pytest.raises(ValueError, match="needs a progress"):
        answer_grammar(FEATURES, 3, approach="tcp_to_obj")
    with pytest.raises(ValueError, match="at least 2"):
        answer_grammar(FEATURES, 1, progress="obj_to_target", approach="tcp_to_obj")
    assert "(sep component)" not in answer_grammar(FEATURES, 2, progress="obj_to_target", approach="tcp_to_obj")


class GrammarEngine:
    """llama.cpp's grammar sampler over the 0.5B model's vocabulary: whether a text can be decoded under a
    grammar, token by token, as generation would (no weights are loaded)."""

    def __init__(self, model_path: Path) -> None:
        import llama_cpp

        self.lib = llama_cpp
        self.llm = llama_cpp.Llama(str(model_path), vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm._model.model)

    def accepts(self, grammar: str, text: str) -> bool:
        lib = self.lib
        sampler = lib.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        assert sampler, "llama.cpp could not read the grammar"
        eos = lib.llama_vocab_eos(self.vocab)
        try:
            for token in [*self.llm.tokenize(text.encode(), add_bos=False, special=False), eos]:
                data = (lib.llama_token_data * 1)(lib.llama_token_data(token, 0.0, 0.0))
                array = lib.llama_token_data_array(data, 1, -1, False)
                lib.llama_sampler_apply(sampler, ctypes.byref(array))
                if math.isinf(data[0].logit):  # the grammar masks it: generation could not write this token
                    return False
                if token != eos:
                    lib.llama_sampler_accept(sampler, token)
            return True
        finally:
            lib.llama_sampler_free(sampler)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not parts_installed(SPEC):
        pytest.skip("0.5B model parts not installed (test extra)")
    return ensure_model(SPEC, tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def engine(model_path: Path) -> Iterator[GrammarEngine]:
    yield GrammarEngine(model_path)


@pytest.mark.slow
@pytest.mark.parametrize("task", [spec.name for spec in list_tasks()])
def test_every_task_own_reward_is_an_answer_the_grammar_accepts(engine: GrammarEngine, task: str) -> None:
    spec = get_task(task)
    components = human_components(spec)
    assert components is not None
    answer = _answer(dict(components))
    grammar = answer_grammar(allowed_features(spec), max(8, len(components)))
    assert engine.accepts(grammar, answer), answer
    parse_candidate(json.loads(answer), allowed_features(spec))  # and the parser agrees


@pytest.mark.slow
@pytest.mark.parametrize("expression", [
    "-tcp_to_obj + If(obj_to_target < 0.1, 1, 0)",  # an unknown function (seen in round 0)
    "-tcp_to_obj_to_target",  # an invented feature
    "np.exp(-tcp_to_obj)",  # Python attribute access
    "1 if grasped > 0.5 else 0",  # Python's conditional
    "smooth(tcp_to_obj)",
    "tolerance(tcp_to_obj, 0, 0.05, 0.2, 0.1, 'gauss')",  # not a shape name
    " - ".join(["-tcp_to_obj"] + ["min(tcp_to_obj, 0.09)"] * 8),  # one term repeated until the token cap
    "min(tcp_to_obj, 0.09, grasped, obj_to_target, tcp_to_obj_xy)",  # the same, inside min
])
def test_the_small_models_mistakes_cannot_be_decoded(engine: GrammarEngine, expression: str) -> None:
    grammar = answer_grammar(FEATURES, 4)
    assert engine.accepts(grammar, _answer({"a": "-tcp_to_obj + 5*(obj_to_target < 0.05)"}))
    assert not engine.accepts(grammar, _answer({"a": expression}))
    assert not engine.accepts(grammar, _answer({"a": "-tcp_to_obj"})[:-3])  # cut off mid-answer


@pytest.mark.slow
def test_from_scratch_the_answer_opens_with_correctly_signed_progress_and_approach(engine: GrammarEngine) -> None:
    """Each fixed component is one term that grows as its distance shrinks; the rest stay free."""
    grammar = answer_grammar(FEATURES, 4, progress="obj_to_target", approach="tcp_to_obj")
    for progress in ["-obj_to_target", "-2.5*obj_to_target", "3*exp(-obj_to_target/0.25)",
                     "(1 - tanh(obj_to_target/0.1))", "tolerance(obj_to_target, 0, 0.05, 0.3, 0.1, 'long_tail')",
                     "2*exp(-obj_to_target/initial_obj_to_target)",
                     "tolerance(obj_to_target, 0, 0.05, initial_obj_to_target, sigmoid='long_tail')"]:
        answer = _answer({"progress": progress, "approach": "exp(-tcp_to_obj/0.1)", "bonus": "5*(grasped > 0.5)"})
        assert engine.accepts(grammar, answer), progress
    wrong = [
        {"progress": "obj_to_target", "approach": "-tcp_to_obj"},  # grows with the distance
        {"progress": "exp(obj_to_target/0.1)", "approach": "-tcp_to_obj"},
        {"progress": "-tcp_to_obj", "approach": "-tcp_to_obj"},  # another feature
        {"approach": "-tcp_to_obj", "progress": "-obj_to_target"},  # not opening the answer
        {"progress": "-obj_to_target"},  # no approach
        {"progress": "-obj_to_target + 5*grasped", "approach": "-tcp_to_obj"},  # more than one term
        {"progress": "exp(-obj_to_target/10)", "approach": "-tcp_to_obj"},  # flat over any episode's distance
        {"progress": "-obj_to_target", "approach": "exp(-tcp_to_obj/0.05)"},  # 0.0005 at a start 0.38 m away
        {"progress": "tolerance(obj_to_target, 0, 0.5, 0.3)", "approach": "-tcp_to_obj"},  # 1 over the whole way
        {"progress": "tolerance(obj_to_target, 0, 0.05)", "approach": "-tcp_to_obj"},  # no margin: a step
        {"progress": "-obj_to_target", "approach": "exp(-tcp_to_obj/initial_obj_to_target)"},  # another start
    ]
    for components in wrong:
        assert not engine.accepts(grammar, _answer(components)), components
    alone = answer_grammar(FEATURES, 1, progress="obj_to_target")
    assert engine.accepts(alone, _answer({"progress": "-obj_to_target"}))


def test_the_scale_bounds_follow_the_sampled_distances() -> None:
    """From D/ln(10) (a tenth at the start distance D) to 2D (40% change over it), D the 90th percentile."""
    door = np.r_[np.full(90, 0.486), np.full(10, 0.2)]  # a door 0.49 m from shut, closed part of the way at times
    assert scale_bounds(door) == (0.22, 0.97)
    assert scale_bounds(np.full(50, 0.094)) == (0.05, 0.18)  # a button 9 cm away
    assert scale_bounds(np.full(50, 1.2)) == (0.53, 2.4)
    assert scale_bounds(None) == scale_bounds(np.full(5, np.nan)) == scale_bounds(np.zeros(5)) == SCALE_BOUNDS


@pytest.mark.slow
def test_from_scratch_the_scale_follows_the_tasks_distances(engine: GrammarEngine) -> None:
    """`exp(-d/0.1)` for a door 0.49 m from shut is 0.008 at the start: under bounds from the sampled distances
    the opening terms shape the whole way, and the start distance stays a scale where the task has it."""
    scales = {"obj_to_target": scale_bounds(np.full(20, 0.486)), "tcp_to_obj": scale_bounds(np.full(20, 0.38))}
    grammar = answer_grammar(FEATURES, 3, progress="obj_to_target", approach="tcp_to_obj", scales=scales)
    for progress in ["exp(-obj_to_target/0.30)", "2*(1 - tanh(obj_to_target/0.97))", "-obj_to_target",
                     "exp(-obj_to_target/initial_obj_to_target)",
                     "tolerance(obj_to_target, 0, 0.05, 0.50, sigmoid='long_tail')"]:
        assert engine.accepts(grammar, _answer({"progress": progress, "approach": "exp(-tcp_to_obj/0.17)"})), progress
    for progress, approach in [("exp(-obj_to_target/0.10)", "-tcp_to_obj"), ("exp(-obj_to_target/0.99)", "-tcp_to_obj"),
                               ("-obj_to_target", "exp(-tcp_to_obj/0.16)"), ("-obj_to_target", "exp(-tcp_to_obj/0.8)")]:
        assert not engine.accepts(grammar, _answer({"progress": progress, "approach": approach})), (progress, approach)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_local_model_under_the_grammar_writes_answers_that_parse(model_path: Path) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage

    from lares_agent.llm import LLMClient, LLMConfig
    from lares_agent.llm.local import LlamaCppChatModel

    spec = get_task("door-close-v3")
    features = allowed_features(spec)
    messages: list[Any] = [
        SystemMessage(f"You write reward functions as math expressions over these features: {', '.join(features)}."),
        HumanMessage("Write a reward for closing the door. Answer in JSON with 'components' and 'rationale'."),
    ]
    chat = LlamaCppChatModel(model_path=str(model_path), n_ctx=2048, n_threads=1)
    client = LLMClient(chat, LLMConfig(max_tokens=200, timeout_s=300.0, temperature=1.0))
    grammar = answer_grammar(features, 4)
    for _ in range(3):  # hot samples: each differs, each parses
        answer = client.complete(messages, grammar=grammar)
        if answer.completion_tokens >= 200:
            continue  # cut at the token limit: the grammar cannot finish what the limit stops
        try:
            parse_candidate(json.loads(answer.text), features)
        except RewardRejected as exc:  # the grammar is syntax: a constant term is the validator's to refuse
            assert "constant" in exc.reason, exc.reason
