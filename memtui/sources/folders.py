"""What a folder means, the same for every command and the API: ranks, or one capture.

A folder is listed by :func:`memtui.sources.ranks.discover_ranks` (a bounded walk: no
link to a folder followed, a depth and an entry cap, what cannot be read skipped with a
warning).  Then, by :func:`folder_target`:

* a folder that is one capture by its layout (a profiler ``*_ascend_pt`` folder, its
  ``ASCEND_PROFILER_OUTPUT``, an msMemScope ``device_N`` folder) is that capture;
* a folder holding one capture is that capture (the file or folder inside it);
* a folder holding several is their ranks (``memtui summary``, the ranks screen), and
  is one capture only where they are one result: every one a profiler rank folder (one
  device per rank, as a profiler run writes them side by side), or every one a
  ``device_N`` folder of the same msMemScope process folder;
* otherwise a command that reads one capture (``findings``, ``check``, ``report``, the
  API's ``memtui.open``) is told in one line how many captures the folder holds and how
  to see them (never two unrelated dumps merged into one capture's events);
* a walk that stopped at its entry cap (``/``, a home folder) means nothing: one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from memtui.errors import CaptureError
from memtui.sources.common.walk import too_big
from memtui.sources.ranks import Discovery, discover_ranks, is_profiler_root, is_rank_root


@dataclass
class FolderTarget:
    """What a folder opens as: one ``capture`` (a file or a folder inside it, or the
    folder itself), or ``profiler_roots`` read as one capture of several ranks; with the
    ``warnings`` of its listing."""

    folder: Path
    capture: Path | None = None
    profiler_roots: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def folder_target(folder: Path) -> FolderTarget:
    """What ``folder`` opens as (see the module docstring); a CaptureError where it is
    not one capture."""
    folder = Path(folder)
    if is_rank_root(folder):
        return FolderTarget(folder, capture=folder)
    found = discover_ranks([folder])
    if found.truncated:
        raise CaptureError(folder, too_big())
    captures = [c.path for c in found.captures]
    warnings = [w for w in found.warnings if "no capture found" not in w]
    if len(captures) == 1:
        return FolderTarget(folder, capture=captures[0], warnings=warnings)
    if captures and all(_is_dir(c) and is_profiler_root(c) for c in captures):
        return FolderTarget(folder, profiler_roots=captures, warnings=warnings)
    parents = {c.parent for c in captures}
    if captures and len(parents) == 1 and all(_is_dir(c) and is_rank_root(c)
                                              for c in captures):
        return FolderTarget(folder, capture=parents.pop(), warnings=warnings)
    if not captures:
        raise CaptureError(folder, _nothing_in(folder, found))
    raise CaptureError(folder, _several(folder, captures))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


#: What memtui reads, said where a folder holds none of it.
KINDS = "PyTorch snapshots, msMemScope dumps and folders, Ascend profiler files and folders"


def _nothing_in(folder: Path, found: Discovery) -> str:
    """Why a folder holds no capture: empty, nothing in it a capture file by its name, and
    the first thing the walk passed over (unreadable, a link to a folder, too deep)."""
    try:
        empty = next(os.scandir(folder), None) is None
    except OSError:
        empty = False
    why = (f"no capture in this folder: it is empty (memtui reads {KINDS})" if empty else
           f"no capture in this folder: nothing in it is a format memtui reads ({KINDS})")
    skipped = [w for w in found.warnings if any(
        said in w for said in ("could not be read", "not followed", "levels down", "stopped"))]
    return f"{why}; {skipped[0]}" if skipped else why


def _several(folder: Path, captures: list[Path]) -> str:
    names = []
    for capture in captures[:3]:
        try:
            names.append(str(capture.relative_to(folder)))
        except ValueError:
            names.append(str(capture))
    more = f" and {len(captures) - 3} more" if len(captures) > 3 else ""
    return (f"holds {len(captures)} captures ({', '.join(names)}{more}), not one: open one "
            f"of them, or see them side by side as ranks (memtui summary {folder}, or "
            f"memtui {folder})")


__all__ = ["FolderTarget", "folder_target"]
