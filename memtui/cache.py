"""The reopen cache: a loaded MemoryTrace kept as Arrow IPC files, memory-mapped on reopen.

Opening a big capture means unpickling or scanning gigabytes; opening it again should not.
After a load, :func:`store` writes every frame of the trace as an uncompressed Arrow IPC
(Feather v2) file and its :class:`~memtui.model.TraceMeta` as JSON into one entry folder
under ``$XDG_CACHE_HOME/memtui/`` (default ``~/.cache/memtui``), never beside the input.
:func:`lookup` maps those files back (zero copy: the columns are pages of the cache file
until touched).

* **Key**: the input's resolved path, size, mtime, inode change time, a hash of its first
  and last MiB, the same figures of the files its loader reads beside it (SQLite's
  ``-wal``, where committed rows wait for a checkpoint; the rest of a profiler CSV's
  group and a dump's python traces, read with it; every file of the folder a
  ``profiler_info_N.json`` opens) and :data:`MODEL_VERSION` (bump it whenever a source or
  the model changes what a trace holds).  A changed input gets a new key; its old entry is
  removed when the new one is written.
* **Atomic**: an entry is written into a temporary folder and renamed into place, so a
  reader sees a whole entry or none.  Its files are written with direct I/O where the file
  system allows it (:class:`_HashingWriter`): gigabytes of frames need not take the
  kernel's file cache page by page while the first open's findings run.
* **Never trusted**: every file of an entry is checked against the xxHash (XXH3-128)
  digest its manifest (or, for a file kept later, the record that names it) holds, its
  rows against the entry's own counts, and its Arrow structure against the column
  contract, before use; a derived result names the entry it belongs to.  Whatever does
  not check out is ignored and deleted, and the caller loads or computes it again.
* **Never followed**: an entry that is a symbolic link (or a file in it that is one) is
  removed, never read or written through; a cache folder owned by another user or
  writable by group or others is not used at all (as ``ssh`` refuses such a key folder),
  with one line saying so.  The folder is created private (0700).
* **Capped**: after each store the oldest entries (by last use) are evicted until the cache
  holds at most ``MEMTUI_CACHE_MAX_BYTES`` (default 5 GB).
* A column holding one value in every row (or null in every row: a snapshot's device,
  pool, stream, owner) is not written: the manifest keeps its place, dtype and value
  (digested), and a reopen puts it back as one value.  Writing it would write it out,
  8 to 16 bytes a row, beside the first open's findings.
* Only regular files are cached.  ``meta`` goes as JSON, frames a source keeps in
  ``meta.extra`` as IPC files of their own; a meta whose ``extra`` holds anything else that
  does not survive a JSON round trip unchanged is not cached at all (a cached trace must
  equal a fresh one).

* Beside the trace an entry keeps what the first screens and commands would otherwise
  compute again on every open: every device's allocated and reserved levels
  (:func:`store_levels`, ``.npy`` files memory-mapped on reopen and handed to the analyses
  by ``memtui.loading``; the Trend's first paint needs them) and derived results such as
  ``memtui summary``'s figures and printed text (:func:`save_derived`; a reopened
  ``summary`` prints them without loading the trace at all), and the Blocks screen's
  index of the first device the UI showed (:func:`save_arrays`, kept by
  ``memtui.loading.keep_block_map`` once the app built it after its first paint, read
  on reopen by ``kept_block_map`` when the screen's data is first asked for: 2.1 s to
  build at 10M events, 0.4 s to map and check).  The Pool and Stacks screens reuse
  that index and build the rest in milliseconds.  Layered captures (msMemScope) keep
  neither levels nor indexes: a layer's view is made from the trace on every open.

Every failure to read or write the cache is silent (a full disk aside: then what was
half written is removed and one line says so): the cache only ever saves time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.version import __version__

if TYPE_CHECKING:  # polars and the model are imported on use: `--no-cache` stays light
    import polars as pl

    from memtui.model import MemoryTrace, TraceMeta

#: Bump when a loader or the model changes what a trace of the same file holds.
MODEL_VERSION = 3  # 3: one time-ordered event axis (seq), sources keep their own "row"
DEFAULT_MAX_BYTES = 5 * 10**9
_EDGE = 1 << 20  # bytes hashed at each end of the input
_MANIFEST = "manifest.json"
#: Entries of at least this many bytes are memory-mapped (pyarrow); smaller ones are read.
MAP_FROM_BYTES = 32 << 20
#: Kept arrays (levels, indexes) smaller than this are read; larger ones memory-mapped
#: through pyarrow where it is imported already (an entry's large frames import it), read
#: below :data:`MAP_FROM_BYTES` where it is not (its import costs more than the read).
READ_NPY_BELOW = 1 << 20
NO_CACHE_ENV = "MEMTUI_NO_CACHE"
MAX_BYTES_ENV = "MEMTUI_CACHE_MAX_BYTES"
#: A ``profiler_info_N.json`` stands for the folder it sits in (the Ascend loader reads it).
_FOLDER_STAND_IN = re.compile(r"^profiler_info(_\d{1,5})?\.json$")
#: Files of such a folder that the key looks at, at most (stat calls only).
_MAX_COMPANIONS = 20_000


def enabled() -> bool:
    """False where ``--no-cache`` (or ``MEMTUI_NO_CACHE=1``) turned the cache off."""
    return os.environ.get(NO_CACHE_ENV, "") in ("", "0")


def disable() -> None:
    """``--no-cache``: this process and the ones it starts (rank workers) skip the cache."""
    os.environ[NO_CACHE_ENV] = "1"


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/memtui``, or ``~/.cache/memtui``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memtui"


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """One line on stderr, once per process (the cache is otherwise silent)."""
    if message not in _warned:
        _warned.add(message)
        from memtui.errors import printable

        print(f"memtui: {printable(message)}", file=sys.stderr, flush=True)


def max_bytes() -> int:
    """The cap ``MEMTUI_CACHE_MAX_BYTES`` sets (``5GB``, ``512MiB``, ``1e9``), else 5 GB."""
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    from memtui.sizes import parse_size

    try:
        return parse_size(text)
    except ValueError:
        _warn_once(f"{MAX_BYTES_ENV}={text!r} is not a size (say 5GB, 512MiB or 1e9): "
                   "the cache keeps its default cap of 5 GB")
        return DEFAULT_MAX_BYTES


def usable_root(create: bool = False) -> Path | None:
    """The cache folder where it is safe to use, else None.

    Created private (0700) where missing and ``create`` is set.  Refused, with one line
    on stderr, where it is owned by another user or writable by its group or by others:
    another user could then plant entries (figures memtui would print) or links."""
    root = cache_dir()
    try:
        if create:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = root.stat()  # a link to a folder of the user's own choosing is followed
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        why = ("owned by another user" if info.st_uid != os.geteuid()
               else "writable by other users")
        _warn_once(f"the cache folder {root} is {why}: not used (make it yours and "
                   "chmod go-w, or set XDG_CACHE_HOME elsewhere)")
        return None
    return root


def _entry_of(key: CacheKey, create_root: bool = False) -> Path | None:
    """The folder of ``key``'s entry where it is a real folder in a usable cache; a link
    or a file in its place is removed (never followed) and None returned."""
    root = usable_root(create=create_root)
    if root is None:
        return None
    entry = root / key.folder
    try:
        info = os.lstat(entry)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):  # a symbolic link or a file: not an entry
        with contextlib.suppress(OSError):
            os.unlink(entry)
        return None
    return entry


# -- digests ---------------------------------------------------------------------------------

def _digest_bytes(data: bytes | memoryview) -> str:
    import xxhash

    return xxhash.xxh3_128_hexdigest(data)


_READ_BLOCK = 1 << 22


def _digest_file(file: Path) -> str:
    """XXH3-128 of a regular file's bytes, read a few MiB at a time (a mapping would count
    every page of a multi-GB file in the process's resident memory); OSError for a link or
    other.  Blocks the kernel's file cache holds are read from it; a block it does not hold
    (``RWF_NOWAIT`` says so) is read with direct I/O where the file system allows it, so
    that checking an entry written direct does not first fill the file cache with every
    page of it (the screens map and touch the pages they need)."""
    import mmap

    import xxhash

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(file, flags)
    direct = None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(file))
        direct = _direct_twin(file, flags, info)
        digest = xxhash.xxh3_128()
        if direct is None:  # (no direct I/O here, or no RWF_NOWAIT: macOS, Windows)
            with os.fdopen(os.dup(fd), "rb", buffering=0) as stream:
                while chunk := stream.read(_READ_BLOCK):
                    digest.update(chunk)
            return digest.hexdigest()
        with mmap.mmap(-1, _READ_BLOCK) as block, memoryview(block) as view:
            offset = 0
            while offset < info.st_size:
                got = _read_block(fd, direct, view, offset)
                if not got:
                    break  # (cut short meanwhile: the digest tells)
                digest.update(got)
                offset += len(got)
                got.release()
        return digest.hexdigest()
    finally:
        os.close(fd)
        if direct is not None:
            os.close(direct)


def _direct_twin(file: Path, flags: int, info: os.stat_result) -> int | None:
    """A second descriptor of the same file opened for direct I/O, or None."""
    if not hasattr(os, "O_DIRECT") or not hasattr(os, "RWF_NOWAIT"):
        return None
    try:
        fd = os.open(file, flags | os.O_DIRECT)
    except OSError:
        return None
    twin = os.fstat(fd)
    if (twin.st_dev, twin.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        return None
    return fd


def _read_block(fd: int, direct: int, view: memoryview, offset: int) -> memoryview:
    """The file's next bytes at ``offset`` (a block at most, empty at its end): from the
    file cache where it holds them, else through ``direct`` (see :func:`_digest_file`),
    else plainly (direct reads refused)."""
    try:
        got = os.preadv(fd, [view], offset, os.RWF_NOWAIT)
        if got > 0:
            return view[:got]
    except BlockingIOError:
        pass  # not in the file cache
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    aligned = offset - offset % _DIRECT_ALIGN
    try:
        got = os.preadv(direct, [view], aligned)
        return view[offset - aligned:max(got, offset - aligned)]
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    return view[:os.preadv(fd, [view], offset)]


def _drop_direct(fd: int) -> None:
    """Clear ``O_DIRECT`` on ``fd``: its reads or writes go through the file cache again."""
    import fcntl

    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~getattr(os, "O_DIRECT", 0))


#: The size of :class:`_HashingWriter`'s staging buffer (a multiple of any block size).
_DIRECT_BUFFER = 1 << 22
#: Direct I/O writes whole blocks: the file's last block is padded to this, then cut.
_DIRECT_ALIGN = 4096


class _HashingWriter(io.RawIOBase):
    """A new file written through, its bytes hashed (XXH3-128) and counted as they pass:
    a frame's Arrow file digested without reading it back.

    Where the file system allows it the file is written with direct I/O (``O_DIRECT``),
    from one page-aligned buffer of :data:`_DIRECT_BUFFER` bytes: the bytes go from that
    buffer to the disk, not through pages of the kernel's file cache taken for them one
    by one.  Measured on a 2-core VM, 2.5 GB written buffered cost 5.3-6.5 s of system
    time and direct 0.1 s (the entry of a 10M-row msMemScope DB: the first open's store
    beside its findings).  A reopen's digests read what the file cache lacks directly too
    (:func:`_digest_file`); the screens' mapped pages come in as they are touched.
    Where direct I/O is refused (tmpfs, some network file systems) or a direct write
    fails with EINVAL, the rest is written the ordinary way."""

    def __init__(self, file: Path) -> None:
        import mmap

        import xxhash

        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        direct = getattr(os, "O_DIRECT", 0)
        self._fd = -1
        if direct:
            with contextlib.suppress(OSError):
                self._fd = os.open(file, flags | direct, 0o600)
        if self._fd < 0:
            direct = 0
            self._fd = os.open(file, flags, 0o600)
        self._direct = bool(direct)
        self._buffer = mmap.mmap(-1, _DIRECT_BUFFER) if self._direct else None
        self._filled = 0
        self._digest = xxhash.xxh3_128()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self._digest.update(view)
        if self._buffer is None:
            self._write_out(view)
        else:
            taken = 0
            while taken < len(view):
                room = min(_DIRECT_BUFFER - self._filled, len(view) - taken)
                self._buffer[self._filled:self._filled + room] = view[taken:taken + room]
                self._filled += room
                taken += room
                if self._filled == _DIRECT_BUFFER:
                    self._flush_buffer(_DIRECT_BUFFER)
        self.size += len(view)
        return len(view)

    def _write_out(self, view: memoryview) -> None:
        """Write all of ``view``; a direct write refused with EINVAL goes on the ordinary
        way (nothing of a refused write was written)."""
        done = 0
        while done < len(view):
            try:
                done += os.write(self._fd, view[done:])
            except OSError as exc:
                if exc.errno != errno.EINVAL or not self._direct:
                    raise
                _drop_direct(self._fd)
                self._direct = False

    def _flush_buffer(self, length: int) -> None:
        """Write the buffer's first ``length`` bytes (whole blocks while direct)."""
        assert self._buffer is not None
        with memoryview(self._buffer) as whole, whole[:length] as view:
            self._write_out(view)
        self._filled = 0

    def close(self) -> None:
        """Write what the buffer holds and close the file, once: a failed write (a full
        disk) still closes it, and a second close (the collector's) does nothing, so no
        descriptor number reused meanwhile (an SQLite connection's) is ever closed."""
        if self._fd < 0:
            return
        try:
            if self._buffer is not None:
                self._write_last_block()
        finally:
            fd, self._fd = self._fd, -1
            if self._buffer is not None:
                # (a failed write's traceback may still hold a view of it: then the
                # collector unmaps it later)
                with contextlib.suppress(BufferError):
                    self._buffer.close()
                self._buffer = None
            os.close(fd)
            super().close()

    def _write_last_block(self) -> None:
        """The buffer's last bytes: padded to a whole block, written, and the padding cut
        off the file again (direct), or written as they are."""
        assert self._buffer is not None
        last = self._filled
        if last:
            padded = -(-last // _DIRECT_ALIGN) * _DIRECT_ALIGN if self._direct else last
            self._buffer[last:padded] = bytes(padded - last)
            self._flush_buffer(padded)
            if padded != last:
                os.ftruncate(self._fd, self.size)

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


#: A frame of fewer rows is written whole: a column of one value costs little there.
CONSTANTS_FROM_ROWS = 1024
#: The dtypes a column of one value may have in the manifest (JSON holds its value).
_CONSTANT_DTYPES = ("String", "Boolean", "Int8", "Int16", "Int32", "Int64",
                    "UInt8", "UInt16", "UInt32", "UInt64")


def _without_constants(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[list[Any]]]:
    """``frame`` less its columns of one value (or null in every row), and those columns
    as ``[position, name, dtype, value]``: they are kept in the manifest, not written.

    A source holds such a column (a snapshot's device, pool, stream) as one value; writing
    it would write it out, 8 to 16 bytes a row, while the findings run beside the store.
    Each column is asked by :func:`memtui.model.one_value_columns`; at least one column
    is always written (it holds the frame's rows)."""
    from memtui.model import one_value_columns

    if frame.height < CONSTANTS_FROM_ROWS:
        return frame, []
    candidates = [name for name, dtype in frame.schema.items()
                  if str(dtype) in _CONSTANT_DTYPES]
    constants = [[frame.columns.index(name), name, str(frame.schema[name]), value]
                 for name, value in one_value_columns(frame, candidates).items()]
    if len(constants) == frame.width:
        constants = constants[1:]
    return frame.drop([name for _, name, _, _ in constants]), constants


def _with_constants(frame: pl.DataFrame, constants: list[list[Any]]) -> pl.DataFrame:
    """``frame`` with the columns :func:`_without_constants` kept in the manifest put back
    in their places, each as one value (ValueError on a manifest of another shape)."""
    import polars as pl

    if not constants:
        return frame
    columns: list[Any] = [pl.col(name) for name in frame.columns]
    for position, name, dtype, value in sorted(constants, key=lambda c: c[0]):
        if dtype not in _CONSTANT_DTYPES or not isinstance(name, str) or \
                not isinstance(position, int) or not 0 <= position <= len(columns):
            raise ValueError(f"constant column {name!r}: not one the cache writes")
        columns.insert(position, pl.lit(value, getattr(pl, dtype)).alias(name))
    return frame.select(columns)


def _write_frame(frame: pl.DataFrame, file: Path) -> tuple[int, str]:
    """``frame`` as an uncompressed Arrow IPC file (a new file): its size and digest."""
    with _HashingWriter(file) as out:
        frame.write_ipc(out, compression="uncompressed")
    return out.size, out.hexdigest()


def _check_file(file: Path, size: int, digest: str) -> None:
    """ValueError unless ``file`` is a regular file of ``size`` bytes and ``digest``."""
    info = os.lstat(file)
    if not stat.S_ISREG(info.st_mode) or info.st_size != size:
        raise ValueError(f"{file.name}: not the file the entry wrote")
    if _digest_file(file) != digest:
        raise ValueError(f"{file.name}: its bytes changed")


def _json_digest(value: Any) -> str:
    return _digest_bytes(json.dumps(value, sort_keys=True).encode())


# -- keys ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CacheKey:
    """Which entry a file maps to: ``folder`` is ``<path hash>-<content hash>``."""

    path: str
    size: int
    mtime_ns: int
    edges: str
    code: str = ""
    ctime_ns: int = 0
    companions: str = ""

    @property
    def path_part(self) -> str:
        return hashlib.blake2b(self.path.encode(), digest_size=8).hexdigest()

    @property
    def folder(self) -> str:
        content = (f"{self.size}:{self.mtime_ns}:{self.ctime_ns}:{self.edges}:"
                   f"{self.companions}:{self.code}:{MODEL_VERSION}:{__version__}")
        digest = hashlib.blake2b(content.encode(), digest_size=12).hexdigest()
        return f"{self.path_part}-{digest}"

    def as_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "model_version": MODEL_VERSION,
                "memtui_version": __version__}


