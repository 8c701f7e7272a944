"""Prompt assembly for the nodes and the one strict extractor of candidates from an LLM answer.

Message layout for llama.cpp's prefix cache (docs/feasibility.md §4.4, 5x faster): the system message is the long
fixed part (task, features, language, sign conventions, few-shot examples, persona) and is byte-identical
for every call of a run; the user message carries what varies (elites, critique, reasons). The previous
best answer is never replayed as a `system` turn (the reference's role bug, docs/lares-reference.md §12 item 9).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from lares_agent.engine.replay.potential import Shaping
from lares_agent.graphs.context import GraphTask, TaskExampleMode
from lares_agent.graphs.state import CandidateRecord, EliteInfo
from lares_agent.prompts.loader import Persona, load_template

__all__ = [
    "FUNCTION_TABLE",
    "AnswerError",
    "answer_format",
    "clip",
    "extract_candidates",
    "messages",
    "persona_text",
    "proposal_schema",
    "render_elites",
    "render_reasons",
    "render_stats",
    "system_text",
]

# The reward language's functions as the LLM should write them (lares_agent.rewards accepts these names).
FUNCTION_TABLE = "\n".join(
    [
        "- exp(x), log(x), sqrt(x), tanh(x), sigmoid(x), Abs(x)",
        "- Min(a, b, ...), Max(a, b, ...), clip(x, low, high)",
        "- where(condition, a, b): a where the condition holds, else b",
        "- tolerance(x, lower, upper, margin, value_at_margin, sigmoid): 1 inside [lower, upper], falls smoothly to "
        "value_at_margin at margin outside (margin may be a feature expression; sigmoid 'gaussian' (default), "
        "'long_tail', 'reciprocal', 'hyperbolic', 'cosine', 'linear', 'quadratic' or 'tanh_squared')",
        "- hamacher(a, b): soft AND of two terms in [0, 1]",
    ]
)


class AnswerError(ValueError):
    """An LLM answer that holds no usable candidate; `reason` is one line for the retry prompt."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def clip(text: str, max_chars: int) -> str:
    """Trim a section to `max_chars` (LLM text goes back into prompts; the context is 4096 tokens)."""
    text = text.strip()
    return text if len(text) <= max_chars else text[: max_chars - 3].rstrip() + "..."


def feature_table(task: GraphTask, names: Sequence[str], meaning_chars: int | None = None) -> str:
    """One line per allowed feature: name [unit]: meaning (the meaning cut to `meaning_chars`, left out at 0)."""
    info = {f.name: f for f in task.features}
    lines = []
    for name in names:
        f = info.get(name)
        if f is None:
            lines.append(f"- {name}")
            continue
        meaning = f.meaning if meaning_chars is None else clip(f.meaning, meaning_chars) if meaning_chars > 0 else ""
        lines.append(f"- {name} [{f.unit}]: {meaning}" if meaning else f"- {name} [{f.unit}]")
    return "\n".join(lines)


def _example(components: Mapping[str, str], rationale: str) -> str:
    return json.dumps({"components": dict(components), "rationale": rationale})


def task_examples(progress: str, approach: str | None) -> str:
    """Two answers for this very task. The small model copies the first one's shape, so where the robot must
    reach an object first both examples shape the approach (without it nothing learned: docs/results-archive.md)."""
    if approach:
        return "\n".join([
            _example({"approach": f"-{approach}", "progress": f"-5*{progress}", "bonus": "5*success"},
                     "reach the object, then move it; a bonus on success"),
            _example({"approach": f"exp(-{approach}/0.1)", "progress": f"3*exp(-{progress}/0.05)",
                      "effort": "-0.01*action_norm"}, "bounded staged shaping with a small effort cost"),
        ])
    return "\n".join([
        _example({"progress": f"-{progress}", "bonus": "5*success"}, "dense progress cost with a success bonus"),
        _example({"progress": f"exp(-{progress}/0.1)", "near": f"2*tolerance({progress}, 0, 0.05, 0.2, 0.1)"},
                 "bounded shaping, peaked at the goal"),
    ])


BUILDING_BLOCKS = """Building blocks (d: a distance feature; d0: its value when the episode starts, if a feature says):
- bounded closeness: tolerance(d, 0, r, d0, 0.1, 'long_tail') is 1 within r of the goal and falls toward 0 over d0
- decaying closeness: exp(-d/s) or (1 - tanh(d/s)) with s from about half of d0 to twice d0 (or d0 itself); far
  above d0 the term hardly changes over the episode, far below it pays only at the goal
- staged terms: a later stage pays only once an earlier one holds, where(d < r, later, earlier)
- soft AND of two terms in [0, 1]: hamacher(a, b) is high only when both are
- a success bonus on the task's own success test, and small effort costs such as -0.01*action_norm"""
"""What the scratch prompt shows instead of answers for the run's task: the shapes the tasks' own rewards are made
of (MetaWorld's `tolerance` with the starting distance as margin, stages, the Hamacher product), in placeholders, so
that nothing can be copied (docs/RESULTS.md: a shown answer for the task was installed word for word)."""


