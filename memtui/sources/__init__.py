"""The input formats: one package per format sniffs a path by content and loads a MemoryTrace.

* ``torch_snapshot/``: PyTorch (CUDA, torch_npu) snapshot pickles;
* ``memscope/``: msMemScope DBs, CSVs, python traces, result folders;
* ``ascend/``: Ascend profiler folders, CSVs and DBs;
* ``common/``: what they share (safe unpickler, SQLite connect helper, alloc/free
  pairing, call-stack interning).

Each format package has the same shape: its ``__init__`` exposes ``NAME``,
``sniff(path) -> bool`` (cheap: reads a few bytes or lists a folder, never raises) and
``load(path, progress) -> MemoryTrace``; ``read*`` modules turn files into rows and
``build`` turns rows into the model.  ``progress`` is ``None`` or a callable
``(fraction, message)`` the loader calls as it goes.  :func:`open_capture` tries them in
:data:`SOURCES` order.  Nothing here imports ``memtui.analysis`` or textual: data flows
one way (file -> source -> model -> analysis -> screen).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from memtui.errors import CaptureError
from memtui.sources.common.files import check_input, compression, read_head

if TYPE_CHECKING:
    from memtui.model import MemoryTrace

Progress = Callable[[float, str], None]

#: Every source, tried in this order (imported on first use: a light helper such as
#: ``memtui.sources.common.files`` does not pay for polars and every reader).
_SOURCE_MODULES = ("torch_snapshot", "memscope", "ascend")


def sources() -> list[ModuleType]:
    """Every source package, in the order :func:`open_capture` tries them."""
    return list(_each_source())


def _each_source() -> Iterator[ModuleType]:
    """The source packages in order, each imported only when the one before declined."""
    import importlib

    for name in _SOURCE_MODULES:
        yield importlib.import_module(f"memtui.sources.{name}")


def __getattr__(name: str) -> object:
    if name == "SOURCES":  # the list, as before the sources were imported lazily
        return sources()
    raise AttributeError(f"module 'memtui.sources' has no attribute {name!r}")


def open_capture(path: str | Path, progress: Progress | None = None,
                 preview: Callable[[MemoryTrace], None] | None = None) -> MemoryTrace:
    """Load ``path`` with the first source whose sniff accepts it.

    ``preview`` is handed a model of what was read so far, once, by a source that makes
    one while a long read goes on (``PREVIEWS``: an msMemScope DB); its
    ``meta.extra["preview"]`` says how many rows of how many.

    Raises :class:`CaptureError` for anything unreadable (see
    :func:`~memtui.sources.common.files.check_input` for missing, unreadable and
    non-regular paths, checked before any sniffing); any other exception escaping a
    loader is a bug and is turned into a CaptureError naming it, so users never see a
    traceback.
    """
    path = Path(path)
    check_input(path)
    if path.is_dir():
        return _open_folder(path, progress, preview)
    return _open_sniffed(path, progress, preview)


def _open_folder(path: Path, progress: Progress | None,
                 preview: Callable[[MemoryTrace], None] | None = None) -> MemoryTrace:
    """A folder, as it means one capture (:func:`memtui.sources.folders.folder_target`:
    its layout, the one capture in it, or several that are one result); the warnings of
    its listing join the trace's."""
    from memtui.sources.folders import folder_target

    target = folder_target(path)
    if target.profiler_roots:
        from memtui.sources import ascend

        trace = _loaded(ascend, path, lambda: ascend.load_roots(path, target.profiler_roots,
                                                                progress))
    elif target.capture is not None and target.capture != path:
        trace = open_capture(target.capture, progress, preview)
    else:
        trace = _open_sniffed(path, progress, preview)
    trace.meta.warnings = [*trace.meta.warnings, *target.warnings]
    return trace


def _loaded(source: ModuleType, path: Path, load: Callable[[], MemoryTrace]) -> MemoryTrace:
    """``load()``, whatever it raises said in one line naming ``path``."""
    try:
        return load()
    except CaptureError:
        raise
    except MemoryError:
        raise CaptureError(path, "not enough memory to load it") from None
    except OSError as exc:
        raise CaptureError(path, f"cannot read it ({exc.strerror or exc})") from None
    except Exception as exc:  # a loader bug must still not show a traceback
        raise CaptureError(
            path, f"could not be read as {source.NAME}: it is malformed in a way "
            f"memtui does not handle yet ({type(exc).__name__}; please report it)"
        ) from None


def _open_sniffed(path: Path, progress: Progress | None,
                  preview: Callable[[MemoryTrace], None] | None = None) -> MemoryTrace:
    """``path`` loaded by the first source that claims it."""
    for source in _each_source():
        if _sniffs(source, path):
            if preview is not None and getattr(source, "PREVIEWS", False):
                return _loaded(source, path, lambda source=source: source.load(
                    path, progress, preview=preview))
            return _loaded(source, path, lambda source=source: source.load(path, progress))
    packed = compression(path) if path.is_file() else None
    if packed is not None:
        raise CaptureError(path, f"compressed with {packed}: decompress it first")
    kinds = ", ".join(source.NAME for source in sources())
    raise CaptureError(path, unread_problem(path, kinds))


SQLITE_MAGIC = b"SQLite format 3\x00"


def unread_problem(path: Path, kinds: str) -> str:
    """What ``path``, which no source claims, was found to be: an empty folder, a folder
    without a capture, a SQLite file cut short or without the tables memtui reads, else
    simply not a format memtui reads (``kinds``: the formats that are)."""
    if path.is_dir():
        try:
            entries = sum(1 for _ in path.iterdir())
        except OSError:
            entries = -1
        if entries == 0:
            return f"no capture in this folder: it is empty (memtui reads {kinds})"
        return f"no capture in this folder: nothing in it is a format memtui reads ({kinds})"
    head = read_head(path, 100)
    if head.startswith(SQLITE_MAGIC):
        cut = sqlite_shortfall(head, path.stat().st_size)
        if cut is not None:
            return f"SQLite file is truncated ({cut}): a copy cut short, or one still written"
        return "a SQLite database without the msMemScope or Ascend profiler tables memtui reads"
    return f"not a format memtui reads ({kinds})"


def sqlite_shortfall(head: bytes, size: int) -> str | None:
    """How a SQLite file of ``size`` bytes starting with ``head`` (its first 100 bytes) is
    cut short, or None where its header and pages are all there (the page count is read
    from the header where the header says it is valid)."""
    if len(head) < 100:
        return f"{size} bytes, less than its 100-byte header"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96] and pages > 0
    if valid and size < page_size * pages:
        return f"{size:,} of its {page_size * pages:,} bytes"
    return None


def _sniffs(source: ModuleType, path: Path) -> bool:
    """Whether ``source`` claims ``path``; a sniff that fails says no (sniffs never raise)."""
    try:
        return bool(source.sniff(path))
    except (Exception, RecursionError):
        return False