def key_of(path: str | Path) -> CacheKey | None:
    """The cache key of a regular file, or None (a folder, or unreadable)."""
    try:
        resolved = Path(path).resolve()
        stat_now = resolved.stat()
        if not resolved.is_file():
            return None
        edges = _edges_digest(resolved, stat_now.st_size)
        companions = _companions_digest(resolved)
    except OSError:
        return None
    return CacheKey(str(resolved), stat_now.st_size, stat_now.st_mtime_ns, edges,
                    code_stamp(), stat_now.st_ctime_ns, companions)


def _edges_digest(file: Path, size: int) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with open(file, "rb") as fh:
        digest.update(fh.read(_EDGE))
        if size > _EDGE:
            fh.seek(max(_EDGE, size - _EDGE))
            digest.update(fh.read(_EDGE))
    return digest.hexdigest()


def companions_of(resolved: Path) -> list[Path]:
    """Files the loader of ``resolved`` reads beside it, whose change changes the capture:
    SQLite's ``-wal`` (committed rows live there until a checkpoint moves them into the
    ``.db``, which keeps its size and mtime meanwhile), the files read with it
    (:func:`memtui.sources.common.groups.read_with`: the rest of a profiler CSV's group, a
    dump's python traces), and every file of the folder a ``profiler_info_N.json`` stands
    for (at most :data:`_MAX_COMPANIONS`)."""
    from memtui.sources.common.groups import read_with
    from memtui.sources.common.walk import files_under

    found = []
    wal = resolved.with_name(resolved.name + "-wal")
    if wal.is_file():
        found.append(wal)
    found += read_with(resolved)  # a profiler CSV's group, a dump's python traces
    if _FOLDER_STAND_IN.match(resolved.name):
        for file in files_under(resolved.parent, max_entries=_MAX_COMPANIONS):
            if file != resolved:  # (the loader's own bounded walk: links not followed)
                found.append(file)
    return found


