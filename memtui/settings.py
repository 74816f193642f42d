"""memtui's settings in ``pyproject.toml``: ``[tool.memtui.<section>]``, read without surprises.

The one reader of memtui's tables in a project's ``pyproject.toml`` (``[tool.memtui.check]``
for ``memtui check``'s limits; other sections for other commands).  Light: the standard
library and :mod:`memtui.errors` only.

Whatever the file holds, reading it ends in a table of settings or in one
:class:`~memtui.errors.CaptureError` naming the file and the problem, never a traceback:

* a file that cannot be read, is not UTF-8 or is not TOML;
* ``tool``, ``tool.memtui`` or the section that is not a table (``tool = "x"``,
  ``[tool]`` with ``memtui = 1``): said, with what it is instead;
* a key unknown to the section (its known keys listed), or one setting given twice in its
  two spellings (``max_peak`` and ``max-peak``: TOML sees two keys, the user one setting).

Keys come back spelt with dashes (``max-peak``), as the command line spells them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memtui.errors import CaptureError

PYPROJECT = "pyproject.toml"
#: Bytes of a pyproject.toml read at most (a settings file, not a data file).
MAX_BYTES = 4 << 20


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at ``start`` or in a folder above it (None: none;
    a folder that cannot be looked into is passed over)."""
    for folder in (start, *start.parents):
        candidate = folder / PYPROJECT
        try:
            if candidate.is_file():
                return candidate
        except OSError:
            continue
    return None


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML document at ``path``; a CaptureError where it cannot be read or parsed."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise CaptureError(path, f"cannot read it ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:
        raise CaptureError(path, f"larger than {MAX_BYTES >> 20} MiB: not a settings file")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CaptureError(path, "not UTF-8 text, as TOML must be") from None
    except tomllib.TOMLDecodeError as exc:
        raise CaptureError(path, f"not valid TOML ({exc})") from None
    except RecursionError:
        raise CaptureError(path, "not valid TOML (nested too deeply)") from None


def _kind(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "a number", float: "a number",
             list: "an array"}
    return names.get(type(value), type(value).__name__)


def tool_section(data: Mapping[str, Any], section: str, path: Path) -> dict[str, Any]:
    """``data["tool"]["memtui"][section]`` where present (empty where any level is
    missing); a CaptureError naming ``path`` where a level is not a table."""
    node: Any = data
    where: list[str] = []
    for part in ("tool", "memtui", section):
        where.append(part)
        if not isinstance(node, Mapping) or part not in node:
            return {}
        node = node[part]
        if not isinstance(node, Mapping):
            raise CaptureError(path, f"[{'.'.join(where)}] must be a table, not "
                                     f"{_kind(node)}")
    return dict(node)


def dashed_keys(table: Mapping[str, Any], known: Iterable[str], section: str,
                path: Path | str) -> dict[str, Any]:
    """``table`` with its keys spelt with dashes; a CaptureError naming ``path`` for a key
    not in ``known`` (spelt with dashes) or a setting given in both spellings."""
    known = tuple(known)
    out: dict[str, Any] = {}
    spelt: dict[str, str] = {}
    for key, value in table.items():
        name = str(key).replace("_", "-")
        if name not in known:
            raise CaptureError(path, f"[tool.memtui.{section}]: unknown key {str(key)!r} "
                                     f"(known: {', '.join(known)})")
        if name in out:
            raise CaptureError(path, f"[tool.memtui.{section}]: {spelt[name]!r} and "
                                     f"{str(key)!r} are the same setting: give it once")
        out[name], spelt[name] = value, str(key)
    return out


def read_settings(path: Path, section: str, known: Iterable[str]) -> dict[str, Any]:
    """``[tool.memtui.<section>]`` of the ``pyproject.toml`` at ``path``, keys spelt with
    dashes and each one of ``known``; empty where the file has no such section."""
    return dashed_keys(tool_section(read_toml(path), section, path), known, section, path)


__all__ = ["dashed_keys", "find_pyproject", "read_settings", "read_toml", "tool_section"]
