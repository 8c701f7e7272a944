"""graphs layer of lares-agent (see docs/DESIGN.md §2)."""
