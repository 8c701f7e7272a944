"""`lares run --config FILE`: a run described in a TOML, YAML or JSON file, one key per `lares run` option.

A key is an option's name without its dashes (`reward_period` or `reward-period`), its value the option's type as
the file format writes it (`hidden = [256, 256]` or `"256x256"`). A run's own `config.json` is such a file, so a
run can be started again with one setting changed: `lares run --config runs/X/config.json --seed 2`. What wins:
an option given on the command line, then the file, then the preset, then the default. The file is checked whole
before anything else happens; an unknown key or a value of the wrong type is one line naming the key (exit 2).
"""

from __future__ import annotations

import difflib
import json
import math
import tomllib
import types
import typing
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal

import typer

from lares_agent.errors import ConfigError
from lares_agent.runs.input_files import check_input_file
from lares_agent.search.config import SearchConfig
from lares_agent.search.presets import FIELDS, parse_field

__all__ = ["SUFFIXES", "from_command_line", "merge_config_file", "read_config_file", "shadowed_preset"]

SUFFIXES = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}
# What a run's config.json holds besides its options: the run format marker (runs/marker.py).
_MARKER_KEYS = ("format", "format_version")
# Where a value comes from when the user typed it: not a default.
_TYPED = ("COMMANDLINE", "ENVIRONMENT", "PROMPT")


