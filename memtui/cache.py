"""The reopen cache: a loaded MemoryTrace kept as Arrow IPC files, memory-mapped on reopen.

Opening a big capture means unpickling or scanning gigabytes; opening it again should not.
After a load, :func:`store` writes every frame of the trace as an uncompressed Arrow IPC
(Feather v2) file and its :class:`~memtui.model.TraceMeta` as JSON into one entry folder
under ``$XDG_CACHE_HOME/memtui/`` (default ``~/.cache/memtui``), never beside the input.
:func:`lookup` maps those files back (zero copy: the columns are pages of the cache file
until touched).

* **Key**: the input's resolved path, size, mtime, a hash of its first and last MiB and
  :data:`MODEL_VERSION` (bump it whenever a source or the model changes what a trace
  holds).  A changed input gets a new key; its old entry is removed when the new one is
  written.
* **Atomic**: an entry is written into a temporary folder and renamed into place, so a
  reader sees a whole entry or none.
* **Never trusted**: an entry whose manifest, file sizes, Arrow structure or column
  contract do not check out is ignored and deleted; the caller loads the input again.
* **Capped**: after each store the oldest entries (by last use) are evicted until the cache
  holds at most ``MEMTUI_CACHE_MAX_BYTES`` (default 5 GB).
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

Every failure to read or write the cache is silent: the cache only ever saves time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui import __version__

if TYPE_CHECKING:  # polars and the model are imported on use: `--no-cache` stays light
    import polars as pl

    from memtui.model import MemoryTrace, TraceMeta

#: Bump when a loader or the model changes what a trace of the same file holds.
MODEL_VERSION = 2  # 2: one time-ordered event axis (seq), sources keep their own "row"
DEFAULT_MAX_BYTES = 5 * 10**9
_EDGE = 1 << 20  # bytes hashed at each end of the input
_MANIFEST = "manifest.json"
#: Entries of at least this many bytes are memory-mapped (pyarrow); smaller ones are read.
MAP_FROM_BYTES = 32 << 20
NO_CACHE_ENV = "MEMTUI_NO_CACHE"


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


def max_bytes() -> int:
    try:
        return int(os.environ.get("MEMTUI_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES))
    except ValueError:
        return DEFAULT_MAX_BYTES


# -- keys ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CacheKey:
    """Which entry a file maps to: ``folder`` is ``<path hash>-<content hash>``."""

    path: str
    size: int
    mtime_ns: int
    edges: str
    code: str = ""

    @property
    def path_part(self) -> str:
        return hashlib.blake2b(self.path.encode(), digest_size=8).hexdigest()

    @property
    def folder(self) -> str:
        content = (f"{self.size}:{self.mtime_ns}:{self.edges}:{self.code}:{MODEL_VERSION}:"
                   f"{__version__}")
        digest = hashlib.blake2b(content.encode(), digest_size=12).hexdigest()
        return f"{self.path_part}-{digest}"

    def as_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "model_version": MODEL_VERSION,
                "memtui_version": __version__}


def key_of(path: str | Path) -> CacheKey | None:
    """The cache key of a regular file, or None (a folder, or unreadable)."""
    try:
        resolved = Path(path).resolve()
        stat = resolved.stat()
        if not resolved.is_file():
            return None
        digest = hashlib.blake2b(digest_size=16)
        with open(resolved, "rb") as fh:
            digest.update(fh.read(_EDGE))
            if stat.st_size > _EDGE:
                fh.seek(max(_EDGE, stat.st_size - _EDGE))
                digest.update(fh.read(_EDGE))
    except OSError:
        return None
    return CacheKey(str(resolved), stat.st_size, stat.st_mtime_ns, digest.hexdigest(),
                    code_stamp())


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
    entry = cache_dir() / key.folder
    if not entry.is_dir():
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


def _read_entry(entry: Path, key: CacheKey) -> MemoryTrace | None:
    from memtui.model import SCHEMAS, MemoryTrace

    manifest = json.loads((entry / _MANIFEST).read_text())
    if manifest.get("key") != key.as_json():
        return None
    frames: dict[str, pl.DataFrame] = {}
    mapped = sum(manifest["sizes"].values()) >= MAP_FROM_BYTES
    for name in SCHEMAS:
        file = entry / f"{name}.arrow"
        if file.stat().st_size != manifest["sizes"][name]:
            return None
        frames[name] = _read_arrow(file, mapped)
        if not _fits_contract(frames[name], name):
            return None
    meta = meta_from_json(manifest["meta"])
    for extra_key, (file_name, size) in manifest.get("extra_frames", {}).items():
        file = entry / file_name
        if file.stat().st_size != size:
            return None
        meta.extra[extra_key] = _read_arrow(file, mapped)
    return MemoryTrace(meta=meta, **frames)


def _read_arrow(file: Path, mapped: bool = True) -> pl.DataFrame:
    """An IPC file as a frame whose columns are pages of the file (memory-mapped), or,
    for a small entry (``mapped`` False), read into memory by polars itself: a copy of a
    few MB costs less than importing pyarrow (about 30 ms of a small file's reopen)."""
    import polars as pl

    if not mapped:
        return pl.read_ipc(file)
    import pyarrow as pa

    # not closed here: the buffers keep the mapping alive as long as the columns live
    table = pa.ipc.open_file(pa.memory_map(str(file))).read_all()
    return pl.from_arrow(table, rechunk=False)  # type: ignore[return-value]


def _fits_contract(df: pl.DataFrame, name: str) -> bool:
    from memtui.model import SCHEMAS

    want = list(SCHEMAS[name].items())
    return list(df.schema.items())[: len(want)] == want


# -- writing ----------------------------------------------------------------------------------

def store(key: CacheKey, trace: MemoryTrace) -> bool:
    """Write ``trace`` under ``key`` (atomically), then keep the cache under its cap.

    Returns False where nothing was stored (meta not JSON-safe, disk full, no permission).
    """
    from memtui.model import SCHEMAS

    fields = {f.name for f in dataclasses.fields(trace)}
    plain, extra_frames = _split_extra_frames(trace.meta)
    meta = meta_to_json(plain)
    if meta is None or fields != {"meta", *SCHEMAS}:
        return False
    root = cache_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    except OSError:
        return False
    try:
        sizes = {}
        for name in SCHEMAS:
            file = staging / f"{name}.arrow"
            trace.frame(name).write_ipc(file, compression="uncompressed")
            sizes[name] = file.stat().st_size
        extra_files = {}
        for index, (extra_key, frame) in enumerate(extra_frames.items()):
            file = staging / f"extra-{index}.arrow"
            frame.write_ipc(file, compression="uncompressed")
            extra_files[extra_key] = (file.name, file.stat().st_size)
        manifest = {"key": key.as_json(), "meta": meta, "sizes": sizes,
                    "extra_frames": extra_files, "written": time.time()}
        (staging / _MANIFEST).write_text(json.dumps(manifest))
        _drop_entries_of(root, key)
        os.rename(staging, root / key.folder)
    except Exception:  # noqa: BLE001 - a cache that cannot be written is just not there
        shutil.rmtree(staging, ignore_errors=True)
        return False
    store_levels(key, trace)
    evict(root, max_bytes(), keep=key.folder)
    return True


_pending: list[threading.Thread] = []


def store_in_background(key: CacheKey, trace: MemoryTrace) -> None:
    """:func:`store` in a thread (mostly file writes, which release the GIL), so the first
    screen or the summary need not wait for it; :func:`wait_for_stores` joins them."""
    thread = threading.Thread(target=store, args=(key, trace), name="memtui-cache-store")
    _pending.append(thread)
    thread.start()


def wait_for_stores() -> None:
    """Block until every background store has finished (the CLI calls it before exiting;
    the UI's indexing thread too, before it keeps an index beside the entry: both may
    wait at once, so each joins every store, none takes one from the other)."""
    for thread in list(_pending):
        thread.join()
        with contextlib.suppress(ValueError):  # (the other waiter removed it first)
            _pending.remove(thread)


def load_derived(key: CacheKey, name: str) -> Any | None:
    """A result computed from the trace of ``key`` and kept beside it (JSON), or None."""
    try:
        manifest = json.loads((cache_dir() / key.folder / _MANIFEST).read_text())
        if manifest.get("key") != key.as_json():
            return None
        return json.loads((cache_dir() / key.folder / f"derived-{name}.json").read_text())
    except (OSError, ValueError):
        return None


def save_derived(key: CacheKey, name: str, value: Any, *, wait: bool = True) -> None:
    """Keep ``value`` (JSON-ready) beside the trace of ``key``, where that entry exists.

    Waits for the entry's own background store first.  Names a result and its settings:
    the caller puts whatever the value depends on beyond the trace into ``name``.
    ``wait=False`` is for a background store itself (it would wait for itself)."""
    if wait:
        wait_for_stores()
    entry = cache_dir() / key.folder
    if not entry.is_dir():
        return
    try:
        text = json.dumps(value)
        if json.loads(text) != value:  # it would not come back the same
            return
        fd, staging = tempfile.mkstemp(prefix=".tmp-", dir=entry)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(staging, entry / f"derived-{name}.json")
    except (OSError, TypeError, ValueError):
        return


# -- levels (what the first screen draws) --------------------------------------------------

#: The derived result naming an entry's level files (written last: it vouches for them).
LEVELS = "levels"


def store_levels(key: CacheKey, trace: MemoryTrace) -> bool:
    """Keep every device's allocated and reserved levels beside the entry of ``key``
    (``.npy`` files, memory-mapped on reopen: the Trend's first paint need not walk the
    events again).  Layered captures are shown through a layer's view, whose levels are
    its own: nothing is kept for them.  Returns False where nothing was kept."""
    from memtui.analysis.layers import has_layers
    from memtui.analysis.levels import allocated_level, reserved_level

    entry = cache_dir() / key.folder
    if has_layers(trace) or not entry.is_dir():
        return False
    names: dict[str, dict[str, Any]] = {}
    try:
        for index, info in enumerate(trace.meta.devices):
            device = info.name
            kept = {}
            for kind, level in (("allocated", allocated_level(trace, device)),
                                ("reserved", reserved_level(trace, device))):
                kept[kind] = None if level is None else _save_level(
                    entry, f"level-{index}-{kind}", level)
            names[device] = kept
    except Exception:  # noqa: BLE001 - no levels kept: the screens compute them
        return False
    save_derived(key, LEVELS, names, wait=False)
    return True


def _save_level(entry: Path, stem: str, level: Any) -> dict[str, Any]:
    import numpy as np

    return {part: _save_npy(entry, f"{stem}-{part}",
                            np.ascontiguousarray(getattr(level, part), dtype=np.int64))
            for part in ("t", "values")}


def _save_npy(entry: Path, stem: str, array: Any) -> list:
    """``array`` as ``entry/stem.npy`` (atomically); its file name and size."""
    import numpy as np

    target = entry / f"{stem}.npy"
    fd, staging = tempfile.mkstemp(prefix=".tmp-", dir=entry)
    with os.fdopen(fd, "wb") as fh:
        np.save(fh, np.ascontiguousarray(array), allow_pickle=False)
    os.replace(staging, target)
    return [target.name, target.stat().st_size]


def _load_npy(entry: Path, name_and_size: list) -> Any:
    """The array :func:`_save_npy` wrote, memory-mapped; a ValueError where its size
    changed or it is not a plain one-dimensional array."""
    import numpy as np

    name, size = name_and_size
    file = entry / Path(name).name
    if file.stat().st_size != size:
        raise ValueError(f"{file} changed size")
    array = np.load(file, mmap_mode="r", allow_pickle=False)
    if array.ndim != 1 or array.dtype.kind not in "iub":
        raise ValueError(f"{file} is not a plain array")
    return np.asarray(array)


def lookup_levels(key: CacheKey) -> dict[str, tuple[Any, Any]]:
    """device -> (allocated, reserved or None) :class:`~memtui.analysis.levels.Level`
    kept for ``key``, memory-mapped; empty where none are kept or any file does not check
    out (sizes, dtype, shapes): then the screens compute them as on a first open."""
    names = load_derived(key, LEVELS)
    if not isinstance(names, dict):
        return {}
    entry = cache_dir() / key.folder
    try:
        return {device: (_load_level(entry, kept["allocated"]),
                         _load_level(entry, kept["reserved"]) if kept["reserved"] else None)
                for device, kept in names.items()}
    except Exception:  # noqa: BLE001 - never trusted: computed again
        return {}


def _load_level(entry: Path, files: dict[str, Any]) -> Any:
    import numpy as np

    from memtui.analysis.levels import Level

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
    entry = cache_dir() / key.folder
    if not entry.is_dir():
        return False
    try:
        files = {part: _save_npy(entry, f"{name}-{index}", array)
                 for index, (part, array) in enumerate(arrays.items())}
    except (OSError, ValueError, TypeError):
        return False
    save_derived(key, f"arrays-{name}", files, wait=False)  # written last: vouches for them
    return True


def load_arrays(key: CacheKey, name: str) -> dict[str, Any] | None:
    """The arrays :func:`save_arrays` kept under ``name``, memory-mapped; None where none
    are kept or a file does not check out (its size, a plain 1-D integer or boolean
    array): the caller builds them again, never trusting a broken file."""
    files = load_derived(key, f"arrays-{name}")
    if not isinstance(files, dict):
        return None
    entry = cache_dir() / key.folder
    try:
        return {part: _load_npy(entry, kept) for part, kept in files.items()}
    except Exception:  # noqa: BLE001 - never trusted: built again
        return None


def _drop_entries_of(root: Path, key: CacheKey) -> None:
    """Remove older entries of the same input (their file changed since)."""
    for entry in root.glob(f"{key.path_part}-*"):
        shutil.rmtree(entry, ignore_errors=True)


def _entry_size(entry: Path) -> int:
    """Bytes of an entry's files; 0 for one another process or thread removed meanwhile
    (two stores at once, as ``memtui compare`` makes, each evict)."""
    try:
        return sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
    except OSError:
        return 0


def evict(root: Path, limit: int, keep: str | None = None) -> list[str]:
    """Delete the least recently used entries until the cache holds at most ``limit`` bytes.

    The entry named ``keep`` (the one just written) goes last.  Returns the names deleted.
    """
    entries = []
    for entry in root.iterdir() if root.is_dir() else ():
        try:
            if not entry.is_dir():
                continue
            if entry.name.startswith(".tmp-"):  # a write that died more than an hour ago
                if entry.stat().st_mtime < time.time() - 3600:
                    shutil.rmtree(entry, ignore_errors=True)
                continue
            entries.append((entry.name == keep, entry.stat().st_mtime, entry))
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


def clear() -> tuple[int, int]:
    """Delete every entry (and stale temporary folders); returns (entries, bytes) freed."""
    root = cache_dir()
    count = freed = 0
    if not root.is_dir():
        return 0, 0
    for entry in root.iterdir():
        if entry.is_dir():
            freed += _entry_size(entry)
            shutil.rmtree(entry, ignore_errors=True)
            count += not entry.name.startswith(".tmp-")
    return count, freed


def usage() -> tuple[int, int]:
    """(entries, bytes) the cache holds now."""
    root = cache_dir()
    if not root.is_dir():
        return 0, 0
    entries = [e for e in root.iterdir() if e.is_dir() and not e.name.startswith(".tmp-")]
    return len(entries), sum(_entry_size(e) for e in entries)
