"""Following a capture while it is written: read what is new since the last look, nothing twice.

:func:`open_follower` picks a follower by content, as :func:`memtui.sources.open_capture`
picks a source; each has ``poll() -> FollowUpdate`` (cheap when nothing changed: a ``stat``,
a folder listing, or one ``max(rowid)`` query) and ``restart()``:

* :class:`MemscopeDbFollower`: an msMemScope DB being written (WAL or rollback journal).
  Each poll opens a fresh read-only connection (never writing beside the file, never
  holding a transaction between polls) and reads only rows past the last rowid seen, in
  short chunks; the rows extend the model built so far
  (:class:`memtui.sources.memscope.live.LiveBuild`: no full rebuild).
* :class:`CsvFollower`: an msMemScope or profiler CSV being appended.  Only complete new
  records are read, from the byte offset reached (a half-written last one waits).  A
  dump CSV's records are parsed as they come and appended to the rows read
  (:class:`memtui.sources.memscope.tail.CsvTail`); python traces and profiler tables have
  their new lines parsed alone by the format's own reader (:class:`_LineTail`), the parts
  kept.
* :class:`FolderFollower`: a folder holding msMemScope results follows its newest dump
  file as above; else it is a :class:`SnapshotFollower`.  A folder holding several
  ranks' dumps follows one rank (:class:`RankChoice`: the lowest, or ``--rank N``),
  which ``Follower.scope`` says (the status bar shows it);
* :class:`SnapshotFollower`: a folder where snapshot dumps appear (``memtui record``'s, or
  any job's ``_dump_snapshot``), or one snapshot file rewritten in place: the newest
  complete dump (hidden and temporary names ignored; a dump that does not load whole is
  taken as still being written and tried again later).

A file truncated, replaced (rotated) or deleted is reported in ``FollowUpdate.problem``
and reading stops there, the last good trace kept, until ``restart()``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from memtui.errors import CaptureError
from memtui.model import MemoryTrace

#: A newer dump that still does not load this long after its last change is broken, not
#: being written.
SETTLED_S = 3.0
#: File names a dump writer uses while a dump is incomplete.
_PARTIAL_SUFFIXES = (".tmp", ".part", ".partial", ".temp", ".swp", "-journal", "-wal", "-shm")


@dataclass
class FollowUpdate:
    """What one poll found.

    ``trace``: the capture with what is new (None when nothing changed); ``new_rows``: rows
    (or events) read this time; ``waiting``: why there is nothing to show yet; ``problem``:
    the file was truncated, replaced or deleted (reading has stopped, the last trace stays);
    ``stale``: the capture has moved on but what is new cannot be read (the newest dump
    does not load, every dump is gone, the folder cannot be read): the trace shown is
    older than the capture; ``notice``: something the user should hear once (rows read
    before were rewritten: the trace was read again from the start).
    """

    trace: MemoryTrace | None = None
    new_rows: int = 0
    waiting: str | None = None
    problem: str | None = None
    stale: str | None = None
    notice: str | None = None


@dataclass
class _FileId:
    """Enough of ``stat`` to tell growth from truncation and replacement."""

    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> _FileId | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(st.st_ino, st.st_size, st.st_mtime_ns)


class Follower:
    """Base: the path, the stopped state and the problem wording."""

    kind = ""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.stopped: str | None = None  # the problem that stopped reading

    @property
    def scope(self) -> str | None:
        """What of the path is followed where it holds several ranks (None: all of it)."""
        choice = self.rank_choice()
        return choice.scope if choice is not None else None

    def rank_choice(self) -> RankChoice | None:
        """Which rank is followed, of a folder holding several."""
        return None

    def poll(self) -> FollowUpdate:
        if self.stopped is not None:
            return FollowUpdate(problem=self.stopped)
        try:
            return self._poll()
        except _Stop as stop:
            self.stopped = f"{self.path.name} {stop.what} at {time.strftime('%H:%M:%S')}"
            return FollowUpdate(problem=self.stopped)

    def restart(self) -> None:
        """Forget what was read: the next poll reads the file from its start."""
        self.stopped = None
        self._reset()

    def close(self) -> None:
        """Remove anything the follower keeps (temporary copies)."""

    def _poll(self) -> FollowUpdate:
        raise NotImplementedError

    def _reset(self) -> None:
        raise NotImplementedError


class _Stop(Exception):
    """Reading cannot go on: ``what`` happened to the file."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _check_same_file(path: Path, seen: _FileId | None, now: _FileId | None,
                     grows: bool = True) -> None:
    """Raise :class:`_Stop` where the file went away, was replaced or shrank."""
    if seen is None:
        return
    if now is None:
        raise _Stop("was deleted")
    if now.inode != seen.inode:
        raise _Stop("was replaced (rotated)")
    if grows and now.size < seen.size:
        raise _Stop("was truncated")


