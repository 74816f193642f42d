"""DESIGN.md section 2, the layers: sources/ and analysis/ never import textual, sources/ never
imports analysis/, a screen module imports no other screen module, nothing imports torch."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "memtui"


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


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
    """Only memtui/record/ (the ``record`` extra) may import torch, and nothing imports it
    but its own command and the pytest plugin (which imports it when a marked test runs;
    ``import torch`` there is the check for it)."""
    plugin = path.name == "pytest_plugin.py"
    bad = [name for name in _imports(path)
           if (name.split(".")[0] in ("torch", "torch_npu") and not plugin)
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
    bad = [name for name in screens if name != SHARED_SCREEN_MODULE]
    assert not bad, f"{path} imports other screen modules {bad}"


def test_layer_rules_catch_a_breach(tmp_path):
    """The checks above can fail: a module that imports across a layer is seen."""
    module = tmp_path / "breach.py"
    module.write_text("from memtui.analysis.levels import allocated_level\n"
                      "import memtui.tui.screens.blocks\n")
    found = list(_imports(module))
    assert "memtui.analysis.levels" in found and "memtui.tui.screens.blocks" in found


@pytest.mark.parametrize("path", list(_modules("export", "api.py")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_exports_and_the_api_never_import_the_ui(path):
    """memtui/export/ and the API write from the model and the analyses: no textual."""
    bad = [name for name in _imports(path) if name.startswith("memtui.tui")
           or name.split(".")[0] in ("textual", "textual_plotext")]
    assert not bad, f"{path} imports {bad}"
