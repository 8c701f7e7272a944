"""Local LLM numbers: model assembly, load time, generation speed, and the prefix-cache speed-up.

The graph sends many calls that share a long system prompt (task documentation, persona, few-shot example).
llama.cpp reuses the KV cache of the longest shared token prefix when one `Llama` object stays alive, which is
why `local.py` keeps one per process. This script prints the cold vs cached time of such a call side by side.

    python benchmarks/llm_prefix_cache.py [--model qwen2.5-coder-0.5b] [--threads 2] [--fresh]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from langchain_core.messages import HumanMessage, SystemMessage

from lares_agent.llm import KNOWN_MODELS, LLMClient, LLMConfig
from lares_agent.llm.local import LlamaCppChatModel, get_llama
from lares_agent.llm.models import cache_dir, ensure_model, known_model, resolve_model

FEATURES = [
    ("tcp_to_obj", "distance from the gripper to the object, metres"),
    ("obj_to_target", "distance from the object to the goal, metres"),
    ("tcp_speed", "speed of the gripper, metres per second"),
    ("action_norm", "Euclidean norm of the action vector"),
    ("grasp", "1 when the object is held between the fingers, else 0"),
]


def long_system_prompt(repeats: int) -> str:
    """A deterministic ~1.5k-token system prompt: the kind of fixed task documentation the graph sends."""
    lines = ["You write dense reward functions for a simulated robot arm. Rules: lower distances are better;",
             "penalise large actions lightly; reward success strongly. Answer with one JSON object."]
    for i in range(repeats):
        for name, meaning in FEATURES:
            lines.append(f"Feature note {i}.{name}: {meaning}. Typical range observed in episode {i}: 0 to {i + 1}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=12, help="size of the shared system prompt")
    parser.add_argument("--rounds", type=int, default=2, help="cold/cached call pairs to average")
    parser.add_argument("--fresh", action="store_true", help="time assembly into an empty temporary cache")
    args = parser.parse_args()

    spec = known_model(args.model)
    if args.fresh and spec is not None:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            ensure_model(spec, Path(tmp))
            seconds = time.perf_counter() - start
            print(f"assembly + sha256 of {spec.name} ({spec.size / 2**20:.0f} MiB): {seconds:.2f} s")
    start = time.perf_counter()
    path = resolve_model(args.model)
    print(f"resolve {args.model} from cache {cache_dir()}: {time.perf_counter() - start:.3f} s -> {path.name}")

    start = time.perf_counter()
    get_llama(str(path), args.n_ctx, args.threads)
    print(f"load (n_ctx {args.n_ctx}, {args.threads} threads): {time.perf_counter() - start:.2f} s")

    model = LlamaCppChatModel(model_path=str(path), n_ctx=args.n_ctx, n_threads=args.threads)
    client = LLMClient(model, LLMConfig(temperature=0.0, max_tokens=24, timeout_s=600.0))
    llama = model.load()

    gen = client.complete([HumanMessage("Count from 1 to 60 separated by commas.")], max_tokens=96)
    rate = gen.completion_tokens / gen.seconds
    print(f"generation: {gen.completion_tokens} tokens in {gen.seconds:.2f} s = {rate:.1f} tok/s "
          f"(incl. a {gen.prompt_tokens}-token prompt)")

    system = SystemMessage(long_system_prompt(args.repeats))
    turns = ["Propose a reward for pushing the object.", "Propose a reward that also keeps the gripper slow.",
             "Propose a reward that uses grasp.", "Propose a reward with a success bonus."]
    cold, warm = [], []
    for i, turn in enumerate(turns[: args.rounds]):
        llama.reset()  # forget the cached prefix: the cost of a call without reuse
        answer = client.complete([system, HumanMessage(turn)], tag="cold")
        cold.append(answer.seconds)
        answer = client.complete([system, HumanMessage(turns[(i + 1) % len(turns)])], tag="cached")
        warm.append(answer.seconds)
    prompt_tokens = client.usage["by_tag"]["cold"]["prompt_tokens"] // len(cold)
    cold_s, warm_s = sum(cold) / len(cold), sum(warm) / len(warm)
    print(f"shared-prefix call ({prompt_tokens} prompt tokens, <=24 generated): "
          f"cold {cold_s:.2f} s | prefix cached {warm_s:.2f} s | speed-up {cold_s / warm_s:.1f}x")
    print(f"prompt evaluation (cold, generation included): {prompt_tokens / cold_s:.0f} tok/s")
    print("known models:", ", ".join(KNOWN_MODELS))


if __name__ == "__main__":
    main()
