"""msMemScope (formerly msLeaks) captures: DB, dump CSV, python-trace CSV, or a result folder.

Sniffs by content: an SQLite file with a ``memscope_dump``/``leaks_dump`` or
``python_trace_<pid>`` table (profiler DBs have none of these), a CSV whose header is
msMemScope's, or a folder holding such files (``.../device_N/dump/...``, every device).
Reading is :mod:`memscope_read`'s job, turning rows into the model
:mod:`memscope_build`'s; see ../shared/formats/msmemscope.md for the formats.

Blocks carry their access times; the inefficient-block ``flags`` are left null here and
set after loading by :func:`memtui.analysis.findings.flags.with_inefficient_flags` (the
thresholds are a user setting, not a property of the file).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from memtui.progress import Phase, Phases
from memtui.sources.common.groups import memscope_traces
from memtui.sources.common.walk import walk
from memtui.sources.memscope.build import READ_SHARE, build_trace
from memtui.sources.memscope.read import (
    RawFile,
    csv_kind,
    db_tables,
    is_memscope_db,
    is_sqlite,
    read_csv,
    read_db,
)

NAME = "msMemScope capture"
_FILE_NAME = re.compile(r"(memscope_dump|leaks_dump)_.*\.(db|csv)$|python_trace_.*\.csv$")
_DEVICE_DIR = re.compile(r"^device_(\d{1,4}|cpu)$")


def sniff(path: Path) -> bool:
    path = Path(path)
    try:
        if path.is_dir():
            return bool(_folder_files(path, first_only=True))
        return _file_is_ours(path)
    except OSError:
        return False


def _file_is_ours(path: Path) -> bool:
    if is_sqlite(path):
        # An SQLite file too damaged to list its tables is ours only by its name.
        return is_memscope_db(path) or (
            db_tables(path) is None and _FILE_NAME.search(path.name) is not None)
    return csv_kind(path) is not None


def _folder_files(folder: Path, first_only: bool = False) -> list[Path]:
    """msMemScope files of the result folder ``folder`` (by name, then content), where
    msMemScope's layout puts them and nowhere else: in the folder itself, in its
    ``dump/``, or in its ``device_N/dump/`` (a process's ``msmemscope_{pid}_{ts}_ascend``
    folder); never a backup copy further down, never through a link to a folder."""
    found: list[Path] = []
    for listed in walk(folder, max_depth=2):
        listed.dirs[:] = [d for d in listed.dirs if _in_layout(folder, d)]
        if not _holds_dumps(folder, listed.path):
            continue
        for candidate in listed.files:
            if _FILE_NAME.search(candidate.name) and _file_is_ours(candidate):
                found.append(candidate)
                if first_only:
                    return found
    return found


def _in_layout(root: Path, folder: Path) -> bool:
    """Whether ``folder`` is on msMemScope's way down from ``root`` to its dump files."""
    parts = folder.relative_to(root).parts
    if len(parts) == 1:
        return parts[0] == "dump" or _DEVICE_DIR.match(parts[0]) is not None
    return len(parts) == 2 and _DEVICE_DIR.match(parts[0]) is not None and parts[1] == "dump"


def _holds_dumps(root: Path, folder: Path) -> bool:
    """Whether ``folder`` (the root, its ``dump/`` or a ``device_N/dump/``) holds dumps
    by the layout (a ``device_N`` folder itself holds only its ``dump/``)."""
    parts = folder.relative_to(root).parts
    return not parts or parts[-1] == "dump"


#: A file of at least this many rows (by its rowids) is previewed while it is read ...
PREVIEW_MIN_ROWS = 2_000_000
#: ... from this many rows on: a model of them takes a few seconds to build.
PREVIEW_ROWS = 800_000

#: ``preview(trace)``: a model of the rows read so far (``trace.meta.extra["preview"]``
#: says how many of how many), once, while a long read goes on.
Preview = Callable[[MemoryTrace], None] | None

#: Sources whose ``load`` takes ``preview`` (:func:`memtui.sources.open_capture`).
PREVIEWS = True


def load(path: Path, progress=None, preview: Preview = None) -> MemoryTrace:
    """The capture at ``path`` (a DB, a CSV or a result folder).  ``preview`` is handed a
    model of the rows read so far, once, where a single DB is long to read
    (:class:`_Previewer`)."""
    path = Path(path)
    files = _folder_files(path) if path.is_dir() else [path, *memscope_traces(path)]
    if not files:
        raise CaptureError(path, "a folder without msMemScope dump or python-trace files")
    raws: list[RawFile] = []
    phases = Phases(progress)
    for index, file in enumerate(files):
        share = (READ_SHARE * index / len(files), READ_SHARE * (index + 1) / len(files))
        reading = phases.start(f"reading rows of {file.name}", share)
        previewer = (_Previewer(path, preview)
                     if preview is not None and index == 0 and is_sqlite(file) else None)

        def report(done: int, total: int, reading: Phase = reading,
                   previewer: _Previewer | None = previewer) -> None:
            reading.total = total
            reading.update(done)
            if previewer is not None:
                previewer.done, previewer.total = done, total

        raws.append(read_db(file, report, previewer) if is_sqlite(file) else read_csv(file))
        reading.finish(_rows_of(raws[-1]))
    if not any(_has_rows(raw) for raw in raws):
        raise CaptureError(path, "an msMemScope capture without a single row")
    trace = build_trace(raws, path, progress)
    phases.report(1.0, "done")
    return trace


def _rows_of(raw: RawFile) -> int:
    return sum(frame.height for frame in (raw.memory, raw.other, raw.trace)
               if frame is not None)


def _has_rows(raw: RawFile) -> bool:
    return any(frame is not None and frame.height for frame in (raw.memory, raw.other, raw.trace))


class _Previewer:
    """The ``look`` of a DB's read (:func:`memscope_read.read_db`): once the rows read
    reach :data:`PREVIEW_ROWS` of a file of :data:`PREVIEW_MIN_ROWS` or more, the model
    of those rows (built as a whole capture's is) goes to ``show``.  msMemScope writes a
    block's rows when it is freed, so the rows read first are the capture's first blocks
    freed: the preview lacks the blocks still held then.  A preview that cannot be built
    or shown is left out: the read goes on either way."""

    def __init__(self, path: Path, show: Callable[[MemoryTrace], None]) -> None:
        self.path = path
        self.show = show
        self.done = 0
        self.total = 0
        self.shown = False

    def __call__(self, rows_so_far: Callable[[], RawFile]) -> None:
        if self.shown or self.total < PREVIEW_MIN_ROWS or self.done < PREVIEW_ROWS:
            return
        self.shown = True
        raw = rows_so_far()
        if not _has_rows(raw):
            return
        try:
            trace = build_trace([raw], self.path)
            trace.meta.extra["preview"] = {"rows": self.done, "of": self.total}
            self.show(trace)
        except Exception:  # noqa: BLE001 - a preview is a courtesy; the whole read decides
            return
