"""The caching allocator's settings a replay runs under: read from a capture's
``allocator_settings`` (PyTorch 2.4+ snapshots) or defaults, changed by ``--set KEY:VALUE``
strings in PYTORCH_CUDA_ALLOC_CONF's own syntax.

Only the settings that decide where a block goes are modelled: ``max_split_size_mb``,
``roundup_power2_divisions``, ``garbage_collection_threshold`` and
``expandable_segments``.  ``capacity`` is not an allocator setting: it is the device memory
the replay lets cudaMalloc reach (None: no limit known); ``memory_fraction`` says it is the
process's own limit (``torch.cuda.set_per_process_memory_fraction``), under which alone
``garbage_collection_threshold`` acts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

#: CUDAAllocatorConfig's default max_split_size: std::numeric_limits<size_t>::max().
NO_MAX_SPLIT = (1 << 64) - 1
MIB = 1 << 20

class SettingError(ValueError):
    """A ``--set`` or ``--capacity`` the replay cannot take (the command names the file)."""


#: The settings the Trend screen's ``w`` cycles through (``--set`` takes these and more).
WHAT_IF_CHOICES = ("expandable_segments:True", "max_split_size_mb:512",
                   "roundup_power2_divisions:4", "garbage_collection_threshold:0.8")

#: The keys ``--set`` understands (PYTORCH_CUDA_ALLOC_CONF names).
KNOWN_KEYS = ("max_split_size_mb", "roundup_power2_divisions", "garbage_collection_threshold",
              "expandable_segments")


@dataclass(frozen=True)
class Settings:
    """What the replayed allocator does differently from PyTorch's defaults.

    ``roundup_power2_divisions`` maps the power-of-two interval (its lower end, in MiB:
    1, 2, 4, ... 16384 and larger) to its number of divisions; a single int applies to all
    (CUDAAllocatorConfig::parseRoundUpPower2Divisions).  0 or 1: no rounding beyond 512 B.
    """

    max_split_size: int = NO_MAX_SPLIT
    roundup_power2_divisions: tuple[int, ...] = field(default_factory=lambda: (0,) * 16)
    garbage_collection_threshold: float = 0.0
    expandable_segments: bool = False
    capacity: int | None = None
    #: the capacity is a per-process limit (torch.cuda.set_per_process_memory_fraction):
    #: only then does garbage_collection_threshold act (malloc's ``set_fraction &&``)
    memory_fraction: bool = False

    def describe(self) -> str:
        """The settings in PYTORCH_CUDA_ALLOC_CONF's syntax (defaults left out)."""
        parts = []
        if self.max_split_size != NO_MAX_SPLIT:
            parts.append(f"max_split_size_mb:{self.max_split_size // MIB}")
        if any(self.roundup_power2_divisions):
            divisions = set(self.roundup_power2_divisions)
            if len(divisions) == 1:
                parts.append(f"roundup_power2_divisions:{divisions.pop()}")
            else:
                pairs = ",".join(f"{1 << i}:{d}"
                                 for i, d in enumerate(self.roundup_power2_divisions))
                parts.append(f"roundup_power2_divisions:[{pairs}]")
        if self.garbage_collection_threshold:
            parts.append(f"garbage_collection_threshold:{self.garbage_collection_threshold:g}")
        if self.expandable_segments:
            parts.append("expandable_segments:True")
        return ",".join(parts) or "defaults"


def from_capture(allocator_settings: Any) -> Settings:
    """The settings a snapshot recorded (``allocator_settings``; None before torch 2.4:
    the defaults, which the proof then checks).  The loader keeps only values of the
    types PyTorch writes (``memtui.sources.torch_snapshot.settings``); whatever else
    reaches here (a hand-built trace) is read where it can be and taken as the default
    where it cannot, never an exception."""
    if not isinstance(allocator_settings, dict) or not allocator_settings:
        return Settings()
    raw_split = _number(allocator_settings.get("max_split_size"))
    max_split = NO_MAX_SPLIT if raw_split is None or raw_split < 0 else int(raw_split)
    divisions = allocator_settings.get("roundup_power2_divisions") or {}
    if isinstance(divisions, dict):
        ordered = tuple(int(_number(divisions.get(str(1 << i))) or 0) for i in range(16))
    else:
        ordered = (int(_number(divisions) or 0),) * 16
    threshold = _number(allocator_settings.get("garbage_collection_threshold")) or 0.0
    return Settings(
        max_split_size=max_split,
        roundup_power2_divisions=ordered,
        garbage_collection_threshold=threshold if 0.0 <= threshold < 1.0 else 0.0,
        expandable_segments=_flag(allocator_settings.get("expandable_segments")),
    )


