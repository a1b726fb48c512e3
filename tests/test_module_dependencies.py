"""The rooms of `server/` and `calibration/` import one way, with no circles; and every room
keeps its size.

Reads every module's imports with `ast` (top-level and function-level, `TYPE_CHECKING` included)
and checks them against the layering documented in `server/__init__.py`:
I/O layer -> `server.realtime` -> (`server.responders` -> `server.speech`,
`server.listening` -> `server.speech.resampling`) -> `calibration`; the local-audio client
`server.local_audio` uses only `server.listening` and `server.speech.resampling`.

The size rule (issue 28): no Python module over
`MAX_MODULE_LINES` lines and no class over `MAX_CLASS_LINES` (decorators included, measured with
`ast`) under `SIZED_PACKAGES`, and no JavaScript file over `MAX_SCRIPT_LINES` under `web/`
(`web/vendor/` and any `node_modules` left out: not ours).
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
    "server.local_audio": ("server.local_audio", "server.listening", "server.speech.resampling"),
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


# ---------------------------------------------------------------------------------- size rule

SIZED_PACKAGES = ("server", "calibration", "benchmarks", "tests")
"""The folders whose Python modules and classes keep their size."""
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400
MAX_SCRIPT_LINES = 600
"""Lines (as `str.splitlines` counts them) a module, a class, a page script may have."""
NOT_OURS = ("vendor", "node_modules")
"""Folders under `web/` (at any depth) whose scripts are someone else's: not measured."""


def files_under(folder: Path, suffixes: tuple[str, ...],
                skip: tuple[str, ...] = ()) -> list[Path]:
    """Files under `folder` ending in one of `suffixes`, sorted; folders named in `skip` or
    starting with "." (caches, `.hypothesis`) are not entered."""
    found = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if any(part in skip or part.startswith(".") for part in parts[:-1]):
            continue
        if path.is_file() and path.name.endswith(suffixes):
            found.append(path)
    return found


def class_sizes(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every class in `source`, nested ones included;
    a class's lines run from its first decorator to its last line."""
    sizes = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                assert child.end_lineno is not None
                sizes.append((prefix + child.name, first, child.end_lineno - first + 1))
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return sizes


def size_offenders(root: Path = ROOT) -> list[str]:
    """Every module, class and page script of `root` over its limit, one line each:
    "path: N lines (limit L)" or "path:LINE class NAME: N lines (limit L)"."""
    offenders = []
    for package in SIZED_PACKAGES:
        for path in files_under(root / package, (".py",), NOT_OURS):
            source = path.read_text(encoding="utf-8")
            name = path.relative_to(root).as_posix()
            if (lines := len(source.splitlines())) > MAX_MODULE_LINES:
                offenders.append(f"{name}: {lines} lines (module limit {MAX_MODULE_LINES})")
            offenders += [f"{name}:{first} class {cls}: {lines} lines "
                          f"(class limit {MAX_CLASS_LINES})"
                          for cls, first, lines in class_sizes(source) if lines > MAX_CLASS_LINES]
    for path in files_under(root / "web", (".js", ".mjs"), NOT_OURS):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_SCRIPT_LINES:
            offenders.append(f"{path.relative_to(root).as_posix()}: {lines} lines "
                             f"(script limit {MAX_SCRIPT_LINES})")
    return offenders


def test_no_module_class_or_page_script_outgrows_its_room() -> None:
    offenders = size_offenders()
    assert not offenders, (
        f"{len(offenders)} over the size rule (issue 28):\n  " + "\n  ".join(offenders)
        + "\nSplit each by job into new modules (a class into collaborators; page scripts into "
        "ES modules) whose names say what lives there, and update every importer: no "
        "re-export shim, no dead code. New code goes into a new module, not a full one.")


def test_the_size_rule_measures_classes_and_skips_what_is_not_ours(tmp_path: Path) -> None:
    """The check is not vacuous: a class one line over is caught with its decorators and its
    nesting, a module and a page script one line over are caught, vendored scripts are not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES - 3))
    source = f"@decorated\nclass Outer:\n    class Inner:\n        pass\n{body}\n"
    assert class_sizes(source) == [("Outer", 1, MAX_CLASS_LINES + 1), ("Outer.Inner", 3, 2)]
    for folder in ("server", "web", "web/vendor", "web/lib/node_modules"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    module = source + "y = 0\n" * (MAX_MODULE_LINES - MAX_CLASS_LINES)
    (tmp_path / "server" / "big.py").write_text(module)
    too_long = "let x;\n" * (MAX_SCRIPT_LINES + 1)
    for script in ("web/app.js", "web/vendor/lib.mjs", "web/lib/node_modules/dep.js"):
        (tmp_path / script).write_text(too_long)
    assert size_offenders(tmp_path) == [
        f"server/big.py: {MAX_MODULE_LINES + 1} lines (module limit {MAX_MODULE_LINES})",
        f"server/big.py:1 class Outer: {MAX_CLASS_LINES + 1} lines (class limit {MAX_CLASS_LINES})",
        f"web/app.js: {MAX_SCRIPT_LINES + 1} lines (script limit {MAX_SCRIPT_LINES})",
    ]
