"""docs/options.md's reference is printed from the command line (lares_agent/cli/options_doc.py), so an option
added, renamed or given another default without regenerating the page fails here."""

from __future__ import annotations

from pathlib import Path

from lares_agent.cli import options_doc

DOC = Path(__file__).resolve().parents[1] / "docs" / "options.md"
REGENERATE = "python -m lares_agent.cli.options_doc --write docs/options.md"


def test_the_reference_in_docs_is_what_the_command_line_prints() -> None:
    generated = options_doc.generated_part(DOC.read_text(encoding="utf-8"))
    assert generated is not None, f"docs/options.md lost its marker line; run `{REGENERATE}`"
    assert generated == options_doc.reference(), f"docs/options.md is stale; run `{REGENERATE}`"


def test_every_visible_option_of_lares_run_has_a_row_with_its_default() -> None:
    text = options_doc.reference()
    run = text.split("### `lares run`")[1].split("### `lares resume`")[0]
    assert "| `--reward-period` | `5000` | `200000` |" in run  # the demo preset's value, and the paper preset's
    assert "| `--obs-norm` / `--no-obs-norm` |" in run
    assert "More settings" in run and "| `--handover-episodes` | `20` |" in run
    assert "`--llm` " not in run and "`--rewards` " not in run  # the hidden old names stay out
    assert "### `lares reward check`" in text and "### `lares models path`" in text  # sub-commands too


def test_write_keeps_the_hand_written_part(tmp_path: Path) -> None:
    page = tmp_path / "options.md"
    page.write_text(f"# Options\n\nwhy they are so\n\n{options_doc.MARKER}\n\nold table\n", encoding="utf-8")
    options_doc.write(page)
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Options\n\nwhy they are so\n\n") and "old table" not in text
    assert options_doc.generated_part(text) == options_doc.reference()