# -- msMemScope DB ----------------------------------------------------------------------------


class MemscopeDbFollower(Follower):
    """See the module docstring."""

    kind = "msMemScope DB"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._reset()

    def _reset(self) -> None:
        from memtui.sources.memscope.tail import DbTail

        self.tail = DbTail(self.path)
        self._file: _FileId | None = None

    def _poll(self) -> FollowUpdate:
        from memtui.sources.memscope.tail import RowsRewritten

        now = _FileId.of(self.path)
        if now is None:
            raise _Stop("was deleted")
        if self._file is not None and now.inode != self._file.inode:
            raise _Stop("was replaced (rotated)")
        self._file = now
        # No stat shortcut: a WAL reused after a checkpoint keeps its size, and mtimes
        # can be coarse; asking SQLite for the largest rowid costs well under a ms.
        notice = None
        try:
            try:
                new = self.tail.read_new()
            except RowsRewritten as rewritten:
                notice = (f"{self.path.name}: rows of {rewritten} read before were written "
                          f"again under the same ids at {time.strftime('%H:%M:%S')}: read "
                          "again from the start")
                self._reset()
                self._file = now
                new = self.tail.read_new()
        except CaptureError as exc:
            if "truncated" in exc.problem or "deleted" in exc.problem:
                raise _Stop(exc.problem) from None
            return FollowUpdate(waiting=exc.problem)
        if not new:
            return FollowUpdate(waiting=None if self.tail.rows else self._waiting())
        trace = self.tail.trace()
        if trace is None:
            return FollowUpdate(new_rows=new, waiting=self._waiting(), notice=notice)
        return FollowUpdate(trace=trace, new_rows=new, notice=notice)

    def _waiting(self) -> str:
        return f"waiting for the first memory rows in {self.path.name}"


# -- appended CSV -----------------------------------------------------------------------------


