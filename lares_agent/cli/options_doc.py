"""The option reference of docs/options.md, printed from the command line itself, so that it cannot go stale.

`python -m lares_agent.cli.options_doc` prints the reference; `--write docs/options.md` replaces what follows the
file's `MARKER` line and keeps the hand-written part above it. tests/test_options_doc.py fails when the file's
generated part differs from what this prints. Each command's options come from typer's Click command (names,
defaults, help, `--help` panels); `lares run`'s defaults that its preset sets are read from `preset_config`, so the
table shows what a bare `lares run` (the demo preset) and `--preset paper` use.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

MARKER = "<!-- generated below by `python -m lares_agent.cli.options_doc --write docs/options.md`; do not edit -->"
MAIN_PANEL = "Options"


def _cell(text: str) -> str:
    """One line of a Markdown table cell: whitespace collapsed, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _value(value: object) -> str:
    """A default as the command line would take it: widths as 256x256, names joined by commas, on/off."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        joiner = "x" if all(isinstance(v, int) and not isinstance(v, bool) for v in value) else ","
        return joiner.join(str(v) for v in value) if value else "(none)"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _flags(param: Any) -> str:
    if param.param_type_name == "argument":
        return f"`{param.name.upper()}`"
    names = [*param.opts, *param.secondary_opts]
    return " / ".join(f"`{n}`" for n in names)


def _preset_values() -> tuple[Mapping[str, object], Mapping[str, object]]:
    """Every `SearchConfig` field's value under the demo preset (a bare `lares run`) and under `--preset paper`."""
    from lares_agent.search.presets import preset_config

    demo, paper = preset_config("demo"), preset_config("paper")
    return ({f.name: getattr(demo, f.name) for f in dataclasses.fields(demo)},
            {f.name: getattr(paper, f.name) for f in dataclasses.fields(paper)})


def _rows(command: Any, presets: bool) -> Iterator[tuple[str, list[str]]]:
    """(help panel, table cells) per visible parameter, in declaration order."""
    demo, paper = _preset_values() if presets else ({}, {})
    for param in command.params:
        if getattr(param, "hidden", False) or param.name == "ctx":
            continue
        default = param.default if not callable(param.default) else None
        shown = _value(default)
        if default is None and param.name in demo:
            shown = _value(demo[param.name])
        cells = [_flags(param), f"`{shown}`" if shown else ""]
        if presets:
            differs = param.name in paper and paper[param.name] != demo.get(param.name)
            cells.append(f"`{_value(paper[param.name])}`" if differs and paper[param.name] is not None else "")
        cells.append(_cell(param.help or ""))
        yield getattr(param, "rich_help_panel", None) or MAIN_PANEL, cells


def _commands(group: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for name, command in group.commands.items():
        if getattr(command, "hidden", False):
            continue
        path = f"{prefix} {name}"
        if hasattr(command, "commands"):
            yield from _commands(command, path)
        else:
            yield path, command


def reference() -> str:
    """The generated part of docs/options.md: one section per command, its options in one table per `--help`
    panel."""
    import typer.main

    from lares_agent.cli.app import app

    out: list[str] = []
    for path, command in _commands(typer.main.get_command(app), "lares"):
        presets = path == "lares run"
        out += [f"### `{path}`", ""]
        summary = (command.help or "").strip().split("\n\n")[0]
        if summary:
            out += [_cell(summary), ""]
        panels: dict[str, list[list[str]]] = {}
        for panel, cells in _rows(command, presets):
            panels.setdefault(panel, []).append(cells)
        if not panels:
            out += ["No options.", ""]
        head = ["option", "default (demo)", "`--preset paper`", "what it does"] if presets else \
            ["option", "default", "what it does"]
        for panel, rows in panels.items():
            if len(panels) > 1 or panel != MAIN_PANEL:
                out += [f"{panel}:", ""]
            out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            out += ["| " + " | ".join(cells) + " |" for cells in rows]
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def generated_part(text: str) -> str | None:
    """What follows `MARKER` in a docs/options.md text (None without the marker)."""
    _, found, tail = text.partition(MARKER + "\n")
    return tail.lstrip("\n") if found else None


def write(path: Path) -> None:
    """Keep the hand-written part of `path` (up to `MARKER`) and replace the rest with `reference()`."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    head = text.partition(MARKER)[0].rstrip("\n")
    path.write_text(f"{head}\n\n{MARKER}\n\n{reference()}" if head else f"{MARKER}\n\n{reference()}",
                    encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--write"] and len(args) == 2:
        write(Path(args[1]))
        return 0
    if args:
        print("usage: python -m lares_agent.cli.options_doc [--write docs/options.md]", file=sys.stderr)
        return 2
    sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
