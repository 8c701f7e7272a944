"""cli layer of lares-agent (see DESIGN.md §2)."""
