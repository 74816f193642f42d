"""A module's private names (``_name``) are its own: no other memtui module imports one
(``from memtui.x import _name``) or reaches for one through the module
(``from memtui.x import y`` then ``y._name``).  What two modules share is public.  A
package may import its own private compiled extension (``from memtui.sources.common
import _pairing``)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "memtui"

def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_of(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module an ``from ... import`` names, a relative one resolved."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


def _is_submodule(package: Path, module: str, name: str) -> bool:
    folder = package.parent.joinpath(*module.split("."))
    return any((folder / f"{name}{end}").exists() for end in (".py", "", ".c")) or any(
        folder.glob(f"{name}.*.so")) or any(folder.glob(f"{name}.*.pyd"))  # .c: an extension


def private_uses(path: Path, package: Path = PACKAGE) -> list[tuple[str, str, int]]:
    """``(module used, private name, line)`` for each private name of another memtui
    module that ``path`` imports or reads as a module attribute."""
    module = _module_of(path, package)
    is_package = path.name == "__init__.py"
    own_package = module if is_package else module.rpartition(".")[0]
    root = package.name
    tree = ast.parse(path.read_text())
    uses: list[tuple[str, str, int]] = []
    bound: dict[str, str] = {}  # a local name -> the memtui module it is
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == root:
                    bound[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            if source.split(".")[0] != root or source == module:
                continue
            for alias in node.names:
                if _is_submodule(package, source, alias.name):
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                    if _private(alias.name) and source != own_package:
                        uses.append((source, alias.name, node.lineno))
                elif _private(alias.name):
                    uses.append((source, alias.name, node.lineno))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in bound
                and bound[node.value.id] != module):
            uses.append((bound[node.value.id], node.attr, node.lineno))
    return uses


def _all_uses(package: Path = PACKAGE) -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for source, name, line in private_uses(path, package):
            where = str(path.relative_to(package.parent))
            found.setdefault((where, source), []).append(f"{name} (line {line})")
    return found


def test_no_module_uses_another_modules_private_name():
    found = _all_uses()
    assert not found, "private names used across modules (make them public):\n" + "\n".join(
        f"{where} uses {source}'s {', '.join(names)}" for (where, source), names
        in sorted(found.items()))


def _write(root: Path, files: dict[str, str]) -> Path:
    package = root / "memtui"
    for name, text in files.items():
        target = package / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return package


def test_the_check_catches_each_way_of_reaching_a_private_name(tmp_path):
    package = _write(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "",
        "a/read.py": "def _chunks(): ...\ndef chunks(): ...\n",
        "a/_rows.cpython-311-x86_64-linux-gnu.so": "",
        "a/tail.py": ("from memtui.a.read import _chunks, chunks\n"
                      "from memtui.a import read\n"
                      "from . import _rows\n"
                      "import memtui.a.read as r\n"
                      "read._chunks(); r._chunks(); read.chunks(); _rows.make()\n"),
        "b/__init__.py": "",
        "b/use.py": "from ..a import _rows\nfrom ..a.read import _chunks\n",
    })
    tail = sorted((s, n) for s, n, _ in private_uses(package / "a" / "tail.py", package))
    assert tail == [("memtui.a.read", "_chunks")] * 3
    use = sorted((s, n) for s, n, _ in private_uses(package / "b" / "use.py", package))
    assert use == [("memtui.a", "_rows"), ("memtui.a.read", "_chunks")]
