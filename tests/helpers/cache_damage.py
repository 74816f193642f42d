"""Breaking a file the reopen cache kept beside an entry, the ways the tests break them."""

from __future__ import annotations

from pathlib import Path

#: The damages :func:`damage_file` makes.
FILE_DAMAGES = ("truncate", "garbage", "missing")


def damage_file(file: Path, damage: str) -> None:
    """Cut the last 8 bytes of ``file``, overwrite it with garbage of the same size, or
    remove it (``damage`` one of :data:`FILE_DAMAGES`)."""
    if damage == "truncate":
        file.write_bytes(file.read_bytes()[:-8])
    elif damage == "garbage":
        file.write_bytes(b"\x17" * file.stat().st_size)
    elif damage == "missing":
        file.unlink()
    else:
        raise ValueError(f"no such damage: {damage}")


def only_entry(root: Path) -> Path:
    """The one entry folder under the cache ``root`` (staging folders left out)."""
    (entry,) = [p for p in root.iterdir() if not p.name.startswith(".")]
    return entry
