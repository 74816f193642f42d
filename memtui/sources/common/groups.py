"""Files that are one capture together, found by their names beside each other.

Light (standard library only): the reopen cache keys a file by the files read with it,
before any source is imported.

* An Ascend profiler rank's CSVs: ``memory_record.csv`` holds the levels,
  ``operator_memory.csv`` the operators' blocks, ``npu_module_mem.csv`` and
  ``static_op_mem.csv`` more curves; each is half of the picture, so a profiler CSV opens
  with the others of its group (:func:`profiler_group`): the files in the same folder whose
  names differ only in the kind (``memory_record``...) and its ``_slice_N`` / timestamp
  tail, the prefix before the kind being the same (``rank0_memory_record.csv`` and
  ``rank0_operator_memory.csv``; copies renamed ``run__memory_record.csv`` too), with
  the ``<prefix>profiler_info[_N].json`` that names the rank.
* An msMemScope dump opens with the ``python_trace_*.csv`` files beside it where it is the
  only dump in its folder (:func:`memscope_traces`): nothing else says which dump a python
  trace belongs to.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PROFILER_KINDS = ("memory_record", "operator_memory", "npu_module_mem", "static_op_mem",
                  "npu_mem")
#: A profiler CSV's name: a prefix (empty, or ending in ``_``), its kind, its tail.
PROFILER_CSV = re.compile(
    r"^(?P<prefix>(?:.*_)?)(?P<kind>" + "|".join(PROFILER_KINDS) +
    r")(?P<tail>(?:_slice_\d{1,2})?(?:_\d{1,20})?)\.csv$")
PROFILER_INFO = re.compile(r"^(?P<prefix>(?:.*_)?)profiler_info(?:_(?P<rank>\d{1,6}))?\.json$")
MEMSCOPE_DUMP = re.compile(r"(memscope_dump|leaks_dump)_.*\.(db|csv)$")
PYTHON_TRACE = re.compile(r"^python_trace_.*\.csv$")
#: Entries of a folder looked at, at most, when finding a file's group.
MAX_SIBLINGS = 20_000


def profiler_kind(name: str) -> tuple[str, str] | None:
    """(prefix, kind) of a profiler CSV's file name, or None."""
    match = PROFILER_CSV.match(name)
    return (match.group("prefix"), match.group("kind")) if match else None


def _siblings(path: Path) -> list[str]:
    """The names beside ``path`` (at most :data:`MAX_SIBLINGS`; none where the folder
    cannot be listed), sorted."""
    names = []
    try:
        with os.scandir(path.parent) as scan:
            for entry in scan:
                names.append(entry.name)
                if len(names) >= MAX_SIBLINGS:
                    break
    except OSError:
        return []
    return sorted(names)


def profiler_group(path: Path) -> tuple[list[Path], Path | None]:
    """The profiler CSVs of ``path``'s group (``path`` among them) and its
    ``profiler_info`` file (None without one); ``[path], None`` for a file of no group."""
    path = Path(path)
    own = profiler_kind(path.name)
    if own is None:
        return [path], None
    prefix = own[0]
    files, info = [], None
    for name in _siblings(path):
        kind = profiler_kind(name)
        if kind is not None and kind[0] == prefix:
            files.append(path.with_name(name))
        elif info is None and (match := PROFILER_INFO.match(name)) and \
                match.group("prefix") == prefix:
            info = path.with_name(name)
    if path not in files:
        files.append(path)
    return files, info


def memscope_traces(path: Path) -> list[Path]:
    """The ``python_trace_*.csv`` files beside the msMemScope dump ``path`` where it is the
    only dump in its folder (empty otherwise, and for a file that is no dump)."""
    path = Path(path)
    if not MEMSCOPE_DUMP.search(path.name) or PYTHON_TRACE.match(path.name):
        return []
    names = _siblings(path)
    dumps = [n for n in names if MEMSCOPE_DUMP.search(n) and not n.endswith(("-wal", "-shm"))]
    if dumps != [path.name]:
        return []
    return [path.with_name(n) for n in names if PYTHON_TRACE.match(n)]


def read_with(path: Path) -> list[Path]:
    """The files read together with ``path`` (itself excluded): its profiler group and
    info file, or the python traces of its dump."""
    path = Path(path)
    files, info = profiler_group(path)
    found = [f for f in files if f != path] + ([info] if info is not None else [])
    return found + memscope_traces(path)


__all__ = ["MEMSCOPE_DUMP", "PROFILER_CSV", "PROFILER_INFO", "PROFILER_KINDS",
           "memscope_traces", "profiler_group", "profiler_kind", "read_with"]
