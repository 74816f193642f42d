"""The msMemScope reader and builder as they were before the one-pass build (issue 34),
frozen here for one purpose: tests/sources/test_memscope_before_after.py holds the new
build to the model this one gives, frame by frame, on every real DB and CSV, generated DBs
and hypothesis-made ones.  Nothing else imports it; it changes only where the model's
contract does (one fix since: an owner after a non-ASCII character was sliced at a byte
count taken for a character count, in both).
"""

from __future__ import annotations

from pathlib import Path

from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from tests.helpers.memscope_before.build import build_trace
from tests.helpers.memscope_before.read import is_sqlite, read_csv, read_db


def load_before(path: Path) -> MemoryTrace:
    """One msMemScope DB or dump CSV into the model, as memtui built it before (the rules
    of ``memtui.sources.memscope.load`` for one file)."""
    path = Path(path)
    raw = read_db(path) if is_sqlite(path) else read_csv(path)
    if not any(frame is not None and frame.height
               for frame in (raw.memory, raw.other, raw.trace)):
        raise CaptureError(path, "an msMemScope capture without a single row")
    return build_trace([raw], path)
