"""A snapshot's ``allocator_settings``, read as PyTorch writes them or set aside with a warning.

PyTorch (2.3+) writes ``allocator_settings`` as a dict (../shared/formats/torch_snapshot.md
section 1.2): ``PYTORCH_CUDA_ALLOC_CONF`` (str), ``max_split_size`` (int bytes, -1 =
unlimited), ``garbage_collection_threshold`` (float), ``expandable_segments`` (bool),
``roundup_power2_divisions`` (a dict of ``"1"``, ``"2"``, ... ``"32768"`` to int), and
others.  A file may hold anything there: :func:`clean_settings` keeps each value of the
type PyTorch writes (``"True"``/``"False"`` strings read as the booleans they name, never
``bool("False")``), leaves out every other (a string for a size, NaN, a list, the whole
entry a list or a string) and says in one warning per value what it left out; the
replay and the advice then take PyTorch's default for it and say so where it matters.
"""

from __future__ import annotations

import math
from typing import Any

#: Keys whose value is a size in bytes (int; -1 or None: unlimited).
_SIZES = ("max_split_size", "max_cached_size", "max_round_threshold")
_FLAGS = ("expandable_segments", "release_lock_on_cudamalloc",
          "pinned_use_cuda_host_register", "graph_capture_record_stream_reuse")
_TEXTS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NPU_ALLOC_CONF")
_LIMIT = 1 << 62


def clean_settings(raw: Any) -> tuple[dict[str, Any], list[str]]:
    """(the settings PyTorch's types allow, a warning per value left out)."""
    if raw is None or (isinstance(raw, dict) and not raw):
        return {}, []
    if not isinstance(raw, dict):
        return {}, [f"allocator_settings is {_kind(raw)}, not PyTorch's table of settings: "
                    "left out (the replay and the advice take the defaults)"]
    kept: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in raw.items():
        if not isinstance(key, str):
            warnings.append(f"allocator_settings: a key {_shown(key)} that is not a name: "
                            "left out")
            continue
        cleaned, ok = _clean(key, value)
        if ok:
            kept[key] = cleaned
        else:
            warnings.append(f"allocator_settings: {key} {_shown(value)} is not what PyTorch "
                            "writes there: left out (its default is taken)")
    return kept, warnings


def _clean(key: str, value: Any) -> tuple[Any, bool]:
    """(value as kept, whether it is kept)."""
    if value is None:
        return None, True
    if key in _SIZES:
        return (value, True) if _is_int(value) and -1 <= value < _LIMIT else (None, False)
    if key in _FLAGS:
        return _flag(value)
    if key == "garbage_collection_threshold":
        ok = _is_number(value) and 0.0 <= float(value) < 1.0
        return (float(value), True) if ok else (None, False)
    if key == "roundup_power2_divisions":
        return _divisions(value)
    if key in _TEXTS:
        return (value, True) if isinstance(value, str) else (None, False)
    # another key of a newer torch: kept where the reopen cache keeps it unchanged
    if isinstance(value, str | bool) or _is_int(value) or \
            (_is_number(value) and math.isfinite(value)):
        return value, True
    return None, False


def _flag(value: Any) -> tuple[bool | None, bool]:
    if isinstance(value, bool):
        return value, True
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true", True
    if _is_int(value) and value in (0, 1):
        return bool(value), True
    return None, False


def _divisions(value: Any) -> tuple[Any, bool]:
    """An int, or a dict of power-of-two MiB keys (strings) to divisions (ints), each
    0 or a power of two."""
    def good(number: Any) -> bool:
        return _is_int(number) and 0 <= number < 1 << 20 and not number & (number - 1)

    if _is_int(value):
        return (value, True) if good(value) else (None, False)
    if not isinstance(value, dict):
        return None, False
    kept = {}
    for key, number in value.items():
        if not (isinstance(key, str) and key.isdigit() and len(key) < 8) or not good(number):
            return None, False
        kept[key] = number
    return kept, True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value)


def _kind(value: Any) -> str:
    return {list: "a list", tuple: "a tuple", str: "a string"}.get(type(value),
                                                                 type(value).__name__)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["clean_settings"]
