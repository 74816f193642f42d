"""Several captures at once: the rank captures in a folder (or given as several paths).

Distributed training writes one capture per rank: PyTorch snapshots named ``rank{N}``
(torchtitan, Megatron, verl), msMemScope's ``msmemscope_{pid}_{ts}_ascend/device_{id}/``
folders, one Ascend profiler ``*_ascend_pt`` / ``*_ascend_ms`` folder (or
``ascend_pytorch_profiler_{N}.db``) per rank.  :func:`discover_ranks` finds them, any mix
of the three, and says what it can tell of each from names and cheap reads: the rank
(``rank{N}``, ``ascend_pytorch_profiler_{N}.db``, ``rank_id`` of ``profiler_info_{N}.json``)
and the device (``device_{id}``).  The device names and ranks inside a capture (snapshot
``device`` fields, msMemScope ``Device Id``, profiler DB ranks) come from loading it.

This module only lists files; it loads nothing and never raises for a bad file: such a
file is kept as a capture, so that loading it fails and the caller skips it with a
warning naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: How deep under a given folder captures are looked for.
MAX_DEPTH = 4
_RANK_NAME = re.compile(r"(?:^|[^a-z])rank[_-]?(\d{1,6})(?!\d)", re.IGNORECASE)
_PROFILER_DB = re.compile(r"ascend_(?:pytorch|mindspore)_profiler_(\d{1,6})\.db$")
_DEVICE_DIR = re.compile(r"^device_(\d{1,4}|cpu)$")
_INFO_NAME = re.compile(r"^profiler_info(?:_(\d{1,6}))?\.json$")
_RANK_ROOT_SUFFIXES = ("_ascend_pt", "_ascend_ms")
_PROFILER_OUTPUT = ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output")
#: Loose Ascend profiler CSVs (one rank's data spread over several files).
_PROFILER_CSV = re.compile(
    r"(?:^|_)(memory_record|operator_memory|npu_module_mem|static_op_mem|npu_mem)"
    r"(?:_slice_\d+)?(?:_\d+)?\.csv$")
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
    """The captures found (in rank order, then path order) and what was passed over."""

    captures: list[RankCapture] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def discover_ranks(paths: Sequence[str | Path]) -> Discovery:
    """The rank captures in ``paths``: files are taken as given, folders are searched.

    One capture per real file or folder: symbolic links are resolved, so a link loop
    (``ln -s . again``) or a second name (``latest.pickle -> rank1.pickle``) adds no rank;
    of several names, the one that is not a link is kept (it names the rank)."""
    found = Discovery()
    chosen: dict[Path, tuple[RankCapture, bool]] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            candidates = _walk(path, 0, set())
            top = path.parent
            if not candidates:
                found.warnings.append(f"{path}: no capture found in this folder")
        elif path.exists():
            candidates = [path]
            top = path.parent.parent
        else:
            found.warnings.append(f"{path}: no such file or folder")
            continue
        for candidate in candidates:
            key, linked = _real(candidate), _through_a_link(candidate, top)
            if key not in chosen or (chosen[key][1] and not linked):
                chosen[key] = (describe(candidate, top), linked)
    found.captures = sorted((capture for capture, _ in chosen.values()), key=_order)
    return found


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
        if part.is_symlink():
            return True
    return False


def count_captures(paths: Sequence[str | Path]) -> int:
    """How many captures :func:`discover_ranks` finds (a cheap listing)."""
    return len(discover_ranks(paths).captures)


def describe(path: Path, top: Path | None = None) -> RankCapture:
    """A capture with the rank and device its names (and profiler_info) tell; only the
    parts of ``path`` below ``top`` count (folders above what the user gave say nothing)."""
    return RankCapture(path=path, rank=rank_of(path, top), device_id=_device_of(path, top))


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
    if path.is_dir():
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
        try:
            data = json.loads(info.read_text(encoding="utf-8", errors="replace"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "rank_id" in data:
            try:
                rank = int(data["rank_id"])
            except (TypeError, ValueError):
                continue
            return rank if rank >= 0 else None
        number = _INFO_NAME.match(info.name).group(1)
        if number is not None:
            return int(number)
    return None


def _is_rank_root(folder: Path) -> bool:
    """A folder that is one capture as a whole: a profiler rank folder, an msMemScope
    ``device_{id}`` folder, a ``PROF_*`` msprof folder."""
    name = folder.name
    if name.endswith(_RANK_ROOT_SUFFIXES) or _DEVICE_DIR.match(name) or name.startswith("PROF_"):
        return True
    return any((folder / sub).is_dir() for sub in _PROFILER_OUTPUT)


def _walk(folder: Path, depth: int, visited: set[Path]) -> list[Path]:
    """The captures under ``folder``: rank folders whole, capture files one by one; a
    folder already walked (reached again through a link) is not walked twice."""
    real = _real(folder)
    if real in visited:
        return []
    visited.add(real)
    if _is_rank_root(folder):
        return [folder]
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    found: list[Path] = []
    loose: dict[int | None, list[Path]] = {}
    for entry in entries:
        if entry.name.startswith(".") or entry.is_dir():
            continue
        if _PROFILER_CSV.search(entry.name):
            loose.setdefault(rank_of(entry), []).append(entry)
        elif _is_capture_file(entry):
            found.append(entry)
    found.extend(_primary_profiler_csv(files) for files in loose.values())
    if depth < MAX_DEPTH:
        for entry in entries:
            if entry.is_dir() and not entry.name.startswith((".", "__")):
                found.extend(_walk(entry, depth + 1, visited))
    return found


def _is_capture_file(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(_CAPTURE_SUFFIXES) and not _COMPANION.match(name)


def _primary_profiler_csv(files: list[Path]) -> Path:
    """Of one rank's loose profiler CSVs, the one that carries its levels."""
    def kind(path: Path) -> int:
        return _PROFILER_CSV_ORDER.index(_PROFILER_CSV.search(path.name).group(1))

    return min(files, key=lambda p: (kind(p), p.name))


def _order(capture: RankCapture) -> tuple:
    device = capture.device_id or ""
    return (capture.rank is None, capture.rank or 0, not device.isdigit(),
            int(device) if device.isdigit() else 0, str(capture.path))


__all__ = ["Discovery", "MAX_DEPTH", "RankCapture", "count_captures", "describe",
           "discover_ranks", "rank_of"]
