"""`--persona NAME|FILE`: a shipped persona by name, or a persona file of the user's own."""

from __future__ import annotations

from pathlib import Path

from lares_agent.errors import LaresError
from lares_agent.prompts.loader import Persona, PromptError, load_persona, parse_persona_file
from lares_agent.runs.oserrors import run_file_error


def resolve_persona(name_or_path: str) -> Persona:
    """A path to an existing `.md`/`.txt` file is read as a persona (first line `# Title`); anything else is a
    shipped persona's name."""
    path = Path(name_or_path)
    try:
        if path.suffix in (".md", ".txt") or path.is_file():
            if not path.is_file():
                raise LaresError(f"persona file {path} does not exist")
            return parse_persona_file(path)
        return load_persona(name_or_path)
    except PromptError as exc:
        raise LaresError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise LaresError(f"persona file {path} is not UTF-8 text (byte {exc.start}: {exc.reason}); pass a "
                         "Markdown or text file") from None
    except OSError as exc:
        raise run_file_error("read the persona file", path, exc) from None
