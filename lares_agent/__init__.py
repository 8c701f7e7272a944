"""lares-agent: LLM reward search (LaRes) with an agent graph, on a laptop."""

__version__ = "0.1.0"
