"""Recording accelerator memory history in a running PyTorch process, dumped as snapshots.

This module owns what happens inside the recorded process: finding the accelerator the
process uses (CUDA through ``torch.cuda``, Ascend through ``torch_npu``), turning its
allocator's memory history on (``_record_memory_history``), and writing snapshots of it
into a folder: every ``every`` seconds from a daemon thread, on an out-of-memory error
(the allocator's OOM observer, so the dump holds the state at the failure), and at exit
(also at a SIGTERM the script does not handle itself).
Each dump is written to a hidden temporary name and renamed, so a reader never sees a
half-written file.

It uses the standard library only (torch is imported where it is already loaded or
asked for), because ``memtui record`` loads it by file path into the user's own Python,
which may be another interpreter than memtui's: see ``site/sitecustomize.py`` and
:func:`install_from_environment`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.util
import json
import os
import pickle
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

#: The environment variable carrying :class:`Settings` (JSON) to the recorded process.
CONFIG_ENV = "MEMTUI_RECORD"
#: Suffix of finished dumps; temporary ones start with a dot and end in ``.tmp``.
DUMP_SUFFIX = ".pickle"
TEMP_SUFFIX = ".tmp"
DEFAULT_MAX_ENTRIES = 100_000
MAX_OOM_DUMPS = 3
_PREFIX = "memtui record"


@dataclass
class Settings:
    """What to record and where (the options of ``memtui record``)."""

    out: str = "memtui_record"
    every: float | None = 60.0  # seconds between dumps; None: only on OOM and at exit
    on_oom: bool = True
    max_entries: int = DEFAULT_MAX_ENTRIES
    stacks: str = "python"  # "python" or "all" (C++ frames too)
    keep: int = 5  # interval dumps kept (the oldest are deleted); OOM and exit dumps stay

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Settings:
        data = json.loads(text)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class Backend(Protocol):
    """One accelerator's memory-history API."""

    name: str

    def enable(self, settings: Settings) -> None: ...

    def disable(self) -> None: ...

    def snapshot(self) -> dict: ...

    def attach_oom(self, callback: Callable[..., None]) -> bool: ...


class TorchBackend:
    """``torch.cuda.memory`` or ``torch_npu.npu.memory``: the same private API."""

    def __init__(self, name: str, memory: Any, attach: Callable | None) -> None:
        self.name = name
        self.memory = memory
        self._attach = attach

    def enable(self, settings: Settings) -> None:
        self.memory._record_memory_history(enabled="all", context="all",
                                           stacks=settings.stacks,
                                           max_entries=settings.max_entries)

    def disable(self) -> None:
        self.memory._record_memory_history(enabled=None)

    def snapshot(self) -> dict:
        return self.memory._snapshot()

    def attach_oom(self, callback: Callable[..., None]) -> bool:
        if self._attach is None:
            return False
        self._attach(callback)
        return True


def no_torch_reason() -> str:
    """Why torch was not recorded where it is not loaded: missing from this Python (the
    script's ``import torch`` failed), or installed but never imported."""
    try:
        installed = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        installed = False
    if not installed:
        return (f"torch is not installed in this Python ({sys.executable}); install it "
                "there (pip install torch), or run the script with the Python that has it")
    return "the script never imported torch"


def load_torch() -> str | None:
    """Import torch (and torch_npu, where installed) for a recording started from
    memtui's own process (the pytest plugin); None, or why there is no torch.  The one
    place outside the recorded script that imports torch: the viewer never does."""
    try:
        import torch  # noqa: F401  (find_backend looks at the loaded modules)
    except ImportError:
        return "torch is not installed"
    with contextlib.suppress(ImportError):
        import torch_npu  # noqa: F401  (Ascend, where it is installed)
    return None