def _companions_digest(resolved: Path) -> str:
    """The names, sizes, mtimes and inode change times of :func:`companions_of` (and the
    edges of a ``-wal``): empty where there are none."""
    files = companions_of(resolved)
    if not files:
        return ""
    digest = hashlib.blake2b(digest_size=16)
    for file in files:
        try:
            info = file.stat()
        except OSError:
            continue
        digest.update(f"{file}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns};"
                      .encode())
        if file.name.endswith("-wal"):
            digest.update(_edges_digest(file, info.st_size).encode())
    return digest.hexdigest()


_code_stamp: str | None = None


def code_stamp() -> str:
    """A hash of memtui's own source files (names, sizes, mtimes): an entry written by other
    code (a loader or an analysis changed since, even without a version bump) is stale."""
    global _code_stamp
    if _code_stamp is None:
        package = Path(__file__).resolve().parent
        digest = hashlib.blake2b(digest_size=8)
        for file in sorted(package.rglob("*.py")):
            stat = file.stat()
            digest.update(f"{file.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns};"
                          .encode())
        _code_stamp = digest.hexdigest()
    return _code_stamp


# -- meta as JSON -----------------------------------------------------------------------------

def meta_to_json(meta: TraceMeta) -> dict[str, Any] | None:
    """``meta`` as JSON-ready data, or None where it would not come back equal."""
    data = dataclasses.asdict(meta)
    data.pop("cache_key", None)  # where the trace was read from this time: never stored
    try:
        if json.loads(json.dumps(data)) != data:
            return None
    except (TypeError, ValueError, RecursionError):
        return None
    return data