def _number(value: Any) -> float | None:
    """``value`` as a finite number (an int stays an int), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (value == value and abs(value) < 1e300):
        return None
    return value


def _flag(value: Any) -> bool:
    """A recorded flag: True, or the string ``"True"`` (never ``bool("False")``)."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True or (isinstance(value, int) and value == 1)


def apply_changes(settings: Settings, changes: list[str]) -> Settings:
    """``settings`` with each ``KEY:VALUE`` of ``changes`` applied (several may be joined by
    commas, as in PYTORCH_CUDA_ALLOC_CONF).  A bad key or value raises SettingError."""
    for change in changes:
        parts = _split_conf(change)
        if not parts:
            raise SettingError(f"--set {change!r}: no setting in it (say "
                               "expandable_segments:True)")
        for part in parts:
            key, _, value = part.partition(":")
            settings = _apply_one(settings, key.strip(), value.strip())
    return settings


def _split_conf(text: str) -> list[str]:
    # commas inside [...] belong to roundup_power2_divisions' list
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in (p.strip() for p in parts) if p]


def _apply_one(settings: Settings, key: str, value: str) -> Settings:
    try:
        if key == "max_split_size_mb":
            mb = int(value)
            # CUDAAllocatorConfig::parseMaxSplitSize: at least kLargeBuffer / MiB (20)
            if mb < 20:
                raise ValueError("max_split_size_mb must be at least 20 (kLargeBuffer)")
            if mb * MIB > MAX_SIZE:
                raise ValueError("max_split_size_mb of more than a petabyte: no device has "
                                 "that much (leave it unset for no limit)")
            return replace(settings, max_split_size=mb * MIB)
        if key == "roundup_power2_divisions":
            return replace(settings, roundup_power2_divisions=_parse_divisions(value))
        if key == "garbage_collection_threshold":
            threshold = float(value)
            if not 0.0 < threshold < 1.0:
                raise ValueError("garbage_collection_threshold must be in (0, 1)")
            return replace(settings, garbage_collection_threshold=threshold)
        if key == "expandable_segments":
            if value not in ("True", "False"):
                raise ValueError("expandable_segments is True or False")
            return replace(settings, expandable_segments=value == "True")
    except ValueError as err:
        raise SettingError(f"--set {key}:{value}: {err}") from None
    raise SettingError(f"--set {key}: unknown setting (known: {', '.join(KNOWN_KEYS)})")


def _parse_divisions(value: str) -> tuple[int, ...]:
    """``4`` or ``[256:1,512:2,>:4]`` (CUDAAllocatorConfig::parseRoundUpPower2Divisions)."""
    def checked(number: str) -> int:
        divisions = int(number)
        if divisions and divisions & (divisions - 1):
            raise ValueError("divisions must be a power of two")
        return divisions

    if not value.startswith("["):
        return (checked(value),) * 16
    out = [0] * 16
    last = 0
    for item in value.strip("[]").split(","):
        interval, _, number = item.partition(":")
        interval = interval.strip()
        if interval == ">":
            for i in range(last, 16):
                out[i] = checked(number)
            continue
        mib = int(interval)
        if mib <= 0 or mib & (mib - 1):
            raise ValueError("intervals must be powers of two (MiB)")
        index = min(mib.bit_length() - 1, 15)
        out[index] = checked(number)
        last = index + 1
    return tuple(out)


#: The largest size a setting or a capacity may name (a petabyte: beyond any device).
MAX_SIZE = 1 << 50


def parse_size(text: str, option: str = "--capacity") -> int:
    """``80GiB``, ``24 GB``, ``1.5T``, ``4096`` (bytes) -> bytes.  Binary units either way
    (a card's "80 GB" is 80 GiB).  ``option`` names what was given, in the error."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*", text)
    if not match:
        raise SettingError(f"{option} {text}: not a size (say 80GiB, 24GB, 40960MiB)")
    number, unit = float(match.group(1)), match.group(2).upper()
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit]
    size = number * scale
    if not 1 <= size <= MAX_SIZE:  # under a byte (0.5) is no memory either, as 0 is
        raise SettingError(f"{option} {text}: {'0' if size < 1 else 'more than a petabyte'}"
                           ": not a device's memory")
    return int(size)
