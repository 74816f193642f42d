"""Predictions: replay a proven capture under changed settings and set the figures beside
the recorded run's.

Per device: reserved peak, reserved at the end, cudaMalloc and cudaFree calls (with
expandable segments: page maps and unmaps), the free bytes at the reserved peak split as
every screen and finding splits them (fragmented: free inside partly used segments;
cached: wholly free segments; the largest fragmented gap:
:class:`memtui.analysis.layout.pool_state.Fragmentation`), and each OOM avoided (a
recorded ``oom`` the new run serves) or caused (an alloc the new run cannot serve within
the capacity).

A prediction is refused on a device whose proof (:mod:`.proof`) failed: if the replay
cannot reproduce what happened, what it says would happen is worth nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from memtui.analysis.layout.pool_state import state_at_seq
from memtui.analysis.replay.allocator import get_allocation_size, round_size
from memtui.analysis.replay.proof import Proof, prove
from memtui.analysis.replay.run import (
    ReplayError,
    ReplayRun,
    action_codes,
    is_action,
    private_routes,
    replay_device,
)
from memtui.analysis.replay.settings import Settings
from memtui.model import MemoryTrace
from memtui.units import format_bytes as fb

#: What no replay of a capture can know, said with every prediction.
LIMITS = (
    "memory outside the caching allocator (the CUDA context, cuBLAS/NCCL workspaces, other "
    "processes) is not in the capture: the capacity is what the allocator could reach",
    "frees complete (free_completed) where the recording had them: kernel timing and "
    "stream synchronisation are not modelled",
    "the program's own choices do not change with the setting: the same requests in the "
    "same order, torch.cuda.empty_cache() where it was called",
    "the pool before the first event is the recorded one (walked back from the dump): the "
    "setting acts from the first event on",
)


@dataclass(frozen=True)
class RunFigures:
    """What one run (recorded, or predicted) did on a device."""

    reserved_peak: int
    reserved_peak_event: int | None
    reserved_at_end: int
    cuda_malloc: int
    cuda_free: int
    fragmented_at_peak: int
    cached_at_peak: int
    largest_gap_at_peak: int
    ooms: int  # allocs the run could not serve (recorded: the trace's oom events)
    first_oom_event: int | None

    @property
    def fragmented_share_at_peak(self) -> float:
        """Fragmented bytes at the reserved peak as a share of it."""
        return self.fragmented_at_peak / self.reserved_peak if self.reserved_peak else 0.0

    def to_dict(self) -> dict:
        return {
            "reserved_peak": self.reserved_peak, "reserved_peak_event": self.reserved_peak_event,
            "reserved_at_end": self.reserved_at_end, "cuda_malloc": self.cuda_malloc,
            "cuda_free": self.cuda_free, "fragmented_at_peak": self.fragmented_at_peak,
            "fragmented_share_at_peak": round(self.fragmented_share_at_peak, 4),
            "cached_at_peak": self.cached_at_peak,
            "largest_gap_at_peak": self.largest_gap_at_peak, "ooms": self.ooms,
            "first_oom_event": self.first_oom_event,
        }


@dataclass(frozen=True)
class OomChange:
    """One OOM the new settings avoid or cause (``event``: index in the device's events)."""

    event: int
    requested: int
    change: str  # "avoided", "caused", "still happens"


@dataclass(frozen=True)
class Prediction:
    """A device's recorded run beside the run under ``settings``."""

    device: str
    proof: Proof
    settings: Settings
    capacity_source: str
    recorded: RunFigures | None = None
    predicted: RunFigures | None = None
    oom_changes: list[OomChange] = field(default_factory=list)
    limits: tuple[str, ...] = LIMITS
    refused: str = ""
    #: the predicted reserved bytes after each of the device's events (for the Trend).
    curve: np.ndarray | None = None

    @property
    def saving(self) -> int | None:
        """Bytes off the reserved peak (negative: the peak grows); None when refused."""
        if self.recorded is None or self.predicted is None:
            return None
        return self.recorded.reserved_peak - self.predicted.reserved_peak

    def to_dict(self) -> dict:
        return {
            "device": self.device, "settings": self.settings.describe(),
            "capacity": self.settings.capacity, "capacity_source": self.capacity_source,
            "proof": self.proof.to_dict(), "refused": self.refused or None,
            "recorded": self.recorded.to_dict() if self.recorded else None,
            "predicted": self.predicted.to_dict() if self.predicted else None,
            "reserved_peak_saving": self.saving,
            "oom_changes": [{"event": o.event, "requested": o.requested, "change": o.change}
                            for o in self.oom_changes],
            "cannot_know": list(self.limits),
        }


def predict(trace: MemoryTrace, device: str, settings: Settings,
            proof_and_run: tuple[Proof, ReplayRun | None] | None = None) -> Prediction:
    """Replay ``device`` under ``settings`` beside the recorded run (refused where the
    proof fails).  ``settings.capacity`` None: the capacity an OOM in the recording
    shows, if any; else no limit (then no OOM can be predicted)."""
    proof, baseline = proof_and_run or prove(trace, device)
    if not proof.holds or baseline is None:
        return Prediction(device, proof, settings, "",
                          refused=f"the replay is not proven on this capture: {proof.why_not()}")
    capacity_source = ("" if settings.capacity is None else
                       "--fraction-limit" if settings.memory_fraction else "--capacity")
    if settings.capacity is None:
        inferred = inferred_capacity(trace, device, baseline)
        if inferred is not None:
            settings = replace(settings, capacity=inferred[0],
                               memory_fraction="per-process limit" in inferred[1])
            capacity_source = inferred[1]
    try:
        run = replay_device(trace, device, settings, replay_retries=False)
    except ReplayError as err:
        return Prediction(device, proof, settings, capacity_source,
                          refused=f"the replay under {settings.describe()} stopped at {err}")
    recorded_ooms = np.flatnonzero(is_action(action_codes(baseline.events), "oom"))
    changes = [OomChange(i, size, {"kept": "still happens"}.get(kind, kind))
               for i, size, kind in run.ooms]
    limits = LIMITS
    if settings.capacity is None:
        limits += ("no device capacity is known (no OOM in the capture, no --capacity): the "
                   "replay lets every cudaMalloc succeed, so it predicts no OOM",)

    if private_routes(trace, device) is not None:
        limits += ("allocations under CUDA graph capture go to the private pool the "
                   "recording used (the trace does not mark the capture); private pools "
                   "are never expandable and emptyCache leaves them while their graph "
                   "lives",)
    if settings.garbage_collection_threshold and not settings.memory_fraction:
        limits += ("garbage_collection_threshold acts only under a per-process memory "
                   "fraction (torch.cuda.set_per_process_memory_fraction; malloc's "
                   "set_fraction), which this capture does not show: it changes nothing",)
    if any(kind == "caused" for _, _, kind in run.ooms):
        limits += ("the first OOM caused would have stopped the program there: the figures "
                   "after it assume the program went on without that block",)
    return Prediction(
        device=device, proof=proof, settings=settings, capacity_source=capacity_source,
        recorded=recorded_figures(trace, device, baseline, recorded_ooms.tolist()),
        predicted=figures(run, [i for i, _, kind in run.ooms if kind != "avoided"]),
        oom_changes=changes, limits=limits, curve=run.reserved,
    )


def figures(run: ReplayRun, oom_events: list[int]) -> RunFigures:
    """A run's figures.  The reserved peak is over the trace's events: the pool before the
    first event is the recorded one in every run (the replay cannot change the past)."""
    reserved = run.reserved
    peak_event = int(np.argmax(reserved)) if reserved.size else None
    return RunFigures(
        reserved_peak=int(reserved[peak_event]) if peak_event is not None else 0,
        reserved_peak_event=peak_event,
        reserved_at_end=run.reserved_at_end,
        cuda_malloc=run.count("segment_alloc") + run.count("segment_map"),
        cuda_free=run.count("segment_free") + run.count("segment_unmap"),
        fragmented_at_peak=run.fragmented_at_peak, cached_at_peak=run.cached_at_peak,
        largest_gap_at_peak=run.largest_gap_at_peak,
        ooms=len(oom_events), first_oom_event=min(oom_events) if oom_events else None,
    )


def recorded_figures(trace: MemoryTrace, device: str, baseline: ReplayRun,
                     oom_events: list[int]) -> RunFigures:
    """The recorded run's figures: the proven replay's, but its free bytes at the reserved
    peak are the recording's own pool there (:func:`state_at_seq`, as the findings, ``memtui
    state`` and the Pool screen measure it: a block the dump does not know has its trace
    size, the requested one, as in PyTorch's viewer; the replay's allocator rounds it)."""
    out = figures(baseline, oom_events)
    if out.reserved_peak_event is None:
        return out
    row = baseline.events.row(out.reserved_peak_event, named=True)
    measures = state_at_seq(trace, device, int(row["seq"])).fragmentation_of(row["reserved"])
    return replace(out, fragmented_at_peak=measures.fragmented, cached_at_peak=measures.cached,
                   largest_gap_at_peak=measures.largest_gap)


_DEVICE_FREE = re.compile(r"(\d+) free on the device")


def inferred_capacity(trace: MemoryTrace, device: str,
                      baseline: ReplayRun) -> tuple[int, str] | None:
    """The memory the allocator could reach, where the capture shows it: at a recorded
    OOM, reserved then + the driver's free memory then (the trace's ``device_free``);
    else at malloc's own release after a failed cudaMalloc, just under reserved then +
    the segment it asked for."""
    events = baseline.events
    codes = action_codes(events)
    markers = trace.markers.filter((pl.col("kind") == "oom")
                                   & (pl.col("device").is_null() | (pl.col("device") == device)))
    oom_index = np.flatnonzero(is_action(codes, "oom"))
    sizes = events["size"]
    for index, name in zip(oom_index.tolist(), markers["name"].to_list(), strict=False):
        match = _DEVICE_FREE.search(name or "")
        if not match:
            continue
        before = int(baseline.reserved[index - 1]) if index else baseline.start_reserved
        device_free = int(match.group(1))
        asked = get_allocation_size(round_size(int(sizes[index] or 0), baseline.settings))
        if device_free >= asked:
            # the device had room: the limit was the process's own (a memory fraction),
            # somewhere in [reserved then, reserved then + the segment asked)
            return (before + asked - 1,
                    f"the recorded OOM at event {index}: the device had {fb(device_free)} "
                    f"free, so a per-process limit of {fb(before)} to {fb(before + asked)}")
        return before + device_free, f"the recorded OOM at event {index}"
    for index, kind in baseline.release_runs:
        if kind != "retry":
            continue
        before = int(baseline.reserved[index - 1]) if index else baseline.start_reserved
        asked = next((s for o, a, s in zip(baseline.segments.owner, baseline.segments.action,
                                           baseline.segments.size, strict=True)
                      if o > index and a == "segment_alloc"), 0)
        return before + asked - 1, f"the failed cudaMalloc before event {index}"
    return None
