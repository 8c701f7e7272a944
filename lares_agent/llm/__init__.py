"""LLM layer: chat-model backends behind one LangChain interface, and the client graph nodes call.

Backends: llama.cpp in process with a GGUF file (default; the model ships as part packages and is assembled
once, `models.py`), any OpenAI-compatible endpoint (`openai_compat.py`) and record/replay (`replay.py`).
"""

from lares_agent.llm.client import LLMAnswer, LLMClient
from lares_agent.llm.config import LLMConfig
from lares_agent.llm.errors import BudgetExceeded, LLMError, LLMTimeout, ModelNotFound, ReplayMissing
from lares_agent.llm.factory import build_chat_model, make_client, offline_client
from lares_agent.llm.models import DEFAULT_MODEL, KNOWN_MODELS, resolve_model
from lares_agent.llm.replay import ReplayChatModel

__all__ = [
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "BudgetExceeded",
    "LLMAnswer",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMTimeout",
    "ModelNotFound",
    "ReplayChatModel",
    "ReplayMissing",
    "build_chat_model",
    "make_client",
    "offline_client",
    "resolve_model",
]
