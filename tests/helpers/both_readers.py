"""Loading a snapshot with each reader (compiled, Python) and comparing what they give.

:func:`load_with` reads a file with one reader, chosen by ``MEMTUI_PURE_PYTHON`` for the
call (:func:`reader`); :func:`outcome` turns a load into something ``==`` compares whole:
every frame of the model (columns, dtypes, rows), the metadata (warnings included), or
the error's message.
"""

from __future__ import annotations

import dataclasses
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from memtui.sources.common import safe_pickle
from memtui.sources.torch_snapshot import columnar, load

FRAMES = ("events", "blocks", "segments", "frames", "stacks", "calls", "curves", "markers")


@contextmanager
def reader(name: str):
    """Run the body with ``name`` ("compiled" or "python") as the snapshot reader."""
    saved = os.environ.get(columnar.PURE_PYTHON_ENV)
    os.environ[columnar.PURE_PYTHON_ENV] = "1" if name == "python" else "0"
    try:
        yield
    finally:
        if saved is None:
            del os.environ[columnar.PURE_PYTHON_ENV]
        else:
            os.environ[columnar.PURE_PYTHON_ENV] = saved


@pytest.fixture(autouse=True)
def no_data_limit_under_asan(monkeypatch):
    """Under AddressSanitizer (``MEMTUI_ASAN=1``, .ci/run) the process's RLIMIT_DATA would
    stop the sanitizer's own mappings (it aborts instead of failing an allocation): the
    limit is left off there; the readers' own bounds and harness.py's still hold.  Import
    it into a test module to use it."""
    if os.environ.get("MEMTUI_ASAN") == "1":
        monkeypatch.setattr(safe_pickle, "_data_bytes", lambda: 0)


def load_with(name: str, path: Path) -> MemoryTrace | CaptureError:
    with reader(name):
        try:
            return load(path)
        except CaptureError as exc:
            return exc


def outcome(result: MemoryTrace | CaptureError) -> tuple:
    """A comparable picture of a load: its error text, or every frame and the metadata."""
    if isinstance(result, CaptureError):
        return ("error", str(result))
    frames = tuple((name, getattr(result, name).to_dict(as_series=False),
                    dict(getattr(result, name).schema)) for name in FRAMES)
    return ("trace", frames, dataclasses.asdict(result.meta))