def find_backend() -> tuple[TorchBackend | None, str]:
    """The accelerator this process's torch can record, or None and why not.

    Looks only at modules already imported: CUDA where ``torch.cuda.is_available()``,
    Ascend where ``torch_npu`` is loaded and ``torch.npu.is_available()``.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None, no_torch_reason()
    npu = sys.modules.get("torch_npu")
    if npu is not None:
        try:
            if torch.npu.is_available():
                attach = getattr(npu._C, "_npu_attach_out_of_memory_observer", None)
                return TorchBackend("npu", npu.npu.memory, attach), ""
        except Exception as exc:  # a broken torch_npu install: say so, run unrecorded
            return None, f"torch_npu is loaded but unusable ({type(exc).__name__}: {exc})"
    try:
        if torch.cuda.is_available():
            attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
            return TorchBackend("cuda", torch.cuda.memory, attach), ""
    except Exception as exc:
        return None, f"torch.cuda is unusable ({type(exc).__name__}: {exc})"
    version = getattr(torch, "__version__", "?")
    return None, (f"torch {version} sees no CUDA or Ascend device here"
                  + (" (a CPU build)" if "cpu" in version or not torch.version.cuda else ""))


def say(message: str) -> None:
    print(f"{_PREFIX}: {message}", file=sys.stderr, flush=True)


def write_atomically(path: Path, payload: bytes) -> None:
    """``payload`` at ``path``, appearing whole or not at all (a temporary created
    exclusively under a random hidden name, then renamed); the temporary file is removed
    where the write fails (a full disk leaves nothing behind)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):  # a random name, created exclusively: a link planted at a
        temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
        try:  # predictable one in a shared folder is never written through
            fd = os.open(temp, flags, 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"no free temporary name beside {path}")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def why_not_written(exc: BaseException) -> str:
    """What a failed dump says: a full disk by name, anything else as it came."""
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full (no space left on device)"
    return f"{type(exc).__name__}: {exc}"


class Recorder:
    """Memory history on, dumps into ``settings.out`` (see the module docstring)."""

    def __init__(self, settings: Settings, backend: Backend | None) -> None:
        self.settings = settings
        self.backend = backend
        self.folder = Path(settings.out)
        self.dumps: list[Path] = []
        self.started = False
        self._count = 0
        self._ooms = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tag = _process_tag()

    def start(self) -> bool:
        """Turn the history on and start the interval thread; False without a backend."""
        if self.backend is None or self.started:
            return self.started
        self.folder.mkdir(parents=True, exist_ok=True)
        self.backend.enable(self.settings)
        self.started = True
        if self.settings.on_oom and not self.backend.attach_oom(self._on_oom):
            say(f"{self.backend.name}: this torch has no OOM observer; no dump at an OOM")
        if self.settings.every:
            self._thread = threading.Thread(target=self._every, name="memtui-record",
                                            daemon=True)
            self._thread.start()
        return True

    def stop(self) -> None:
        """The exit dump, then history off; safe to call twice."""
        if not self.started:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.dump("exit")
        self.started = False
        with contextlib.suppress(Exception):  # the process is ending: a courtesy
            self.backend.disable()

    def dump(self, reason: str) -> Path | None:
        """One snapshot into the folder, named by time, process, order and reason."""
        with self._lock:
            try:
                snapshot = self.backend.snapshot()
                self._count += 1
                stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
                path = self.folder / (f"snapshot_{stamp}_{self._tag}_{self._count:05d}_"
                                      f"{reason}{DUMP_SUFFIX}")
                write_atomically(path, pickle.dumps(snapshot, protocol=4))
            except Exception as exc:  # never take the training down for a dump
                say(f"could not write the {reason} dump: {why_not_written(exc)}")
                return None
            self.dumps.append(path)
            if reason == "interval":
                self._prune()
            return path

    def _prune(self) -> None:
        intervals = [p for p in self.dumps if p.name.endswith(f"_interval{DUMP_SUFFIX}")]
        for old in intervals[: max(len(intervals) - self.settings.keep, 0)]:
            with contextlib.suppress(OSError):
                old.unlink()
            self.dumps.remove(old)

    def _every(self) -> None:
        while not self._stop.wait(self.settings.every):
            self.dump("interval")

    def _on_oom(self, *_details) -> None:
        """The allocator's OOM observer (device, alloc, device_alloc, device_free)."""
        self._ooms += 1
        if self._ooms <= MAX_OOM_DUMPS:
            self.dump("oom")


