"""Build the model of a PyTorch (CUDA and torch_npu) memory snapshot.

Reads what ``torch.cuda.memory._dump_snapshot()`` and ``torch_npu.npu.memory._dump_snapshot()``
write (torch 2.0 to 2.15 keys, pickle protocols 2 to 5), the bare segment list of
``torch.cuda.memory_snapshot()`` and the legacy blocks with ``history``; see
../shared/formats/torch_snapshot.md.  Unknown keys are ignored.

The compiled reader (:mod:`memtui.sources.torch_snapshot.columnar`, where it was built)
reads the traces straight into columns; where it is absent or leaves a file to Python, the
safe unpickler reads the dicts and they are turned into columns once, while they are
checked (one pass per key, :func:`memtui.sources.torch_snapshot.validate.trace_columns`).
Call stacks are interned by object identity (the pickle memo shares them heavily), and
everything after that is polars: pairing allocs and frees into blocks, segments, and the
levels, which are found by walking back from the final state (start = active at end -
allocs + frees).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from memtui.arrays import with_first
from memtui.errors import CaptureError
from memtui.model import (
    ACTION_DTYPE,
    ACTIONS,
    DeviceInfo,
    MemoryTrace,
    TraceMeta,
    conform,
    constants_as_scalars,
    segment_level_from_start,
)
from memtui.progress import Phase, Phases
from memtui.sources.common.collector import collector_paused
from memtui.sources.common.lifetimes import pair_by_address
from memtui.sources.common.safe_pickle import load_pickle, looks_like_pickle
from memtui.sources.common.stacks import StackInterner
from memtui.sources.torch_snapshot.columnar import ColumnTrace, read_columnar
from memtui.sources.torch_snapshot.mapped import MappedPieces, mapped_pieces
from memtui.sources.torch_snapshot.settings import clean_settings
from memtui.sources.torch_snapshot.validate import (
    TraceColumns,
    clean_snapshot,
    is_trace,
    short_text,
    text_values,
    trace_columns,
)
from memtui.units import counted, format_bytes

NAME = "PyTorch memory snapshot"
SOURCE = "torch_snapshot"

#: Trace actions as torch writes them -> canonical actions.
_ACTION_NAMES = {
    "free_completed": "free",
    "workspace_snapshot": "workspace",
}
#: Every action torch writes -> its canonical name (anything else is warned about, dropped).
_ENUM_OF_TORCH = {
    name: _ACTION_NAMES.get(name, name)
    for name in ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                 "segment_map", "segment_unmap", "oom", "snapshot", "annotate",
                 "workspace_snapshot")
}
_ACTIVE_STATES = ("active_allocated", "active_pending_free")
_NPU_ONLY_ACTIONS = ("workspace_snapshot",)


def sniff(path: Path) -> bool:
    return Path(path).is_file() and looks_like_pickle(Path(path))


def load(path: Path, progress=None) -> MemoryTrace:
    path = Path(path)
    # Millions of dicts come and go here: the cyclic collector would walk them again and
    # again (more than half the unpickling time) for no cycle to find.
    with collector_paused():
        phases = Phases(progress)
        reading = phases.start(f"unpickling {path.name}", (0.0, UNPICKLE_SHARE),
                               path.stat().st_size / 1e6, unit="MB")
        listener = _bytes_read(reading) if progress is not None else None
        data = read_columnar(path, listener)
        snapshot = _normalise(path, load_pickle(path, listener) if data is None else data)
        reading.finish()
        problems, columns = clean_snapshot(path, snapshot, path.stat().st_size)
        building = phases.start("building the model", (UNPICKLE_SHARE, 0.99), unit="events")
        try:
            trace = _SnapshotBuilder(path, snapshot, columns).build()
        except (KeyError, TypeError, AttributeError, IndexError, ValueError,
                pl.exceptions.PolarsError) as exc:  # e.g. an alloc without an address
            raise CaptureError(
                path, f"malformed PyTorch memory snapshot ({type(exc).__name__}: {exc})"
            ) from None
        trace.meta.warnings[:0] = problems
        del snapshot, columns
        building.finish(trace.events.height)
    _report(progress, 1.0, "done")
    return trace


#: The share of the progress bar the unpickling fills (the model is built after it).
UNPICKLE_SHARE = 0.6


def _bytes_read(reading: Phase):
    """A ``load_pickle`` listener that moves the unpickling's phase on by the bytes read
    (``unpickling x.pickle: 120.0 of 296.0 MB · 48.0 MB/s``)."""
    def report(done: int, size: int) -> None:
        reading.total = size / 1e6
        reading.update(done / 1e6)
    return report


def _canonical_actions(columns: TraceColumns) -> pl.Series:
    """Each entry's canonical action (null where unknown); from the compiled reader, one
    lookup per distinct action name, gathered by code."""
    if columns.action_codes is None:
        return columns.actions().replace_strict(_ENUM_OF_TORCH, default=None,
                                                return_dtype=ACTION_DTYPE).alias("action")
    table = pl.Series([_ENUM_OF_TORCH.get(name) for name in columns.action_names],
                      dtype=ACTION_DTYPE)
    return table.gather(pl.Series(columns.action_codes)).alias("action")


def _report(progress, fraction: float, message: str) -> None:
    if progress is not None:
        progress(fraction, message)


def _normalise(path: Path, data: Any) -> dict:
    """The snapshot as a dict with ``segments`` and ``device_traces``, or a CaptureError."""
    if isinstance(data, list):  # torch.cuda.memory_snapshot(): the bare segment list
        data = {"segments": data, "device_traces": []}
    if not isinstance(data, dict) or "segments" not in data:
        kind = type(data).__name__
        raise CaptureError(
            path, f"a pickle of a {kind}, not a PyTorch memory snapshot (no 'segments')"
        )
    segments = data["segments"]
    traces = data.get("device_traces") or []
    if not isinstance(segments, list) or not all(isinstance(s, dict) for s in segments):
        raise CaptureError(path, "not a PyTorch memory snapshot ('segments' is not a list)")
    if not isinstance(traces, list) or not all(map(is_trace, traces)):
        raise CaptureError(path, "not a PyTorch memory snapshot ('device_traces' is malformed)")
    return data


def _is_npu(snapshot: dict) -> bool:
    """torch_npu writes no ``time_us``, has ``pool_id`` on entries and workspace actions."""
    entries = [e for trace in snapshot.get("device_traces") or [] for e in trace[:1000]]
    if any(e.get("action") in _NPU_ONLY_ACTIONS for e in entries):
        return True
    return bool(entries) and all("pool_id" in e and "time_us" not in e for e in entries)


def _block_address(segment: dict, block: dict, offset: int) -> int:
    """Blocks before torch 2.1 have no address: they tile their segment in order."""
    address = block.get("address")
    return segment["address"] + offset if address is None else address


def _block_frames(block: dict) -> list | None:
    """A block's allocation context: ``frames`` (2.1+) or its last ``history`` entry (2.0)."""
    frames = block.get("frames")
    if frames is None and block.get("history"):
        frames = block["history"][-1].get("frames")
    return frames


