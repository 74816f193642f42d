"""Ascend profiler memory data (torch_npu, MindSpore, msprof) into the canonical model.

Opens, by content: a profiler folder (``*_ascend_pt`` / ``*_ascend_ms``), its
``ASCEND_PROFILER_OUTPUT/``, ``PROF_*/``, a parent folder holding several ranks, or any
single file of the set: ``memory_record``, ``operator_memory``, ``npu_module_mem``,
``static_op_mem``, msprof's ``npu_mem`` CSVs, ``ascend_pytorch_profiler[_N].db`` and
``msprof_*.db``, or ``profiler_info_N.json`` (which opens the folder it sits in).  Where a
rank has both, its DB is read rather than its CSVs, as MindStudio Insight does.  Formats,
units and Insight's rules: ../shared/formats/ascend_profiler.md.  Modules:
``files`` (what and where), ``read_csv`` / ``read_db`` (reading),
``build`` (the model).

What lands in the model
-----------------------
Devices: one per (rank, NPU), named ``rank{R}/npu{N}`` (``npu{N}`` when the rank is not
known; prefixed with the profiler folder's name where two would share a name).  The rank
comes from RANK_DEVICE_MAP, else ``profiler_info_N.json``, else the DB file name; the
host from HOST_INFO.  Times are int ns from the rank's first timestamp (Insight's x axis);
``meta.extra["rank_start_ns"][device]`` holds that start as local Unix time in ns.

``events``: one ``snapshot`` row per memory_record row (DB: MEMORY_RECORD rows plus the
NPU_MEM ``app`` rows the CSV's APP rows come from), ``pool`` = the Component as written
(``PTA``, ``GE``, ``PTA+GE``, ``APP``, ``WORKSPACE``, ``MindSpore``...), ``allocated`` /
``reserved`` / ``active`` = its Total columns in bytes, ``stream`` = Stream Ptr.  msprof
DBs without MEMORY_RECORD give their NPU_OP_MEM GE events instead, as ``alloc``/``free``.

``blocks``: one per operator_memory row (DB OP_MEMORY): ``owner`` = operator name,
``pool`` ``GE`` for ``cann::`` (GE) rows, else ``PTA`` (``MindSpore``), ``t_alloc`` /
``t_free`` (null: not released before the end), ``ghost`` where the size is negative or
the allocation time missing (freed without its allocation: alive from the start); extra
columns ``t_active_free`` and the pool totals at allocation and release,
``alloc_allocated``, ``alloc_reserved``, ``alloc_active``, ``free_allocated``,
``free_reserved``, ``free_active`` (bytes).  msprof DBs: blocks paired by address.

``curves`` (``bytes`` = int bytes), by Insight's Group By:

* Overall (``component`` and ``stream`` null): ``Operators Allocated``, ``Operators
  Activated`` (only where the rank has stream data), ``Operators Reserved`` from the
  PTA+GE rows (MindSpore+GE; derived from PTA and GE where missing; GE alone for
  inference data, see ``meta.extra["inference"]``); ``App Reserved`` from APP rows;
  ``Workspace Allocated`` / ``Workspace Reserved`` from WORKSPACE rows.
* Stream (``stream`` set): ``Allocated``, ``Activated``, ``Reserved`` of each stream's
  PTA+GE rows (Insight's "Allocated of <stream>").
* Component (``component`` set to ``PTA``, ``GE`` or ``APP``): ``Allocated``,
  ``Activated``, ``Reserved`` (Insight's "PTA Allocated"...; APP has ``Reserved`` only).
* ``Module Reserved`` with ``component`` = the CANN module (npu_module_mem), sampled.
  Insight's component table lists the modules whose peak is at least 100 MB.
* ``Static Size`` and ``Static Total Size`` with ``component`` = ``graph <id>`` (or
  ``graph <id> model <name>``): the static-graph curve, whose ``t`` is the **node index**,
  not a time.  The static operator table (no TOTAL rows) is
  ``meta.extra["static_ops"]`` (device, graph, model, name, start, end, size in bytes).

MindSpore's memory_record divides KB by 1000 for its "MB" (a MindSpore quirk); values are
taken as the file states them.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from memtui.progress import Phases
from memtui.sources.ascend import frames
from memtui.sources.ascend.build import RankData, build_trace
from memtui.sources.ascend.files import (
    DB,
    INFO,
    RankFiles,
    classify_file,
    discover,
    has_profiler_files,
    rank_of_db_name,
    rank_of_root,
    rank_root,
)
from memtui.sources.ascend.read_csv import read_kind
from memtui.sources.ascend.read_db import read_db
from memtui.sources.common.groups import profiler_group

NAME = "Ascend profiler"
_FRAME_OF_KIND = {"memory_record": "records", "npu_mem": "records",
                  "operator_memory": "operators", "npu_module_mem": "modules",
                  "static_op_mem": "static"}
_INFO_KEYS = ("torch_npu_version", "cann_version", "ms_version")


def sniff(path: Path) -> bool:
    try:
        path = Path(path)
        if path.is_dir():
            return has_profiler_files(path)
        return classify_file(path) is not None
    except Exception:  # sniff never raises
        return False


def load(path: Path, progress=None) -> MemoryTrace:
    path = Path(path)
    warnings: list[str] = []
    return _load_ranks(path, _rank_files(path, warnings), warnings, progress)


def load_roots(folder: Path, roots: list[Path], progress=None) -> MemoryTrace:
    """The profiler rank folders ``roots`` (found under ``folder`` by
    :func:`memtui.sources.folders.folder_target`) as one capture, a device per rank."""
    warnings: list[str] = []
    rank_files = [files for root in roots for files in discover(root)]
    if not rank_files:
        raise CaptureError(folder, "holds no Ascend profiler memory data (no memory_record, "
                                   "operator_memory or ascend_pytorch_profiler DB)")
    return _load_ranks(Path(folder), rank_files, warnings, progress)


def _load_ranks(path: Path, rank_files: list[RankFiles], warnings: list[str],
                progress) -> MemoryTrace:
    # One file asked for: its problem is the error.  A folder: a bad file is a warning,
    # unless no file at all could be read.
    errors: list[CaptureError] | None = None if path.is_file() else []
    ranks = []
    phases = Phases(progress)
    reading = phases.start("reading rank files", (0.0, 0.95), len(rank_files), unit="ranks")
    for index, files in enumerate(rank_files):
        phases.report(0.95 * index / max(len(rank_files), 1), f"reading {files.label}")
        ranks.append(_load_rank(files, warnings, errors))
        reading.update(index + 1)
    if errors and len(errors) == sum(len(f.all_files()) for f in rank_files):
        raise errors[0]
    building = phases.start("building the model", (0.95, 0.99))
    trace = build_trace(path, ranks, warnings)
    building.finish(trace.events.height + trace.curves.height)
    phases.report(1.0, "done")
    return trace


def _rank_files(path: Path, warnings: list[str]) -> list[RankFiles]:
    if path.is_dir():
        found = discover(path)
        if not found:
            raise CaptureError(path, "holds no Ascend profiler memory data (no memory_record, "
                                     "operator_memory or ascend_pytorch_profiler DB)")
        return found
    kind = classify_file(path)
    if kind is None:
        raise CaptureError(path, "not an Ascend profiler memory file")
    if kind == INFO:
        found = discover(path.parent)  # the profiler folder it describes
        if not found:
            warnings.append(f"{path.name}: profiler metadata only; the memory data would be "
                            "in an ASCEND_PROFILER_OUTPUT folder beside it, and there is none")
        return found
    if kind == DB:
        return [RankFiles(root=rank_root(path), files={kind: [path]})]
    return [_csv_group(path, kind, warnings)]


def _csv_group(path: Path, kind: str, warnings: list[str]) -> RankFiles:
    """A profiler CSV with the rest of its group (:func:`memtui.sources.common.groups.
    profiler_group`: the same folder and name prefix, each file's kind by its content):
    memory_record's levels and operator_memory's blocks are halves of one picture."""
    group, info = profiler_group(path)
    files: dict[str, list[Path]] = {kind: [path]}
    for other in group:
        if other == path:
            continue
        other_kind = classify_file(other)
        if other_kind in _FRAME_OF_KIND:
            files.setdefault(other_kind, []).append(other)
        else:
            warnings.append(f"{other.name}: named like a profiler CSV of {path.name}'s rank "
                            "but not one by its content: left out")
    for paths in files.values():
        paths.sort(key=lambda p: p.name)
    return RankFiles(root=rank_root(path), files=files, info=info)


def _load_rank(files: RankFiles, warnings: list[str],
               errors: list[CaptureError] | None) -> RankData:
    rank_id, info = rank_of_root(files.root, files.info)
    warnings.extend(f"{files.label}: {note}" for note in files.notes)
    data = RankData(root=files.root, rank=rank_id,
                    files=[str(p) for p in files.all_files()],
                    extra={k: info[k] for k in _INFO_KEYS if k in info})
    try:
        if DB in files.files:
            _load_db(data, files.files[DB][0], warnings)
        else:
            _load_csvs(data, files, warnings, errors)
    except CaptureError as exc:
        if errors is None:
            raise
        errors.append(exc)
        warnings.append(f"skipped {exc}")
    _set_framework(data, files.root)
    return data


def _set_framework(data: RankData, root: Path) -> None:
    components = set(data.records["component"].unique().to_list())
    if any(str(c).startswith("MindSpore") for c in components) or \
            root.name.endswith("_ascend_ms"):
        data.framework = "mindspore"
    elif not components & {"PTA", "PTA+GE", "WORKSPACE"} and (
            data.operators.is_empty() or data.operators["pool"].eq("GE").fill_null(False).all()):
        data.framework = "msprof"


def load_csv_parts(path: Path, parts: list[pl.DataFrame], warnings: list[str]) -> MemoryTrace:
    """The trace of one profiler CSV from its rows read in parts (``--follow`` parses only
    the lines added since its last read; ``read_csv.read_kind`` of each part): what
    :func:`load` of the whole file gives."""
    path = Path(path)
    files = RankFiles(root=rank_root(path), files={})
    rank_id, info = rank_of_root(files.root)
    data = RankData(root=files.root, rank=rank_id, files=[str(path)],
                    extra={k: info[k] for k in _INFO_KEYS if k in info})
    name = _FRAME_OF_KIND[classify_file(path)]
    setattr(data, name, _stack(parts, name))
    _set_framework(data, files.root)
    return build_trace(path, [data], list(warnings))


def _load_db(data: RankData, path: Path, warnings: list[str]) -> None:
    db = read_db(path)
    warnings.extend(db.warnings)
    data.records, data.operators, data.op_events, data.modules = (
        db.records, db.operators, db.op_events, db.modules)
    data.rank_of_device = db.rank_of_device
    ranks = set(db.rank_of_device.values())
    if len(ranks) == 1:
        data.rank = ranks.pop()
    elif data.rank is None:
        data.rank = rank_of_db_name(path)
    data.host, data.chips = db.host, db.chips
    if db.session:
        data.extra["session"] = db.session


def _load_csvs(data: RankData, files: RankFiles, warnings: list[str],
               errors: list[CaptureError] | None) -> None:
    collected: dict[str, list[pl.DataFrame]] = {}
    for paths in files.files.values():
        for path in paths:
            try:
                found, df, file_warnings = read_kind(path)
            except CaptureError as exc:
                if errors is None:
                    raise
                errors.append(exc)
                warnings.append(f"skipped {exc}")
                continue
            warnings.extend(file_warnings)
            collected.setdefault(_FRAME_OF_KIND[found], []).append(df)
    for name, parts in collected.items():
        setattr(data, name, _stack(parts, name))


def _stack(parts: list[pl.DataFrame], name: str) -> pl.DataFrame:
    """Concatenate one kind's frames from several files, keeping ``seq`` unique."""
    if "seq" not in frames.KINDS[name]:
        return pl.concat(parts)
    out, offset = [], 0
    for df in parts:
        if df.is_empty():
            continue
        low, high = int(df["seq"].min()), int(df["seq"].max())
        out.append(df.with_columns(seq=pl.col("seq") - low + offset))
        offset += high - low + 1
    if not out:
        return frames.empty(name)
    return pl.concat(out)


def _report(progress, fraction: float, message: str) -> None:
    if progress is not None:
        progress(fraction, message)
