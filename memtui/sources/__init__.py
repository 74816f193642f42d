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
from memtui.sources.common.files import check_input, compression

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


def open_capture(path: str | Path, progress: Progress | None = None) -> MemoryTrace:
    """Load ``path`` with the first source whose sniff accepts it.

    Raises :class:`CaptureError` for anything unreadable (see
    :func:`~memtui.sources.common.files.check_input` for missing, unreadable and
    non-regular paths, checked before any sniffing); any other exception escaping a
    loader is a bug and is turned into a CaptureError naming it, so users never see a
    traceback.
    """
    path = Path(path)
    check_input(path)
    for source in _each_source():
        if _sniffs(source, path):
            try:
                return source.load(path, progress)
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
    packed = compression(path) if path.is_file() else None
    if packed is not None:
        raise CaptureError(path, f"compressed with {packed}: decompress it first")
    kinds = ", ".join(source.NAME for source in sources())
    raise CaptureError(path, f"not a format memtui reads ({kinds})")


def _sniffs(source: ModuleType, path: Path) -> bool:
    """Whether ``source`` claims ``path``; a sniff that fails says no (sniffs never raise)."""
    try:
        return bool(source.sniff(path))
    except (Exception, RecursionError):
        return False
