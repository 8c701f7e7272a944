"""The engine's error types: one place, so behaviour modules import no other behaviour module for them."""

from __future__ import annotations

__all__ = ["ConstantRewardError", "EngineError", "NonFiniteRewardError", "RewardColumnError"]


class EngineError(RuntimeError):
    """The engine cannot continue or was configured inconsistently; ``reason`` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RewardColumnError(ValueError):
    """A reward column cannot be set or used; `reason` is one line, fit for an LLM critique."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ConstantRewardError(RewardColumnError):
    """The candidate gives (nearly) the same reward on every stored row: it cannot be scaled (§12 item 5)."""


class NonFiniteRewardError(RewardColumnError):
    """The candidate gives NaN or infinite rewards on stored rows (§12 item 5)."""