def approach_rule(progress: str, approach: str | None) -> str:
    """The sign-convention line that asks for an approach term (empty where the task has none)."""
    if not approach:
        return ""
    return (f"- {progress} cannot change before the robot reaches the object: every candidate also needs an "
            f"approach component on {approach} (-w*{approach} or w*exp(-{approach}/s)).\n")


OTHER_TASK_EXAMPLE = "\nFor a DIFFERENT task"
"""Where the system template's example for another task starts (it ends the template); "none" and `detail` >= 1
cut it."""
MAX_DETAIL = 3
MEANING_CHARS = 40  # a feature's meaning at detail 2


POTENTIAL_BLOCKS = BUILDING_BLOCKS.rsplit("\n", 1)[0].replace("Building blocks", "Building blocks of a potential")
"""`BUILDING_BLOCKS` for a potential: the same shapes, without the effort costs (a potential reads no action)."""


def system_text(task: GraphTask, feature_names: Sequence[str], max_components: int,
                examples: TaskExampleMode = "none", human: Mapping[str, str] | None = None, detail: int = 0,
                shaping: Shaping = "additive") -> str:
    """The fixed system message of a run: identical across nodes, calls and personas, so llama.cpp caches it (the
    persona goes into the user message, `persona_text`). ``examples`` (`GraphLimits.task_examples`): "none" shows
    the building blocks and no example answer, so that what the model writes is not a copy of ours (the template's
    "# Reward language" keeps the answer format in placeholders); "other" adds the other task's example, "own" also
    `task_examples` before it. ``human`` (the init setting): the task's own reward is shown instead of any example for
    this task, as the reward the candidates refine (it stays under "none": it is the setting's input, not ours).

    ``detail`` shortens it for a small context (`graphs/budget.py` picks it), keeping the task, the features and
    the rules: 1 leaves out the building blocks and the other task's example, 2 also cuts each feature's meaning to
    `MEANING_CHARS`, 3 leaves the meanings and this task's example answers out (the task's own reward stays).

    ``shaping`` "potential" (`GraphLimits.shaping`): the system_potential template, which asks for a potential of the
    state (higher closer to solving the task) shaping the base reward it names (engine/replay/potential.py): the task's
    own reward with init (shown as the base, whose terms may serve as a potential), else its success indicator."""
    approach = task.approach_feature if task.approach_feature in feature_names else None
    potential = shaping == "potential"
    blocks = POTENTIAL_BLOCKS if potential else BUILDING_BLOCKS
    if human is not None:
        label = ("the base reward your potential shapes; its terms may serve as a potential too" if potential
                 else "the starting point: refine it")
        shown = (f"The task's own reward, written by its designer ({label}):\n"
                 + _example(human, "the designer's reward"))
    elif examples == "own" and detail < MAX_DETAIL:
        shown = "For this task:\n" + task_examples(task.progress_feature, approach)
    else:
        what = "potential" if potential else "reward"
        shown = f"None for this task: build its {what} from its own features." + ("\n" + blocks) * (detail < 1)
    meaning_chars = None if detail < 2 else MEANING_CHARS if detail == 2 else 0
    extra: dict[str, object] = {}
    if potential:
        extra["base_reward"] = ("the task's own reward, shown below" if human is not None
                                else "1 on every step where the task's success test holds, else 0")
    text = load_template("system_potential" if potential else "system").render(dict(
        **extra,
        task_name=task.name,
        task_description=" ".join(str(task.description).split()),
        horizon=task.horizon,
        progress_feature=task.progress_feature,
        approach_rule=approach_rule(task.progress_feature, approach),
        task_examples=shown,
        feature_table=feature_table(task, feature_names, meaning_chars),
        max_components=max_components,
        function_table=FUNCTION_TABLE,
    ))
    return text if detail < 1 and examples != "none" else text.split(OTHER_TASK_EXAMPLE)[0] + "\n"


def persona_text(persona: Persona) -> str:
    """The persona section that ends each user message (after the run's shared system prefix)."""
    return f"# Your persona\n{persona.text}"


def messages(system: str, user: str) -> list[BaseMessage]:
    """[system, user] as LangChain messages."""
    return [SystemMessage(content=system), HumanMessage(content=user)]


def _num(x: Any) -> str:
    return "?" if x is None else f"{float(x):.3g}"


TASK_RETURN_NOTE = "task return = the task's own hand-designed reward summed over an episode (higher is better)"
"""The line that says what an elite's "task return" is: the reference's feedback calls the same number the "human
designed expert reward" score."""
RETURN_GRADE_NOTE = "; no policy succeeds yet, so fitness is the task return"


