"""PyTorch (CUDA and torch_npu) memory snapshots: ``sniff`` and ``load``.

Reading is the compiled reader's job where it was built (:mod:`.columnar`, ``_reader.c``:
straight to columns), else, and for any file it leaves, the safe unpickler's
(:mod:`memtui.sources.common.safe_pickle`: refuses every global, so nothing in a file
runs); turning the snapshot into the model is :mod:`memtui.sources.torch_snapshot.build`'s.
See ../shared/formats/torch_snapshot.md.  The names below are imported on first use, so
that :mod:`.reader_choice` (which reader is in use) stays light.
"""

from __future__ import annotations

__all__ = ["NAME", "SOURCE", "load", "sniff"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from memtui.sources.torch_snapshot import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