class CsvFollower(Follower):
    """See the module docstring."""

    kind = "CSV"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._lines: _LineTail | None = None
        self._reset()

    def _reset(self) -> None:
        self.offset = 0  # bytes of the file read
        self.lines = 0
        self.tail = None  # memscope.tail.CsvTail, once the header says a dump CSV
        self._file: _FileId | None = None
        if self._lines is not None:
            self._lines.close()
        self._lines = None

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()

    def _poll(self) -> FollowUpdate:
        now = _FileId.of(self.path)
        _check_same_file(self.path, self._file, now)
        if now is None:
            raise _Stop("was deleted")
        if self._file is not None and now.size < self.offset:
            raise _Stop("was truncated")
        self._file = now
        if now.size == self.offset:
            return FollowUpdate(waiting=self._waiting())
        if self.tail is None and self._lines is None and not self._choose():
            return FollowUpdate(waiting=self._waiting())
        if self.tail is not None:
            return self._poll_dump()
        return self._poll_lines(now)

    def _choose(self) -> bool:
        """Once the header line is whole: a dump CSV is parsed record by record as it grows,
        a python-trace or profiler CSV line by line (:class:`_LineTail`)."""
        from memtui.sources.memscope.read import csv_kind, first_line
        from memtui.sources.memscope.tail import CsvTail

        with open(self.path, "rb") as fh:
            head = fh.read(65536)
        if b"\n" not in head:
            return False
        kind = csv_kind(self.path)
        if kind == "dump" and first_line(self.path):
            self.tail = CsvTail(self.path)
            return True
        header = head[: head.index(b"\n") + 1]
        self._lines = _LineTail(self.path, header, "trace" if kind == "trace" else "profiler")
        self.offset = len(header)
        self.lines = 1
        return True

    def _poll_dump(self) -> FollowUpdate:
        """A dump CSV: the complete records past the offset parsed and appended."""
        new = self.tail.read_new()
        self.offset = self.tail.offset
        self.lines = self.tail.rows + 1
        if not new:
            return FollowUpdate(waiting=self._waiting())
        trace = self.tail.trace()
        if trace is None:
            return FollowUpdate(new_rows=new, waiting=f"no memory rows yet in {self.path.name}")
        return FollowUpdate(trace=trace, new_rows=new)

    def _poll_lines(self, now: _FileId) -> FollowUpdate:
        """A python-trace or profiler CSV: its complete new lines parsed alone."""
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(now.size - self.offset)
        end = data.rfind(b"\n")
        if end < 0:  # not one complete line yet: it waits
            return FollowUpdate(waiting=self._waiting())
        complete = data[: end + 1]
        new_lines = complete.count(b"\n")
        try:
            trace = self._lines.add(complete, self.lines - 1)
        except CaptureError as exc:
            return FollowUpdate(new_rows=new_lines, waiting=exc.problem)
        finally:
            self.offset += len(complete)
            self.lines += new_lines
        if trace is None:
            return FollowUpdate(new_rows=new_lines, waiting=self._waiting())
        trace.meta.path = str(self.path)
        return FollowUpdate(trace=trace, new_rows=new_lines)

    def _waiting(self) -> str | None:
        return None if self.lines >= 2 else f"waiting for the first rows of {self.path.name}"


class _LineTail:
    """A python-trace or profiler CSV read line by line: each batch of new complete lines is
    parsed alone, by the format's own reader, from a small file holding the header and
    those lines (in a private temporary folder, never beside the file); the parts add up
    to what the reader gives for the whole file."""

    def __init__(self, path: Path, header: bytes, kind: str) -> None:
        self.path = path
        self.header = header
        self.kind = kind
        self.folder = Path(tempfile.mkdtemp(prefix="memtui-follow-"))
        # The last folders too: the readers take the device from ``device_N/``.
        self.chunk = self.folder.joinpath(*Path(path).resolve().parts[-3:])
        self.chunk.parent.mkdir(parents=True, exist_ok=True)
        self.parts: list = []
        self.warnings: list[str] = []
        self.memscope = None  # memscope.tail parts for a python trace

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def add(self, lines: bytes, rows_before: int) -> MemoryTrace | None:
        """Parse ``lines`` (complete, after ``rows_before`` data lines); the trace so far."""
        self.chunk.write_bytes(self.header + lines)
        if self.kind == "trace":
            return self._add_trace(rows_before)
        from memtui.sources import ascend
        from memtui.sources.ascend.read_csv import read_kind

        try:  # new lines none of which is readable are counted (a warning), not refused,
            # once earlier rows were: the warnings then read as a fresh open's
            _, frame, warnings = read_kind(self.chunk, allow_empty=bool(self.parts))
        except CaptureError as exc:
            raise CaptureError(self.path, exc.problem) from None
        self.parts.append(frame)
        self.warnings.extend(warnings)
        return ascend.load_csv_parts(self.path, self.parts, self.warnings)

    def _add_trace(self, rows_before: int) -> MemoryTrace | None:
        import polars as pl

        from memtui.sources.memscope import read
        from memtui.sources.memscope.tail import TailParts

        if self.memscope is None:
            self.memscope = TailParts(path=self.path, layout="python trace csv")
        raw = read.read_trace_csv(self.chunk)
        self.memscope.warnings.extend(
            w.replace(self.chunk.name, self.path.name) for w in raw.warnings)
        if raw.trace is not None and raw.trace.height:
            self.memscope.trace_parts.append(raw.trace.with_columns(
                pl.col("row", "seq") + rows_before))
        return self.memscope.trace()


