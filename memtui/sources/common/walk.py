"""The one way memtui looks into a folder: a bounded walk that does not wander.

Every listing of a folder's captures (the ranks of a run, a profiler folder's files, an
msMemScope result folder, the reopen cache's look at a profiler folder) goes through
:func:`walk`, which

* never follows a symbolic link to a folder (a link to a file is a file, read where it
  points: one file the user placed there; a link to a folder could lead anywhere, round
  a loop or to ``/``);
* goes at most :data:`MAX_DEPTH` levels below the folder given and looks at most at
  :data:`MAX_ENTRIES` entries in all, then stops and says so (``truncated``): a walk of
  ``/`` or of a home folder ends in a moment and claims nothing;
* skips hidden entries (``.name``) and what cannot be read (a folder without permission,
  ``x -> /proc/1/cwd``), counting each with the first one named: never an exception.

Each folder comes as a :class:`Folder` (its files and sub-folders, sorted); the caller
prunes ``folder.dirs`` in place to keep the walk out of a sub-folder, as with
:func:`os.walk`.  What was passed over is gathered in a :class:`WalkNotes`, whose
:meth:`~WalkNotes.warnings` are lines for people.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: Levels below the folder given that are looked into (a run's rank folders, a profiler
#: folder's ASCEND_PROFILER_OUTPUT, msMemScope's msmemscope_*_ascend/device_N/dump/).
MAX_DEPTH = 5
#: Entries (files and folders) looked at, at most, in one walk.
MAX_ENTRIES = 20_000


@dataclass
class Folder:
    """One folder of a walk: its path, depth below the root, files and sub-folders."""

    path: Path
    depth: int
    files: list[Path] = field(default_factory=list)
    dirs: list[Path] = field(default_factory=list)


@dataclass
class WalkNotes:
    """What a walk passed over: unreadable entries, links to folders, its caps."""

    unreadable: list[str] = field(default_factory=list)
    folder_links: list[Path] = field(default_factory=list)
    entries: int = 0
    truncated: bool = False
    too_deep: int = 0
    max_entries: int = MAX_ENTRIES
    max_depth: int = MAX_DEPTH

    def warnings(self, root: Path | str) -> list[str]:
        """One line for people per kind of thing passed over."""
        lines = []
        if self.unreadable:
            more = f" and {len(self.unreadable) - 1} more" if len(self.unreadable) > 1 else ""
            lines.append(f"{root}: skipped what could not be read: {self.unreadable[0]}{more}")
        if self.folder_links:
            lines.append(f"{root}: {len(self.folder_links)} link(s) to folders not followed "
                         f"(first: {self.folder_links[0]})")
        if self.too_deep:
            lines.append(f"{root}: {self.too_deep} folder(s) more than {self.max_depth} levels "
                         "down not looked into (name a folder nearer the capture)")
        if self.truncated:
            lines.append(f"{root}: stopped after {self.max_entries:,} entries: not every "
                         "capture in it was looked for (name the run's own folder)")
        return lines


def walk(root: Path | str, *, max_depth: int | None = None, max_entries: int | None = None,
         notes: WalkNotes | None = None) -> Iterator[Folder]:
    """The folders under ``root`` (itself first), depth first in name order; see the
    module docstring (the caps default to :data:`MAX_DEPTH` and :data:`MAX_ENTRIES`).
    ``notes`` (made by the caller) gathers what was passed over."""
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    max_entries = MAX_ENTRIES if max_entries is None else max_entries
    notes = notes if notes is not None else WalkNotes()
    notes.max_entries, notes.max_depth = max_entries, max_depth
    stack = [(Path(root), 0)]
    while stack:
        path, depth = stack.pop()
        folder = _list(path, depth, notes, max_entries)
        if folder is None:
            if notes.truncated:
                return
            continue
        if depth >= max_depth and folder.dirs:
            notes.too_deep += len(folder.dirs)
            folder.dirs = []
        yield folder
        if notes.truncated:
            return
        stack.extend((sub, depth + 1) for sub in reversed(folder.dirs))


def _list(path: Path, depth: int, notes: WalkNotes, max_entries: int) -> Folder | None:
    """The files and sub-folders of ``path`` (None where it cannot be listed, or where the
    entry cap is reached: ``notes.truncated``)."""
    entries = []
    try:
        with os.scandir(path) as scan:
            for entry in scan:  # (a folder of millions of entries is not read whole)
                notes.entries += 1
                if notes.entries > max_entries:
                    notes.truncated = True
                    break
                entries.append(entry)
    except OSError as exc:
        notes.unreadable.append(f"{path}: {exc.strerror or exc}")
        return None
    folder = Folder(path, depth)
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_symlink():
                if entry.is_dir():  # (follows the link: never walked into)
                    notes.folder_links.append(Path(entry.path))
                elif entry.is_file():
                    folder.files.append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                folder.dirs.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                folder.files.append(Path(entry.path))
        except OSError as exc:
            notes.unreadable.append(f"{entry.path}: {exc.strerror or exc}")
    return folder


def too_big() -> str:
    """What a folder whose walk stopped at the entry cap is told (one line's end)."""
    return (f"holds more than {MAX_ENTRIES:,} entries within {MAX_DEPTH} levels: not the "
            "folder of one run (name the capture, or its run's own folder)")


def files_under(root: Path | str, *, max_depth: int | None = None,
                max_entries: int | None = None,
                notes: WalkNotes | None = None) -> Iterator[Path]:
    """Every file :func:`walk` finds under ``root``, in its order."""
    for folder in walk(root, max_depth=max_depth, max_entries=max_entries, notes=notes):
        yield from folder.files


__all__ = ["MAX_DEPTH", "MAX_ENTRIES", "Folder", "WalkNotes", "files_under", "too_big",
           "walk"]