def _split_extra_frames(meta: TraceMeta) -> tuple[TraceMeta, dict[str, pl.DataFrame]]:
    """``meta`` without the frames some sources keep in ``extra`` (Ascend static ops...),
    and those frames: they are stored as IPC files of their own, not as JSON."""
    import polars as pl

    frames = {k: v for k, v in meta.extra.items() if isinstance(v, pl.DataFrame)}
    if not frames:
        return meta, {}
    rest = {k: v for k, v in meta.extra.items() if k not in frames}
    return dataclasses.replace(meta, extra=rest), frames


def meta_from_json(data: dict[str, Any]) -> TraceMeta:
    from memtui.model import DeviceInfo, TraceMeta

    devices = [DeviceInfo(**device) for device in data.pop("devices")]
    return TraceMeta(devices=devices, **data)


# -- reading ----------------------------------------------------------------------------------

def lookup(key: CacheKey) -> MemoryTrace | None:
    """The trace stored under ``key``, or None; a broken entry is deleted."""
    entry = _entry_of(key)
    if entry is None:
        return None
    try:
        trace = _read_entry(entry, key)
    except Exception:  # noqa: BLE001 - whatever is wrong with an entry, it is not trusted
        trace = None
    if trace is None:
        shutil.rmtree(entry, ignore_errors=True)
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # last use, for eviction
    return trace


