"""The package's import graph: layers point down only and no module imports itself back (docs/DESIGN.md §2).

Walks every module's ``import`` statements with ``ast`` (function-level and ``TYPE_CHECKING`` imports
included: a cycle hidden inside a function is still a cycle in the design).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "lares_agent"

# Lower index = lower layer; a module may import its own layer or any lower one (docs/ARCHITECTURE.md).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors"}),
    frozenset({"runs"}),
    frozenset({"engine"}),
    frozenset({"rewards"}),
    frozenset({"prompts", "memory", "llm"}),
    frozenset({"tools"}),
    frozenset({"graphs"}),
    frozenset({"search", "trace", "report"}),
    frozenset({"cli"}),
)


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("lares_agent"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("lares_agent"):
                continue
            subs = {f"{mod}.{a.name}" for a in node.names} & modules  # `from pkg import submodule`
            found.update(subs)
            if len(subs) < len(node.names):  # some names are attributes of `mod` itself
                found.add(mod)
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(paths)
    return {name: {m for m in _imports(path, name, modules) if m in modules and m != name}
            for name, path in paths.items()}


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"module {module} is in no layer; add its package to LAYERS")


def test_every_package_has_a_layer() -> None:
    for module in _graph():
        if module != "lares_agent":
            _layer(module)


def test_no_import_points_up() -> None:
    bad = [
        f"{src} -> {dst}"
        for src, dsts in _graph().items()
        if src != "lares_agent"
        for dst in dsts
        if dst != "lares_agent" and _layer(dst) > _layer(src)
    ]
    assert not bad, "imports pointing up a layer:\n" + "\n".join(sorted(bad))


@pytest.mark.parametrize("lower", ["engine", "rewards"])
def test_engine_and_rewards_import_no_llm_or_graph_code(lower: str) -> None:
    banned = ("llm", "graphs", "tools", "search", "prompts", "memory", "cli", "trace", "report")
    bad = [
        f"{src} -> {dst}"
        for src, dsts in _graph().items()
        if src.startswith(f"lares_agent.{lower}")
        for dst in dsts
        if dst.split(".")[1] in banned
    ]
    assert not bad, "\n".join(bad)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _engine_import_points_up(src: str, dst: str) -> bool:
    engine = "lares_agent.engine"
    loop, populations = f"{engine}.loop", f"{engine}.populations"
    if _within(src, f"{engine}.setup") or _within(src, f"{engine}.state"):
        return _within(dst, loop) or _within(dst, populations)
    if _within(src, populations):
        return _within(dst, loop) and (src, dst) != (populations, f"{loop}.engine")
    return False


def test_engine_setup_and_state_sit_below_the_loop_and_the_populations() -> None:
    """engine/setup/ (config, grading, slots, learner groups) and engine/state/ (checkpoints, the state's schema, the
    run log) are what engine/loop/ and engine/populations/ share: they import neither, and populations/ imports of
    loop/ only the engine it builds (docs/ARCHITECTURE.md, the engine's tree)."""
    bad = [f"{src} -> {dst}" for src, dsts in _graph().items() for dst in dsts if _engine_import_points_up(src, dst)]
    assert not bad, "imports pointing up inside engine/:\n" + "\n".join(sorted(bad))


def test_no_import_cycle() -> None:
    graph = _graph()
    # Importing a package runs its __init__; `from pkg.sub import x` therefore also depends on pkg.
    for src in list(graph):
        for dst in list(graph[src]):
            parts = dst.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if parent in graph and parent != src and not src.startswith(parent + "."):
                    graph[src].add(parent)
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_two_packages_import_each_other() -> None:
    """Within one layer too (search and report share theirs): two folders whose modules import each other are one
    piece split in two, even where no module circle closes; what both need lives a layer down."""
    edges = {(src.split(".")[1], dst.split(".")[1]) for src, dsts in _graph().items() if "." in src
             for dst in dsts if "." in dst}
    pairs = sorted(f"{a} <-> {b}" for a, b in edges if a < b and (b, a) in edges)
    assert not pairs, "packages importing each other:\n" + "\n".join(pairs)


def test_the_checker_finds_a_cycle(tmp_path: Path) -> None:
    """The walker itself: a crafted two-module circle is seen (so a green run means something)."""
    pkg = tmp_path / "lares_agent" / "engine"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from lares_agent.engine.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from lares_agent.engine import a\n")
    modules = {"lares_agent.engine", "lares_agent.engine.a", "lares_agent.engine.b"}
    assert "lares_agent.engine.b" in _imports(pkg / "a.py", "lares_agent.engine.a", modules)
    assert "lares_agent.engine.a" in _imports(pkg / "b.py", "lares_agent.engine.b", modules)
