"""Running a loader on a mutated file in-process, bounded in time and memory.

:func:`load_bounded` calls :func:`memtui.sources.open_capture` with tracemalloc on and a
watchdog (``faulthandler``: a hang dumps every thread's stack and ends the run), then
checks the promise of issue 12: the result is a trace or a one-line
:class:`~memtui.errors.CaptureError` (any other exception propagates and fails the
example), it came within ``TIME_LIMIT_S`` and Python's allocations peaked below
``MEMORY_PER_BYTE`` times the file's size plus ``MEMORY_FLOOR``.
"""

from __future__ import annotations

import faulthandler
import os
import time
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, settings

from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from memtui.sources import open_capture
from tests.helpers import run_profile

#: The stated bound: Python-side memory while loading, per byte of input, plus a floor
#: (small captures still import and build a handful of frames).  Real captures peak at
#: 4-14 bytes per byte unpickling (tests/sources/test_snapshot_hostile.py's notes).
MEMORY_PER_BYTE = 200
MEMORY_FLOOR = 64 << 20
TIME_LIMIT_S = 30.0
WATCHDOG_S = 120.0

#: ``MEMTUI_FUZZ_PROFILE=long`` for a local soak (see docs/development.md); CI runs
#: ``short``.  Unset, it follows ``MEMTUI_TEST_PROFILE`` (tests/helpers/run_profile.py):
#: one variable runs all long.
PROFILE = os.environ.get("MEMTUI_FUZZ_PROFILE", run_profile.PROFILE)
_EXAMPLES = {"short": 20, "long": 2000}
FUZZ = settings(
    max_examples=int(os.environ.get("MEMTUI_FUZZ_EXAMPLES", _EXAMPLES.get(PROFILE, 20))),
    deadline=None,
    derandomize=PROFILE == "short",  # CI: the same examples every run
    suppress_health_check=list(HealthCheck),
    database=None,
)


def load_bounded(path: Path) -> MemoryTrace | CaptureError:
    """The trace at ``path`` or the CaptureError it raised, checked (module docstring)."""
    size = path.stat().st_size if path.is_file() else 0
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    tracemalloc.start()
    started = time.monotonic()
    try:
        result: MemoryTrace | CaptureError = open_capture(path)
    except CaptureError as exc:
        result = exc
    finally:
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        faulthandler.cancel_dump_traceback_later()
    assert elapsed < TIME_LIMIT_S, f"{path.name}: {elapsed:.1f} s"
    allowed = MEMORY_PER_BYTE * size + MEMORY_FLOOR
    assert peak <= allowed, f"{path.name}: {peak:,} bytes for a file of {size:,}"
    if isinstance(result, CaptureError):
        line = str(result)
        assert "\n" not in line and line.startswith(f"{path}: "), line
        assert "Traceback" not in line
    return result
