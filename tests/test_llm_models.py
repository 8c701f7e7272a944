"""Model assembly from part packages, sha256 pinning, name/path resolution and `lares models`."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lares_agent.llm import models
from lares_agent.llm.errors import ModelNotFound
from lares_agent.llm.models import KNOWN_MODELS, KnownModel, ensure_model, locate_parts, resolve_model


def _fake_packages(root: Path, prefix: str, chunks: list[bytes]) -> None:
    """Write importable packages `{prefix}{i}/data/part{i:02d}.bin`, the layout of the real model parts."""
    for i, chunk in enumerate(chunks, start=1):
        pkg = root / f"{prefix}{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)


def _spec(chunks: list[bytes], prefix: str, sha: str | None = None) -> KnownModel:
    blob = b"".join(chunks)
    return KnownModel(
        name="fake-model",
        module_prefix=prefix,
        distribution="fake-model-part",
        n_parts=len(chunks),
        sha256=sha or hashlib.sha256(blob).hexdigest(),
        size=len(blob),
        filename="fake.gguf",
        description="test",
        install_hint="pip install fake",
    )


@pytest.fixture
def chunks() -> list[bytes]:
    rng = np.random.default_rng(7)
    return [b"GGUF" + rng.bytes(3000), rng.bytes(2048), rng.bytes(17)]


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[bytes], request) -> str:
    prefix = f"lares_fake_{request.node.name.replace('[', '_').replace(']', '_')}_part"
    site = tmp_path / "site"
    _fake_packages(site, prefix, chunks)
    monkeypatch.syspath_prepend(str(site))
    return prefix


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".partial"))


def test_assembles_parts_in_order_and_remembers_the_hash(tmp_path: Path, chunks, installed) -> None:
    spec = _spec(chunks, installed)
    cache = tmp_path / "cache"
    path = ensure_model(spec, cache)
    assert path.read_bytes() == b"".join(chunks)
    assert models.recorded_sha256(path) == spec.sha256
    assert _leftovers(cache) == []

    def must_not_run(_: KnownModel) -> list[Path]:
        raise AssertionError("a verified model must not be reassembled")

    assert ensure_model(spec, cache, locate=must_not_run) == path


def test_sha_mismatch_is_one_clear_error_and_leaves_nothing(tmp_path: Path, chunks, installed) -> None:
    spec = _spec(chunks, installed, sha="0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(ModelNotFound, match="corrupt") as info:
        ensure_model(spec, cache)
    assert "\n" not in str(info.value)
    assert not (cache / spec.filename).exists()
    assert _leftovers(cache) == []


def test_failed_copy_leaves_no_partial_file(tmp_path: Path, chunks, installed) -> None:
    spec = _spec(chunks, installed)
    cache = tmp_path / "cache"
    parts = locate_parts(spec)
    parts[1].unlink()  # a part vanishing mid-assembly
    with pytest.raises(ModelNotFound, match=r"could not be assembled.*No such file"):
        ensure_model(spec, cache, locate=lambda _: parts)
    assert not (cache / spec.filename).exists()
    assert _leftovers(cache) == []


def test_damaged_cache_file_is_rebuilt_from_parts(tmp_path: Path, chunks, installed) -> None:
    spec = _spec(chunks, installed)
    cache = tmp_path / "cache"
    path = ensure_model(spec, cache)
    blob = bytearray(path.read_bytes())
    blob[100] ^= 0xFF
    path.write_bytes(bytes(blob))  # same size, new mtime: the sidecar no longer vouches for it
    assert models.recorded_sha256(path) is None
    assert ensure_model(spec, cache).read_bytes() == b"".join(chunks)


def test_missing_part_package_names_the_fix(chunks) -> None:
    spec = _spec(chunks, "lares_no_such_package_part")
    with pytest.raises(ModelNotFound, match=r"not installed.*fix: pip install fake"):
        locate_parts(spec)


def test_real_part_packages_have_the_documented_layout() -> None:
    """The 0.5B parts are installed with the test extra: six files whose sizes add up to the pinned size."""
    spec = KNOWN_MODELS["qwen2.5-coder-0.5b"]
    parts = locate_parts(spec)
    assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert sum(p.stat().st_size for p in parts) == spec.size
    with parts[0].open("rb") as fh:
        assert fh.read(4) == b"GGUF"


def test_resolve_missing_path_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelNotFound) as info:
        resolve_model(str(missing), tmp_path)
    message = str(info.value)
    assert "\n" not in message and str(missing) in message and "qwen2.5-coder-1.5b" in message


def test_resolve_rejects_a_non_gguf_file_and_accepts_a_gguf_file(tmp_path: Path) -> None:
    bad = tmp_path / "weights.bin"
    bad.write_bytes(b"PK\x03\x04junk")
    with pytest.raises(ModelNotFound, match="not a GGUF file"):
        resolve_model(bad, tmp_path)
    good = tmp_path / "tiny.gguf"
    good.write_bytes(b"GGUF" + bytes(12))
    assert resolve_model(good, tmp_path) == good


def test_resolve_known_name_assembles_through_the_locator(tmp_path: Path, monkeypatch, chunks) -> None:
    fake_parts = []
    for i, chunk in enumerate(chunks):
        part = tmp_path / f"p{i}"
        part.write_bytes(chunk)
        fake_parts.append(part)
    spec = _spec(chunks, "unused_part")
    monkeypatch.setitem(KNOWN_MODELS, "qwen2.5-coder-0.5b", spec)
    path = resolve_model("Qwen2.5-Coder-0.5B-Instruct", tmp_path / "cache", locate=lambda _: fake_parts)
    assert path.read_bytes() == b"".join(chunks)


def test_cli_models_list_and_path(tmp_path: Path, monkeypatch, chunks, installed) -> None:
    from lares_agent.cli.models_cmd import models_app as app

    monkeypatch.setenv("LARES_CACHE", str(tmp_path / "lc"))
    monkeypatch.setenv("COLUMNS", "250")
    spec = _spec(chunks, installed)
    monkeypatch.setitem(KNOWN_MODELS, "qwen2.5-coder-0.5b", spec)
    runner = CliRunner()
    result = runner.invoke(app, ["path", "qwen2.5-coder-0.5b"])
    assert result.exit_code == 0, result.output
    assembled = Path(result.output.strip())
    assert assembled.parent == tmp_path / "lc" / "models" and assembled.read_bytes() == b"".join(chunks)

    listing = runner.invoke(app, ["list"])
    assert listing.exit_code == 0, listing.output
    assert "qwen2.5-coder-1.5b" in listing.output and spec.sha256[:12] in listing.output

    missing = runner.invoke(app, ["path", str(tmp_path / "absent.gguf")])
    assert missing.exit_code == 1
    assert "error:" in missing.output and "absent.gguf" in missing.output
