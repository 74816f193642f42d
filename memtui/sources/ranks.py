"""Several captures at once: the rank captures in a folder (or given as several paths).

Distributed training writes one capture per rank: PyTorch snapshots named ``rank{N}``
(torchtitan, Megatron, verl), msMemScope's ``msmemscope_{pid}_{ts}_ascend/device_{id}/``
folders, one Ascend profiler ``*_ascend_pt`` / ``*_ascend_ms`` folder (or
``ascend_pytorch_profiler_{N}.db``) per rank.  :func:`discover_ranks` finds them, any mix
of the three, and says what it can tell of each from names and cheap reads: the rank
(``rank{N}``, ``ascend_pytorch_profiler_{N}.db``, ``rank_id`` of ``profiler_info_{N}.json``)
and the device (``device_{id}``).  The device names and ranks inside a capture (snapshot
``device`` fields, msMemScope ``Device Id``, profiler DB ranks) come from loading it.

Loose Ascend profiler files of one rank (``rank0_memory_record.csv``,
``rank0_operator_memory.csv``, ``rank0_profiler_info_0.json``: one folder, one name
prefix) are one capture, opened together (:mod:`memtui.sources.common.groups`); its rank
is its ``profiler_info``'s ``rank_id``.  What is passed over is said in ``warnings``:
profiler metadata with no memory file of its own, python traces that belong to no one
dump, what could not be read, a rank that several captures name (several runs side by
side), a walk stopped at its cap.

The folders are walked by :func:`memtui.sources.common.walk.walk` (bounded: no link to a
folder followed, a depth and an entry cap, unreadable entries skipped with a warning).
This module only lists files; it loads nothing and never raises for a bad file: such a
file is kept as a capture, so that loading it fails and the caller skips it with a
warning naming it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memtui.sources.common.groups import (
    MEMSCOPE_DUMP,
    PROFILER_INFO,
    profiler_group,
    profiler_kind,
)
from memtui.sources.common.walk import WalkNotes, walk

_RANK_NAME = re.compile(r"(?:^|[^a-z])rank[_-]?(\d{1,6})(?!\d)", re.IGNORECASE)
_PROFILER_DB = re.compile(r"ascend_(?:pytorch|mindspore)_profiler_(\d{1,6})\.db$")
_DEVICE_DIR = re.compile(r"^device_(\d{1,4}|cpu)$")
_INFO_NAME = re.compile(r"^profiler_info(?:_(\d{1,6}))?\.json$")
_RANK_ROOT_SUFFIXES = ("_ascend_pt", "_ascend_ms")
_PROFILER_OUTPUT = ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output")
_PROFILER_CSV_ORDER = ("memory_record", "operator_memory", "npu_module_mem", "npu_mem",
                       "static_op_mem")
#: File names that may hold a capture (checked by content when loaded).
_CAPTURE_SUFFIXES = (".pickle", ".pkl", ".pt", ".db", ".csv", ".dat")
#: Companion files that are never a capture of their own.
_COMPANION = re.compile(r"^(python_trace_.*\.csv|.*\.db-(wal|shm|journal))$")


@dataclass(frozen=True)
class RankCapture:
    """One capture among several: its path and what its names say of it."""

    path: Path
    rank: int | None = None
    device_id: str | None = None  # the ``{id}`` of a ``device_{id}`` folder

    @property
    def label(self) -> str:
        return self.path.name


@dataclass
class Discovery:
    """The captures found (in rank order, then path order) and what was passed over
    (``truncated``: a walk stopped at its entry cap, so some may be missing)."""

    captures: list[RankCapture] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    truncated: bool = False


def discover_ranks(paths: Sequence[str | Path]) -> Discovery:
    """The rank captures in ``paths``: files are taken as given, folders are searched
    (a bounded walk: see the module docstring).

    One capture per real file or folder: symbolic links to files are resolved, so a
    second name (``latest.pickle -> rank1.pickle``) adds no rank; of several names, the
    one that is not a link is kept (it names the rank)."""
    found = Discovery()
    chosen: dict[Path, tuple[RankCapture, bool]] = {}
    for raw in paths:
        path = Path(raw)
        kind = _kind_of(path, found)
        if kind == "folder":
            candidates = _walk(path, found)
            top = path.parent
            if not candidates and not found.truncated:
                found.warnings.append(f"{path}: no capture found in this folder")
        elif kind == "file":
            candidates = [describe(path, path.parent.parent)]
            top = path.parent.parent
        else:
            continue
        for candidate in candidates:
            key, linked = _real(candidate.path), _through_a_link(candidate.path, top)
            if key not in chosen or (chosen[key][1] and not linked):
                chosen[key] = (candidate, linked)
    found.captures = sorted((capture for capture, _ in chosen.values()), key=_order)
    found.warnings.extend(_shared_ranks(found.captures))
    return found


def complete_ranks(paths: Sequence[str | Path], where: str | Path) -> Discovery:
    """:func:`discover_ranks`, or a CaptureError naming ``where`` when a walk stopped at
    its entry cap (``memtui summary /``: a folder that is no run's is refused, not read
    for whatever captures lie anywhere below it) or found nothing."""
    from memtui.errors import CaptureError
    from memtui.sources.common.walk import too_big

    found = discover_ranks(paths)
    if found.truncated:
        raise CaptureError(where, too_big())
    if not found.captures:
        unread = [w for w in found.warnings if "could not be read" in w or "no such" in w]
        raise CaptureError(where, "holds no capture memtui reads"
                                  + (f" ({unread[0]})" if unread else ""))
    return found


def _kind_of(path: Path, found: Discovery) -> str | None:
    """``"folder"``, ``"file"``, or None (missing or unreadable: said in a warning)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        found.warnings.append(f"{path}: no such file or folder")
        return None
    except OSError as exc:
        found.warnings.append(f"{path}: cannot be read ({exc.strerror or exc})")
        return None
    return "folder" if stat.S_ISDIR(info.st_mode) else "file"


