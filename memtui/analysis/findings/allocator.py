"""What the capture's allocator settings already set, and the setting that would help.

PyTorch snapshots carry ``allocator_settings`` (torch 2.3+): ``PYTORCH_CUDA_ALLOC_CONF``
(the configuration string), ``max_split_size`` (bytes, -1 = unlimited),
``garbage_collection_threshold`` and ``expandable_segments``.  torch_npu reads the same
options from ``PYTORCH_NPU_ALLOC_CONF``.  :func:`settings_of` merges the dict and the
string; :func:`advice` turns a cause (``fragmentation``, ``full``, ``outside``) into one
sentence that does not repeat what is already set and names settings that conflict.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.model import MemoryTrace
from memtui.units import format_bytes

MiB = 1 << 20
#: Cached bytes worth a setting: no allocator setting is suggested for a few MiB.
MIN_ADVICE_BYTES = 64 * MiB


@dataclass(frozen=True)
class AllocatorSettings:
    env: str  # PYTORCH_CUDA_ALLOC_CONF or PYTORCH_NPU_ALLOC_CONF
    known: bool  # the capture says what was set
    expandable_segments: bool = False
    max_split_size: int | None = None  # bytes; None: unlimited
    garbage_collection_threshold: float | None = None
    conf: str = ""

    def conflicts(self) -> list[str]:
        """Settings that work against each other, as sentences."""
        out = []
        if self.expandable_segments and self.max_split_size is not None:
            out.append(
                f"{self.env} sets both expandable_segments:True and max_split_size_mb:"
                f"{self.max_split_size // MiB}: expandable segments grow in place and are not "
                "split-limited, so max_split_size_mb does nothing for them; drop one")
        return out


def settings_of(trace: MemoryTrace) -> AllocatorSettings:
    """The allocator settings recorded in ``trace`` (``known`` False where none are)."""
    extra = trace.meta.extra or {}
    npu = extra.get("device_kind") == "npu" or trace.meta.source != "torch_snapshot"
    env = "PYTORCH_NPU_ALLOC_CONF" if npu else "PYTORCH_CUDA_ALLOC_CONF"
    raw = extra.get("allocator_settings")
    if not isinstance(raw, dict) or not raw:
        return AllocatorSettings(env=env, known=False)
    conf = raw.get(env) or raw.get("PYTORCH_CUDA_ALLOC_CONF") or \
        raw.get("PYTORCH_NPU_ALLOC_CONF") or ""
    conf = conf if isinstance(conf, str) else ""
    options = _parse_conf(conf)
    flag = raw.get("expandable_segments")
    expandable = (flag is True or (isinstance(flag, str) and flag.strip().lower() == "true")
                  or options.get("expandable_segments", "").lower() == "true")
    split = raw.get("max_split_size")
    max_split = int(split) if isinstance(split, int | float) and not isinstance(split, bool) \
        and 0 < split < (1 << 62) else None
    if max_split is None and options.get("max_split_size_mb", "").isdigit():
        max_split = int(options["max_split_size_mb"]) * MiB
    gc = raw.get("garbage_collection_threshold")
    threshold = float(gc) if isinstance(gc, int | float) and not isinstance(gc, bool) \
        and 0 < gc < 1 else None
    if threshold is None and options.get("garbage_collection_threshold"):
        try:
            threshold = float(options["garbage_collection_threshold"]) or None
        except ValueError:
            threshold = None
    return AllocatorSettings(env=env, known=True, expandable_segments=expandable,
                             max_split_size=max_split, garbage_collection_threshold=threshold,
                             conf=conf)


def _worth_a_setting(cached_free: int, requested: int | None) -> bool:
    """Whether ``cached_free`` bytes are worth naming a setting for: at least
    ``MIN_ADVICE_BYTES`` and, where the request is known, a quarter of it."""
    return cached_free >= MIN_ADVICE_BYTES and (not requested or 4 * cached_free >= requested)


def _parse_conf(conf: str) -> dict[str, str]:
    options = {}
    for part in conf.split(","):
        key, _, value = part.partition(":")
        if key.strip():
            options[key.strip()] = value.strip()
    return options


def advice(settings: AllocatorSettings, cause: str, requested: int | None = None,
           cached_free: int = 0) -> str:
    """One sentence of advice for an OOM (or a fragmented pool) of ``cause``."""
    env = settings.env
    if cause == "fragmentation":
        if not settings.expandable_segments:
            text = (f"set {env}=expandable_segments:True so that segments grow in place "
                    "instead of leaving free gaps too small for large requests")
            if settings.max_split_size is None and requested:
                text += (f" (or max_split_size_mb:{max(requested // MiB // 2, 20)} so that "
                         "large cached blocks are not split for small requests)")
            return text
        threshold = settings.garbage_collection_threshold
        text = "expandable segments are already on: "
        if threshold is None:
            text += (f"set {env}=garbage_collection_threshold:0.8 to reclaim unused cached "
                     "blocks early, or call torch.cuda.empty_cache() before the large request")
        else:
            text += (f"garbage_collection_threshold is already {threshold}; lower the peak or "
                     "free cached blocks (torch.cuda.empty_cache()) before the large request")
        return text
    if cause == "full":
        text = ("the device is full: lower the peak (smaller batch, activation checkpointing, "
                "freeing tensors earlier; see the peak finding)")
        if _worth_a_setting(cached_free, requested) \
                and settings.garbage_collection_threshold is None:
            text += (f"; {format_bytes(cached_free)} sat cached but unused, which "
                     f"{env}=garbage_collection_threshold:0.8 lets the allocator give back")
        return text
    if cause == "outside":
        return ("memory outside this allocator holds the device (another process, "
                "communication buffers, library workspaces): check nvidia-smi / npu-smi")
    return "lower the peak or make the pool less fragmented"


__all__ = ["MIN_ADVICE_BYTES", "AllocatorSettings", "advice", "settings_of"]