class _SnapshotBuilder:
    """Turns one unpickled snapshot into a MemoryTrace."""

    def __init__(self, path: Path, snapshot: dict,
                 columns: dict[int, TraceColumns] | None = None) -> None:
        self.path = path
        self.snapshot = snapshot
        #: the checked columns of trace lists, by ``id`` (see ``_columns_of``)
        self.columns = columns if columns is not None else {}
        self.interner = StackInterner()
        self.warnings: list[str] = []
        self.prefix = "npu" if _is_npu(snapshot) else "cuda"
        self.pool = "PTA" if self.prefix == "npu" else "CUDA"

    def device_name(self, index: int | str) -> str:
        return f"{self.prefix}:{index}"

    # -- raw dicts to columns -------------------------------------------------------------

    def _device_traces(self) -> list[tuple[str, list[dict]]]:
        """(device name, trace entries) of every device with a non-empty trace."""
        traces = [(self.device_name(i), t) for i, t in
                  enumerate(self.snapshot.get("device_traces") or [])]
        host = self.snapshot.get("host_traces") or []
        if host and isinstance(host[0], list):
            host = [entry for trace in host for entry in trace]
        traces.append((self.device_name("host"), host))
        return [(name, trace) for name, trace in traces if trace]

    def _columns_of(self, device: str, trace: list[dict]) -> TraceColumns:
        """The columns the check took of ``trace`` (each used once: a trace list the file
        shares between devices is empty the second time, as its dicts are freed), or
        taken now (the host trace flattened from several)."""
        columns = self.columns.pop(id(trace), None)
        if columns is None:
            columns = trace_columns(trace)
        if columns is None:
            raise CaptureError(self.path, f"malformed trace entries of {device}")
        return columns

    def _device_trace_frame(self, device: str, trace: list[dict]) -> pl.DataFrame:
        """One device's trace entries as columns (taken while they were checked).

        Empties ``trace``: the few rows still needed from the dicts are read first, then
        the dicts are freed before the frame is built (the peak memory is the dicts plus
        their columns, never the dicts plus the frame).
        """
        columns = self._columns_of(device, trace)
        self._collect_entry_markers(device, columns, trace)
        self._collect_segment_pools(device, columns, trace)
        metadata = _entry_texts(trace)
        pools = _entry_pools(trace)
        if pools is not None:
            metadata.append(pools)
        trace.clear()
        # the canonical Enum from here on: comparisons are integer ops, not strings
        action = _canonical_actions(columns)
        unknown = action.is_null().to_numpy()
        if unknown.any():
            names = columns.action_names_at(unknown)
            self.warnings.append(f"{device}: {int(unknown.sum())} trace entries with unknown "
                                 f"actions {names} ignored")
        del unknown
        df = columns.frame().with_columns(
            pl.lit(device, pl.String).alias("device"),
            pl.int_range(0, pl.len(), dtype=pl.Int64).alias("seq"),
            action,
            self._stack_ids(columns),
        )
        del columns, action
        if metadata:
            df = df.with_columns(metadata)
        return df.with_columns(pool=self._pool_column(df))

    def _collect_segment_pools(self, device: str, columns: TraceColumns, trace: list[dict]
                               ) -> None:
        """The pool (``segment_pool_id``, or torch_npu's ``pool_id``) of segment events
        that name one (few rows: a loop is fine)."""
        rows = []
        for index in columns.rows_with_action(("segment_alloc", "segment_map",
                                               "segment_unmap")):
            entry = trace[index]
            pool = entry.get("segment_pool_id", entry.get("pool_id"))
            if pool is not None:
                text = ",".join(map(str, pool)) if isinstance(pool, list | tuple) else str(pool)
                rows.append((index, text))
        self.segment_pool_ids[device] = rows

    def _stack_ids(self, columns: TraceColumns) -> pl.Series:
        """Each entry's stack id, by the identity of its ``frames`` list (one C-level pass);
        from the compiled reader, by its code: the distinct lists are interned in the order
        they first appear, as the identities would be."""
        if columns.frame_codes is None:
            return self.interner.stack_ids(columns.frames)
        codes = np.asarray(columns.frame_codes)
        firsts = pl.Series(codes[codes >= 0]).unique(maintain_order=True).to_numpy()
        lists = columns.frame_lists
        ids = self.interner.stack_ids([lists[code] for code in firsts.tolist()])
        # (int32: the column's own type, gathered straight into it)
        id_of_code = np.full(len(lists) + 1, -1, dtype=np.int32)  # code -1 (no frames): -1
        id_of_code[firsts] = ids.fill_null(-1).to_numpy()
        stack_id = pl.Series("stack_id", id_of_code[codes], dtype=pl.Int32)
        return stack_id.to_frame().select(
            pl.when(stack_id >= 0).then(stack_id)).to_series()

    def _pool_column(self, df: pl.DataFrame) -> pl.Expr:
        """torch_npu puts the workspace allocator's trace first, ending at its snapshot."""
        if self.prefix != "npu":
            return pl.lit(self.pool)
        workspace_end = df["action"].eq("workspace").arg_true()
        if workspace_end.len() == 0:
            return pl.lit(self.pool)
        return (
            pl.when(pl.col("seq") <= workspace_end[0])
            .then(pl.lit("PTA_WORKSPACE"))
            .otherwise(pl.lit(self.pool))
        )

    def _collect_entry_markers(self, device: str, columns: TraceColumns, trace: list[dict]
                               ) -> None:
        """``annotate`` entries and ``oom`` entries become markers (few: a loop is fine)."""
        rows = []
        for index in columns.rows_with_action(("annotate", "oom")):
            entry = trace[index]
            if entry["action"] == "annotate":
                name = short_text(entry.get("user_metadata"), "annotation")
                rows.append((index, entry.get("time_us"), "annotate", name))
            else:
                free = entry.get("device_free")
                name = f"out of memory: {entry.get('size', 0)} bytes requested"
                if free is not None:
                    name += f", {free} free on the device"
                rows.append((index, entry.get("time_us"), "oom", name))
        self.entry_markers.extend((device, *row) for row in rows)

    def _final_blocks(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Segments and their active blocks in the final state, as frames."""
        segments = self.snapshot["segments"]
        host = self.snapshot.get("host_segments") or []
        seg_rows: dict[str, list] = {k: [] for k in (
            "device", "addr", "size", "stream", "pool_id", "kind")}
        block_rows: dict[str, list] = {k: [] for k in (
            "device", "addr", "size", "requested_size", "state", "stream", "frames",
            "user_metadata", "forward_frames")}
        for segment, device in [(s, self.device_name(s.get("device", 0))) for s in segments] + [
            (s, self.device_name("host")) for s in host
        ]:
            pool_id = segment.get("segment_pool_id")
            kind = "expandable" if segment.get("is_expandable") else segment.get("segment_type")
            for key, value in (
                ("device", device), ("addr", segment["address"]),
                ("size", segment["total_size"]), ("stream", segment.get("stream", 0)),
                ("pool_id", ",".join(map(str, pool_id)) if pool_id else None), ("kind", kind),
            ):
                seg_rows[key].append(value)
            offset = extent = 0
            for block in segment.get("blocks", []):
                extent = max(extent, _block_address(segment, block, offset) + block["size"]
                             - segment["address"])
                if block.get("state") in _ACTIVE_STATES:
                    for key, value in (
                        ("device", device),
                        ("addr", _block_address(segment, block, offset)),
                        ("size", block["size"]),
                        ("requested_size", block.get("requested_size", block["size"])),
                        ("state", block["state"]), ("stream", segment.get("stream", 0)),
                        ("frames", _block_frames(block)),
                        ("user_metadata", block.get("user_metadata")),
                        ("forward_frames", _joined_lines(block.get("forward_frames"))),
                    ):
                        block_rows[key].append(value)
                offset += block["size"]
            if extent > segment["total_size"]:  # blocks past the segment's end
                seg_rows["size"][-1] = extent
                self.overflows.setdefault(device, []).append(
                    (segment["address"], segment["total_size"], extent))
        seg_df = pl.DataFrame(seg_rows, schema={
            "device": pl.String, "addr": pl.UInt64, "size": pl.Int64, "stream": pl.Int64,
            "pool_id": pl.String, "kind": pl.String})
        frames = block_rows.pop("frames")
        metadata = text_values(block_rows.pop("user_metadata"))
        forward = text_values(block_rows.pop("forward_frames"))
        block_df = pl.DataFrame(block_rows, schema={
            "device": pl.String, "addr": pl.UInt64, "size": pl.Int64,
            "requested_size": pl.Int64, "state": pl.String, "stream": pl.Int64,
        }).with_columns(stack_id=self.interner.stack_ids(frames))
        if metadata is not None:
            block_df = block_df.with_columns(pl.Series("user_metadata", metadata, pl.String))
        if forward is not None:  # torch 2.11+: where the tensor was made in the forward pass
            block_df = block_df.with_columns(pl.Series("forward_frames", forward, pl.String))
        return seg_df, block_df

    # -- the model -------------------------------------------------------------------------

    def build(self) -> MemoryTrace:
        self.entry_markers: list[tuple] = []
        self.segment_pool_ids: dict[str, list[tuple[int, str]]] = {}
        #: per device, the dumped segments whose blocks run past their end:
        #: (address, total_size, the blocks' extent)
        self.overflows: dict[str, list[tuple[int, int, int]]] = {}
        #: per device, (t, allocated, reserved) with the start first (MemoryTrace's)
        self.walked_levels: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}
        #: per device, its events' times with room for the levels' start point first
        self.times: dict[str, np.ndarray] = {}
        # the annotations' ranges (polars, letting go of the GIL) beside the devices' build
        ranges = _beside(annotation_ranges, self.snapshot.get("external_annotations") or [],
                         self.device_name(""))
        raw = {}
        for name, trace in self._device_traces():
            raw[name] = self._device_trace_frame(name, trace)  # frees the trace's dicts
        has_time = bool(raw) and all(df["time_us"].null_count() == 0 for df in raw.values())
        final_segments, final_blocks = self._final_blocks()
        names = sorted(set(raw) | set(final_segments["device"].to_list()), key=_device_sort_key)
        devices, events, blocks, segments = [], [], [], []
        for name in names:
            info, device_events, device_blocks, device_segments = self._device(
                # popped: the device's raw frame is let go of once its events are made
                name, raw.pop(name, None), final_segments.filter(pl.col("device") == name),
                final_blocks.filter(pl.col("device") == name), has_time)
            devices.append(info)
            events.append(device_events)
            blocks.append(device_blocks)
            segments.append(device_segments)
        settings, problems = clean_settings(self.snapshot.get("allocator_settings"))
        self.warnings.extend(problems)
        meta = TraceMeta(
            source=SOURCE, path=str(self.path), devices=devices,
            time_unit="ns" if has_time else "event", warnings=self.warnings,
            extra={
                "allocator_settings": settings,
                "device_kind": self.prefix,
            },
        )
        frames, stacks = self.interner.frames()
        return MemoryTrace(
            meta=meta,
            events=constants_as_scalars(_merge_device_events(events, names, blocks),
                                         _EVENT_CONSTANTS),
            blocks=constants_as_scalars(_concat(blocks, "blocks").with_columns(
                block_id=pl.int_range(0, pl.len(), dtype=pl.Int64)), _BLOCK_CONSTANTS),
            segments=_concat(segments, "segments").with_columns(
                segment_id=pl.int_range(0, pl.len(), dtype=pl.Int64)),
            frames=frames,
            stacks=stacks,
            markers=conform(self._markers(has_time, ranges), "markers"),
            walked_levels=self.walked_levels,
        )

    def _device(
        self, name: str, raw: pl.DataFrame | None, final_segments: pl.DataFrame,
        final_blocks: pl.DataFrame, has_time: bool,
    ) -> tuple[DeviceInfo, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """One device's info, events, blocks and segments (block ids local to the device)."""
        events = self._events(name, raw, has_time)
        del raw  # its clock (time_us, read into t) goes with it, not at the device's end
        start = int(events["t"].min()) if events.height else 0
        allocated = final_blocks.filter(pl.col("state") == "active_allocated")["size"].sum()
        info = DeviceInfo(
            name=name, kind=self.prefix, has_segments=True, layout_complete=True,
            allocated_at_end=int(allocated or 0),
            reserved_at_end=int(final_segments["size"].sum() or 0),
            segments_at_end=final_segments.height,
        )
        blocks, events, block_rows = self._blocks(name, events, final_blocks, start)
        segments = self._segments(name, events, final_segments, start)
        blocks = _with_block_pools(blocks, events, final_segments)
        events = self._levels(events, info, blocks, segments, block_rows).drop(
            *ENTRY_TEXTS, EVENT_POOL, strict=False)
        device = pl.lit(name, pl.String).alias("device")
        return info, events, blocks.with_columns(device), segments.with_columns(device)

    def _events(self, name: str, raw: pl.DataFrame | None, has_time: bool) -> pl.DataFrame:
        if raw is None:
            return pl.DataFrame(schema={
                "action": ACTION_DTYPE, "addr": pl.UInt64, "size": pl.Int64, "stream": pl.Int64,
                "seq": pl.Int64, "stack_id": pl.Int32, "pool": pl.String, "t": pl.Int64,
                "device": pl.String})
        if raw["action"].null_count():  # unknown actions; else no filtered copy of every row
            raw = raw.filter(pl.col("action").is_not_null())
        # The trace's order is the allocator's (one lock): it is the event axis, and a
        # clock that steps back (a thread's late reading) is held at its latest time.
        t = _walked_times(raw["time_us"] if has_time else raw["seq"], 1000 if has_time else 1)
        self.times[name] = t  # the levels' times too (_levels)
        events = raw.with_columns(pl.Series("t", t[1:], dtype=pl.Int64),  # a view
                                  pl.lit(name, pl.String).alias("device")).drop("time_us")
        # one stream throughout (as usual) held as one value from here on: the reader's
        # column of it goes now, not when the trace is made
        return constants_as_scalars(events, ("stream",))

    def _blocks(
        self, device: str, events: pl.DataFrame, final_blocks: pl.DataFrame, start: int
    ) -> tuple[pl.DataFrame, pl.DataFrame, np.ndarray]:
        """Blocks from alloc/free pairs, ghosts, and final-state blocks with no alloc.

        Returns the blocks (``block_id`` numbered within the device), the events with
        the ``block_id`` of their block, and those ids as an array (-1: none; the levels
        read it, not the column again).
        """
        # the block events by their rows: a filtered copy of every column of millions of
        # events was the open's peak
        rows = np.flatnonzero(
            events["action"].is_in(["alloc", "free_requested", "free"]).to_numpy())
        lifetimes, taken = pair_by_address(events, ["alloc"], ["free"], ["free_requested"],
                                           order="first", rows=rows)
        broken = int(lifetimes["extra_closes"].sum() or 0)
        if broken:
            self.warnings.append(
                f"{device}: {counted(broken, 'free')} of an address already freed ignored")
        pending = lifetimes.filter(pl.col("seq_alloc").is_null() & pl.col("seq_free").is_null())
        # the rest are traced: the frame itself where none is pending (no copy of it)
        traced = lifetimes if pending.is_empty() else lifetimes.filter(
            pl.col("seq_alloc").is_not_null() | pl.col("seq_free").is_not_null())
        alive = traced.filter(pl.col("seq_alloc").is_not_null() & pl.col("seq_free").is_null())
        n_lifetimes = lifetimes.height
        del lifetimes  # (traced may be it: it goes when traced is remade below)
        # Final blocks: the allocator's size for the traced ones still alive, ghosts for
        # the rest.  A ghost the dump shows pending whose free_requested is not in the
        # trace was already pending when the trace began.
        final = final_blocks.join(
            pending.select("addr", "lifetime", "t_free_requested", "seq_free_requested"),
            on="addr", how="left")
        pending_before = (pl.col("state") == "active_pending_free") \
            & pl.col("seq_free_requested").is_null()
        final_ghosts = final.join(alive.select("addr"), on="addr", how="anti").select(
            "addr", "lifetime", "size", "requested_size", "stream", "stack_id",
            *[key for key in ("user_metadata", "forward_frames") if key in final.columns],
            t_free_requested=pl.when(pending_before).then(pl.lit(start, pl.Int64))
            .otherwise(pl.col("t_free_requested")),
            seq_free_requested=pl.when(pending_before).then(pl.lit(-1, pl.Int64))
            .otherwise(pl.col("seq_free_requested")),
            t_alloc=pl.lit(start, pl.Int64), ghost=pl.lit(True),
        )
        # One size per block: the allocator's (rounded) size where the dump knows the block
        # (its address, in the lifetime still open at the dump), else its trace event's
        # size, which is the requested size.
        traced = traced.join(
            final.select("addr", final_size="size"),
            on="addr", how="left",
        ).with_columns(
            known=pl.col("t_free").is_null() & pl.col("final_size").is_not_null(),
            trace_size=pl.col("size").fill_null(pl.col("free_size")),
        ).with_columns(
            # A block from before the trace freed (free_completed) without its
            # free_requested in the trace was already pending when the trace began (as
            # memory_viz undoes free_completed into a pending free).
            requested_before=pl.col("seq_alloc").is_null() & pl.col("seq_free").is_not_null()
            & pl.col("seq_free_requested").is_null(),
        ).select(
            "addr", "lifetime", "seq_alloc", "seq_free", "t_free",
            t_free_requested=pl.when("requested_before").then(pl.lit(start, pl.Int64))
            .otherwise(pl.col("t_free_requested")),
            seq_free_requested=pl.when("requested_before").then(pl.lit(-1, pl.Int64))
            .otherwise(pl.col("seq_free_requested")),
            ghost=pl.col("seq_alloc").is_null(),
            t_alloc=pl.col("t_alloc").fill_null(start),
            size=pl.when(pl.col("known")).then(pl.col("final_size"))
            .otherwise(pl.col("trace_size")),
            requested_size=pl.col("trace_size"),
            stack_id=pl.col("stack_id").fill_null(pl.col("free_stack_id")),
            stream=pl.col("stream").fill_null(pl.col("free_stream")),
        )
        traced = _with_alloc_metadata(traced, events)
        lacking = alive.join(final_blocks, on="addr", how="anti")
        missing = lacking.height
        self.lacking_bytes = int(lacking["size"].sum() or 0)
        if missing:
            self.warnings.append(
                f"{device}: the dump and the trace disagree: {counted(missing, 'block')} "
                "allocated in the trace and never freed are not in the final state (counted "
                "alive to the end)")
        blocks = _in_alloc_order(traced, final_ghosts).with_columns(
            block_id=pl.int_range(0, pl.len(), dtype=pl.Int64), pool=pl.lit(self.pool)
        )
        del traced, alive, pending, final, final_ghosts, lacking  # let go first
        ids = blocks.select("lifetime", "block_id").filter(pl.col("lifetime").is_not_null())
        # lifetime -> block_id as an array (lifetimes are 0..n-1): a gather, not a join;
        # where the dump repeats an address, its later block wins, as a join's last row
        block_of = np.full(n_lifetimes, -1, dtype=np.int64)
        block_of[ids["lifetime"].to_numpy()] = ids["block_id"].to_numpy()
        block_id = np.full(events.height, -1, dtype=np.int64)
        block_id[taken["row"].to_numpy()] = block_of[taken["lifetime"].to_numpy()]
        del taken, block_of
        return blocks.drop("lifetime"), events.with_columns(
            _null_below_zero("block_id", block_id)), block_id

    def _segments(
        self, device: str, events: pl.DataFrame, final_segments: pl.DataFrame, start: int
    ) -> pl.DataFrame:
        """Segments from segment_alloc/free pairs, the mapped pieces of expandable
        segments, and the dumped ranges that existed before the trace.

        A traced segment belongs to the dumped segment whose range contains it, as
        memory_viz assigns them: it takes that segment's pool and kind; one no dumped
        segment covers takes its pool from its trace event (``segment_pool_id``).  What no
        segment_alloc explains of the dump is mapped memory: the trace's maps and unmaps
        are undone from it (:func:`memtui.sources.torch_snapshot.mapped.mapped_pieces`),
        and what is left existed before the trace began (ghost pieces).
        """
        ops = events.filter(pl.col("action").is_in(["segment_alloc", "segment_free"]))
        lifetimes, _ = pair_by_address(ops, ["segment_alloc"], ["segment_free"])
        lifetimes = lifetimes.with_columns(
            size=pl.col("size").fill_null(pl.col("free_size"))).sort("addr")
        final = final_segments.sort("addr").with_columns(
            end=pl.col("addr") + pl.col("size").cast(pl.UInt64), dump_addr=pl.col("addr"))
        holder = final.select("addr", "dump_addr", "end", "pool_id", "kind")
        placed = lifetimes.join_asof(
            holder.rename({"addr": "h_addr"}), left_on="addr", right_on="h_addr",
            strategy="backward",
        ).with_columns(inside=pl.col("end").is_not_null() & (pl.col("addr") < pl.col("end")))
        traced = placed.filter(
            pl.col("seq_alloc").is_not_null() | pl.col("seq_free").is_not_null()
        ).join(self._segment_pool_ids(device), on="seq_alloc", how="left").select(
            "addr", "seq_alloc", "seq_free", "t_free", "size",
            pool_id=pl.when(pl.col("inside")).then(pl.col("pool_id"))
            .otherwise(pl.col("trace_pool_id")),
            t_alloc=pl.col("t_alloc").fill_null(start),
            stream=pl.col("stream").fill_null(pl.col("free_stream")),
            ghost=pl.col("seq_alloc").is_null(),
            kind=pl.when(pl.col("inside")).then(pl.col("kind")),
        )
        allocated = placed.filter(
            pl.col("inside") & pl.col("seq_alloc").is_not_null() & pl.col("seq_free").is_null()
        ).select("dump_addr", "addr", m_end=pl.col("addr") + pl.col("size").cast(pl.UInt64))
        at_end = _uncovered(final, allocated)
        pieces = mapped_pieces(
            at_end, events.filter(pl.col("action").is_in(["segment_map", "segment_unmap"])),
            start, holder, dict(self.segment_pool_ids.get(device, [])))
        if pieces.unexplained:
            self.warnings.append(_unexplained_maps(device, pieces))
        return pl.concat([traced, pieces.frame], how="diagonal_relaxed").sort("t_alloc", "addr")

    def _segment_pool_ids(self, device: str) -> pl.DataFrame:
        """``seq_alloc -> trace_pool_id`` of the device's segment events that name a pool."""
        rows = self.segment_pool_ids.get(device, [])
        return pl.DataFrame(rows, schema={"seq_alloc": pl.Int64, "trace_pool_id": pl.String},
                            orient="row")

    def _levels(self, events: pl.DataFrame, info: DeviceInfo, blocks: pl.DataFrame,
                segments: pl.DataFrame, block_rows: np.ndarray) -> pl.DataFrame:
        """allocated/active/reserved after each event, walked back from the final state
        (``block_rows``: each event's block_id, -1 where none).

        Allocs and frees move the level by their block's one size (``blocks.size``), and
        the end level is the bytes of the blocks alive at the end (allocated plus pending
        free, also those the dump lacks): start = end - allocs + frees, never negative.
        Reserved is the bytes of the segments (and mapped pieces) alive after each event,
        so the segments listed at any event add up to it.  Sets the device's start levels,
        and adds the blocks the dump lacks to ``allocated_at_end``.
        """
        # Each level is one array with its start point first (the Level the analyses
        # read); the events' columns view its tail (MemoryTrace.walked_levels).
        allocated = np.empty(events.height + 1, dtype=np.int64)
        moves = allocated[1:]
        _block_sizes(block_rows, blocks["size"].to_numpy(), out=moves)
        del block_rows
        moves *= _ALLOC_SIGN[events["action"].to_physical().to_numpy()]  # in place
        np.cumsum(moves, out=moves)  # events are in seq order here
        alive_at_end = blocks.filter(pl.col("t_free").is_null())
        active_end = int(alive_at_end["size"].sum() or 0)
        info.allocated_at_end = (info.allocated_at_end or 0) + self.lacking_bytes
        info.start_allocated = active_end - int(moves[-1] if moves.size else 0)
        reserved = segment_level_from_start(events["seq"].to_numpy(), segments)
        info.start_reserved = int(reserved[0])
        end_reserved = int(reserved[-1])
        if info.reserved_at_end is not None and end_reserved != info.reserved_at_end:
            self.warnings.append(
                f"{info.name}: the trace's segments alive at the end hold "
                f"{format_bytes(end_reserved)}, the dump's {format_bytes(info.reserved_at_end)}"
                ": the reserved level follows the segments")
        info.reserved_at_end = end_reserved
        moves += info.start_allocated
        allocated[0] = info.start_allocated
        self._at_least_the_blocks(info, moves, reserved[1:])
        t = self.times.pop(info.name, None)
        if t is None or t.size != events.height + 1:  # no events (the dump's device alone)
            t = _walked_times(events["t"], 1)
        self.walked_levels[info.name] = (t, allocated, reserved)
        ends = pl.Series(moves, dtype=pl.Int64)  # views, not copies
        return events.with_columns(t=pl.Series(t[1:], dtype=pl.Int64), allocated=ends,
                                   reserved=pl.Series(reserved[1:], dtype=pl.Int64),
                                   active=ends)

    def _at_least_the_blocks(self, info: DeviceInfo, allocated: np.ndarray,
                             reserved: np.ndarray) -> None:
        """Reserved as known (in place): never below the bytes of the live blocks.  A dumped segment
        whose blocks run past its end was widened to hold them (PyTorch's own ``segsum``
        refuses such a dump); blocks in no segment the trace or the dump knows raise
        reserved to allocated.  Either makes the device's reserved figures a floor, said
        in one warning."""
        name = info.name
        reasons = []
        for addr, total, extent in self.overflows.get(name, []):
            reasons.append(f"the dump's segment at {addr:#x} holds blocks of "
                           f"{format_bytes(extent)} in {format_bytes(total)} (PyTorch's "
                           "segsum refuses such a dump): widened to its blocks")
        over = np.flatnonzero(allocated > reserved)
        if over.size:
            worst = int(over[np.argmax(allocated[over] - reserved[over])])
            reasons.append(
                f"blocks lie outside every segment the trace and the dump know at "
                f"{counted(over.size, 'event')} (events {int(over[0])} to {int(over[-1])}; "
                f"at event {worst} {format_bytes(int(allocated[worst]))} allocated in "
                f"{format_bytes(int(reserved[worst]))} of segments): reserved shown as at "
                "least allocated")
            np.maximum(reserved, allocated, out=reserved)
            info.layout_complete = False
            if info.reserved_at_end is not None:
                info.reserved_at_end = int(reserved[-1])
        if reasons:
            info.reserved_floor = "; ".join(reasons)
            self.warnings.append(f"{self.path.name} {name}: {info.reserved_floor}")

    def _markers(self, has_time: bool, ranges: Future[pl.DataFrame]) -> pl.DataFrame:
        """The entries' markers, and the annotations' ``ranges`` where the trace has times
        (else annotations cannot be placed among its events)."""
        entry_markers = pl.DataFrame(
            [{"t": time_us * 1000 if has_time else seq, "t_end": None, "device": device,
              "kind": kind, "name": name}
             for device, seq, time_us, kind, name in self.entry_markers],
            schema=_MARKER_SCHEMA)
        annotations = ranges.result()  # (waited for either way: its errors are said here)
        if not has_time:
            return entry_markers.sort("t")
        return pl.concat([entry_markers, annotations]).sort("t")


T = TypeVar("T")


def _beside(function: Callable[..., T], *args: Any) -> Future[T]:
    """``function(*args)`` run in a thread of its own, its result (or error) in the future
    returned."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(function(*args))
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits for it
            future.set_exception(error)

    threading.Thread(target=run, name="memtui-beside", daemon=True).start()
    return future


_MARKER_SCHEMA = {"t": pl.Int64, "t_end": pl.Int64, "device": pl.String, "kind": pl.String,
                  "name": pl.String}


def annotation_ranges(notes: list[dict], device_prefix: str) -> pl.DataFrame:
    """``external_annotations`` START/END pairs (record_function scopes) as ranges (the
    markers' columns; a START never closed keeps a null ``t_end``).

    Each note other than a START closes the latest open START of the same device and name
    (a stack per scope, as the profiler nests them); one with nothing open is ignored, as
    is a note without a time.  Worked on the columns, with no pass per note in Python
    beyond the four that take its fields: per scope, the depth after each note is the
    running sum of +1 (START) and -1 (else) kept from going below zero (the sum less its
    running minimum below zero); a START at depth d and the next closing note that leaves
    depth d - 1 are a pair, so sorted by (scope, that depth, order) each START is followed
    by its END, if any."""
    if not notes:
        return pl.DataFrame(schema=_MARKER_SCHEMA)
    scope = ["device", "name"]
    frame = pl.DataFrame({
        "device": [note.get("device", 0) for note in notes],
        "name": [note.get("name", "") for note in notes],
        "start": [note.get("stage") == "START" for note in notes],
        "time_us": [note.get("time_us", 0) for note in notes],
    }, schema={"device": pl.Int64, "name": pl.String, "start": pl.Boolean,
               "time_us": pl.Int64}).filter(pl.col("time_us").is_not_null())
    depth = (
        frame.with_row_index("order")
        .with_columns(raw=pl.when("start").then(1).otherwise(-1).cum_sum().over(scope))
        .with_columns(depth=pl.col("raw") - pl.min_horizontal(
            pl.col("raw").cum_min().over(scope), 0))
        .with_columns(before=pl.col("depth").shift(1, fill_value=0).over(scope)))
    paired = (
        depth.filter(pl.col("start") | (pl.col("before") > 0))
        .with_columns(level=pl.when("start").then("depth").otherwise(pl.col("depth") + 1))
        .sort([*scope, "level", "order"])
        .with_columns(
            closed=pl.col("start").shift(-1).over([*scope, "level"]).not_(),
            t_next=pl.col("time_us").shift(-1).over([*scope, "level"]))
        .filter("start"))
    return paired.select(
        t=pl.col("time_us") * 1000,
        t_end=pl.when("closed").then(pl.col("t_next") * 1000),
        device=pl.lit(device_prefix) + pl.col("device").cast(pl.String).fill_null("None"),
        kind=pl.lit("annotation"),
        name="name",
    ).sort("t", maintain_order=True)


#: Columns that are often one value for a whole snapshot (one stream, one device, one
#: pool): kept as one value, not one per row (:func:`~memtui.model.constants_as_scalars`).
_EVENT_CONSTANTS = ("device", "stream", "pool", "owner")
_BLOCK_CONSTANTS = ("device", "stream", "pool", "owner", "pool_id", "first_access",
                    "last_access", "max_access_gap")


def _block_sizes(ids: np.ndarray, sizes: np.ndarray, out: np.ndarray) -> None:
    """Each event's block's one size into ``out`` (int64, one per event; ``ids``: each
    event's block_id, the row within the device here, -1 where it has none; ``sizes``
    by block_id), 0 where it has no block."""
    # straight into ``out``, no gathered copy of millions beside it: an event without a
    # block (-1) takes the 0 put last (only allocs and frees move the level, and every
    # one of them has its block); the ids are the blocks' rows, so "wrap" only ever
    # wraps -1 ("raise" would buffer ``out``)
    np.take(np.append(sizes.astype(np.int64, copy=False), 0), ids, out=out, mode="wrap")


def _action_signs(up: tuple[str, ...], down: tuple[str, ...]) -> np.ndarray:
    """Per action code (``ACTION_DTYPE``'s order): +1 for ``up``, -1 for ``down``, else 0."""
    sign = np.zeros(len(ACTIONS), dtype=np.int8)
    sign[[ACTIONS.index(action) for action in up]] = 1
    sign[[ACTIONS.index(action) for action in down]] = -1
    return sign


#: How each action moves the allocated level.
_ALLOC_SIGN = _action_signs(("alloc",), ("free",))


#: Texts a trace entry may carry that its block keeps (an optional ``blocks`` column each,
#: only where some entry has one): ``user_metadata`` (torch 2.10+, ``""`` when unset),
#: ``compile_context`` (2.8+, ``"N/A"`` outside torch.compile regions) and
#: ``forward_frames`` (2.11+: the forward pass's traceback lines, joined).
ENTRY_TEXTS = ("user_metadata", "compile_context", "forward_frames")
_NO_TEXT = {"compile_context": "N/A"}


def _entry_texts(trace: list[dict]) -> list[pl.Series]:
    """The entries' :data:`ENTRY_TEXTS` as columns, those no entry fills left out (older
    files: one look at the first entries)."""
    head = trace[:1000]
    columns = []
    for key in ENTRY_TEXTS:
        if not any(key in entry for entry in head):
            continue
        values = _trace_values(trace, key)
        if values and values.count(values[0]) == len(values):  # one value (one C pass)
            column = _one_text_column(key, values[0], len(values))
            if column is not None:
                columns.append(column)
            continue
        if key == "forward_frames":
            values = [_joined_lines(v) for v in values]
        elif key in _NO_TEXT:
            values = [None if v == _NO_TEXT[key] else v for v in values]
        texts = text_values(values)
        if texts is not None:
            columns.append(pl.Series(key, texts, pl.String))
    return columns


def _one_text_column(key: str, value: object, length: int) -> pl.Series | None:
    """The :data:`ENTRY_TEXTS` column ``key`` of ``length`` entries that all hold
    ``value`` (as :func:`_entry_texts` makes it of them, with no pass per entry), None
    where that value is no text (most files: "", "N/A" or the key absent)."""
    if key == "forward_frames":
        value = _joined_lines(value)
    elif key in _NO_TEXT and value == _NO_TEXT[key]:
        return None
    texts = text_values([value])
    if texts is None:
        return None
    return pl.repeat(texts[0], length, dtype=pl.String, eager=True).alias(key)


#: The pool an entry names (``segment_pool_id``, "owner,id"): an event column, dropped
#: once the blocks have taken theirs.
EVENT_POOL = "event_pool_id"


def _entry_pools(trace: list[dict]) -> pl.Series | None:
    """Each entry's ``segment_pool_id`` as text ("1,0"), None where no entry at either end
    of the trace names one (older torch; one look at the first and last entries)."""
    if not any("segment_pool_id" in entry for entry in trace[:1000] + trace[-1000:]):
        return None
    values = _trace_values(trace, "segment_pool_id")
    pools = pl.Series(values, dtype=pl.List(pl.Int64), strict=False)
    return pools.list.eval(pl.element().cast(pl.String)).list.join(",").alias(EVENT_POOL)


def _in_alloc_order(traced: pl.DataFrame, final_ghosts: pl.DataFrame) -> pl.DataFrame:
    """The blocks by (``t_alloc``, ``seq_alloc``), ghosts first: they tie (the start, no
    alloc), the traced ones by address, then the dump's in its order.

    ``traced`` comes in lifetime order (by first event), so its allocated blocks are
    already in alloc order: only the ghosts are sorted, unless that order does not hold
    (then everything is)."""
    ghost = traced["seq_alloc"].is_null()
    opened = traced.filter(~ghost)
    seq, t = opened["seq_alloc"].to_numpy(), opened["t_alloc"].to_numpy()
    if np.all(seq[1:] > seq[:-1]) and np.all(t[1:] >= t[:-1]):
        return pl.concat([traced.filter(ghost).sort("addr", maintain_order=True),
                          final_ghosts, opened], how="diagonal_relaxed")
    return pl.concat([
        traced.with_columns(_dumped=pl.lit(False), _tie=pl.col("addr")),
        final_ghosts.with_columns(_dumped=pl.lit(True),
                                  _tie=pl.int_range(0, pl.len(), dtype=pl.UInt64)),
    ], how="diagonal_relaxed").sort(
        "t_alloc", "seq_alloc", "_dumped", "_tie", nulls_last=False, maintain_order=True
    ).drop("_dumped", "_tie")


def _with_block_pools(blocks: pl.DataFrame, events: pl.DataFrame,
                      final_segments: pl.DataFrame) -> pl.DataFrame:
    """``blocks`` with ``pool_id``, as PyTorch's memory viewer assigns it
    (``process_alloc_data.js``): the pool the block's trace event names (its alloc; a
    block whose alloc the trace lacks, its free), else that of the dumped segment holding
    its address (None where none does).  Gathers by row, no joins: ``events`` are in seq
    order, and the holders few and sorted."""
    pool_id = pl.lit(None, pl.String)
    if EVENT_POOL in events.columns:
        pools, seq = events[EVENT_POOL], events["seq"]
        pool_id = pl.when(pl.col("seq_alloc").is_not_null()).then(
            _gather_rows(pools, _rows_of_seq(seq, blocks["seq_alloc"]))
        ).otherwise(_gather_rows(pools, _rows_of_seq(seq, blocks["seq_free"])))
    blocks = blocks.with_columns(pool_id=pool_id)
    holders = final_segments.filter(pl.col("pool_id").is_not_null()).select(
        "addr", end=pl.col("addr") + pl.col("size").cast(pl.UInt64), pool="pool_id",
    ).sort("addr", maintain_order=True)
    if holders.is_empty() or blocks.is_empty():
        return blocks
    starts = holders["addr"].to_numpy()
    addr = blocks["addr"].fill_null(0).to_numpy()
    holder = np.searchsorted(starts, addr, side="right") - 1  # the last start <= addr
    inside = (holder >= 0) & blocks["addr"].is_not_null().to_numpy()
    inside &= addr < holders["end"].to_numpy()[np.maximum(holder, 0)]
    pools = holders["pool"].unique()
    if pools.len() == 1:  # one pool (as usual): no column of texts gathered for it
        held = pl.when(pl.Series(inside)).then(pl.lit(pools[0], pl.String))
    else:
        held = _gather_rows(holders["pool"], np.where(inside, holder, -1))
    return blocks.with_columns(pool_id=pl.col("pool_id").fill_null(held))


def _rows_of_seq(seq: pl.Series, wanted: pl.Series) -> np.ndarray:
    """The rows of ``seq`` (ascending) holding each ``wanted`` value, -1 where null or
    absent."""
    values = seq.to_numpy()
    keys = wanted.fill_null(-1).to_numpy()
    rows = np.searchsorted(values, keys) if values.size else np.zeros(keys.size, np.int64)
    rows = np.minimum(rows, max(values.size - 1, 0))
    found = (keys >= 0) & (values[rows] == keys) if values.size else keys < -1
    return np.where(found, rows, -1)


def _gather_rows(column: pl.Series, rows: np.ndarray) -> pl.Series:
    """``column`` at ``rows``, null where a row is -1."""
    index = pl.Series(np.maximum(rows, 0), dtype=pl.Int64)
    taken = column.gather(index) if column.len() else pl.Series(
        column.name, [None] * rows.size, column.dtype)
    return taken.to_frame().select(
        pl.when(pl.Series(rows >= 0)).then(pl.col(column.name))).to_series()


def _joined_lines(value) -> str | None:
    """A list of traceback lines (``forward_frames``) as one text; anything else None."""
    if not isinstance(value, list | tuple) or not value:
        return None
    return "\n".join(line.rstrip("\n") for line in value if isinstance(line, str)) or None


def _with_alloc_metadata(traced: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """``traced`` blocks with the :data:`ENTRY_TEXTS` of their alloc event, where any."""
    for key in ENTRY_TEXTS:
        if key in events.columns:
            noted = events.filter(pl.col(key).is_not_null()).select(seq_alloc="seq", **{key: key})
            traced = traced.join(noted, on="seq_alloc", how="left")
    return traced


def _uncovered(final: pl.DataFrame, mapped: pl.DataFrame) -> pl.DataFrame:
    """The ranges of the dumped segments ``final`` that no range of ``mapped`` covers.

    ``mapped`` has ``dump_addr`` (the dumped segment holding it), ``addr``, ``m_end``.
    Returns rows of ``final`` (its stream, pool, kind) with ``addr``/``size`` narrowed to
    each uncovered range; a segment with nothing mapped inside comes back whole.
    """
    pieces = mapped.sort("dump_addr", "addr").with_columns(
        prev_end=pl.col("m_end").shift(1).over("dump_addr"))
    seg = final.select("dump_addr", s_addr="addr", s_end="end")
    before = pieces.join(seg, on="dump_addr").select(
        "dump_addr", g_addr=pl.col("prev_end").fill_null(pl.col("s_addr")),
        g_end=pl.col("addr"))
    tails = seg.join(
        pieces.group_by("dump_addr").agg(last=pl.col("m_end").max()), on="dump_addr",
        how="left",
    ).select("dump_addr", g_addr=pl.col("last").fill_null(pl.col("s_addr")),
             g_end=pl.col("s_end"))
    gaps = pl.concat([before, tails]).filter(pl.col("g_end") > pl.col("g_addr"))
    return gaps.join(final.drop("addr", "size"), on="dump_addr").with_columns(
        addr=pl.col("g_addr"), size=(pl.col("g_end") - pl.col("g_addr")).cast(pl.Int64))


def _unexplained_maps(device: str, pieces: MappedPieces) -> str:
    """The warning of a trace whose maps and unmaps do not fit the dump's mapped ranges."""
    parts = []
    if pieces.unexplained_map:
        parts.append(f"{format_bytes(pieces.unexplained_map)} mapped that no later state "
                     "holds")
    if pieces.unexplained_unmap:
        parts.append(f"{format_bytes(pieces.unexplained_unmap)} unmapped that were not mapped")
    first, last = pieces.events[0], pieces.events[-1]
    where = f"event {first}" if first == last else f"events {first} to {last}"
    return (f"{device}: the expandable segments' maps and unmaps do not fit the dump "
            f"({' and '.join(parts)}; {counted(len(pieces.events), 'event')}, {where}): "
            "those bytes are left as the dump and the later events have them")


def _trace_values(trace: list[dict], key: str) -> list:
    """``entry[key]`` of every entry (None where an entry lacks it)."""
    if isinstance(trace, ColumnTrace):
        return trace.values(key)
    try:
        return list(map(itemgetter(key), trace))
    except (KeyError, TypeError):
        return [entry.get(key) for entry in trace]


def _walked_times(values: pl.Series, per_unit: int) -> np.ndarray:
    """``values`` times ``per_unit``, never stepping back, in an int64 array with room
    for a level's start point first (the first time again; 0 where there are none)."""
    t = with_first(0, values.to_numpy())
    times = t[1:]
    if per_unit != 1:
        times *= per_unit
        np.maximum.accumulate(times, out=times)
    t[0] = times[0] if times.size else 0
    return t


def _null_below_zero(name: str, values: np.ndarray) -> pl.Series:
    """``values`` as an Int64 column, null where negative (no copy where none is)."""
    series = pl.Series(name, values, dtype=pl.Int64)
    negative = values < 0
    if not negative.any():
        return series
    return series.to_frame().select(
        pl.when(pl.Series(~negative)).then(pl.col(name)).alias(name)).to_series()


def _concat(parts: list[pl.DataFrame], name: str) -> pl.DataFrame:
    return conform(pl.concat(parts, how="diagonal_relaxed") if parts else None, name)


def _merge_device_events(
    events: list[pl.DataFrame], names: list[str], blocks: list[pl.DataFrame]
) -> pl.DataFrame:
    """All devices' events in time order, block ids shifted past the devices before."""
    if len(events) <= 1:
        return _concat(events, "events")
    offset, shifted = 0, []
    for part, device_blocks in zip(events, blocks, strict=True):
        shifted.append(part.with_columns(pl.col("block_id") + offset))
        offset += device_blocks.height
    order = {name: i for i, name in enumerate(names)}
    merged = pl.concat(shifted, how="diagonal_relaxed").with_columns(
        _device_order=pl.col("device").replace_strict(order, return_dtype=pl.Int32)
    )
    return _concat([merged.sort("t", "_device_order", "seq").drop("_device_order")], "events")


def _device_sort_key(name: str) -> tuple[int, str]:
    index = name.split(":", 1)[-1]
    return (int(index), "") if index.isdigit() else (1 << 30, index)
