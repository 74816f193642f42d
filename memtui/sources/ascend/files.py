"""Where the Ascend profiler's memory files are, and what each one is.

Owns three things for the Ascend profiler source (``sources/ascend/__init__.py``):

* :func:`classify_file`: what a single file holds, decided by its content (CSV header,
  SQLite tables, JSON keys), never by its name, so renamed or prefixed copies open too;
* :func:`discover`: the ranks under a folder (a ``*_ascend_pt`` / ``*_ascend_ms`` folder,
  its ``ASCEND_PROFILER_OUTPUT/``, ``PROF_*/mindstudio_profiler_output/``, or a parent
  holding several ranks), found by the file names the profiler writes, and which files of
  each rank to read: the framework DB first (as MindStudio Insight does), else the
  framework CSVs, else the msprof DB, else the msprof CSVs;
* :func:`rank_of_root`: the rank id from ``profiler_info_{N}.json``.

See ../shared/formats/ascend_profiler.md sections 1 and 4.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from memtui.sources.common.files import read_head
from memtui.sources.common.groups import PROFILER_INFO
from memtui.sources.common.sqlite import is_sqlite, table_names
from memtui.sources.common.walk import WalkNotes, walk

# Kinds of file.
RECORD = "memory_record"
OPERATOR = "operator_memory"
MODULE = "npu_module_mem"
STATIC = "static_op_mem"
NPU_MEM = "npu_mem"
DB = "db"
INFO = "profiler_info"
CSV_KINDS = (RECORD, OPERATOR, MODULE, STATIC, NPU_MEM)

#: Tables that make a SQLite file a profiler memory DB.
MEMORY_TABLES = frozenset({"MEMORY_RECORD", "OP_MEMORY", "NPU_OP_MEM", "NPU_MEM", "NPU_MODULE_MEM"})
#: Tables of msMemScope DBs: such files belong to another source.
MEMSCOPE_TABLES = frozenset({"memscope_dump", "leaks_dump"})

_SLICE_TS = r"(_slice_\d{1,2})?(_\d{1,20})?"
#: File names the profiler writes (anchored: files carrying another prefix are found only
#: when opened one by one, by content).
NAME_PATTERNS: dict[str, re.Pattern[str]] = {
    RECORD: re.compile(rf"^memory_record{_SLICE_TS}\.csv$"),
    OPERATOR: re.compile(rf"^operator_memory{_SLICE_TS}\.csv$"),
    MODULE: re.compile(rf"^npu_module_mem{_SLICE_TS}\.csv$"),
    STATIC: re.compile(rf"^static_op_mem{_SLICE_TS}\.csv$"),
    NPU_MEM: re.compile(rf"^npu_mem{_SLICE_TS}\.csv$"),
    DB: re.compile(r"^(ascend_pytorch_profiler|ascend_mindspore_profiler)(_\d{1,16})?\.db$"
                   r"|^msprof_\d{1,16}\.db$"),
}
_DB_NAME_ANYWHERE = re.compile(
    r"(ascend_pytorch_profiler|ascend_mindspore_profiler)(_\d{1,16})?\.db$|msprof_\d{1,16}\.db$")
_INFO_NAME = re.compile(r"^profiler_info(_(\d{1,5}))?\.json$")
_FRAMEWORK_DB = re.compile(r"^ascend_(pytorch|mindspore)_profiler(_(\d{1,16}))?\.db$")
_RANK_ROOT_SUFFIXES = ("_ascend_pt", "_ascend_ms")
_OUTPUT_DIRS = ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output")
#: Sub-folders never searched: raw device data, logs, msMemScope's device_N/ folders.
_PRUNE = re.compile(r"^(\..*|device_\d+|host|data|log|logs|FRAMEWORK|__pycache__)$")
_MAX_DEPTH = 5
_SNIFF_BYTES = 8192


# -- single files, by content ------------------------------------------------------------

def read_header(path: Path) -> list[str] | None:
    """The stripped cells of a text file's first non-blank line, or None if that line
    holds a NUL (a binary file) or no comma."""
    line = first_line(path)
    if line is None or "\x00" in line or "," not in line:
        return None
    return [cell.strip() for cell in next(csv.reader([line]), [])]


def first_line(path: Path) -> str | None:
    """The first non-blank line of a file's first bytes, as text (None: an empty file).
    A NUL there marks a binary file; one in a later row is that row's problem."""
    head = read_head(path, _SNIFF_BYTES)
    if not head:
        return None
    text = head.decode("utf-8-sig", errors="replace")
    return next((line for line in text.splitlines() if line.strip()), "")


