"""The chat model and the client an `LLMConfig` names: the one place that picks a backend (llama.cpp in process, an
OpenAI-compatible endpoint, or a recorded run's answers) and opens the run's call record for the client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from lares_agent.llm.client import LLMClient
from lares_agent.llm.config import LLMConfig
from lares_agent.llm.errors import LLMError
from lares_agent.llm.local import LlamaCppChatModel
from lares_agent.llm.replay import ReplayChatModel, record_path
from lares_agent.llm.usage import UsageLedger
from lares_agent.runs import LLM_CALLS_NAME, LLMCallRow, RecordFile

__all__ = ["build_chat_model", "make_client", "offline_client"]


def build_chat_model(config: LLMConfig, replay_from: Path | None = None) -> BaseChatModel:
    """The chat model a config names; raises ModelNotFound / LLMError with one line on bad settings."""
    if replay_from is not None or config.backend == "replay":
        if replay_from is None:
            raise LLMError("backend 'replay' needs a record to answer from; fix: pass the recorded run directory")
        return ReplayChatModel.from_record(replay_from)
    if config.backend == "local":
        from lares_agent.llm.models import resolve_model

        path = resolve_model(config.model)
        return LlamaCppChatModel(
            model_path=str(path), n_ctx=config.n_ctx, n_threads=config.n_threads, seed=config.seed,
            temperature=config.temperature, max_tokens=config.max_tokens, timeout=config.call_timeout_s,
        )
    if config.backend == "openai":
        from lares_agent.llm.openai_compat import make_openai_chat_model

        return make_openai_chat_model(config)
    raise LLMError(f"unknown LLM backend {config.backend!r}; choose one of: local, openai, replay")


def make_client(config: LLMConfig, run_dir: Path | None, replay_from: Path | None = None) -> LLMClient:
    """A client for `config` recording to `run_dir/llm_calls.jsonl` (no record when run_dir is None).

    With `replay_from` (a run directory or its record file) the answers come from that record instead of a
    model. Replaying into the very record being read is not recorded again (it would duplicate every call).
    """
    chat_model = build_chat_model(config, replay_from)
    path: Path | None = None
    spent: UsageLedger | None = None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / LLM_CALLS_NAME
        if path.is_file():  # a resumed run: its earlier calls count against the budgets
            spent = UsageLedger.from_calls(RecordFile(path, LLMCallRow.from_json).read())
        if replay_from is not None and record_path(replay_from).resolve() == path.resolve():
            path = None
    return LLMClient(chat_model, config, path, spent=spent)


class _NoModel(BaseChatModel):
    """The chat model of a run in which the LLM writes no reward (the `no-llm`, `random-edit` and `critique-edit`
    controls): no backend is resolved or reached, and a call, which the graph never makes there, fails as an LLM
    error would."""

    @property
    def _llm_type(self) -> str:
        return "none"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        raise LLMError("this run asks no LLM (a control without it): no model was built")


def offline_client(config: LLMConfig) -> LLMClient:
    """A client for a run that asks the LLM nothing: no backend is loaded or checked and no call is recorded."""
    return LLMClient(_NoModel(), config, None)
