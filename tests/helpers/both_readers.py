"""Loading a snapshot with each reader (compiled, Python) and comparing what they give.

:func:`load_with` reads a file with one reader, chosen by ``MEMTUI_PURE_PYTHON`` for the
call; :func:`outcome` turns a load into something ``==`` compares whole: every frame of the
model (columns, dtypes, rows), the metadata (warnings included), or the error's message.
"""

from __future__ import annotations

import dataclasses
import os
from contextlib import contextmanager
from pathlib import Path

from memtui.errors import CaptureError
from memtui.model import MemoryTrace
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