def _read_manifest(entry: Path, key: CacheKey) -> dict[str, Any] | None:
    """The entry's manifest where it is a regular file written for ``key``."""
    file = entry / _MANIFEST
    if not stat.S_ISREG(os.lstat(file).st_mode):
        return None
    manifest = json.loads(file.read_text())
    if not isinstance(manifest, dict) or manifest.get("key") != key.as_json():
        return None
    return manifest


def _read_entry(entry: Path, key: CacheKey) -> MemoryTrace | None:
    from memtui.model import SCHEMAS, MemoryTrace

    manifest = _read_manifest(entry, key)
    if manifest is None or manifest.get("meta_digest") != _json_digest(manifest["meta"]):
        return None
    constants = manifest.get("constants", {})
    if manifest.get("constants_digest") != _json_digest(constants):
        return None
    frames: dict[str, pl.DataFrame] = {}
    mapped = sum(manifest["sizes"].values()) >= MAP_FROM_BYTES
    for name in SCHEMAS:
        file = entry / f"{name}.arrow"
        _check_file(file, manifest["sizes"][name], manifest["digests"][file.name])
        frames[name] = _with_constants(_read_arrow(file, mapped), constants.get(name, []))
        if not _fits_contract(frames[name], name) or \
                frames[name].height != manifest["rows"][name]:
            return None
    meta = meta_from_json(manifest["meta"])
    for extra_key, (file_name, size) in manifest.get("extra_frames", {}).items():
        file = entry / Path(file_name).name
        _check_file(file, size, manifest["digests"][file.name])
        meta.extra[extra_key] = _read_arrow(file, mapped)
    return MemoryTrace(meta=meta, **frames)


def _read_arrow(file: Path, mapped: bool = True) -> pl.DataFrame:
    """An IPC file as a frame whose columns are pages of the file (memory-mapped), or,
    for a small entry (``mapped`` False), read into memory by polars itself: a copy of a
    few MB costs less than importing pyarrow (about 30 ms of a small file's reopen)."""
    import polars as pl

    if not mapped:
        with open(file, "rb") as handle:  # a path would be a glob pattern to polars
            return pl.read_ipc(handle)
    import pyarrow as pa

    # the file closed once read: its buffers keep the mapping alive as long as the
    # columns live, and an open capture holds no file descriptor
    source = pa.memory_map(str(file))
    try:
        table = pa.ipc.open_file(source).read_all()
    finally:
        source.close()
    return pl.from_arrow(table, rechunk=False)  # type: ignore[return-value]


def _fits_contract(df: pl.DataFrame, name: str) -> bool:
    from memtui.model import SCHEMAS

    want = list(SCHEMAS[name].items())
    return list(df.schema.items())[: len(want)] == want


# -- writing ----------------------------------------------------------------------------------

def _disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _say_if_disk_full(exc: BaseException, root: Path) -> None:
    if _disk_full(exc):
        _warn_once(f"no space left on the disk of {root}: nothing was kept in the reopen "
                   "cache (what was half written is removed; memtui cache clear frees it)")


