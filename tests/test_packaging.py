"""The install prints no setuptools licence deprecation warning: pyproject.toml's licence is an
SPDX expression, checked by applying the file the way setuptools does when it builds (cheap: nothing is built)."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _licence_warnings(pyproject: Path) -> list[str]:
    setuptools = pytest.importorskip("setuptools")
    from setuptools.config.pyprojecttoml import apply_configuration

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_configuration(setuptools.Distribution(), str(pyproject))
    return [str(w.message) for w in caught if "licen" in str(w.message).lower()]


def test_pyproject_licence_is_an_spdx_expression() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))


def test_setuptools_gives_no_licence_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert _licence_warnings(ROOT / "pyproject.toml") == []
    # the check sees the warning the old TOML-table form gave
    old = (ROOT / "pyproject.toml").read_text().replace('license = "Apache-2.0"', 'license = {text = "Apache-2.0"}')
    old = old.replace('license-files = ["NOTICE"]\n', "")
    (tmp_path / "pyproject.toml").write_text(old)
    for name in ("README.md", "NOTICE"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    monkeypatch.chdir(tmp_path)
    assert _licence_warnings(tmp_path / "pyproject.toml")
