"""Open a capture as every consumer sees it: the source's model plus the load-time analyses.

``memtui.sources.open_capture`` reads a file into a :class:`MemoryTrace` and knows nothing
of analyses (data flows one way).  The commands and the UI call :func:`load_trace`, which
first asks the reopen cache (:mod:`memtui.cache`) for the file's trace, reads it with the
source where the cache has none (and stores it for next time), then adds what depends on
user settings rather than on the file: today the inefficient-block flags under the chosen
thresholds (so the cache holds the source's trace, never the flags).  A reopened trace
comes with the levels the cache kept for it (``memtui.analysis.timeline.levels.seed_levels``): the
first screen draws them without walking the events again; a freshly read one with the
levels its source walked, where it did (``MemoryTrace.walked_levels``: held once, never
copied out of the events' columns).  The findings too are kept
beside the entry (:func:`keep_findings`) and handed back on reopen (:func:`kept_findings`):
a reopened capture's Findings arrive with its first screen.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.analysis.findings.flags import DEFAULT_THRESHOLDS, Thresholds, with_inefficient_flags
from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from memtui.sources import open_capture
from memtui.sources.common.files import check_input

if TYPE_CHECKING:
    from memtui.analysis.findings import Finding
    from memtui.analysis.layout.block_map import BlockMapData
    from memtui.analysis.timeline.live import DeviceIndex

__all__ = ["check_input", "load_trace"]

Progress = Callable[[float, str], None]


def load_trace(path: str | Path, progress: Progress | None = None,
               thresholds: Thresholds = DEFAULT_THRESHOLDS, *,
               use_cache: bool | None = None, store_in_background: bool = False,
               store_after: threading.Event | None = None,
               preview: Callable[[MemoryTrace], None] | None = None) -> MemoryTrace:
    """The capture at ``path`` with its load-time analyses applied.

    ``use_cache=False`` neither reads nor writes the reopen cache; ``None`` (the default)
    uses it unless ``--no-cache`` turned it off for the process (``MEMTUI_NO_CACHE``).
    ``store_in_background`` writes a new cache entry in a thread and returns at once
    (``memtui.cache.wait_for_stores`` joins it; the CLI does before it exits), once
    ``store_after`` is set where one is given (the UI's first paint; see
    :func:`memtui.cache.store_in_background`).

    ``preview`` is handed a model of the rows read so far, its load-time analyses
    applied, where the source makes one while a long read goes on (see
    :func:`memtui.sources.open_capture`; never from the cache).

    A capture of nothing (no device has events, blocks or levels) is a CaptureError: the
    one rule of every command and the UI (:func:`require_a_device`).
    """
    if not os.fspath(path):  # Path("") is ".": an unset $CAPTURE would open the folder
        raise CaptureError(repr(""), "an empty path: name a capture file or folder")
    check_input(Path(path))  # before the cache looks at it: loops, FIFOs, permissions
    if progress is None:  # the commands' report on stderr, where one is on
        from memtui.progress import default

        progress = default()
    if use_cache is None:
        from memtui import cache

        use_cache = cache.enabled()
    levels: dict = {}
    key, fresh = None, False
    if preview is not None:
        preview = _prepared(preview, thresholds)
    if use_cache:
        trace, levels, key, fresh = _cached_or_loaded(path, progress, preview)
    else:
        trace = open_capture(path, progress, preview)
    if not levels and trace.walked_levels:  # the source's own: held once, not copied
        from memtui.analysis.timeline.levels import walked_levels

        levels = walked_levels(trace)
    prepared = prepare_trace(trace, thresholds)
    prepared = replace(prepared, meta=replace(prepared.meta, cache_key=key), walked_levels={})
    if levels:
        from memtui.analysis.timeline.levels import seed_levels

        for device, (allocated, reserved) in levels.items():
            seed_levels(prepared, device, allocated, reserved)
    if fresh and key is not None:
        _store(key, trace, prepared, progress, store_in_background, store_after)
    require_a_device(prepared)
    return prepared


def _prepared(show: Callable[[MemoryTrace], None],
              thresholds: Thresholds) -> Callable[[MemoryTrace], None]:
    """``show`` of a preview with its load-time analyses applied (one of nothing is not
    shown)."""
    def preview(trace: MemoryTrace) -> None:
        if trace.meta.device_names:
            show(prepare_trace(trace, thresholds))
    return preview


def _store(key: Any, trace: MemoryTrace, prepared: MemoryTrace, progress: Progress | None,
           in_background: bool, after: threading.Event | None = None) -> None:
    """Store the source's ``trace`` under ``key`` (never the flags), with the levels of
    ``prepared``, the trace every analysis reads: the same events, so the levels are
    walked once, by the store or by the first analysis, whichever asks first, and held
    once (of the source's own trace they would be held twice)."""
    from memtui import cache

    if in_background:
        cache.store_in_background(key, trace, levels_of=prepared, after=after)
        return
    if progress is not None:
        progress(1.0, "storing in the cache")
    cache.store(key, trace, levels_of=prepared)


#: What a capture of nothing is told, by every command and by the UI.
NO_DEVICE = "no device has events, blocks or levels"


def require_a_device(trace: MemoryTrace) -> None:
    """Raise the one-line CaptureError of a capture with nothing to show (no device has
    events, blocks or levels; its first warning says why, where it has one): ``summary``
    and the UI alike end with exit status 2 on it."""
    if not trace.meta.device_names:
        why = f" ({trace.meta.warnings[0]})" if trace.meta.warnings else ""
        raise CaptureError(trace.meta.path, f"{NO_DEVICE}{why}")


def prepare_trace(trace: MemoryTrace,
                  thresholds: Thresholds = DEFAULT_THRESHOLDS) -> MemoryTrace:
    """The load-time analyses applied to a trace a source built (``--follow`` builds one
    per new batch of rows)."""
    return with_inefficient_flags(trace, thresholds)


def _cached_or_loaded(path: str | Path, progress: Progress | None,
                      preview: Callable[[MemoryTrace], None] | None = None
                      ) -> tuple[MemoryTrace, dict, Any, bool]:
    """The trace of ``path``, the levels kept beside it where it was reopened from the
    cache (device -> (allocated, reserved)), its cache key, taken once before it was
    read, and whether it was read afresh (the caller stores it for next time).  A file
    that changed while it was read (its key after the read differs) is given no key:
    what was read may be of neither version."""
    from memtui import cache

    key = cache.key_of(path)
    if key is not None:
        trace = cache.lookup(key)
        if trace is not None:
            trace.meta.path = str(Path(path))  # as given this time, as a source would say
            if progress is not None:
                progress(1.0, "opened from the cache")
            return trace, cache.lookup_levels(key), key, False
    trace = open_capture(path, progress, preview)
    if key is not None and cache.key_of(path) != key:
        key = None  # replaced or written while it was read
    return trace, {}, key, True


#: ``progress(index, fraction, message)``: the capture at ``paths[index]`` reports.
IndexedProgress = Callable[[int, float, str], None]


def load_traces(paths: list[str | Path], progress: IndexedProgress | None = None,
                thresholds: Thresholds = DEFAULT_THRESHOLDS, *,
                use_cache: bool | None = None,
                store_in_background: bool = False) -> list[MemoryTrace]:
    """Every path loaded with :func:`load_trace`, side by side in threads, in order
    (compare mode).  The loaders spend most of their time in polars and in the C
    unpickler, which release the GIL for much of it, so nothing is copied between
    processes; the first capture that cannot be read raises its CaptureError."""
    from concurrent.futures import ThreadPoolExecutor

    def load(index: int) -> MemoryTrace:
        report = None
        if progress is not None:
            def report(fraction: float, message: str) -> None:
                progress(index, fraction, message)
        return load_trace(paths[index], report, thresholds, use_cache=use_cache,
                          store_in_background=store_in_background)

    if len(paths) < 2:
        return [load(i) for i in range(len(paths))]
    with ThreadPoolExecutor(max_workers=len(paths), thread_name_prefix="memtui-load") as pool:
        futures = [pool.submit(load, i) for i in range(len(paths))]
        return [future.result() for future in futures]


# -- the Blocks screen's index, kept beside the cache entry -------------------------------


def kept_block_map(trace: MemoryTrace, device: str, index: DeviceIndex) -> BlockMapData | None:
    """The Blocks screen's data of ``device`` (``index`` its device index) as
    :func:`keep_block_map` kept it beside the cache entry of the trace's file on an earlier
    open: memory-mapped and checked (None where none is kept, the cache is off, or a file
    is broken or stale: the caller builds it)."""
    from memtui import cache
    from memtui.analysis.layout.block_map import BlockMapData

    name, key = _kept_name_and_key(trace, device)
    arrays = cache.load_arrays(key, name) if key is not None else None
    if arrays is None:
        return None
    try:
        return BlockMapData.from_arrays(index, arrays)
    except (KeyError, ValueError):
        return None


def keep_block_map(trace: MemoryTrace, device: str) -> bool:
    """Keep the Blocks screen's data of ``device`` (built by now in the shared analysis
    cache, and not itself read from the cache) beside the cache entry of the trace's file,
    for :func:`kept_block_map` on the next open.  Nothing is kept for layered captures (a
    view's blocks change with the layer shown) or without the entry.  True where kept."""
    from memtui import cache
    from memtui.analysis.timeline.live import built

    data = built(trace, ("block_map", device))
    if data is None or data.kept:
        return False
    name, key = _kept_name_and_key(trace, device)
    return key is not None and cache.save_arrays(key, name, data.arrays())


def _kept_name_and_key(trace: MemoryTrace, device: str) -> tuple[str, Any]:
    """The kept arrays' name for ``device`` (by its position: a device name comes from the
    file) and the cache key of the trace's file; the key None where nothing is kept."""
    from memtui import cache
    from memtui.analysis.timeline.layers import has_layers

    names = [info.name for info in trace.meta.devices]
    name = f"block-map-{names.index(device)}" if device in names else ""
    if (not name or has_layers(trace) or "layers" in trace.meta.extra
            or not cache.enabled()):
        return name, None
    return name, trace.meta.cache_key  # the file as it was read, not as it is now


# -- the findings, kept beside the cache entry -------------------------------------------


def findings_of(trace: MemoryTrace) -> dict[str, list[Finding]]:
    """``find_all(trace)``, read from beside the cache entry where it was kept, else found
    and kept there for next time."""
    found = kept_findings(trace)
    if found is None:
        from memtui.analysis.findings import find_all

        found = find_all(trace)
        keep_findings(trace, found)
    return found


def kept_findings(trace: MemoryTrace) -> dict[str, list[Finding]] | None:
    """The findings per device :func:`keep_findings` kept for the trace's file under the
    same settings (thresholds, memory layers), or None (none kept, the cache off, an entry
    of other code: the key holds memtui's code stamp, or a file that does not read back)."""
    from memtui import cache
    from memtui.analysis.findings.model import finding_from_dict

    name, key = _findings_name_and_key(trace)
    data = cache.load_derived(key, name) if key is not None else None
    if not isinstance(data, dict) or data.get("devices") != list(trace.meta.device_names):
        return None
    try:
        return {device: [finding_from_dict(item) for item in items]
                for device, items in data["findings"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def keep_findings(trace: MemoryTrace, found: dict[str, list[Finding]]) -> None:
    """Keep ``found`` (``find_all(trace)``) beside the cache entry of the trace's file for
    :func:`kept_findings` on the next open (waits for the entry's own store first)."""
    from memtui import cache
    from memtui.analysis.findings.model import finding_to_dict

    name, key = _findings_name_and_key(trace)
    if key is None:
        return
    cache.save_derived(key, name, {
        "devices": list(trace.meta.device_names),
        "findings": {device: [finding_to_dict(f) for f in items]
                     for device, items in found.items()},
    })


def _findings_name_and_key(trace: MemoryTrace) -> tuple[str, Any]:
    """The kept findings' name (their settings: thresholds and layers, hashed) and the
    cache key of the trace's file; the key None where nothing is kept."""
    import hashlib

    from memtui import cache

    settings = repr((trace.meta.extra.get("thresholds"), trace.meta.extra.get("layers")))
    name = "findings-" + hashlib.blake2b(settings.encode(), digest_size=6).hexdigest()
    if not cache.enabled():
        return name, None
    return name, trace.meta.cache_key  # the file as it was read, not as it is now