# -- snapshot dumps ---------------------------------------------------------------------------


@dataclass
class _Shown:
    path: Path
    file: _FileId


class SnapshotFollower(Follower):
    """See the module docstring."""

    kind = "snapshot dumps"

    def __init__(self, path: Path, rank: int | None = None) -> None:
        super().__init__(path)
        self.ranks = RankChoice(self.path, rank)
        self._reset()

    def rank_choice(self) -> RankChoice | None:
        return self.ranks

    def _reset(self) -> None:
        self.shown: _Shown | None = None
        self._failed: dict[Path, tuple[_FileId, str]] = {}  # dumps that did not load: as
        self._listing: tuple | None = None                    # they were, and why
        self._unreadable: str | None = None  # why the folder cannot be listed

    def candidates(self) -> list[tuple[_FileId, Path]]:
        """Complete-looking dumps, newest first (by modification time, then name)."""
        if self.path.is_file():
            found = _FileId.of(self.path)
            return [(found, self.path)] if found is not None else []
        entries = []
        try:
            with os.scandir(self.path) as scan:
                for entry in scan:
                    name = entry.name
                    if name.startswith(".") or name.endswith(_PARTIAL_SUFFIXES):
                        continue
                    try:
                        if not entry.is_file():
                            continue
                        st = entry.stat()
                    except OSError:
                        continue
                    entries.append((_FileId(st.st_ino, st.st_size, st.st_mtime_ns),
                                    Path(entry.path)))
        except OSError as exc:
            self._unreadable = f"{self.path.name} cannot be read ({exc.strerror or exc})"
            return []
        self._unreadable = None
        entries.sort(key=lambda item: (item[0].mtime_ns, item[1].name), reverse=True)
        chosen = set(self.ranks.pick([path for _, path in entries]))
        return [entry for entry in entries if entry[1] in chosen]

    def _poll(self) -> FollowUpdate:
        if not self.path.exists():
            raise _Stop("was deleted")
        candidates = self.candidates()
        listing = tuple((str(p), f.mtime_ns, f.size) for f, p in candidates[:8])
        if listing == self._listing:
            return FollowUpdate(waiting=self._waiting(), stale=self._stale(candidates))
        self._listing = listing
        from memtui.sources import torch_snapshot

        for file, path in candidates:
            if self.shown is not None and (self.shown.file.mtime_ns, self.shown.path.name) >= (
                    file.mtime_ns, path.name):
                break  # nothing newer than what is shown
            if self._failed.get(path, (None,))[0] == file or file.size == 0:
                continue
            if not torch_snapshot.sniff(path):
                continue
            try:
                trace = torch_snapshot.load(path, None)
            except CaptureError as exc:  # still being written, or not a dump: later
                self._failed[path] = (file, exc.problem)
                self._listing = None
                continue
            self.shown = _Shown(path, file)
            events = trace.events.height
            return FollowUpdate(trace=trace, new_rows=events)
        return FollowUpdate(waiting=self._waiting(), stale=self._stale(candidates))

    def _stale(self, candidates: list[tuple[_FileId, Path]]) -> str | None:
        """Why the dump shown is no longer the capture's newest, where that is so: the
        folder cannot be read, every dump is gone, or a newer dump has not loaded though
        its writer left it alone for :data:`SETTLED_S` seconds."""
        if self.shown is None:
            return None
        if self._unreadable is not None:
            return self._unreadable
        if not candidates:
            return f"no dump left in {self.path.name}"
        file, path = candidates[0]
        failed = self._failed.get(path)
        if path != self.shown.path and failed is not None and failed[0] == file and \
                time.time() - file.mtime_ns / 1e9 >= SETTLED_S:
            return f"no readable dump: {path.name} does not load ({failed[1]})"
        return None

    def _waiting(self) -> str | None:
        if self.shown is not None:
            return None
        return f"waiting for the first complete snapshot dump in {self.path}{self.ranks.which}"


