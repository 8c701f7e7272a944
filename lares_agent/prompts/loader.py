"""Load versioned prompt templates and personas from package data, and render them strictly.

Templates use `string.Template` placeholders (`$name` / `${name}`) because prompts quote JSON and reward
expressions full of braces; `$$` is a literal dollar. Rendering is strict both ways: a placeholder without
a value and a value without a placeholder both raise, so a renamed variable can never silently drop the
critique or the elites from a prompt (the reference filled `code_feedback.txt` slots with mislabelled
values, docs/lares-reference.md §12 item 14).
"""

from __future__ import annotations

import difflib
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

DEFAULT_PERSONA = "neutral"
_PACKAGE = "lares_agent.prompts"
_TEMPLATE_RE = re.compile(r"^(?P<name>[a-z_]+)\.v(?P<version>\d+)\.txt$")


class PromptError(ValueError):
    """A template is missing, or rendering it would leave a placeholder empty or a value unused."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnknownPersonaError(PromptError):
    """No persona file of that name; the message lists the closest names."""


@dataclass(frozen=True)
class PromptTemplate:
    """One versioned template file, e.g. `propose.v1.txt` -> name "propose", version 1."""

    name: str
    version: int
    text: str

    @property
    def variables(self) -> frozenset[str]:
        """Placeholder names in the template."""
        return frozenset(string.Template(self.text).get_identifiers())

    @property
    def ref(self) -> str:
        """Stable reference stored with every LLM call (`propose.v1`)."""
        return f"{self.name}.v{self.version}"

    def render(self, values: Mapping[str, object]) -> str:
        """Substitute `values`; raise PromptError on a missing or an unused variable."""
        template = string.Template(self.text)
        if not template.is_valid():
            raise PromptError(f"{self.ref}: invalid placeholder syntax (use $$ for a literal dollar)")
        missing = sorted(self.variables - values.keys())
        unused = sorted(values.keys() - self.variables)
        if missing:
            raise PromptError(f"{self.ref}: missing value(s) for {', '.join(missing)}")
        if unused:
            raise PromptError(f"{self.ref}: unused value(s) {', '.join(unused)}")
        return template.substitute({k: str(v) for k, v in values.items()})


@dataclass(frozen=True)
class Persona:
    """A persona file `personas/<name>.md`: a title line, a one-line summary, then the role text."""

    name: str
    title: str
    summary: str
    text: str


def _files() -> Traversable:
    return resources.files(_PACKAGE)


def list_templates() -> list[PromptTemplate]:
    """Every template shipped with the package, all versions, sorted by name then version."""
    found = []
    for entry in _files().iterdir():
        match = _TEMPLATE_RE.match(entry.name)
        if match:
            found.append(PromptTemplate(match["name"], int(match["version"]), entry.read_text("utf-8")))
    return sorted(found, key=lambda t: (t.name, t.version))


@lru_cache(maxsize=64)
def load_template(name: str, version: int | None = None) -> PromptTemplate:
    """The template `name` at `version` (default: the highest shipped version)."""
    candidates = [t for t in list_templates() if t.name == name]
    if version is not None:
        candidates = [t for t in candidates if t.version == version]
    if not candidates:
        known = sorted({t.name for t in list_templates()})
        raise PromptError(f"no prompt template {name!r} (version {version}); known: {', '.join(known)}")
    return candidates[-1]


def render(name: str, version: int | None = None, **values: object) -> str:
    """Load and strictly render a template in one call."""
    return load_template(name, version).render(values)


def _parse_persona(name: str, text: str) -> Persona:
    lines = [line.rstrip() for line in text.strip().splitlines()]
    if not lines or not lines[0].startswith("# "):
        raise PromptError(f"persona {name!r}: first line must be '# Title'")
    body = lines[1:]
    while body and not body[0]:
        body.pop(0)
    summary = body[0] if body else ""
    return Persona(name=name, title=lines[0][2:].strip(), summary=summary, text="\n".join(body).strip())


def list_personas() -> list[Persona]:
    """Every persona shipped with the package, sorted by name."""
    folder = _files().joinpath("personas")
    personas = [
        _parse_persona(entry.name[: -len(".md")], entry.read_text("utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".md")
    ]
    return sorted(personas, key=lambda p: p.name)


def load_persona(name: str) -> Persona:
    """The persona `name`; UnknownPersonaError names the closest matches."""
    personas = {p.name: p for p in list_personas()}
    if name not in personas:
        close = difflib.get_close_matches(name, list(personas), n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(personas))}"
        raise UnknownPersonaError(f"unknown persona {name!r}{hint}")
    return personas[name]


def parse_persona_file(path: Path) -> Persona:
    """A user's persona file (same format as the shipped ones: first line `# Title`)."""
    return _parse_persona(path.stem, path.read_text("utf-8"))
