"""memtui: a terminal explorer for GPU and Ascend NPU memory captures, and a library.

``memtui.__all__`` is the supported Python surface (:mod:`memtui.api`)::

    import memtui

    cap = memtui.open("run.pickle")
    cap.summary().devices[0].peak_allocated_bytes

Everything else is private.  The names load on first use, so ``import memtui`` (and
``memtui --help``) imports neither polars nor numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memtui.version import __version__

#: name -> the module that defines it (imported on first use).
_LAZY = {
    "open": "memtui.api",
    "compare": "memtui.api",
    "Capture": "memtui.api",
    "Comparison": "memtui.api",
    "DeviceSummary": "memtui.api",
    "Findings": "memtui.api",
    "State": "memtui.api",
    "Summary": "memtui.api",
    "CheckResult": "memtui.api",
    "WhatIf": "memtui.api",
    "LimitResult": "memtui.analysis.limits.check",
    "Limits": "memtui.analysis.limits.check",
    "parse_size": "memtui.analysis.limits.check",
    "Finding": "memtui.analysis.findings.model",
    "Evidence": "memtui.analysis.findings.model",
    "CaptureError": "memtui.errors",
}

__all__ = ["CaptureError", "Capture", "CheckResult", "Comparison", "DeviceSummary",
           "Evidence", "Finding", "Findings", "LimitResult", "Limits", "State", "Summary",
           "WhatIf", "__version__", "compare", "open", "parse_size"]

if TYPE_CHECKING:
    from memtui.analysis.findings.model import Evidence, Finding
    from memtui.analysis.limits.check import LimitResult, Limits, parse_size
    from memtui.api import (
        Capture,
        CheckResult,
        Comparison,
        DeviceSummary,
        Findings,
        State,
        Summary,
        WhatIf,
        compare,
        open,
    )
    from memtui.errors import CaptureError


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memtui' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