# -- a folder: snapshot dumps, or an msMemScope result folder ---------------------------------

#: msMemScope's dump files, by name (a file being created may not sniff yet).
_DUMP_NAME = re.compile(r"(memscope_dump|leaks_dump)_.*\.(db|csv)$")


class FolderFollower(Follower):
    """A folder: the newest complete snapshot dump in it (:class:`SnapshotFollower`), or,
    where it holds msMemScope results (``memscopeDumpResults/``, a run's folder, its
    ``device_N/dump/``), the newest dump file under it, followed as a file; a newer one (a
    new run) takes its place.  Nothing there yet: it waits for either."""

    kind = "folder"

    def __init__(self, path: Path, rank: int | None = None) -> None:
        super().__init__(path)
        self.snapshots = SnapshotFollower(path, rank)
        self.ranks = RankChoice(self.path, rank)
        self._reset()

    def rank_choice(self) -> RankChoice | None:
        return self.snapshots.ranks if isinstance(self.inner, SnapshotFollower) else self.ranks

    def _reset(self) -> None:
        self.snapshots.restart()
        self.inner: Follower | None = None

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()

    def _poll(self) -> FollowUpdate:
        if not self.path.is_dir():
            raise _Stop("was deleted")
        if self.inner is None or not isinstance(self.inner, SnapshotFollower):
            newest = newest_dump_file(self.path, self.ranks)
            if newest is not None:
                return self._follow_file(newest)
        update = self.snapshots.poll()
        if update.trace is not None:
            self.inner = self.snapshots
        elif self.inner is None and update.waiting:
            update.waiting = (f"waiting for a complete snapshot dump or an msMemScope dump "
                              f"file in {self.path}{self.snapshots.ranks.which}")
        return update

    def _follow_file(self, newest: Path) -> FollowUpdate:
        if self.inner is None or self.inner.path != newest:
            if self.inner is not None:
                self.inner.close()
            self.inner = _file_follower(newest)
        update = self.inner.poll()
        if update.problem:  # the file followed went away: the next poll looks again
            self.inner.close()
            self.inner = None
            update = FollowUpdate(waiting=update.problem)
        return update


def newest_dump_file(folder: Path, ranks: RankChoice | None = None) -> Path | None:
    """The most recently modified msMemScope dump file under ``folder`` (a few levels deep),
    a DB before a CSV of the same time; of one rank (``ranks``) where it holds several."""
    from memtui.sources.common.walk import files_under

    found: list[tuple[tuple[int, bool, str], Path]] = []
    for path in files_under(folder):  # bounded: no link to a folder followed, capped
        if not _DUMP_NAME.search(path.name):
            continue
        stat = _FileId.of(path)
        if stat is not None:
            found.append(((stat.mtime_ns, path.name.endswith(".db"), path.name), path))
    if ranks is not None:
        chosen = set(ranks.pick([path for _, path in found]))
        found = [item for item in found if item[1] in chosen]
    return max(found, key=lambda item: item[0])[1] if found else None


