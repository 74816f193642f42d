"""DESIGN.md section 2, the layers: sources/ and analysis/ never import textual, sources/ never
imports analysis/, a screen module imports no other screen module, nothing imports torch."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

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


@cache
def _imports_of(path) -> tuple[str, ...]:
    """:func:`_imports` of ``path``, parsed once for every rule."""
    return tuple(_imports(path))


@dataclass(frozen=True)
class ImportRule:
    """A layer rule: the modules under ``folders`` (paths in memtui/) may not import a
    name for which ``forbidden(path, name)`` is true."""

    folders: tuple[str, ...]
    forbidden: Callable[[object, str], bool]
    why: str

    def paths(self):
        return list(_modules(*self.folders))

    def offenders(self, paths=None) -> list[str]:
        """``path: imported name`` for every breach, sorted (empty: the rule holds)."""
        return sorted(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: "
                      f"{name}"
                      for path in (self.paths() if paths is None else paths)
                      for name in _imports_of(path) if self.forbidden(path, name))


def _top(name: str) -> str:
    return name.split(".")[0]


def _imports_torch(path, name: str) -> bool:
    """Only memtui/record/ (the ``record`` extra) may import torch; memtui.record is
    imported only by its own command and the pytest plugin (which asks it to load torch
    when a marked test runs: ``record.recorder.load_torch``)."""
    plugin = path.name == "pytest_plugin.py"
    return _top(name) in ("torch", "torch_npu") or (
        name.startswith("memtui.record") and path.name != "record.py" and not plugin)


#: The one screen module every screen may import: the base class and the parts they share.
SHARED_SCREEN_MODULE = "memtui.tui.screens.linked"


def _imports_another_screen(path, name: str) -> bool:
    if path.name in ("__init__.py", "linked.py"):
        return False  # the registry of screens, and the shared module itself
    return name.startswith("memtui.tui.screens") and name != SHARED_SCREEN_MODULE \
        and not name.startswith(SHARED_SCREEN_MODULE + ".")


#: What analysis/ never imports: it computes and never presents (memtui.text, the
#: commands, the API, the loaders, the cache or the exports).
ABOVE_ANALYSIS = ("memtui.text", "memtui.commands", "memtui.api", "memtui.loading",
                  "memtui.cache", "memtui.export", "memtui.cli", "memtui.rankload")

IMPORT_RULES = {
    "no textual below the UI": ImportRule(
        ("sources", "analysis", "model.py"),
        lambda path, name: _top(name) in ("textual", "textual_plotext"),
        "sources/, analysis/ and the model never import textual"),
    "the viewer never imports torch": ImportRule(
        tuple(p.name for p in sorted(PACKAGE.iterdir())
              if p.name != "record" and (p.suffix == ".py" or p.is_dir())
              and p.name != "__pycache__"),
        _imports_torch, _imports_torch.__doc__),
    "sources never import analysis": ImportRule(
        ("sources",),
        lambda path, name: name.startswith(("memtui.analysis", "memtui.tui"))
        or name == "memtui.loading",
        "data flows one way: file -> source -> model -> analysis -> widget"),
    "analysis never imports the UI": ImportRule(
        ("analysis",), lambda path, name: name.startswith("memtui.tui"),
        "analysis/ is pure functions over frames"),
    "screens never import each other": ImportRule(
        ("tui/screens",), _imports_another_screen,
        f"a screen module imports no other screen module, only {SHARED_SCREEN_MODULE}"),
    "analysis computes and never presents": ImportRule(
        ("analysis",), lambda path, name: name.startswith(ABOVE_ANALYSIS),
        "analysis/ never imports " + ", ".join(ABOVE_ANALYSIS)),
    "text only presents": ImportRule(
        ("text",),
        lambda path, name: name.startswith(("memtui.tui", "memtui.commands", "memtui.sources",
                                            "textual")),
        "memtui/text/ writes results for people: it reads no file and imports no UI"),
    "exports and the API never import the UI": ImportRule(
        ("export", "api.py"),
        lambda path, name: name.startswith("memtui.tui")
        or _top(name) in ("textual", "textual_plotext"),
        "memtui/export/ and the API write from the model and the analyses: no textual"),
}


@pytest.mark.parametrize("rule", list(IMPORT_RULES))
def test_import_rule(rule):
    """Each layer rule over every module it covers: the offenders listed, none allowed."""
    checked = IMPORT_RULES[rule]
    assert checked.paths(), f"{rule}: no module to check"
    assert checked.offenders() == [], checked.why


#: A breach of each rule, as (a module path under memtui/, its source).
BREACHES = {
    "no textual below the UI": ("sources/probe.py", "from textual.app import App\n"),
    "the viewer never imports torch": ("tui/probe.py", "def later():\n    import torch\n"),
    "sources never import analysis": ("sources/probe.py", "from ..analysis import timeline\n"),
    "analysis never imports the UI": ("analysis/probe.py", "from memtui import tui\n"),
    "screens never import each other": ("tui/screens/probe.py",
                                        "from memtui.tui.screens.blocks import BlocksScreen\n"),
    "analysis computes and never presents": ("analysis/findings/probe.py",
                                             "from ...text import check\n"),
    "text only presents": ("text/probe.py", "import memtui.sources.memscope\n"),
    "exports and the API never import the UI": ("export/probe.py", "import textual_plotext\n"),
}


@pytest.mark.parametrize("rule", list(IMPORT_RULES))
def test_each_import_rule_can_fail(tmp_path, rule):
    """A module that breaks the rule (also through ``from memtui import tui``, a relative
    import or a late one) is listed, and one that keeps it is not."""
    place, source = BREACHES[rule]
    checked = IMPORT_RULES[rule]
    package = tmp_path / "memtui"
    probe, fine = package / place, package / place.replace("probe", "fine")
    probe.parent.mkdir(parents=True)
    probe.write_text(source)
    fine.write_text("import numpy\nfrom memtui import units\n")
    inside = PACKAGE / place  # where the rule looks: the probe read as if it lay there
    assert [n for n in _imports(probe, package) if checked.forbidden(inside, n)], \
        f"{rule} misses {source!r} in {place}"
    assert not [n for n in _imports(fine, package) if checked.forbidden(inside, n)]
    assert any(place.startswith(folder) for folder in checked.folders)  # a place it checks


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
