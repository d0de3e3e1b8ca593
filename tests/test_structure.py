"""The package's import structure: the folders' allowed directions, no cycles, nothing imports the server,
nothing outside ``formats`` imports its private modules, the sans-IO core stays free of I/O.

Read from the source with ``ast`` (imports under ``TYPE_CHECKING`` count too: a cycle of type
hints is still a cycle in the design).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "proxy"
# Modules with no network, no asyncio, no aiohttp: they are fed data and return data.
SANS_IO = (
    "chat.turn",
    "chat.policies",
    "chat.rewrite",
    "upstream.delta",
    "chat.builder",
    "chat.attempt",
    "chat.toldcalls",
    "chat.chunks",
    "chat.echo",
    "chat.mentions",
    "chat.plaincalls",
    "chat.repeats",
    "wire.sse",
    "chat.schemas",
    "wire.errors",
    "config.allowlist",
    "responses.request",
    "responses.events",
    "responses.record",
    "responses.ids",
)
IO_MODULES = ("aiohttp", "asyncio", "socket", "litellm")
# Which package may import which (the root modules ``cli``/``__main__`` and ``__init__`` aside). Data
# flows one way: server -> responses -> chat -> constrain/upstream -> config -> formats; wire and
# observe are below everything but formats, which imports nothing of the package.
ALLOWED: dict[str, set[str]] = {
    "server": {"responses", "chat", "constrain", "upstream", "config", "formats", "wire", "observe"},
    "responses": {"chat", "formats", "upstream", "config", "wire", "observe"},
    "chat": {"constrain", "upstream", "config", "formats", "wire", "observe"},
    "constrain": {"config", "formats", "wire", "observe"},
    "upstream": {"config", "wire", "observe"},
    "config": {"formats", "wire", "observe"},
    "wire": {"observe"},
    "formats": set(),
    "observe": set(),
}
ROOT_MODULES = {"", "cli", "__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> tuple[set[str], set[str]]:
    """(package modules imported, top-level outside modules imported) by one file."""
    here = module_name(path).split(".") if module_name(path) else []
    package_parts = here if path.name == "__init__.py" else here[:-1]
    inside: set[str] = set()
    outside: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                for alias in node.names:  # `from . import modes` names a module; `from .x import y`, x
                    submodule = f"{target}.{alias.name}" if target else alias.name
                    inside.add(submodule if _exists(submodule) else target)
            elif node.module:
                outside.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            outside.update(alias.name.split(".")[0] for alias in node.names)
    inside.discard(module_name(path))
    return {m for m in inside if _exists(m)}, outside


def _exists(name: str) -> bool:
    base = PACKAGE.joinpath(*name.split(".")) if name else PACKAGE
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p)[0] for p in PACKAGE.rglob("*.py")}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def package_of(module: str) -> str:
    return module.split(".")[0] if "." in module else module


def test_every_folder_is_placed_and_says_what_it_holds() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(ALLOWED), folders ^ set(ALLOWED)
    loose = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", *ROOT_MODULES}
    assert not loose, f"modules at the package root belong in a folder: {sorted(loose)}"
    for folder in folders:
        assert ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text())), folder


def test_imports_follow_the_allowed_directions() -> None:
    wrong = sorted(
        f"{module} -> {dep}"
        for module, deps in graph().items()
        if package_of(module) not in ROOT_MODULES
        for dep in deps
        if package_of(dep) not in (package_of(module), "") and package_of(dep) not in ALLOWED[package_of(module)]
    )
    assert not wrong, wrong


def test_the_direction_check_finds_a_wrong_import() -> None:
    assert "server" not in ALLOWED["chat"] and "chat" not in ALLOWED["formats"]


def test_nothing_outside_formats_imports_its_private_modules() -> None:
    private = sorted(
        f"{module} -> {dep}"
        for module, deps in graph().items()
        if package_of(module) != "formats"
        for dep in deps
        if dep.startswith("formats._")
    )
    assert not private, private


def test_graph_is_read() -> None:
    edges = graph()
    assert "server.handlers" in edges and "chat.turn" in edges["server.handlers"]
    assert "server.state" in edges["server.handlers"]
    assert "formats" in edges["chat.rewrite"]


def test_no_import_cycles() -> None:
    edges = graph()
    # a package imports its own submodules from __init__; only cycles between modules count
    cycle = find_cycle({m: {d for d in deps if not m.startswith(d + ".") and d != ""} for m, deps in edges.items()})
    assert cycle is None, " -> ".join(cycle or [])


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_nothing_imports_the_server_but_cli() -> None:
    importers = sorted(
        m for m, deps in graph().items() if package_of(m) != "server" and any(package_of(d) == "server" for d in deps)
    )
    assert importers == ["cli"], importers
    app_importers = sorted(m for m, deps in graph().items() if "server.app" in deps)
    assert app_importers == ["server.workers"], app_importers


def test_sans_io_core_does_no_io() -> None:
    offenders = {}
    for name in SANS_IO:
        _, outside = imports_of(PACKAGE.joinpath(*name.split(".")).with_suffix(".py"))
        if found := outside & set(IO_MODULES):
            offenders[name] = sorted(found)
    for path in (PACKAGE / "formats").glob("*.py"):
        _, outside = imports_of(path)
        if found := outside & set(IO_MODULES):
            offenders[f"formats.{path.stem}"] = sorted(found)
    assert not offenders, offenders
