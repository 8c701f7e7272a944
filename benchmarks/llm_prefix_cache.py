"""Local LLM numbers: load time, generation speed, and how much of each prompt the KV prefix cache serves.

The graph sends many calls that share a long system message; llama.cpp reuses the KV cache of the longest token
prefix shared with the *previous* call, and `LlamaCppChatModel(prefix_cache=True)` also keeps the state of each
system block it evaluated (llm/prefix_cache.py). This script replays analyse/critique/propose-like sequences
through `LLMClient` and reads `cached_tokens` from the calls' `llm_calls.jsonl`, printing per sequence and
cache setting: prompt tokens per call, the share served from cache (hit rate), tokens evaluated and seconds
per call. Sequences:

- round, header first: one round as `propose.v1.txt` laid it out, "(round r, attempt k)" on the first
  user line, so consecutive propose calls share only the system block and the first line;
- round, header last: the same calls with that line moved below the shared elites/critique block;
- two systems: calls alternating between two system messages that differ from their first line (two tasks in
  one process, a persona at the top): here the saved system states matter.

    python benchmarks/llm_prefix_cache.py [--model qwen2.5-coder-1.5b] [--threads N] [--sequences round-first,...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from lares_agent.llm import LLMClient, LLMConfig
from lares_agent.llm.local import LlamaCppChatModel, default_threads, get_llama, prefix_states
from lares_agent.llm.models import resolve_model
from lares_agent.runs import LLMCallRow, RecordFile

FEATURES = [
    ("tcp_to_obj", "distance from the gripper to the object, metres"),
    ("obj_to_target", "distance from the object to the goal, metres"),
    ("tcp_speed", "speed of the gripper, metres per second"),
    ("action_norm", "Euclidean norm of the action vector"),
    ("grasp", "1 when the object is held between the fingers, else 0"),
]
SCHEMA = {"type": "object", "properties": {"components": {"type": "object", "additionalProperties": {"type": "string"}},
                                           "rationale": {"type": "string"}}, "required": ["components", "rationale"]}


FIRST_LINE = "You write dense reward functions for a simulated robot arm."


def long_system_prompt(repeats: int, first_line: str = FIRST_LINE) -> str:
    """A deterministic system prompt (~1.4k tokens at 12 repeats): the run's fixed task documentation."""
    lines = [first_line, "Rules: lower distances are better; penalise large actions lightly; reward success strongly. "
             "Answer with one JSON object."]
    for i in range(repeats):
        for name, meaning in FEATURES:
            lines.append(f"Feature note {i}.{name}: {meaning}. Typical range observed in episode {i}: 0 to {i + 1}.")
    return "\n".join(lines)


def shared_block(round_: int) -> str:
    """What every propose call of a round repeats: elites and the critique (~350 tokens)."""
    critique = "\n".join(f"- Defect {i}: the term on {n} is {m}; fix it by scaling it by {i + 2}." for i, (n, m) in
                         enumerate(FEATURES * 2))
    return (f"Elite candidates so far:\n- r{round_}-a (fitness 0.2, success 0.2): progress = -tcp_to_obj; bonus = "
            f"5*success\n\nCritique of the elites:\n{critique}\n")


def round_calls(round_: int, header_first: bool, proposals: int) -> Iterator[tuple[str, str]]:
    """(tag, user message) of one round: analyse, critique, then `proposals` propose calls."""
    rollouts = "\n".join(f"step {t}: tcp_to_obj {0.5 - 0.01 * t:.2f} obj_to_target {0.3:.2f} action_norm 0.{t % 9}"
                         for t in range(40))
    yield "analyse", f"# Step: analyse behaviour (round {round_})\nBelow are encoded rollouts:\n{rollouts}\n"
    yield "critique", f"# Step: critique the rewards (round {round_})\n{shared_block(round_)}Name two defects."
    for k in range(1, proposals + 1):
        header = f"# Step: propose a reward candidate (round {round_}, attempt {k})\n"
        tail = f"Already proposed in this round: {k - 1} candidates.\nAnswer with ONE JSON object.\n"
        body = shared_block(round_)
        yield "propose", header + body + tail if header_first else body + header + tail


