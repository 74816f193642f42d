"""Which snapshot reader this process uses: the compiled one (``_reader.c``, where it was
built at install) unless ``MEMTUI_PURE_PYTHON=1``, else the safe Python unpickler.

Light on purpose (no numpy, no polars): ``memtui --version`` and ``memtui cache info`` say
which reader is in use without loading a capture's libraries.
"""

from __future__ import annotations

from memtui.sources.common.compiled import PURE_PYTHON_ENV, in_use_line, pure_python_forced

try:
    from memtui.sources.torch_snapshot import _reader
except ImportError:  # built without a compiler: the Python reader only
    _reader = None

__all__ = ["PURE_PYTHON_ENV", "compiled_available", "compiled_enabled", "compiled_reader",
           "reader_in_use"]


def compiled_reader():  # noqa: ANN201 (the extension module, untyped)
    """The compiled reader's module, ``None`` where it was not built."""
    return _reader


def compiled_available() -> bool:
    return _reader is not None


def compiled_enabled() -> bool:
    return _reader is not None and not pure_python_forced()


def reader_in_use() -> str:
    """The snapshot reader this process uses (see :func:`in_use_line`)."""
    return in_use_line("snapshot reader", _reader is not None, "Python", "reader",
                       "compiled (C), the Python reader where a file needs it")