def _process_tag() -> str:
    rank = os.environ.get("RANK")
    return f"rank{rank}_{os.getpid()}" if rank and rank.isdigit() else str(os.getpid())


# -- inside the process ``memtui record`` runs -----------------------------------------------


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``callback(name)`` once a watched module has finished importing."""

    def __init__(self, names: tuple[str, ...], callback: Callable[[str], None]) -> None:
        self.names = names
        self.callback = callback
        self._busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _NotifyingLoader(spec.loader, self.callback)
        return spec


class _NotifyingLoader(importlib.abc.Loader):
    def __init__(self, loader, callback: Callable[[str], None]) -> None:
        self.loader = loader
        self.callback = callback

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        try:
            self.callback(module.__name__)
        except Exception as exc:  # recording must never break the user's import
            say(f"could not start recording ({type(exc).__name__}: {exc})")


class _ProcessRecording:
    """Starts the recorder when torch (or torch_npu) is imported; the verdict at exit."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.recorder: Recorder | None = None
        self.reason = "the script never imported torch"

    def imported(self, _name: str) -> None:
        if self.recorder is not None:
            return
        backend, why = find_backend()
        if backend is None:
            self.reason = why
            return
        self.recorder = Recorder(self.settings, backend)
        self.recorder.start()
        _say_seen(".recording")
        atexit.register(self.recorder.stop)  # after torch's own: runs before them
        _dump_on_sigterm(self.recorder)
        say(f"recording {backend.name} memory history into {self.settings.out}")

    def at_exit(self) -> None:
        if self.recorder is None:
            if "torch" not in sys.modules:
                self.reason = no_torch_reason()
            say(f"no accelerator memory history could be recorded: {self.reason}. "
                "The script ran unrecorded.")


def _dump_on_sigterm(recorder: Recorder) -> None:
    """A SIGTERM (torchrun stopping its workers, a scheduler's preemption, ``memtui record``
    passing one on) or a SIGHUP (the terminal gone) skips ``atexit``: where the script has
    no handler of its own, dump first, then die of it as before."""
    if threading.current_thread() is not threading.main_thread():
        return

    def on_term(signum, _frame) -> None:
        recorder.stop()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, on_term)


def _is_helper_process() -> bool:
    """A multiprocessing child (spawned worker) or ``python -c`` tool: not the script."""
    return any(arg == "--multiprocessing-fork" for arg in sys.argv) or bool(
        sys.argv and sys.argv[0] == "-c" and "multiprocessing" in " ".join(sys.argv))


#: A private folder where each recorded Python leaves its pid: ``memtui record`` tells
#: from it whether its command ran any Python at all.
SEEN_ENV = "MEMTUI_RECORD_SEEN"


def _say_seen(suffix: str = "") -> None:
    """Leave this process's pid in :data:`SEEN_ENV` (``suffix`` ``.recording``: once its
    recording started), for ``memtui record`` to tell whether anything was recorded."""
    folder = os.environ.get(SEEN_ENV)
    if folder:
        with contextlib.suppress(OSError):
            open(os.path.join(folder, f"{os.getpid()}{suffix}"), "w").close()


def install_from_environment() -> None:
    """Called by the sitecustomize ``memtui record`` puts first on the child's path."""
    text = os.environ.get(CONFIG_ENV)
    if not text or _is_helper_process():
        return
    _say_seen()
    process = _ProcessRecording(Settings.from_json(text))
    atexit.register(process.at_exit)  # registered first: runs last
    sys.meta_path.insert(0, _AfterImport(("torch", "torch_npu"), process.imported))