def _shared_ranks(captures: list[RankCapture]) -> list[str]:
    """A warning per rank that several captures name (runs side by side, each shown by
    its name), unless they are one rank's devices (msMemScope ``device_N`` folders)."""
    by_rank: dict[int, list[RankCapture]] = {}
    for capture in captures:
        if capture.rank is not None:
            by_rank.setdefault(capture.rank, []).append(capture)
    lines = []
    for rank, named in sorted(by_rank.items()):
        devices = {c.device_id for c in named}
        if len(named) < 2 or (None not in devices and len(devices) == len(named)):
            continue
        names = ", ".join(c.label for c in named[:4]) + (
            f" and {len(named) - 4} more" if len(named) > 4 else "")
        lines.append(f"rank {rank} is named by {len(named)} captures ({names}): several "
                     "runs side by side? each row names its file")
    return lines


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a loop: the name itself
        return path.absolute()


def _through_a_link(path: Path, top: Path) -> bool:
    """Whether ``path`` or a folder between ``top`` and it is a symbolic link."""
    for part in [path, *path.parents]:
        if part == top or part == part.parent:
            return False
        try:
            if stat.S_ISLNK(os.lstat(part).st_mode):
                return True
        except OSError:
            return False
    return False


def count_captures(paths: Sequence[str | Path]) -> int:
    """How many captures :func:`discover_ranks` finds (a cheap listing)."""
    return len(discover_ranks(paths).captures)


def describe(path: Path, top: Path | None = None) -> RankCapture:
    """A capture with the rank and device its names (and profiler_info) tell; only the
    parts of ``path`` below ``top`` count (folders above what the user gave say nothing).
    A loose profiler CSV stands for its group: its rank is the group's profiler_info's."""
    rank = None
    if path.name.endswith(".csv") and profiler_kind(path.name) is not None:
        _, info = profiler_group(path)
        rank = _rank_of_info_file(info) if info is not None else None
    if rank is None:
        rank = rank_of(path, top)
    return RankCapture(path=path, rank=rank, device_id=_device_of(path, top))


def _parts_below(path: Path, top: Path | None) -> tuple[str, ...]:
    if top is not None:
        try:
            return path.relative_to(top).parts
        except ValueError:
            pass
    return path.parts


def rank_of(path: Path, top: Path | None = None) -> int | None:
    """The rank ``path`` names (its parts below ``top``), innermost part first; for a
    profiler folder, the ``rank_id`` of its ``profiler_info_{N}.json``."""
    if _is_folder(path):
        rank = _rank_of_info(path)
        if rank is not None:
            return rank
    match = _PROFILER_DB.search(path.name)
    if match:
        return int(match.group(1))
    for part in reversed(_parts_below(path, top)):
        match = _RANK_NAME.search(part)
        if match:
            return int(match.group(1))
    return None


def _device_of(path: Path, top: Path | None = None) -> str | None:
    for part in reversed(_parts_below(path, top)):
        match = _DEVICE_DIR.match(part)
        if match:
            return match.group(1)
    return None


def _rank_of_info(folder: Path) -> int | None:
    """``rank_id`` of ``profiler_info_{N}.json`` (``-1``: not distributed), else its ``N``."""
    try:
        infos = sorted(p for p in folder.iterdir() if _INFO_NAME.match(p.name))
    except OSError:
        return None
    for info in infos:
        rank = _rank_of_info_file(info)
        if rank is not None:
            return rank
    return None


