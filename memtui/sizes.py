"""Byte sizes written by people: ``512MiB``, ``2.5 GiB``, ``5GB``, ``1e9`` -> bytes.

Light (standard library only): the cache reads ``MEMTUI_CACHE_MAX_BYTES`` with it before
anything heavy is imported.  IEC units (``KiB``, ``MiB``, ``GiB``, ``TiB``, and the bare
letters ``K``, ``M``, ``G``, ``T``) are powers of 1024; SI units (``kB``, ``MB``, ``GB``,
``TB``) powers of 1000, as the disk a cap is about counts them.
"""

from __future__ import annotations

import math
import re

_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*")


def parse_size(text: str) -> int:
    """Bytes written in ``text``; ValueError naming it where it is not a size."""
    match = _SIZE.fullmatch(str(text))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (say 512MiB, 2.5 GiB, 5GB or 1e9)")
    value = float(match.group(1)) * _UNITS[unit]
    if not math.isfinite(value) or value > 2**63 - 1:
        raise ValueError(f"not a size: {text!r} (too large)")
    return int(value)