def sequence(name: str, systems: tuple[str, str], proposals: int) -> list[tuple[str, list[BaseMessage]]]:
    """The calls of one named sequence as (tag, messages)."""
    first, other = systems
    if name == "two-systems":
        calls = list(round_calls(1, True, proposals))
        return [(tag, [SystemMessage(first if i % 2 == 0 else other), HumanMessage(user)])
                for i, (tag, user) in enumerate(calls)]
    header_first = name == "round-first"
    return [(tag, [SystemMessage(first), HumanMessage(user)]) for tag, user in round_calls(1, header_first, proposals)]


def run(model: LlamaCppChatModel, calls: list[tuple[str, list[BaseMessage]]], max_tokens: int) -> list[LLMCallRow]:
    """Make `calls` from a cold model (KV cache and saved states dropped) and return their records."""
    llama = model.load()
    llama.reset()
    prefix_states(llama).clear()
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "llm_calls.jsonl"
        client = LLMClient(model, LLMConfig(temperature=0.0, max_tokens=max_tokens, timeout_s=900.0), record)
        for tag, messages in calls:
            client.complete(messages, json_schema=SCHEMA, tag=tag)
        return RecordFile(record, LLMCallRow.from_json).read()


def row(name: str, cache: bool, rows: list[LLMCallRow]) -> str:
    later = rows[1:]  # the first call of a sequence is cold for every setting
    prompt = sum(r.prompt_tokens for r in later)
    cached = sum(r.cached_tokens or 0 for r in later)
    seconds = sum(r.seconds for r in later)
    propose = [r for r in later if r.tag == "propose"]
    p_s = sum(r.seconds for r in propose) / max(1, len(propose))
    p_hit = sum(r.cached_tokens or 0 for r in propose) / max(1, sum(r.prompt_tokens for r in propose))
    return (f"| {name} | {'on' if cache else 'off'} | {len(later)} | {prompt / len(later):.0f} | "
            f"{cached / prompt:.0%} | {(prompt - cached) / len(later):.0f} | {seconds / len(later):.2f} | "
            f"{p_hit:.0%} | {p_s:.2f} | {rows[0].seconds:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: every core this process may use)")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=12, help="size of the shared system prompt")
    parser.add_argument("--proposals", type=int, default=4, help="propose calls per round")
    parser.add_argument("--max-tokens", type=int, default=8, help="tokens generated per call (small: prompt cost)")
    parser.add_argument("--sequences", default="round-first,round-last,two-systems")
    parser.add_argument("--no-prefix-cache", action="store_true", help="only the runs without the saved states")
    args = parser.parse_args()

    threads = args.threads or default_threads()
    path = resolve_model(args.model)
    start = time.perf_counter()
    get_llama(str(path), args.n_ctx, threads)
    print(f"load {path.name} (n_ctx {args.n_ctx}, {threads} threads): {time.perf_counter() - start:.2f} s")
    systems = (long_system_prompt(args.repeats),
               long_system_prompt(args.repeats, "You audit dense reward functions of a simulated robot arm."))
    settings = [False] if args.no_prefix_cache else [False, True]
    print("\nper call after the first (cold) one; hit rate = prompt tokens served from the KV cache\n")
    print("| sequence | saved states | calls | prompt tok/call | hit rate | evaluated tok/call | s/call | "
          "propose hit rate | propose s/call | first call s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.sequences.split(","):
        calls = sequence(name, systems, args.proposals)
        for cache in settings:
            model = LlamaCppChatModel(model_path=str(path), n_ctx=args.n_ctx, n_threads=threads, prefix_cache=cache)
            print(row(name, cache, run(model, calls, args.max_tokens)), flush=True)


if __name__ == "__main__":
    main()