def read_config_file(path: Path) -> dict[str, Any]:
    """The file's top-level table, by its suffix; one `ConfigError` line for a missing, unreadable or malformed
    file."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ConfigError(f"--config {path}: the file name must end in {', '.join(SUFFIXES)} (TOML, YAML or JSON)")
    try:
        check_input_file(path, "--config")  # no device, pipe or huge file (runs/input_files.py)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {path}: cannot read it ({exc})") from None
    try:
        data = _parse(text, kind)
    except (ValueError, RecursionError) as exc:  # tomllib, json and yaml errors are ValueErrors or YAMLErrors
        raise ConfigError(f"--config {path} is not valid {kind}: {_short(' '.join(str(exc).split()))}") from None
    if data is None:  # an empty YAML file
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: the file must hold a table of options (key = value), "
                          f"not a {type(data).__name__}")
    return data


def _short(text: str, limit: int = 200) -> str:
    """`text` cut to `limit` characters: a value or a parser's message quoted in an error stays one short line."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def _parse(text: str, kind: str) -> Any:
    if kind == "TOML":
        return tomllib.loads(text)
    if kind == "JSON":
        return json.loads(text)
    import yaml  # pyyaml, installed with langchain-core and optuna

    class NoAliases(yaml.SafeLoader):  # type: ignore[misc]  # pyyaml has no type stubs here
        """Safe YAML without aliases (`*name`): an options file needs none, and a few nested aliases expand
        to millions of values (the "billion laughs") once the value is walked or printed."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise yaml.YAMLError("aliases (*name) are not read in an options file: write each value out")
            return super().compose_node(parent, index)

    try:
        return yaml.load(text, Loader=NoAliases)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from None


def from_command_line(ctx: typer.Context, aliases: Mapping[str, str]) -> set[str]:
    """The options typed on the command line, by their field name (an old name as its new one's)."""
    typed = set()
    for name in ctx.params:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name in _TYPED:
            typed.add(aliases.get(name, name))
    return typed


def merge_config_file(ctx: typer.Context, path: Path, aliases: Mapping[str, str]) -> tuple[dict[str, object], set[str]]:
    """`ctx.params` with the file's value for every option not typed on the command line, and the names the file
    set. `aliases` maps an option's old name to its new one; the file may use either, not both."""
    data = read_config_file(path)
    typed = from_command_line(ctx, aliases)
    options = [n for n in ctx.params if n != "config"]
    known = {aliases.get(n, n) for n in options} | FIELDS
    values: dict[str, object] = {}
    where: dict[str, str] = {}
    for raw, value in data.items():
        key = str(raw).replace("-", "_")
        if key in _MARKER_KEYS:
            _check_marker(path, key, value)
            continue
        name = aliases.get(key, key)
        if name not in known:
            raise ConfigError(f"--config {path}: unknown key {raw!r}{_hint(key, known)} (a key is a `lares run` "
                              "option without its dashes, e.g. reward_period)")
        if name in where:
            raise ConfigError(f"--config {path}: {raw!r} and {where[name]!r} are the same option: give one of them")
        where[name] = str(raw)
        values[name] = _typed_value(path, str(raw), name, value, ctx.params.get(name))
    params = dict(ctx.params)
    for name, value in values.items():
        if name in typed:
            continue
        params[name] = value
        for old, new in aliases.items():
            if new == name:
                params[old] = None  # the old name's default, so that the two never disagree
    return params, set(values)


def shadowed_preset(preset: str, typed: Collection[str], from_file: Collection[str], source: str) -> str | None:
    """A line for a `--preset` typed on the command line whose settings the file sets anyway: the file wins over
    the preset, so with a run's config.json (every setting) the typed preset changes nothing but its name."""
    from lares_agent.search.presets import PRESETS

    if "preset" not in typed:
        return None
    values = next((v for name, v in PRESETS.items() if name == preset), {})
    hidden = sorted(set(values) & set(from_file))
    if not hidden:
        return None
    shown = ", ".join(hidden[:4]) + (f" and {len(hidden) - 4} more" if len(hidden) > 4 else "")
    return (f"{source} sets {shown}, which --preset {preset} would set too: the file's values are kept (give them "
            "as flags to change them)")


def _check_marker(path: Path, key: str, value: object) -> None:
    """A run's config.json carries the run format marker; a file that claims another format or a newer version
    is refused rather than read as options."""
    from lares_agent.runs.marker import RUN_FORMAT, RUN_FORMAT_VERSION

    if key == "format" and value != RUN_FORMAT:
        raise ConfigError(f"--config {path}: format {value!r} is not {RUN_FORMAT!r} (leave the key out of your own "
                          "files)")
    if key == "format_version" and (not isinstance(value, int) or isinstance(value, bool)
                                    or value > RUN_FORMAT_VERSION):
        raise ConfigError(f"--config {path}: format_version {value!r} was written by a newer lares (this one reads "
                          f"up to {RUN_FORMAT_VERSION}); upgrade lares-agent")


def _hint(key: str, known: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _typed_value(path: Path, raw: str, name: str, value: object, default: object) -> object:
    """`value` as the option's type: a field's type hint (search/config.py), or for the options that are not
    fields (run_dir, report, allow_fallback, preset) the type of their command-line default."""
    hint: Any
    if name in FIELDS:
        hint = typing.get_type_hints(SearchConfig)[name]
    else:
        hint = Path if isinstance(default, Path) else type(default)
    out = _convert(value, hint)
    if out is not _BAD:
        return out
    if isinstance(value, str) and name in FIELDS:  # text, as the option would take it (`hidden = "256x256"`)
        try:
            return parse_field(name, value, raw)
        except ConfigError:
            pass
    raise ConfigError(f"--config {path}: {raw} must be {_describe(hint)}, not "
                      f"{_short(json.dumps(value, default=str))}")


_BAD = object()


def _convert(value: object, hint: Any) -> object:
    """`value` as `hint` (bool, int, float, str, a Literal, Path, tuple[X, ...], or X | None), else `_BAD`. Strict:
    a bool is no number, 2.5 no int (an integral float such as TOML's 1e6 is), a number no text."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        if value is None and type(None) in typing.get_args(hint):
            return None
        for member in typing.get_args(hint):
            out = _convert(value, member)
            if out is not _BAD:
                return out
        return _BAD
    origin = typing.get_origin(hint)
    if value is None or hint is type(None):
        return _BAD
    if hint is bool:
        return value if isinstance(value, bool) else _BAD
    if isinstance(value, bool):
        return _BAD
    if hint is int:
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        return value if isinstance(value, int) else _BAD
    if hint is float:
        return float(value) if isinstance(value, (int, float)) else _BAD
    if hint is str or origin is Literal:
        return value if isinstance(value, str) else _BAD
    if hint is Path:
        return Path(value) if isinstance(value, str) else _BAD
    if origin is tuple and isinstance(value, (list, tuple)):
        items = [_convert(v, typing.get_args(hint)[0]) for v in value]
        return _BAD if any(i is _BAD for i in items) else tuple(items)
    return _BAD


def _describe(hint: Any) -> str:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        return " or ".join(_describe(m) for m in members) + " (or null)"
    origin = typing.get_origin(hint)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    if origin is tuple:
        return "a list of " + {int: "whole numbers", str: "names"}.get(typing.get_args(hint)[0], "values")
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "text", Path: "a path (text)"}
    return names.get(hint, str(hint))