def classify_header(cells: list[str]) -> str | None:
    """The kind of profiler CSV whose header is ``cells``, or None."""
    names = set(cells)
    if {"Op Name", "Graph ID", "Node Index Start", "Node Index End"} <= names:
        return STATIC
    if {"Name", "Size(KB)", "Allocation Time(us)"} <= names:
        return OPERATOR
    if {"event", "timestamp(us)"} <= names and any(c.startswith("memory(") for c in names):
        return NPU_MEM
    if {"Component", "Timestamp(us)"} <= names:
        if any(c.startswith("Total Allocated(") for c in names):
            return RECORD
        if any(c.startswith("Total Reserved(") for c in names):
            return MODULE
    return None


def sqlite_tables(path: Path) -> set[str] | None:
    """The table and view names of a SQLite file, or None if it is not a readable one."""
    return table_names(path, views=True)


def is_profiler_info(path: Path) -> bool:
    """Whether ``path`` is a ``profiler_info_N.json`` (by its keys)."""
    head = read_head(path, (1 << 20) + 1)
    if not head or len(head) > 1 << 20:
        return False
    try:
        data = json.loads(head.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return False
    if not isinstance(data, dict):
        return False
    return "rank_id" in data or (
        "config" in data and bool({"torch_npu_version", "cann_version", "ms_version"} & data.keys())
    )


def classify_file(path: Path) -> str | None:
    """The kind of profiler file ``path`` is, by content; None if it is none of them."""
    path = Path(path)
    if not path.is_file():
        return None
    tables = sqlite_tables(path)
    if tables is not None:
        if tables & MEMSCOPE_TABLES or not tables & MEMORY_TABLES:
            return None
        return DB
    if is_sqlite(path) and _DB_NAME_ANYWHERE.search(path.name):
        return DB  # a damaged profiler DB: claimed so that loading says what is wrong
    header = read_header(path)
    if header is not None:
        return classify_header(header)
    if is_profiler_info(path):
        return INFO
    return None


# -- ranks in folders --------------------------------------------------------------------

@dataclass
class RankFiles:
    """The files to read for one rank (one profiler folder, or one group of loose files
    with its ``profiler_info`` file), and notes on the files of it left out."""

    root: Path
    files: dict[str, list[Path]] = field(default_factory=dict)
    info: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.root.name or str(self.root)

    def all_files(self) -> list[Path]:
        return [p for paths in self.files.values() for p in paths]


def rank_root(file: Path) -> Path:
    """The folder that stands for the rank ``file`` belongs to."""
    for ancestor in list(file.parents)[:4]:
        if ancestor.name.endswith(_RANK_ROOT_SUFFIXES):
            return ancestor
    parent = file.parent
    if parent.name in _OUTPUT_DIRS:
        return parent.parent
    return parent


def rank_of_root(root: Path, info: Path | None = None) -> tuple[int | None, dict]:
    """(rank id, the profiler_info dict) from ``profiler_info_N.json`` in ``root`` (or
    from ``info``, a group's own ``<prefix>profiler_info_N.json``).

    ``rank_id`` ``-1`` (not distributed) gives None; without the key, the ``N`` of the
    file name is taken.
    """
    if info is not None:
        candidates = [info]
    else:
        try:
            candidates = sorted(p for p in root.iterdir() if _INFO_NAME.match(p.name))
        except OSError:
            return None, {}
    for path in candidates:
        try:
            data = json.loads(read_head(path, 1 << 20).decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        rank = _int_or_none(data.get("rank_id"))
        if rank is None and "rank_id" not in data:
            named = PROFILER_INFO.match(path.name)
            rank = _int_or_none(named.group("rank")) if named else None
        return (rank if rank is not None and rank >= 0 else None), data
    return None, {}


def rank_of_db_name(path: Path) -> int | None:
    """The ``N`` of ``ascend_pytorch_profiler_N.db`` (None without one)."""
    match = _FRAMEWORK_DB.match(path.name)
    return _int_or_none(match.group(3)) if match else None


def discover(path: Path, notes: WalkNotes | None = None) -> list[RankFiles]:
    """The ranks under the folder ``path``, each with the files to read, by rank root
    (a bounded walk: :func:`memtui.sources.common.walk.walk`; ``notes`` gathers what it
    passed over)."""
    by_root: dict[Path, list[tuple[str, Path]]] = {}
    for kind, file in _walk(Path(path), notes=notes):
        by_root.setdefault(rank_root(file), []).append((kind, file))
    ranks = []
    for root in sorted(by_root, key=lambda p: _natural_key(str(p))):
        chosen, left_out = _choose(by_root[root])
        if chosen:
            ranks.append(RankFiles(root=root, files=chosen, notes=left_out))
    return ranks


def has_profiler_files(path: Path) -> bool:
    """Cheap check for sniff: does the folder hold a profiler memory file (by name)?"""
    return any(True for _ in _walk(Path(path), stop_early=True))


def _walk(folder: Path, stop_early: bool = False, notes: WalkNotes | None = None):
    """(kind, path) of profiler files by name under ``folder``, ``_MAX_DEPTH`` deep, in
    the bounded walk (links to folders never followed; raw-data folders pruned)."""
    for found in walk(folder, max_depth=_MAX_DEPTH, notes=notes):
        found.dirs[:] = [d for d in found.dirs if not _PRUNE.match(d.name)]
        for file in sorted(found.files, key=lambda p: _natural_key(p.name)):
            for kind, pattern in NAME_PATTERNS.items():
                if pattern.match(file.name):
                    if kind == DB and stop_early and not _db_has_memory(file):
                        break
                    yield kind, file
                    if stop_early:
                        return
                    break


def _db_has_memory(path: Path) -> bool:
    tables = sqlite_tables(path)
    return bool(tables) and not tables & MEMSCOPE_TABLES and bool(tables & MEMORY_TABLES)


def _choose(found: list[tuple[str, Path]]) -> tuple[dict[str, list[Path]], list[str]]:
    """Which of a rank's files to read: framework DB > framework CSVs > msprof DB > CSVs
    (as MindStudio Insight reads them), and a note naming what was left out and why."""
    framework = [(k, p) for k, p in found if p.parent.name != "mindstudio_profiler_output"
                 and not p.name.startswith("msprof_")]
    msprof = [(k, p) for k, p in found if (k, p) not in framework]
    for group in (framework, msprof):
        dbs = [p for k, p in group if k == DB and _db_has_memory(p)]
        if dbs:
            return {DB: dbs[:1]}, _left_out(found, dbs[:1], f"its DB {dbs[0].name} is read")
        csvs = [(k, p) for k, p in group if k in CSV_KINDS]
        if csvs:
            chosen: dict[str, list[Path]] = {}
            for kind, file in csvs:
                chosen.setdefault(kind, []).append(file)
            read = [p for _, p in csvs]
            return chosen, _left_out(found, read, "its framework CSVs are read")
    return {}, []


def _left_out(found: list[tuple[str, Path]], read: list[Path], why: str) -> list[str]:
    """One note naming the files of a rank not read (the same data, in another form)."""
    rest = [p.name for _, p in found if p not in read]
    if not rest:
        return []
    names = ", ".join(rest[:4]) + (f" and {len(rest) - 4} more" if len(rest) > 4 else "")
    return [f"left out {names}: {why} (the same data; MindStudio Insight reads it so)"]


def _int_or_none(value) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _natural_key(text: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]
