"""What one propose call costs the local model, and whether a decoding trick makes it cheaper.

A LaRes trial's LLM time is its calls' prompt evaluation and generation on a CPU core the learners would otherwise
use (docs/RESULTS.md, "A whole trial's cost"). This script replays recorded propose calls (the messages of a run's
`llm_calls.jsonl`) through llama-cpp-python on one thread and prints, per decoding mode, the prompt evaluation and
generation speed:

  * free: no constraint on the answer;
  * grammar: the reward language's answer grammar (`rewards/grammar.py`), as a run decodes;
  * grammar + lookup: the same with prompt-lookup decoding (llama-cpp-python's `LlamaPromptLookupDecoding`): draft
    tokens copied from the prompt, checked in one batch. Refinements copy long expressions from the elites shown,
    which is where drafting could pay.

Each mode loads the model afresh; the first call's whole prompt is evaluated with a one-token answer (the prompt
speed), then every call is answered (the generation speed; the first call's prompt is then in the KV cache, a later
call's shared part too, as in a run). Run it with the machine otherwise idle:

    python benchmarks/llm_decoding.py RUN/llm_calls.jsonl --task door-close-v3 --calls 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from lares_agent.engine.tasks.registry import get_task
from lares_agent.llm.models import resolve_model
from lares_agent.rewards import Limits, answer_grammar, prompt_features

MODES = ("free", "grammar", "grammar + lookup")


def propose_messages(path: Path, count: int) -> list[list[dict[str, str]]]:
    """The messages of the first `count` answered propose calls of a recorded run."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    found = [r["messages"] for r in rows if r.get("tag") == "propose" and r.get("ok")]
    if len(found) < count:
        raise SystemExit(f"{path} holds {len(found)} answered propose calls, fewer than --calls {count}")
    return found[:count]


def measure(mode: str, calls: list[list[dict[str, str]]], grammar_text: str, max_tokens: int) -> dict[str, float]:
    """Prompt tokens/s and generated tokens/s over `calls` in one decoding mode (one thread)."""
    from llama_cpp import Llama
    from llama_cpp.llama_grammar import LlamaGrammar
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    lookup = mode.endswith("lookup")
    extra: dict[str, Any] = {"draft_model": LlamaPromptLookupDecoding(num_pred_tokens=10), "logits_all": True} \
        if lookup else {}
    llama: Any = Llama(model_path=str(resolve_model(None)), n_ctx=4096, n_threads=1, n_threads_batch=1, seed=0,
                  verbose=False, **extra)
    grammar = LlamaGrammar.from_string(grammar_text, verbose=False) if mode != "free" else None
    prompt_tps, answer = 0.0, [0, 0.0]
    try:
        for i, messages in enumerate(calls):
            if i == 0:  # the whole prompt once; later calls reuse the shared part, as in a run
                began = time.perf_counter()
                out = llama.create_chat_completion(messages=messages, max_tokens=1, temperature=0.4, seed=1)
                prompt_tps = out["usage"]["prompt_tokens"] / (time.perf_counter() - began)
            began = time.perf_counter()
            out = llama.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.4, seed=1,
                                               grammar=grammar)
            answer[0] += out["usage"]["completion_tokens"]
            answer[1] += time.perf_counter() - began
    finally:
        llama.close()
    return {"prompt_tps": prompt_tps, "answer_tps": answer[0] / answer[1], "answer_tokens": answer[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("calls", type=Path, help="a run's llm_calls.jsonl")
    parser.add_argument("--task", required=True, help="the run's task (its features make the answer grammar)")
    parser.add_argument("--calls", dest="count", type=int, default=2, help="propose calls replayed per mode")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    features = prompt_features(get_task(args.task), designer=True, state_only=False)
    grammar_text = answer_grammar(features, Limits().max_components)  # a run's default cap
    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown --modes {', '.join(unknown)}; choose from {', '.join(MODES)}")
    calls = propose_messages(args.calls, args.count)
    print(f"{len(calls)} propose calls of {args.calls}, one llama.cpp thread\n")
    print("| decoding | prompt tokens/s | generated tokens/s | generated tokens |")
    print("|---|---|---|---|")
    for mode in modes:
        got = measure(mode, calls, grammar_text, args.max_tokens)
        print(f"| {mode} | {got['prompt_tps']:.1f} | {got['answer_tps']:.2f} | {got['answer_tokens']:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