def _rank_of_info_file(info: Path) -> int | None:
    """``rank_id`` of one ``[prefix]profiler_info[_N].json`` (None for ``-1``: not
    distributed), else the ``N`` of its name; None where it says neither."""
    try:
        with open(info, encoding="utf-8", errors="replace") as fh:
            data = json.loads(fh.read(1 << 20))
    except (OSError, ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and "rank_id" in data:
        try:
            rank = int(data["rank_id"])
        except (TypeError, ValueError, OverflowError):
            return None
        return rank if rank >= 0 else None
    match = PROFILER_INFO.match(info.name)
    number = match.group("rank") if match else None
    return int(number) if number is not None else None


def is_profiler_root(folder: Path) -> bool:
    """A folder that is one Ascend profiler rank as a whole: ``*_ascend_pt`` /
    ``*_ascend_ms``, ``PROF_*``, its ``ASCEND_PROFILER_OUTPUT`` (or msprof's
    ``mindstudio_profiler_output``), or a folder holding one of those."""
    name = folder.name
    if name.endswith(_RANK_ROOT_SUFFIXES) or name.startswith("PROF_") or \
            name in _PROFILER_OUTPUT:
        return True
    return any(_is_folder(folder / sub) for sub in _PROFILER_OUTPUT)


def is_rank_root(folder: Path) -> bool:
    """A folder that is one capture as a whole: a profiler rank folder
    (:func:`is_profiler_root`), an msMemScope ``device_{id}`` folder."""
    return is_profiler_root(folder) or bool(_DEVICE_DIR.match(folder.name))


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _walk(folder: Path, found: Discovery) -> list[RankCapture]:
    """The captures under ``folder`` (bounded: :func:`memtui.sources.common.walk.walk`):
    rank folders whole, loose profiler files by group, capture files one by one;
    ``found`` gets the warnings of what was passed over."""
    if is_rank_root(folder):
        return [describe(folder, folder.parent)]
    notes = WalkNotes()
    captures: list[RankCapture] = []
    for listed in walk(folder, notes=notes):
        roots = [d for d in listed.dirs if is_rank_root(d)]
        listed.dirs[:] = [d for d in listed.dirs
                          if d not in roots and not d.name.startswith("__")]
        captures += [describe(root, folder.parent) for root in roots]
        captures += _loose_captures(listed.files, folder.parent, found)
    found.warnings.extend(notes.warnings(folder))
    found.truncated = found.truncated or notes.truncated
    return captures


def _loose_captures(files: list[Path], top: Path, found: Discovery) -> list[RankCapture]:
    """The captures among one folder's files: each profiler group once (by its primary
    CSV), each other capture file; ``found`` is told of what is left out."""
    captures, groups, infos = [], set(), []
    dumps = [f for f in files if MEMSCOPE_DUMP.search(f.name) and not _COMPANION.match(f.name)]
    for file in files:
        named = profiler_kind(file.name)
        if named is not None:
            if named[0] not in groups:
                groups.add(named[0])
                members = [f for f in files if (k := profiler_kind(f.name)) and k[0] == named[0]]
                captures.append(describe(_primary_profiler_csv(members), top))
        elif PROFILER_INFO.match(file.name):
            infos.append(file)
        elif _is_capture_file(file):
            captures.append(describe(file, top))
    for info in infos:
        if PROFILER_INFO.match(info.name).group("prefix") not in groups:
            found.warnings.append(f"{info}: profiler metadata with no memory file beside it "
                                  "(memory_record.csv, operator_memory.csv): left out")
    traces = [f for f in files if f.name.startswith("python_trace_") and f.suffix == ".csv"]
    if traces and len(dumps) > 1:
        found.warnings.append(f"{traces[0].parent}: {len(traces)} python trace file(s) left "
                              f"out: {len(dumps)} dumps lie beside them and nothing says "
                              "whose they are")
    return captures


def _is_capture_file(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(_CAPTURE_SUFFIXES) and not _COMPANION.match(name)


def _primary_profiler_csv(files: list[Path]) -> Path:
    """Of one rank's loose profiler CSVs, the one that carries its levels."""
    def kind(path: Path) -> int:
        return _PROFILER_CSV_ORDER.index(profiler_kind(path.name)[1])

    return min(files, key=lambda p: (kind(p), p.name))


def _order(capture: RankCapture) -> tuple:
    device = capture.device_id or ""
    return (capture.rank is None, capture.rank or 0, not device.isdigit(),
            int(device) if device.isdigit() else 0, str(capture.path))


__all__ = ["Discovery", "RankCapture", "complete_ranks", "count_captures",
           "describe",
           "discover_ranks", "is_profiler_root", "is_rank_root", "rank_of"]