class RankChoice:
    """Which rank a folder holding several ranks' dumps is followed for.

    Ranks are told by names, as ``memtui PATH...`` tells them
    (:func:`memtui.sources.ranks.describe`: ``rank{N}`` in a file or folder name, an
    msMemScope ``device_{id}`` folder).  With ``wanted`` (``--rank N``) that rank (or
    ``device_N``, where names tell no rank) is followed; else the lowest rank seen, which
    only changes when a lower one appears (the view never jumps between ranks as their
    dumps come).  ``scope`` says which, for the status bar; files whose names tell no
    rank are followed where no name tells one."""

    def __init__(self, folder: Path, wanted: int | None = None) -> None:
        self.folder = folder
        self.wanted = wanted
        self.known: dict[tuple, str] = {}  # rank key -> label
        self.key: tuple | None = None

    def pick(self, paths: list[Path]) -> list[Path]:
        """The paths of the followed rank."""
        from memtui.sources.ranks import describe

        keyed = {}
        for path in paths:
            found = describe(path, self.folder)
            key = (found.rank is None, found.rank or 0, found.device_id or "")
            keyed[path] = key
            if found.rank is not None or found.device_id is not None:
                self.known.setdefault(key, f"rank {found.rank}" if found.rank is not None
                                      else f"device_{found.device_id}")
        if not self.known:
            return paths
        if self.wanted is not None:
            self.key = next((k for k in sorted(self.known) if k[:2] == (False, self.wanted)
                             or (k[0] and k[2] == str(self.wanted))), None)
        else:
            self.key = min(self.known)
        return [path for path, key in keyed.items() if key == self.key]

    @property
    def scope(self) -> str | None:
        if self.key is None or (len(self.known) < 2 and self.wanted is None):
            return None
        return f"{self.known[self.key]} of {len(self.known)}"

    @property
    def which(self) -> str:
        """For a waiting message: the rank waited for."""
        if self.wanted is None or self.key is not None:
            return ""
        seen = ", ".join(self.known[k] for k in sorted(self.known)) or "none yet"
        return f" for rank {self.wanted} (ranks seen: {seen})"

    def listing(self) -> str:
        """Every rank seen, the followed one marked."""
        return ", ".join(("▶ " if k == self.key else "") + self.known[k]
                         for k in sorted(self.known))


# -- picking one ------------------------------------------------------------------------------


def open_follower(path: str | Path, rank: int | None = None) -> Follower:
    """The follower for ``path`` (see the module docstring); a CaptureError otherwise.
    ``rank``: of a folder holding several ranks' dumps, the rank followed
    (:class:`RankChoice`)."""
    from memtui.sources.common.files import check_input, is_folder

    path = Path(path)
    if not os.path.lexists(path):
        raise CaptureError(path, "no such file or folder")
    if is_folder(path):
        check_input(path)  # a folder that cannot be read: one line
        return FolderFollower(path, rank)
    if rank is not None:
        raise CaptureError(path, "--rank picks a rank of a folder; this is one file")
    return _file_follower(path)


def _file_follower(path: Path) -> Follower:
    from memtui.sources import memscope, torch_snapshot
    from memtui.sources.common.sqlite import is_sqlite
    from memtui.sources.memscope.read import csv_kind

    if is_sqlite(path):
        if memscope.sniff(path) or _empty_db(path):
            return MemscopeDbFollower(path)
        raise CaptureError(path, "an SQLite file --follow does not read (only msMemScope DBs)")
    if csv_kind(path) is not None or _is_profiler_csv(path) or (
            path.suffix.lower() == ".csv" and path.stat().st_size < 65536):
        return CsvFollower(path)  # a CSV whose header is still being written waits
    if path.stat().st_size == 0 or torch_snapshot.sniff(path):
        return SnapshotFollower(path)
    raise CaptureError(path, "--follow reads msMemScope DBs and CSVs, profiler CSVs, snapshot "
                             "pickles and folders of snapshot dumps")


def _empty_db(path: Path) -> bool:
    """An SQLite file without tables yet (the writer is about to create them)."""
    from memtui.sources.common.sqlite import table_names

    return table_names(path) == set()


def _is_profiler_csv(path: Path) -> bool:
    from memtui.sources import ascend

    return path.suffix.lower() == ".csv" and ascend.sniff(path)


__all__ = ["CsvFollower", "FolderFollower", "FollowUpdate", "Follower", "MemscopeDbFollower",
           "RankChoice", "SnapshotFollower", "open_follower"]
