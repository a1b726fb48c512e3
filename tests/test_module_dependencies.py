"""The rooms of `server/` and `calibration/` import one way, with no circles.

Reads every module's imports with `ast` (top-level and function-level, `TYPE_CHECKING` included)
and checks them against the layering documented in `server/__init__.py`:
I/O layer -> `server.realtime` -> (`server.responders` -> `server.speech`,
`server.listening` -> `server.speech.resampling`) -> `calibration`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("server", "calibration")

ALLOWED = {
    "calibration": ("calibration",),
    "server.speech": ("calibration", "server.speech"),
    "server.listening": ("calibration", "server.listening", "server.speech.resampling"),
    "server.responders": ("calibration", "server.responders", "server.speech"),
    "server.realtime": ("calibration", "server.realtime", "server.speech", "server.listening",
                        "server.responders"),
}
"""Room -> module prefixes its modules may import from this project (the I/O layer, `server`'s
own top-level modules, may import everything)."""

FORBIDDEN_THIRD_PARTY = {"server.realtime": ("websockets", "asyncio", "threading", "socket",
                                            "prometheus_client")}
"""Room -> outside packages its modules may not import: the sans-I/O core has no I/O (and no
metrics: `server.metrics` derives them from its events)."""


def module_name(path: Path) -> str:
    """`server/realtime/session.py` -> `server.realtime.session` (packages end at `__init__`)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Every module of the packages in `PACKAGES`, by dotted name."""
    return {module_name(path): path for package in PACKAGES
            for path in sorted((ROOT / package).rglob("*.py"))}


def imports_of(name: str, path: Path) -> set[str]:
    """The absolute module names `path` imports (relative imports resolved against `name`);
    `from package import module` yields `package.module` when that is a module."""
    modules = project_modules()
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names
                         if f"{base}.{alias.name}" in modules)
    return found


def room_of(name: str) -> str | None:
    """The room (key of `ALLOWED`) a module belongs to; None for the I/O layer."""
    return next((room for room in sorted(ALLOWED, key=len, reverse=True)
                 if name == room or name.startswith(room + ".")), None)


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports (packages imported for a submodule
    count as the submodule)."""
    modules = project_modules()
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {imported for imported in imports_of(name, path) if imported in modules}
        edges[name] = {target for target in targets
                       if not any(other.startswith(target + ".") for other in targets)}
    return edges


def test_every_room_imports_only_what_its_layer_allows() -> None:
    violations = []
    for name, path in project_modules().items():
        room = room_of(name)
        if room is None:
            continue
        for imported in imports_of(name, path):
            top = imported.split(".")[0]
            if top in PACKAGES and not within(imported, ALLOWED[room]):
                violations.append(f"{name} imports {imported}")
            if within(imported, FORBIDDEN_THIRD_PARTY.get(room, ())):
                violations.append(f"{name} imports {imported} (no I/O in {room})")
    assert violations == []


def test_calibration_imports_nothing_from_server() -> None:
    for name, path in project_modules().items():
        if name.startswith("calibration"):
            assert not any(within(m, ("server",)) for m in imports_of(name, path)), name


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `edges` as [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target):], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_circles() -> None:
    assert find_cycle(graph()) is None


@pytest.mark.parametrize(("edges", "circle"), [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
])
def test_the_circle_finder_finds_circles(edges: dict[str, set[str]],
                                         circle: list[str] | None) -> None:
    assert find_cycle(edges) == circle


def test_the_layer_check_catches_an_upward_import() -> None:
    """A room importing the I/O layer is a violation (the check is not vacuous)."""
    assert room_of("server.realtime.session") == "server.realtime"
    assert room_of("server.connection") is None
    assert not within("server.connection", ALLOWED["server.realtime"])
    assert not within("server.realtime.session", ALLOWED["server.speech"])
    assert within("server.speech.resampling", ALLOWED["server.listening"])
    assert not within("server.speech.piper_tts", ALLOWED["server.listening"])
