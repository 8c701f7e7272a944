"""Limits of the reward language and the error every rejection raises.

Every bound here exists so that parsing LLM text takes bounded time and memory whatever the text is:
the reference `exec`s LLM code unsandboxed (docs/lares-reference.md §12 item 27); we parse it as data instead,
and these limits are checked on the Python `ast` before any sympy object is built.
"""

from __future__ import annotations

from dataclasses import dataclass

from lares_agent.errors import LaresError

__all__ = ["Limits", "RewardRejected"]


class RewardRejected(LaresError, ValueError):
    """A candidate that the reward language refuses; `reason` is one line, fit for an LLM critique."""

    def __init__(self, reason: str) -> None:
        # One line only: the reason is shown to an LLM and printed by the CLI.
        self.reason = " ".join(str(reason).split())
        super().__init__(self.reason)


@dataclass(frozen=True)
class Limits:
    """Bounds on a candidate's text and shape.

    The defaults allow every reward LaRes' LLM wrote for MetaWorld in a readable form (a handful of terms,
    each a few calls deep) while keeping a parse well under a second on adversarial input.
    """

    max_chars: int = 1000  # one expression's text
    max_candidate_chars: int = 8000  # a whole JSON candidate
    max_nodes: int = 160  # Python ast nodes in one expression
    max_depth: int = 32  # Python ast depth (left-nested sums count one level per term)
    max_sympy_nodes: int = 800  # sympy tree size after building (tolerance etc. add a few nodes)
    max_literal: float = 1e6  # |number| written in the text or produced by folding constants
    max_exponent: float = 8.0  # |p| in x**p
    max_components: int = 8
    max_call_args: int = 8  # Min/Max/Piecewise arguments
    max_name_chars: int = 40  # component names
    max_rationale_chars: int = 4000

    def __post_init__(self) -> None:
        for name in (
            "max_chars",
            "max_candidate_chars",
            "max_nodes",
            "max_depth",
            "max_sympy_nodes",
            "max_components",
            "max_call_args",
            "max_name_chars",
            "max_rationale_chars",
        ):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"Limits.{name} must be >= 1")
        if not self.max_literal > 0 or not self.max_exponent > 0:
            raise ValueError("Limits.max_literal and Limits.max_exponent must be > 0")
