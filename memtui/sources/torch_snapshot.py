"""PyTorch (CUDA and torch_npu) memory snapshots into the canonical model.

Reads what ``torch.cuda.memory._dump_snapshot()`` and ``torch_npu.npu.memory._dump_snapshot()``
write (torch 2.0 to 2.15 keys, pickle protocols 2 to 5), the bare segment list of
``torch.cuda.memory_snapshot()`` and the legacy blocks with ``history``; see
../shared/formats/torch_snapshot.md.  Unknown keys are ignored.

The trace dicts are turned into columns once (one pass per key), call stacks are interned
by object identity (the pickle memo shares them heavily), and everything after that is
polars: pairing allocs and frees into blocks, segments, and the levels, which are found
by walking back from the final state (start = active at end - allocs + frees).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from memtui.errors import CaptureError
from memtui.model import (
    ACTIONS,
    DeviceInfo,
    MemoryTrace,
    TraceMeta,
    conform,
)
from memtui.sources.lifetimes import pair_by_address
from memtui.sources.safe_pickle import load_pickle, looks_like_pickle
from memtui.sources.stacks import StackInterner

NAME = "PyTorch memory snapshot"
SOURCE = "torch_snapshot"

#: Trace actions as torch writes them -> canonical actions.
_ACTION_NAMES = {
    "free_completed": "free",
    "workspace_snapshot": "workspace",
}
_ACTIVE_STATES = ("active_allocated", "active_pending_free")
_NPU_ONLY_ACTIONS = ("workspace_snapshot",)
_TRACE_KEYS = ("action", "addr", "size", "stream", "time_us")


def sniff(path: Path) -> bool:
    return Path(path).is_file() and looks_like_pickle(Path(path))


def load(path: Path, progress=None) -> MemoryTrace:
    path = Path(path)
    _report(progress, 0.0, f"unpickling {path.name}")
    data = load_pickle(path)
    _report(progress, 0.6, "building the model")
    snapshot = _normalise(path, data)
    try:
        trace = _SnapshotBuilder(path, snapshot).build()
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise CaptureError(
            path, f"malformed PyTorch memory snapshot ({type(exc).__name__}: {exc})"
        ) from None
    _report(progress, 1.0, "done")
    return trace


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
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
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

    def __init__(self, path: Path, snapshot: dict) -> None:
        self.path = path
        self.snapshot = snapshot
        self.interner = StackInterner()
        self.warnings: list[str] = []
        self.prefix = "npu" if _is_npu(snapshot) else "cuda"
        self.pool = "PTA" if self.prefix == "npu" else "CUDA"

    def device_name(self, index: int | str) -> str:
        return f"{self.prefix}:{index}"

    # -- raw dicts to columns -------------------------------------------------------------

    def _trace_frames(self) -> tuple[pl.DataFrame, bool]:
        """All trace entries of every device as one frame, and whether they carry time."""
        parts = []
        traces = list(enumerate(self.snapshot.get("device_traces") or []))
        host = self.snapshot.get("host_traces") or []
        if host and isinstance(host[0], list):
            host = [entry for trace in host for entry in trace]
        if host:
            traces.append(("host", host))
        for index, trace in traces:
            if trace:
                parts.append(self._device_trace_frame(self.device_name(index), trace))
        if not parts:
            return pl.DataFrame(), False
        events = pl.concat(parts, how="diagonal_relaxed")
        has_time = "time_us" in events.columns and events["time_us"].null_count() == 0
        return events, has_time

    def _device_trace_frame(self, device: str, trace: list[dict]) -> pl.DataFrame:
        frames = [entry.get("frames") for entry in trace]
        columns: dict[str, Any] = {
            key: [entry.get(key) for entry in trace] for key in _TRACE_KEYS
        }
        df = pl.DataFrame(
            {
                "device": pl.Series([device] * len(trace), dtype=pl.String),
                "seq": pl.int_range(0, len(trace), eager=True, dtype=pl.Int64),
                "action": pl.Series(columns["action"], dtype=pl.String),
                "addr": pl.Series(columns["addr"], dtype=pl.UInt64),
                "size": pl.Series(columns["size"], dtype=pl.Int64),
                "stream": pl.Series(columns["stream"], dtype=pl.Int64),
                "time_us": pl.Series(columns["time_us"], dtype=pl.Int64),
                "stack_id": self.interner.stack_ids(frames),
            }
        )
        for key in ("action", "size"):
            missing = df[key].null_count()
            if missing:
                raise CaptureError(
                    self.path, f"malformed PyTorch memory snapshot: {missing} trace entries of "
                    f"{device} have no '{key}'")
        df = df.with_columns(pl.col("action").replace(_ACTION_NAMES))
        unknown = df.filter(~pl.col("action").is_in(ACTIONS))
        if unknown.height:
            names = sorted(unknown["action"].unique().to_list())
            self.warnings.append(
                f"{device}: {unknown.height} trace entries with unknown actions {names} ignored"
            )
        df = df.with_columns(pool=self._pool_column(df))
        self._collect_entry_markers(device, df, trace)
        return df

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

    def _collect_entry_markers(self, device: str, df: pl.DataFrame, trace: list[dict]) -> None:
        """``annotate`` entries and ``oom`` entries become markers (few: a loop is fine)."""
        rows = []
        for index in df["action"].is_in(["annotate", "oom"]).arg_true().to_list():
            entry = trace[index]
            if entry["action"] == "annotate":
                name = str(entry.get("user_metadata") or "annotation")
                rows.append((index, "annotate", name))
            else:
                free = entry.get("device_free")
                name = f"out of memory: {entry.get('size', 0)} bytes requested"
                if free is not None:
                    name += f", {free} free on the device"
                rows.append((index, "oom", name))
        self.entry_markers.extend((device, *row) for row in rows)

    def _final_blocks(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Segments and their active blocks in the final state, as frames."""
        segments = self.snapshot["segments"]
        host = self.snapshot.get("host_segments") or []
        seg_rows: dict[str, list] = {k: [] for k in (
            "device", "addr", "size", "stream", "pool_id", "kind")}
        block_rows: dict[str, list] = {k: [] for k in (
            "device", "addr", "size", "requested_size", "state", "stream", "frames")}
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
            offset = 0
            for block in segment.get("blocks", []):
                if block.get("state") in _ACTIVE_STATES:
                    for key, value in (
                        ("device", device),
                        ("addr", _block_address(segment, block, offset)),
                        ("size", block["size"]),
                        ("requested_size", block.get("requested_size", block["size"])),
                        ("state", block["state"]), ("stream", segment.get("stream", 0)),
                        ("frames", _block_frames(block)),
                    ):
                        block_rows[key].append(value)
                offset += block["size"]
        seg_df = pl.DataFrame(seg_rows, schema={
            "device": pl.String, "addr": pl.UInt64, "size": pl.Int64, "stream": pl.Int64,
            "pool_id": pl.String, "kind": pl.String})
        frames = block_rows.pop("frames")
        block_df = pl.DataFrame(block_rows, schema={
            "device": pl.String, "addr": pl.UInt64, "size": pl.Int64,
            "requested_size": pl.Int64, "state": pl.String, "stream": pl.Int64,
        }).with_columns(stack_id=self.interner.stack_ids(frames))
        return seg_df, block_df

    # -- the model -------------------------------------------------------------------------

    def build(self) -> MemoryTrace:
        self.entry_markers: list[tuple] = []
        raw, has_time = self._trace_frames()
        final_segments, final_blocks = self._final_blocks()
        time_unit = "ns" if has_time else "event"
        events = self._events(raw, has_time)
        devices = self._devices(events, final_segments, final_blocks)
        starts = events.group_by("device").agg(start=pl.col("t").min())
        blocks, events = self._blocks(events, final_blocks, starts)
        segments = self._segments(events, final_segments, starts)
        events = self._levels(events, devices).sort("t", "device", "seq")
        meta = TraceMeta(
            source=SOURCE, path=str(self.path), devices=devices, time_unit=time_unit,
            warnings=self.warnings,
            extra={
                "allocator_settings": self.snapshot.get("allocator_settings") or {},
                "device_kind": self.prefix,
            },
        )
        frames, stacks = self.interner.frames()
        return MemoryTrace(
            meta=meta,
            events=conform(events, "events"),
            blocks=conform(blocks, "blocks"),
            segments=conform(segments, "segments"),
            frames=frames,
            stacks=stacks,
            markers=conform(self._markers(events, has_time), "markers"),
        )

    def _events(self, raw: pl.DataFrame, has_time: bool) -> pl.DataFrame:
        if raw.is_empty():
            return pl.DataFrame(schema={
                "device": pl.String, "seq": pl.Int64, "action": pl.String, "addr": pl.UInt64,
                "size": pl.Int64, "stream": pl.Int64, "stack_id": pl.Int32, "pool": pl.String,
                "t": pl.Int64})
        t = pl.col("time_us") * 1000 if has_time else pl.col("seq")
        return (
            raw.filter(pl.col("action").is_in(ACTIONS))
            .with_columns(t=t.cast(pl.Int64), action=pl.col("action").cast(pl.String))
            .drop("time_us")
        )

    def _devices(
        self, events: pl.DataFrame, final_segments: pl.DataFrame, final_blocks: pl.DataFrame
    ) -> list[DeviceInfo]:
        names = set(events["device"].unique().to_list()) | set(
            final_segments["device"].unique().to_list()
        )
        devices = []
        for name in sorted(names, key=_device_sort_key):
            segs = final_segments.filter(pl.col("device") == name)
            blocks = final_blocks.filter(pl.col("device") == name)
            allocated = blocks.filter(pl.col("state") == "active_allocated")["size"].sum()
            devices.append(
                DeviceInfo(
                    name=name, kind=self.prefix, has_segments=True,
                    allocated_at_end=int(allocated or 0),
                    reserved_at_end=int(segs["size"].sum() or 0),
                    segments_at_end=segs.height,
                )
            )
        return devices

    def _blocks(
        self, events: pl.DataFrame, final_blocks: pl.DataFrame, starts: pl.DataFrame
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Blocks from alloc/free pairs, ghosts, and final-state blocks with no alloc."""
        ops = events.filter(pl.col("action").is_in(["alloc", "free_requested", "free"]))
        lifetimes, ops = pair_by_address(ops, ["alloc"], ["free"], ["free_requested"])
        broken = int(lifetimes["extra_closes"].sum() or 0)
        if broken:
            self.warnings.append(f"{broken} frees of an address already freed were ignored")
        traced = lifetimes.filter(
            pl.col("seq_alloc").is_not_null() | pl.col("seq_free").is_not_null())
        alive = traced.filter(pl.col("seq_alloc").is_not_null() & pl.col("seq_free").is_null())
        pending = lifetimes.filter(pl.col("seq_alloc").is_null() & pl.col("seq_free").is_null())
        # Final blocks: requested size for the traced ones still alive, ghosts for the rest.
        final = final_blocks.join(pending.select("device", "addr", "gen", "t_free_requested"),
                                  on=["device", "addr"], how="left")
        final_ghosts = final.join(alive, on=["device", "addr"], how="anti").join(
            starts, on="device", how="left"
        ).select(
            "device", "addr", "gen", "size", "requested_size", "stream", "stack_id",
            "t_free_requested", t_alloc=pl.col("start").fill_null(0), ghost=pl.lit(True),
        )
        requested = final.select("device", "addr", requested=pl.col("requested_size"))
        traced = traced.join(starts, on="device", how="left").join(
            requested, on=["device", "addr"], how="left"
        ).select(
            "device", "addr", "gen", "seq_alloc", "seq_free", "t_free", "t_free_requested",
            ghost=pl.col("seq_alloc").is_null(),
            t_alloc=pl.col("t_alloc").fill_null(pl.col("start")),
            size=pl.col("size").fill_null(pl.col("free_size")),
            requested_size=pl.when(pl.col("t_free").is_null()).then(pl.col("requested")),
            stack_id=pl.col("stack_id").fill_null(pl.col("free_stack_id")),
            stream=pl.col("stream").fill_null(pl.col("free_stream")),
        )
        missing = alive.join(final_blocks, on=["device", "addr"], how="anti").height
        if missing and not final_blocks.is_empty():
            self.warnings.append(
                f"{missing} blocks allocated in the trace and never freed are not in the "
                "final state"
            )
        blocks = pl.concat([traced, final_ghosts], how="diagonal_relaxed").sort(
            "device", "t_alloc", "seq_alloc", nulls_last=False
        ).with_columns(
            block_id=pl.int_range(0, pl.len(), dtype=pl.Int64), pool=pl.lit(self.pool)
        )
        ids = blocks.filter(pl.col("gen").is_not_null()).select(
            "device", "addr", "gen", "block_id")
        ops = ops.join(ids, on=["device", "addr", "gen"], how="left").select(
            "device", "seq", "block_id")
        events = events.join(ops, on=["device", "seq"], how="left")
        return blocks.drop("gen"), events

    def _segments(
        self, events: pl.DataFrame, final_segments: pl.DataFrame, starts: pl.DataFrame
    ) -> pl.DataFrame:
        """Segments from segment_alloc/free (and map/unmap) pairs, plus the final ones."""
        ops = events.filter(pl.col("action").str.starts_with("segment_"))
        lifetimes, _ = pair_by_address(
            ops, ["segment_alloc", "segment_map"], ["segment_free", "segment_unmap"]
        )
        alive = lifetimes.filter(pl.col("seq_alloc").is_not_null() & pl.col("seq_free").is_null())
        finals = final_segments.join(starts, on="device", how="left")
        matched = finals.join(alive.select("device", "addr"), on=["device", "addr"], how="semi")
        unmatched = finals.join(alive.select("device", "addr"), on=["device", "addr"], how="anti")
        # An expandable segment grows by segment_map inside its range: what the trace mapped
        # is counted there, and only the rest of the segment existed before the trace.
        mapped_inside = (
            unmatched.join(alive.select("device", pl.col("addr").alias("m_addr"),
                                        pl.col("size").alias("m_size")), on="device", how="inner")
            .filter((pl.col("m_addr") >= pl.col("addr"))
                    & (pl.col("m_addr") < pl.col("addr") + pl.col("size")))
            .group_by("device", "addr").agg(mapped=pl.col("m_size").sum())
        )
        ghosts = (
            unmatched.join(mapped_inside, on=["device", "addr"], how="left")
            .with_columns(size=pl.col("size") - pl.col("mapped").fill_null(0))
            .filter(pl.col("size") > 0)
            .select("device", "addr", "size", "stream", "pool_id", "kind",
                    t_alloc=pl.col("start").fill_null(0), ghost=pl.lit(True))
        )
        traced = lifetimes.filter(
            pl.col("seq_alloc").is_not_null() | pl.col("seq_free").is_not_null()
        ).join(starts, on="device", how="left").join(
            matched.select("device", "addr", "pool_id", "kind", final_size=pl.col("size")),
            on=["device", "addr"], how="left",
        ).select(
            "device", "addr", "seq_alloc", "seq_free", "t_free", "pool_id",
            t_alloc=pl.col("t_alloc").fill_null(pl.col("start")),
            size=pl.col("size").fill_null(pl.col("free_size")),
            stream=pl.col("stream").fill_null(pl.col("free_stream")),
            ghost=pl.col("seq_alloc").is_null(),
            kind=pl.col("kind").fill_null(
                pl.when(pl.col("open_action") == "segment_map").then(pl.lit("expandable"))
            ),
        )
        return pl.concat([traced, ghosts], how="diagonal_relaxed").sort(
            "device", "t_alloc", "addr"
        ).with_columns(segment_id=pl.int_range(0, pl.len(), dtype=pl.Int64))

    def _levels(self, events: pl.DataFrame, devices: list[DeviceInfo]) -> pl.DataFrame:
        """allocated/active/reserved after each event, walked back from the final state."""
        action = pl.col("action")
        alloc_delta = (
            pl.when(action == "alloc").then(pl.col("size"))
            .when(action == "free").then(-pl.col("size")).otherwise(0)
        )
        seg_delta = (
            pl.when(action.is_in(["segment_alloc", "segment_map"])).then(pl.col("size"))
            .when(action.is_in(["segment_free", "segment_unmap"])).then(-pl.col("size"))
            .otherwise(0)
        )
        events = events.sort("device", "seq").with_columns(
            alloc_delta=alloc_delta, seg_delta=seg_delta
        )
        sums = events.group_by("device").agg(
            pl.col("alloc_delta").sum(), pl.col("seg_delta").sum()
        )
        sums = {row["device"]: row for row in sums.iter_rows(named=True)}
        active_end = self._active_at_end()
        starts = []
        for info in devices:
            row = sums.get(info.name, {"alloc_delta": 0, "seg_delta": 0})
            info.start_allocated = active_end.get(info.name, 0) - row["alloc_delta"]
            info.start_reserved = (info.reserved_at_end or 0) - row["seg_delta"]
            starts.append((info.name, info.start_allocated, info.start_reserved))
        start_df = pl.DataFrame(starts, schema=["device", "start_a", "start_r"], orient="row")
        return events.join(start_df, on="device", how="left").with_columns(
            allocated=pl.col("start_a") + pl.col("alloc_delta").cum_sum().over("device"),
            reserved=pl.col("start_r") + pl.col("seg_delta").cum_sum().over("device"),
        ).with_columns(active=pl.col("allocated")).drop(
            "alloc_delta", "seg_delta", "start_a", "start_r"
        )

    def _active_at_end(self) -> dict[str, int]:
        """Bytes in blocks not yet free_completed at the dump (allocated + pending free)."""
        totals: dict[str, int] = {}
        segments = [(s, s.get("device", 0)) for s in self.snapshot["segments"]] + [
            (s, "host") for s in self.snapshot.get("host_segments") or []
        ]
        for segment, index in segments:
            name = self.device_name(index)
            active = sum(b["size"] for b in segment.get("blocks", [])
                         if b.get("state") in _ACTIVE_STATES)
            totals[name] = totals.get(name, 0) + active
        return totals

    def _markers(self, events: pl.DataFrame, has_time: bool) -> pl.DataFrame:
        rows = []
        times = {(d, s): t for d, s, t in events.select("device", "seq", "t").iter_rows()} \
            if self.entry_markers else {}
        for device, seq, kind, name in self.entry_markers:
            t = times.get((device, seq))
            rows.append({"t": t, "t_end": None, "device": device, "kind": kind, "name": name})
        if has_time:
            rows.extend(self._annotation_ranges())
        return pl.DataFrame(rows, schema={"t": pl.Int64, "t_end": pl.Int64, "device": pl.String,
                                          "kind": pl.String, "name": pl.String}).sort("t")

    def _annotation_ranges(self) -> list[dict]:
        """``external_annotations`` START/END pairs (record_function scopes) as ranges."""
        open_starts: dict[tuple, list[int]] = {}
        rows = []
        for note in self.snapshot.get("external_annotations") or []:
            device = self.device_name(note.get("device", 0))
            key = (device, note.get("name", ""))
            t = int(note.get("time_us", 0)) * 1000
            if note.get("stage") == "START":
                open_starts.setdefault(key, []).append(t)
            elif open_starts.get(key):
                rows.append({"t": open_starts[key].pop(), "t_end": t, "device": device,
                             "kind": "annotation", "name": key[1]})
        for (device, name), ts in open_starts.items():
            rows.extend({"t": t, "t_end": None, "device": device, "kind": "annotation",
                         "name": name} for t in ts)
        return rows


def _device_sort_key(name: str) -> tuple[int, str]:
    index = name.split(":", 1)[-1]
    return (int(index), "") if index.isdigit() else (1 << 30, index)