def store(key: CacheKey, trace: MemoryTrace, levels_of: MemoryTrace | None = None) -> bool:
    """Write ``trace`` under ``key`` (atomically), then keep the cache under its cap.

    ``levels_of``: the trace whose levels are kept beside the entry, where it is not
    ``trace`` itself (the one the analyses read, of the same events: its levels are
    walked and held once).  Returns False where nothing was stored (meta not JSON-safe,
    disk full, no permission).
    """
    from memtui.model import SCHEMAS

    # the source's own walk of the levels is not stored with the frames: the levels are
    # kept in files of their own (store_levels)
    fields = {f.name for f in dataclasses.fields(trace)} - {"walked_levels"}
    plain, extra_frames = _split_extra_frames(trace.meta)
    meta = meta_to_json(plain)
    if meta is None or fields != {"meta", *SCHEMAS}:
        return False
    root = usable_root(create=True)
    if root is None:
        return False
    try:
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    except OSError as exc:
        _say_if_disk_full(exc, root)
        return False
    try:
        sizes, digests, rows, constants = {}, {}, {}, {}
        for name in SCHEMAS:
            frame = trace.frame(name)
            file = staging / f"{name}.arrow"
            written, constants[name] = _without_constants(frame)
            sizes[name], digests[file.name] = _write_frame(written, file)
            rows[name] = frame.height
            del written
        extra_files = {}
        for index, (extra_key, frame) in enumerate(extra_frames.items()):
            file = staging / f"extra-{index}.arrow"
            size, digests[file.name] = _write_frame(frame, file)
            extra_files[extra_key] = (file.name, size)
        manifest = {"key": key.as_json(), "meta": meta, "meta_digest": _json_digest(meta),
                    "sizes": sizes, "rows": rows, "digests": digests,
                    "constants": constants, "constants_digest": _json_digest(constants),
                    "extra_frames": extra_files, "written": time.time()}
        (staging / _MANIFEST).write_text(json.dumps(manifest))
        _drop_entries_of(root, key)
        os.rename(staging, root / key.folder)
    except Exception as exc:  # noqa: BLE001 - a cache that cannot be written is just not there
        shutil.rmtree(staging, ignore_errors=True)
        _say_if_disk_full(exc, root)
        return False
    store_levels(key, trace if levels_of is None else levels_of)
    evict(root, max_bytes(), keep=key.folder)
    return True


_pending: list[threading.Thread] = []
#: The moment each background store waits for (see :func:`store_in_background`).
_gates: dict[threading.Thread, threading.Event] = {}
#: A store told to wait for a moment starts this many seconds later at the latest.
DEFER_LIMIT_S = 10.0


def store_in_background(key: CacheKey, trace: MemoryTrace,
                        levels_of: MemoryTrace | None = None,
                        after: threading.Event | None = None) -> None:
    """:func:`store` in a thread (mostly file writes, which release the GIL), so the first
    screen or the summary need not wait for it; :func:`wait_for_stores` joins them.

    ``after``: the store starts once it is set (the UI sets it at its first paint, so the
    writing does not take a core from the work before it), after :data:`DEFER_LIMIT_S`
    at the latest, or at once where :func:`wait_for_stores` asks for it."""
    def deferred_store() -> None:
        if after is not None:
            after.wait(DEFER_LIMIT_S)
        store(key, trace, levels_of)

    thread = threading.Thread(target=deferred_store, name="memtui-cache-store")
    if after is not None:
        _gates[thread] = after
    _pending.append(thread)
    thread.start()


def wait_for_stores() -> None:
    """Block until every background store has finished (the CLI calls it before exiting;
    the UI's indexing thread too, before it keeps an index beside the entry: both may
    wait at once, so each joins every store, none takes one from the other).  A store
    still waiting for its moment starts at once."""
    for thread in list(_pending):
        gate = _gates.pop(thread, None)
        if gate is not None:
            gate.set()
        thread.join()
        with contextlib.suppress(ValueError):  # (the other waiter removed it first)
            _pending.remove(thread)


def load_derived(key: CacheKey, name: str) -> Any | None:
    """A result computed from the trace of ``key`` and kept beside it (JSON), or None.

    Only what :func:`save_derived` wrote for this very entry and name, unchanged since
    (its digest), is returned: a file swapped in from another entry, edited, or of
    another shape is removed and None returned (the caller computes it again)."""
    entry = _entry_of(key)
    if entry is None:
        return None
    file = entry / f"derived-{name}.json"
    try:
        if _read_manifest(entry, key) is None or not stat.S_ISREG(os.lstat(file).st_mode):
            return None
        kept = json.loads(file.read_text())
        if isinstance(kept, dict) and kept.get("entry") == key.folder and \
                kept.get("name") == name and "value" in kept and \
                kept.get("digest") == _json_digest(kept["value"]):
            return kept["value"]
    except (OSError, ValueError, RecursionError):
        return None
    with contextlib.suppress(OSError):
        os.unlink(file)
    return None


def save_derived(key: CacheKey, name: str, value: Any, *, wait: bool = True) -> None:
    """Keep ``value`` (JSON-ready) beside the trace of ``key``, where that entry exists.

    Waits for the entry's own background store first.  Names a result and its settings:
    the caller puts whatever the value depends on beyond the trace into ``name``.
    ``wait=False`` is for a background store itself (it would wait for itself)."""
    if wait:
        wait_for_stores()
    entry = _entry_of(key)
    if entry is None:
        return
    try:
        text = json.dumps(value)
        if json.loads(text) != value:  # it would not come back the same
            return
        kept = {"entry": key.folder, "name": name, "digest": _json_digest(value),
                "value": value}
        _write_atomically(entry, f"derived-{name}.json", json.dumps(kept).encode())
    except (OSError, TypeError, ValueError) as exc:
        _say_if_disk_full(exc, entry.parent)
        return


