"""Reading pickles without ever running anything in them.

:func:`load_pickle` uses an unpickler whose ``find_class`` refuses every global, so a file
whose opcodes would import or call something (``os.system``, ``builtins.eval``...) stops
at that opcode with a :class:`CaptureError`; persistent ids and out-of-band buffers are
refused too.  Protocols 2 to 5 are read.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any, NoReturn

from memtui.errors import CaptureError
from memtui.sources.common.files import open_regular, read_head

PICKLE_PROTO = 0x80  # first byte of every pickle of protocol 2 or later


class _RefusingUnpickler(pickle.Unpickler):
    """An unpickler that builds only plain containers, numbers and strings."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise pickle.UnpicklingError(f"it asks to load the global {module}.{name}, refused")

    def persistent_load(self, pid: Any) -> NoReturn:
        raise pickle.UnpicklingError("it holds a persistent id, refused")


def looks_like_pickle(path: Path) -> bool:
    """True where ``path`` is a file starting with a protocol 2-5 pickle header."""
    head = read_head(path, 2)
    return len(head) == 2 and head[0] == PICKLE_PROTO and 2 <= head[1] <= 5


def load_pickle(path: Path) -> Any:
    """Unpickle ``path`` safely; any failure becomes a one-line :class:`CaptureError`."""
    try:
        fh = open_regular(path)
    except OSError as exc:
        raise CaptureError(path, f"cannot read it ({exc.strerror or exc})") from None
    try:
        if os.fstat(fh.fileno()).st_size == 0:
            raise CaptureError(path, "the file is empty")
        return _RefusingUnpickler(fh).load()
    except CaptureError:
        raise
    except pickle.UnpicklingError as exc:
        message = str(exc)
        if "refused" in message:
            raise CaptureError(path, f"unsafe pickle: {message}; nothing was run") from None
        raise CaptureError(path, f"corrupt pickle ({message})") from None
    except EOFError:
        raise CaptureError(path, "truncated pickle (the file ends before the data does)") from None
    except MemoryError:
        raise CaptureError(path, "not enough memory to unpickle it") from None
    except Exception as exc:
        raise CaptureError(path, f"corrupt pickle ({type(exc).__name__}: {exc})") from None
    finally:
        fh.close()