def render_elites(elites: Sequence[EliteInfo], max_chars: int) -> str:
    """One line per elite: id, fitness, success, task return, complexity, then its components; a first line says
    what the task return is (and that it is the fitness, when the update graded by it).

    The task return is shown in both settings, as the reference's feedback showed the environment's return in
    both: it is a score of the policy's episodes, not the human reward's expression, which the scratch setting
    keeps from the LLM (it sees neither the expression nor the ``human_reward`` feature)."""
    if not elites:
        return "none yet (initial round)"
    lines = []
    for e in elites:
        body = "; ".join(f"{n} = {x}" for n, x in (e.get("components") or {}).items()) or "(the task's own reward)"
        ret = f", task return {_num(e['task_return'])}" if e.get("task_return") is not None else ""
        lines.append(
            f"- {e.get('id', '?')} (fitness {_num(e.get('fitness'))}, success {_num(e.get('success'))}{ret}, "
            f"complexity {_num(e.get('complexity'))}): {body}"
        )
    if any(e.get("task_return") is not None for e in elites):
        graded = any(e.get("graded_by") == "return" for e in elites)
        lines.insert(0, f"({TASK_RETURN_NOTE}{RETURN_GRADE_NOTE if graded else ''})")
    return clip("\n".join(lines), max_chars)


def render_stats(elites: Sequence[EliteInfo], max_chars: int) -> str:
    """Per elite and component: the statistics the search layer measured on the buffer."""
    lines = []
    for e in elites:
        for comp, stats in sorted((e.get("stats") or {}).items()):
            values = ", ".join(f"{k} {_num(v)}" for k, v in sorted(stats.items()))
            lines.append(f"- {e.get('id', '?')}.{comp}: {values}")
    return clip("\n".join(lines), max_chars) if lines else "none measured"


def render_reasons(reasons: Iterable[str], max_chars: int, limit: int = 6) -> str:
    """Distinct reasons, most recent first, as bullet lines."""
    unique: list[str] = []
    for reason in reversed(list(reasons)):
        if reason and reason not in unique:
            unique.append(reason)
    return clip("\n".join(f"- {r}" for r in unique[:limit]), max_chars) if unique else "none"


def render_taken(records: Sequence[CandidateRecord], max_chars: int) -> str:
    """Expressions already proposed this round (accepted or not), so the next call differs."""
    lines = ["- " + "; ".join(f"{n} = {x}" for n, x in r["components"].items()) for r in records if r.get("components")]
    return clip("\n".join(lines), max_chars) if lines else "none"


def proposal_schema(n: int, max_components: int) -> dict[str, Any]:
    """JSON schema of a propose answer; llama.cpp turns it into a grammar, so the shape is guaranteed.

    One candidate (n == 1) is a bare candidate object, exactly like the few-shot examples, which small
    models follow best; several come wrapped as {"candidates": [...]}. The rationale is capped: an
    uncapped one costs ~100 tokens and 5 s per call and got the 0.5B model truncated mid-JSON
    (docs/feasibility.md §4.3).
    """
    candidate = {
        "type": "object",
        "properties": {
            "components": {
                "type": "object",
                "additionalProperties": {"type": "string", "maxLength": 200},
                "minProperties": 1,
                "maxProperties": max_components,
            },
            "rationale": {"type": "string", "maxLength": 120},
        },
        "required": ["components", "rationale"],
    }
    if n == 1:
        return candidate
    return {
        "type": "object",
        "properties": {"candidates": {"type": "array", "items": candidate, "minItems": n, "maxItems": n}},
        "required": ["candidates"],
    }


def answer_format(n: int, examples: bool = True) -> str:
    """The answer-format sentence of the propose prompt, matching `proposal_schema(n, ...)`; ``examples``: the
    system message shows an example answer to point at (not under `--task-examples none`)."""
    if n == 1:
        like = " like the examples" if examples else ""
        return f'Answer with ONE JSON object{like}: {{"components": {{...}}, "rationale": "..."}}.'
    return (f'Answer with JSON only: {{"candidates": [{{"components": {{...}}, "rationale": "..."}}, ...]}} '
            f"holding exactly {n} different candidates.")


def _json_start(text: str) -> int:
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    return min(starts) if starts else -1


def extract_candidates(text: str) -> list[dict[str, Any]]:
    """Candidates from an answer: `{"candidates": [...]}`, a bare candidate, or a list of them.

    One strict extractor (the reference chained five regex fallbacks, §2.4): optional prose or a code
    fence before the first JSON value is skipped, the value itself must be valid JSON. Raises AnswerError.
    """
    body = (text or "").strip()
    if not body:
        raise AnswerError("empty answer: reply with the JSON object only")
    start = _json_start(body)
    if start < 0:
        raise AnswerError("answer holds no JSON: reply with the JSON object only, no prose")
    try:
        value, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as exc:
        raise AnswerError(f"answer is not valid JSON ({exc.msg} at char {exc.pos}); it may have been cut off") from None
    if isinstance(value, Mapping) and "candidates" in value:
        value = value["candidates"]
    items = value if isinstance(value, list) else [value]
    if not items:
        raise AnswerError("answer has an empty candidates list")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("components"), Mapping):
            raise AnswerError(f"candidate {i + 1} has no 'components' object mapping names to expressions")
        out.append(dict(item))
    return out
