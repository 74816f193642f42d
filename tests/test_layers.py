"""DESIGN.md section 2, the layers: sources/ and analysis/ never import textual, sources/ never
imports analysis/, a screen module imports no other screen module, nothing imports torch."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "memtui"


def _imports(path, package=PACKAGE):
    """Every module name ``path`` imports, anywhere in it: ``import a.b`` gives ``a.b``;
    ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module: ``from memtui import
    tui``); a relative import is resolved against the module's package."""
    tree = ast.parse(path.read_text())
    try:
        name = _module_name(path, package)
        package_of = name if path.name == "__init__.py" else name.rpartition(".")[0]
    except ValueError:  # a file outside the package (the tests' own probes)
        package_of = ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package_of.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base:
                yield base
            yield from (f"{base}.{alias.name}" if base else alias.name for alias in node.names)


def _modules(*folders):
    for folder in folders:
        target = PACKAGE / folder
        yield from ([target] if target.is_file() else sorted(target.rglob("*.py")))


@pytest.mark.parametrize("path", list(_modules("sources", "analysis", "model.py")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_no_textual_below_the_ui(path):
    bad = [name for name in _imports(path) if name.split(".")[0] in ("textual", "textual_plotext")]
    assert not bad, f"{path} imports {bad}"


VIEWER = [p for p in sorted(PACKAGE.rglob("*.py")) if "record" not in p.relative_to(PACKAGE).parts]


@pytest.mark.parametrize("path", VIEWER, ids=lambda p: str(p.relative_to(REPO)))
def test_viewer_never_imports_torch(path):
    """Only memtui/record/ (the ``record`` extra) may import torch; memtui.record is
    imported only by its own command and the pytest plugin (which asks it to load torch
    when a marked test runs: ``record.recorder.load_torch``)."""
    plugin = path.name == "pytest_plugin.py"
    bad = [name for name in _imports(path)
           if name.split(".")[0] in ("torch", "torch_npu")
           or (name.startswith("memtui.record") and path.name != "record.py" and not plugin)]
    assert not bad, f"{path} imports {bad}"


def test_ui_never_parses_files():
    """tui/ reads captures only through memtui.sources, never with a parser of its own."""
    parsers = {"pickle", "sqlite3", "csv"}
    for path in (PACKAGE / "tui").rglob("*.py"):
        bad = [n for n in _imports(path) if n.split(".")[0] in parsers]
        assert not bad, f"{path} imports {bad}"


def test_every_package_is_installed():
    """pyproject lists packages by hand (snapshots/ is mapped in): none may be forgotten."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in PACKAGE.rglob("__init__.py")
    }
    assert found <= listed, f"add to pyproject.toml packages: {sorted(found - listed)}"
    assert "memtui.snapshots" in listed


@pytest.mark.parametrize("path", list(_modules("sources")), ids=lambda p: str(p.relative_to(REPO)))
def test_sources_never_import_analysis(path):
    """Data flows one way: file -> source -> model -> analysis -> widget."""
    bad = [name for name in _imports(path) if name.startswith("memtui.analysis")
           or name.startswith("memtui.tui") or name == "memtui.loading"]
    assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("path", list(_modules("analysis")), ids=lambda p: str(p.relative_to(REPO)))
def test_analysis_never_imports_the_ui(path):
    bad = [name for name in _imports(path) if name.startswith("memtui.tui")]
    assert not bad, f"{path} imports {bad}"


#: The one screen module every screen may import: the base class and the parts they share.
SHARED_SCREEN_MODULE = "memtui.tui.screens.linked"


@pytest.mark.parametrize("path", sorted((PACKAGE / "tui" / "screens").glob("*.py")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_screens_never_import_each_other(path):
    if path.name in ("__init__.py", "linked.py"):
        return  # the registry of screens, and the shared module itself
    screens = [name for name in _imports(path) if name.startswith("memtui.tui.screens")]
    bad = [name for name in screens if name != SHARED_SCREEN_MODULE
           and not name.startswith(SHARED_SCREEN_MODULE + ".")]
    assert not bad, f"{path} imports other screen modules {bad}"


def test_layer_rules_catch_a_breach(tmp_path):
    """The checks above can fail: a module that imports across a layer is seen, also as
    ``from memtui import tui`` or a relative ``from ..tui import screens``."""
    module = tmp_path / "breach.py"
    module.write_text("from memtui.analysis.timeline.levels import allocated_level\n"
                      "import memtui.tui.screens.blocks\n"
                      "from memtui import tui\n")
    found = list(_imports(module))
    assert "memtui.analysis.timeline.levels" in found and "memtui.tui.screens.blocks" in found
    assert "memtui.tui" in found
    package = tmp_path / "memtui"
    (package / "analysis").mkdir(parents=True)
    relative = package / "analysis" / "sneaky.py"
    relative.write_text("from ..tui import screens\n")
    assert "memtui.tui.screens" in list(_imports(relative, package))


#: The rooms of analysis/, in the one order they may import each other: a room imports
#: only rooms before it (its own modules freely), never one after it.
ANALYSIS_ROOMS = ("timeline", "layout", "stacks", "roles", "replay", "findings", "summary",
                  "tables", "across", "limits")


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["memtui", "analysis"] or len(parts) < 3:
        return None
    return parts[2]


def test_every_analysis_module_lives_in_a_room():
    """analysis/ is grouped by question (issue 35): no module outside the rooms."""
    stray = [p.name for p in (PACKAGE / "analysis").iterdir()
             if p.name not in ("__init__.py", "__pycache__")
             and p.name.removesuffix(".py") not in ANALYSIS_ROOMS]
    assert stray == []


def room_breaches(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where a room of analysis/ imports a later room."""
    order = {room: i for i, room in enumerate(ANALYSIS_ROOMS)}
    bad = []
    for module, targets in graph.items():
        here = _room(module)
        for target in targets:
            there = _room(target)
            if here and there and here != there and order[there] > order[here]:
                bad.append((module, target))
    return sorted(bad)


def test_analysis_rooms_import_one_way():
    assert room_breaches(import_graph()) == []


def test_the_room_order_can_fail():
    graph = {"memtui.analysis.timeline.levels": {"memtui.analysis.findings.leak"},
             "memtui.analysis.findings.leak": {"memtui.analysis.timeline.levels"}}
    assert room_breaches(graph) == [("memtui.analysis.timeline.levels",
                                     "memtui.analysis.findings.leak")]


@pytest.mark.parametrize("path", list(_modules("analysis")), ids=lambda p: str(p.relative_to(REPO)))
def test_analysis_computes_and_never_presents(path):
    """analysis/ is pure functions over frames: it never imports the text for people
    (memtui.text), the commands, the API, the loaders, the cache or the exports."""
    above = ("memtui.text", "memtui.commands", "memtui.api", "memtui.loading", "memtui.cache",
             "memtui.export", "memtui.cli", "memtui.rankload")
    bad = [name for name in _imports(path) if name.startswith(above)]
    assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("path", list(_modules("text")), ids=lambda p: str(p.relative_to(REPO)))
def test_text_only_presents(path):
    """memtui/text/ writes results for people: it reads no file and imports no UI."""
    bad = [name for name in _imports(path)
           if name.startswith(("memtui.tui", "memtui.commands", "memtui.sources", "textual"))]
    assert not bad, f"{path} imports {bad}"


def _module_name(path, package=PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _run_time_imports(tree: ast.AST):
    """Every Import / ImportFrom node of ``tree`` that can run: at the top or in a function,
    not under ``if TYPE_CHECKING:`` (read by type checkers only, never imported)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _run_time_imports_of(child))
            continue
        yield from _run_time_imports_of(node)


def _run_time_imports_of(node: ast.AST):
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _run_time_imports(node)


def import_graph(package=PACKAGE) -> dict[str, set[str]]:
    """memtui module -> the memtui modules it imports when it runs: at the top or late, in
    a function (a circle through a late import is still a circle); not under
    TYPE_CHECKING.  ``from pkg import name`` counts as importing ``pkg.name`` where that
    is a module."""
    paths = {_module_name(p, package): p for p in package.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package_of = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in _run_time_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            else:
                base = node.module or ""
                if node.level:
                    anchor = package_of.split(".")[: len(package_of.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths
                            or _compiled(package, f"{base}.{alias.name}") else base
                            for alias in node.names}
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def _compiled(package, module: str) -> bool:
    """Whether ``module`` is a compiled extension of the package (``_reader.c`` built into
    ``_reader*.so``): a module of its own, importing nothing of memtui."""
    folder = package.parent.joinpath(*module.split(".")[:-1])
    stem = module.rpartition(".")[2]
    return any(folder.glob(f"{stem}.c")) or any(folder.glob(f"{stem}.*.so")) or \
        any(folder.glob(f"{stem}.*.pyd"))


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each group of modules that import one another, round in a circle (Tarjan's strongly
    connected components of more than one module), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


def test_no_module_imports_itself_round_a_circle():
    """A module's parts import downwards only: an app that imports its follower which
    imports the app back, or findings and the summary importing each other, is a knot
    (issue 23 point 12).  Shared helpers go to a module that imports neither."""
    assert import_circles(import_graph()) == []


def test_the_circle_check_can_fail(tmp_path):
    """A circle through a late import and a relative one is seen; a chain is not, nor an
    import under TYPE_CHECKING."""
    package = tmp_path / "memtui"
    (package / "tui").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tui" / "__init__.py").write_text("")
    (package / "tui" / "app.py").write_text("from memtui.tui import follow\n")
    (package / "tui" / "follow.py").write_text(
        "def later():\n    from .app import MemtuiApp\n    from memtui import units\n")
    (package / "units.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memtui.tui import app\n")
    (package / "tui" / "_fast.c").write_text("/* a compiled module */\n")
    (package / "tui" / "cursor.py").write_text("from memtui.tui import _fast\n")
    graph = import_graph(package)
    assert graph["memtui.tui.follow"] == {"memtui.tui.app", "memtui.units"}
    assert graph["memtui.units"] == set()  # read by type checkers only
    assert graph["memtui.tui.cursor"] == set()  # the compiled module, not the package
    assert import_circles(graph) == [["memtui.tui.app", "memtui.tui.follow"]]


@pytest.mark.parametrize("path", list(_modules("export", "api.py")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_exports_and_the_api_never_import_the_ui(path):
    """memtui/export/ and the API write from the model and the analyses: no textual."""
    bad = [name for name in _imports(path) if name.startswith("memtui.tui")
           or name.split(".")[0] in ("textual", "textual_plotext")]
    assert not bad, f"{path} imports {bad}"
