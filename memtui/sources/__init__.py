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

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from memtui.sources import ascend, memscope, torch_snapshot

Progress = Callable[[float, str], None]

#: Every source, tried in this order.
SOURCES: list[ModuleType] = [torch_snapshot, memscope, ascend]


def open_capture(path: str | Path, progress: Progress | None = None) -> MemoryTrace:
    """Load ``path`` with the first source whose sniff accepts it.

    Raises :class:`CaptureError` for anything unreadable; any other exception escaping a
    loader is a bug and is turned into a CaptureError naming it, so users never see a
    traceback.
    """
    path = Path(path)
    if not path.exists():
        raise CaptureError(path, "no such file or folder")
    if path.is_file():
        try:
            if path.stat().st_size == 0:
                raise CaptureError(path, "the file is empty")
        except OSError as exc:
            raise CaptureError(path, f"cannot read it ({exc.strerror})") from None
    for source in SOURCES:
        if source.sniff(path):
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
                    path, f"could not be read as {source.NAME} ({type(exc).__name__}: {exc})"
                ) from None
    kinds = ", ".join(source.NAME for source in SOURCES)
    raise CaptureError(path, f"not a format memtui reads ({kinds})")
