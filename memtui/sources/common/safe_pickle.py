"""Reading pickles without ever running anything in them.

:func:`load_pickle` uses an unpickler whose ``find_class`` refuses every global, so a file
whose opcodes would import or call something (``os.system``, ``builtins.eval``...) stops
at that opcode with a :class:`CaptureError`; persistent ids and out-of-band buffers are
refused too.  Protocols 2 to 5 are read.  ``load_pickle(path, read_bytes)`` reports the
bytes read so far while it unpickles (:class:`watching_reads`: a thread reads the file's
offset, so the C unpickler, or the compiled reader, is never slowed by a Python reader).
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable
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


#: ``read_bytes(done, size)``: the unpickler has read ``done`` of the file's ``size`` bytes.
BytesRead = Callable[[int, int], None]
#: Seconds between two reports of the bytes read.
REPORT_EVERY = 0.1


def load_pickle(path: Path, read_bytes: BytesRead | None = None) -> Any:
    """Unpickle ``path`` safely; any failure becomes a one-line :class:`CaptureError`.
    ``read_bytes`` hears how far it has read, every :data:`REPORT_EVERY` seconds."""
    try:
        fh = open_regular(path)
    except OSError as exc:
        raise CaptureError(path, f"cannot read it ({exc.strerror or exc})") from None
    try:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise CaptureError(path, "the file is empty")
        with memory_bounded(size) as cap, watching_reads(fh, size, read_bytes):
            return _RefusingUnpickler(fh).load()
    except CaptureError:
        raise
    except MemoryError:
        short = memory_short_of(cap.allowed)
        if short or not cap.limited:
            raise CaptureError(path, f"not enough memory to read it: a snapshot of "
                               f"{size / 2**20:,.0f} MiB takes up to about "
                               f"{TYPICAL_PER_BYTE * size / 2**30:,.1f} GiB to unpickle"
                               f"{short or ''}") from None
        raise CaptureError(path, f"unpickling it needs more than {cap.allowed:,} bytes, "
                           f"far more than a pickle of {size:,} bytes can hold (a memo or "
                           "container bomb?): refused") from None
    except pickle.UnpicklingError as exc:
        message = str(exc)
        if "refused" in message:
            raise CaptureError(path, f"unsafe pickle: {message}; nothing was run") from None
        raise CaptureError(path, f"corrupt pickle ({message})") from None
    except EOFError:
        raise CaptureError(path, "truncated pickle (the file ends before the data does)") from None
    except Exception as exc:
        raise CaptureError(path, f"corrupt pickle ({type(exc).__name__}: {exc})") from None
    finally:
        fh.close()


class watching_reads:  # noqa: N801 - a context manager, named as one reads it
    """While the block runs, a thread reports ``fh``'s offset in the file (what the
    buffered reader has taken from the OS: at most a buffer ahead of the unpickler) to
    ``read_bytes``; nothing without one."""

    def __init__(self, fh, size: int, read_bytes: BytesRead | None) -> None:
        self.fd, self.size, self.read_bytes = fh.fileno(), size, read_bytes
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> watching_reads:
        if self.read_bytes is not None:
            self.thread = threading.Thread(target=self._watch, name="memtui-pickle-progress",
                                           daemon=True)
            self.thread.start()
        return self

    def _watch(self) -> None:
        while not self.done.wait(REPORT_EVERY):
            try:
                offset = os.lseek(self.fd, 0, os.SEEK_CUR)
            except OSError:
                return
            try:
                self.read_bytes(min(offset, self.size), self.size)
            except Exception:  # noqa: BLE001 - a listener's failure never stops the load
                return

    def __exit__(self, *exc) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()


#: Unpickling real snapshots takes at most ~14x their size (measured on ../shared/data);
#: a pickle is allowed this many times its size, plus a floor, before it is refused.
TYPICAL_PER_BYTE = 14
MEMORY_PER_BYTE = 64
MEMORY_FLOOR = 32 << 20


class memory_bounded:  # noqa: N801 - a context manager, named as one reads it
    """Limit the process's data memory (``RLIMIT_DATA``) to what it uses now plus
    ``MEMORY_PER_BYTE`` times ``size`` plus a floor, while the block runs: an allocation
    past that raises MemoryError (a 9-byte ``LONG_BINPUT 2**27`` would take 2 GB).

    Where the limit cannot be set (no ``resource``, no /proc) nothing is limited.  The
    limit is the process's: one bounded block runs at a time (a lock), so that two
    threads unpickling at once never leave each other's limit behind, and none is set
    while another thread may be doing heavy work (a cache store, an executor worker:
    native code there would abort on a failed allocation rather than raise).
    """

    _one_at_a_time = threading.Lock()

    def __init__(self, size: int) -> None:
        self.allowed = MEMORY_PER_BYTE * size + MEMORY_FLOOR
        self.limited = False
        self._saved: tuple[int, int] | None = None

    def __enter__(self) -> memory_bounded:
        self._one_at_a_time.acquire()
        try:
            import resource

            used = 0 if _others_at_work() else _data_bytes()
            soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
            target = used + self.allowed
            if used and (hard == resource.RLIM_INFINITY or target < hard) and (
                    soft == resource.RLIM_INFINITY or target < soft):
                resource.setrlimit(resource.RLIMIT_DATA, (target, hard))
                self._saved = (soft, hard)
                self.limited = True
        except (ImportError, OSError, ValueError):
            pass
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._saved is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_DATA, self._saved)
                self._saved = None
        finally:
            self._one_at_a_time.release()


#: Threads whose work may allocate in native code (polars, pyarrow) at any moment.
_BUSY_THREADS = ("memtui-cache", "memtui-record", "ThreadPoolExecutor", "asyncio")


def _others_at_work() -> bool:
    current = threading.current_thread()
    return any(t is not current and t.name.startswith(_BUSY_THREADS)
               for t in threading.enumerate())


def _data_bytes() -> int:
    """The process's data segment now (``VmData``), or 0 where unknown."""
    return _status_bytes(b"VmData:")


def memory_short_of(wanted: int) -> str:
    """Where this process may use less than ``wanted`` more bytes (an address-space limit,
    ``ulimit -v``, or too little memory free on the machine): what says so, for the
    error; else "".  A MemoryError under such a limit is a machine short of memory, not a
    pickle that claims too much."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft < _address_space_bytes() + wanted:
            return (f"; this process may use only {soft / 2**30:,.1f} GiB in all "
                    "(ulimit -v)")
    except (ImportError, OSError, ValueError):
        pass
    available = _available_bytes()
    if available and available < wanted:
        return f"; only {available / 2**30:,.1f} GiB of memory is free on this machine"
    return ""


def _address_space_bytes() -> int:
    """The process's address space now (``VmSize``), or 0 where unknown."""
    return _status_bytes(b"VmSize:")


def _available_bytes() -> int:
    """``MemAvailable`` of /proc/meminfo, or 0 where unknown."""
    try:
        with open("/proc/meminfo", "rb") as info:
            for line in info:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _status_bytes(field: bytes) -> int:
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