def _write_atomically(entry: Path, name: str, data: bytes) -> Path:
    """``data`` as ``entry/name`` through a temporary file renamed into place (which
    replaces a link of that name rather than writing through it); the temporary file is
    removed where the write fails (a full disk)."""
    fd, staging = tempfile.mkstemp(prefix=".tmp-", dir=entry)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(staging, entry / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise
    return entry / name


# -- levels (what the first screen draws) --------------------------------------------------

#: The derived result naming an entry's level files (written last: it vouches for them).
LEVELS = "levels"


def store_levels(key: CacheKey, trace: MemoryTrace) -> bool:
    """Keep every device's allocated and reserved levels beside the entry of ``key``
    (``.npy`` files, memory-mapped on reopen: the Trend's first paint need not walk the
    events again).  Layered captures are shown through a layer's view, whose levels are
    its own: nothing is kept for them.  Returns False where nothing was kept."""
    from memtui.analysis.timeline.layers import has_layers
    from memtui.analysis.timeline.levels import allocated_level, reserved_level

    entry = _entry_of(key)
    if has_layers(trace) or entry is None:
        return False
    names: dict[str, dict[str, Any]] = {}
    try:
        saved: dict[int, tuple[Any, list]] = {}
        for index, info in enumerate(trace.meta.devices):
            device = info.name
            kept = {}
            levels = (("allocated", allocated_level(trace, device)),
                      ("reserved", reserved_level(trace, device)))
            for kind, level in levels:
                kept[kind] = None if level is None else _save_level(
                    entry, f"level-{index}-{kind}", level, saved)
            names[device] = kept
    except Exception as exc:  # noqa: BLE001 - no levels kept: the screens compute them
        _say_if_disk_full(exc, entry.parent)
        return False
    save_derived(key, LEVELS, names, wait=False)
    return True


def _save_level(entry: Path, stem: str, level: Any,
                saved: dict[int, tuple[Any, list]]) -> dict[str, Any]:
    """The files of ``level``'s times and values; an array already saved (``saved``: by
    identity, each with its array held meanwhile; a source's allocated and reserved
    levels share one array of times) is named again, not written twice."""
    import numpy as np

    files = {}
    for part in ("t", "values"):
        array = getattr(level, part)
        if id(array) not in saved:
            saved[id(array)] = array, _save_npy(
                entry, f"{stem}-{part}", np.ascontiguousarray(array, dtype=np.int64))
        files[part] = saved[id(array)][1]
    return files


def _save_npy(entry: Path, stem: str, array: Any) -> list:
    """``array`` as ``entry/stem.npy``: its file name, size and digest.  Written
    atomically, straight from the array (no copy of its bytes in memory), through
    :class:`_HashingWriter` (direct I/O where allowed; digested on the way, not read
    back)."""
    import numpy as np

    array = np.ascontiguousarray(array)
    staging = entry / f".tmp-{stem}-{secrets.token_hex(8)}.npy"
    try:
        with _HashingWriter(staging) as out:
            np.lib.format.write_array_header_1_0(
                out, np.lib.format.header_data_from_array_1_0(array))
            out.write(array.data)
        target = entry / f"{stem}.npy"
        os.replace(staging, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise
    return [target.name, out.size, out.hexdigest()]


def _load_npy(entry: Path, kept: list) -> Any:
    """The array :func:`_save_npy` wrote, memory-mapped (read where it is small); a
    ValueError where its size or digest changed or it is not a plain one-dimensional
    array.  The file is closed on return: the mapping lives as long as the array, and an
    open capture holds no file descriptor (numpy's own memmap keeps one per array)."""
    import numpy as np

    name, size, digest = kept
    file = entry / Path(name).name
    _check_file(file, size, digest)
    with open(file, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        readers = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise ValueError(f"{file}: an .npy version memtui did not write")
        shape, fortran, dtype = readers[version](fh)
        offset = fh.tell()
        if len(shape) != 1 or fortran or dtype.kind not in "iub" or dtype.hasobject:
            raise ValueError(f"{file} is not a plain array")
        if offset + shape[0] * dtype.itemsize != size:
            raise ValueError(f"{file}: its header and its size differ")
        if size < READ_NPY_BELOW or (size < MAP_FROM_BYTES and "pyarrow" not in sys.modules):
            return np.frombuffer(fh.read(), dtype=dtype, count=shape[0])  # (no import)
    import pyarrow as pa

    source = pa.memory_map(str(file))
    try:
        buffer = source.read_buffer()
    finally:
        source.close()
    return np.frombuffer(buffer, dtype=dtype, count=shape[0], offset=offset)


def lookup_levels(key: CacheKey) -> dict[str, tuple[Any, Any]]:
    """device -> (allocated, reserved or None) :class:`~memtui.analysis.timeline.levels.Level`
    kept for ``key``, memory-mapped; empty where none are kept or any file does not check
    out (digests, sizes, dtype, shapes): then the screens compute them as on a first open."""
    names = load_derived(key, LEVELS)
    entry = _entry_of(key)
    if not isinstance(names, dict) or entry is None:
        return {}
    try:
        return {device: (_load_level(entry, kept["allocated"]),
                         _load_level(entry, kept["reserved"]) if kept["reserved"] else None)
                for device, kept in names.items()}
    except Exception:  # noqa: BLE001 - never trusted: computed again
        return {}


def _load_level(entry: Path, files: dict[str, Any]) -> Any:
    import numpy as np

    from memtui.analysis.timeline.levels import Level

    parts = {}
    for part in ("t", "values"):
        parts[part] = _load_npy(entry, files[part])
        if parts[part].dtype != np.int64:
            raise ValueError(f"{files[part][0]} is not a level")
    if parts["t"].shape != parts["values"].shape:
        raise ValueError("a level's times and values differ in length")
    return Level(t=parts["t"], values=parts["values"])


# -- kept arrays (the indexes a screen builds after the first paint) -------------------------


def save_arrays(key: CacheKey, name: str, arrays: dict[str, Any]) -> bool:
    """Keep one-dimensional integer or boolean ``arrays`` beside the entry of ``key``
    (``.npy`` files, memory-mapped by :func:`load_arrays`), where that entry exists;
    False where nothing was kept.  Waits for the entry's own background store first."""
    wait_for_stores()
    entry = _entry_of(key)
    if entry is None:
        return False
    try:
        files = {part: _save_npy(entry, f"{name}-{index}", array)
                 for index, (part, array) in enumerate(arrays.items())}
    except (OSError, ValueError, TypeError) as exc:
        _say_if_disk_full(exc, entry.parent)
        return False
    save_derived(key, f"arrays-{name}", files, wait=False)  # written last: vouches for them
    return True


def load_arrays(key: CacheKey, name: str) -> dict[str, Any] | None:
    """The arrays :func:`save_arrays` kept under ``name``, memory-mapped; None where none
    are kept or a file does not check out (its digest and size, a plain 1-D integer or
    boolean array): the caller builds them again, never trusting a broken file."""
    files = load_derived(key, f"arrays-{name}")
    entry = _entry_of(key)
    if not isinstance(files, dict) or entry is None:
        return None
    try:
        return {part: _load_npy(entry, kept) for part, kept in files.items()}
    except Exception:  # noqa: BLE001 - never trusted: built again
        return None


def _drop_entries_of(root: Path, key: CacheKey) -> None:
    """Remove older entries of the same input (their file changed since)."""
    for entry in root.glob(f"{key.path_part}-*"):
        _remove(entry)


def _remove(entry: Path) -> bool:
    """Remove an entry folder, or a link or file in its place (never what a link points
    to); True where it is gone."""
    try:
        if stat.S_ISDIR(os.lstat(entry).st_mode):
            shutil.rmtree(entry, ignore_errors=True)
        else:
            os.unlink(entry)
    except OSError:
        pass
    return not os.path.lexists(entry)


def _entry_size(entry: Path) -> int:
    """Bytes of an entry's files; 0 for one another process or thread removed meanwhile
    (two stores at once, as ``memtui compare`` makes, each evict), or for a link."""
    try:
        if not stat.S_ISDIR(os.lstat(entry).st_mode):
            return 0
        return sum(os.lstat(f).st_size for f in entry.iterdir())
    except OSError:
        return 0


def evict(root: Path, limit: int, keep: str | None = None) -> list[str]:
    """Delete the least recently used entries until the cache holds at most ``limit`` bytes.

    The entry named ``keep`` (the one just written) goes last.  Returns the names deleted.
    """
    entries = []
    for entry in root.iterdir() if root.is_dir() else ():
        try:
            info = os.lstat(entry)
            if not stat.S_ISDIR(info.st_mode):
                continue
            if entry.name.startswith(".tmp-"):  # a write that died more than an hour ago
                if info.st_mtime < time.time() - 3600:
                    shutil.rmtree(entry, ignore_errors=True)
                continue
            entries.append((entry.name == keep, info.st_mtime, entry))
        except OSError:
            continue
    entries.sort(key=lambda item: (item[0], item[1]))
    sizes = {entry: _entry_size(entry) for _, _, entry in entries}
    total = sum(sizes.values())
    deleted = []
    for _, _, entry in entries:
        if total <= limit:
            break
        shutil.rmtree(entry, ignore_errors=True)
        total -= sizes[entry]
        deleted.append(entry.name)
    return deleted


@dataclasses.dataclass
class Cleared:
    """What :func:`clear` did: entries and bytes removed, entries it could not remove."""

    entries: int = 0
    bytes: int = 0
    failed: int = 0


def clear() -> Cleared:
    """Delete every entry (and stale temporary folders); counts only what is really gone."""
    root = cache_dir()
    done = Cleared()
    if not root.is_dir():
        return done
    for entry in root.iterdir():
        size = _entry_size(entry)
        counted = not entry.name.startswith(".tmp-")
        if _remove(entry):
            done.entries += counted
            done.bytes += size
        else:
            done.failed += 1
    return done


def usage() -> tuple[int, int]:
    """(entries, bytes) the cache holds now."""
    root = cache_dir()
    if not root.is_dir():
        return 0, 0
    entries = [e for e in root.iterdir()
               if not e.is_symlink() and e.is_dir() and not e.name.startswith(".tmp-")]
    return len(entries), sum(_entry_size(e) for e in entries)
