"""The msMemScope model of a growing capture, extended with each read instead of rebuilt.

:class:`LiveBuild` keeps the model built so far (``--follow``).  msMemScope writes a
block's rows when it is freed, so new rows can be older than the newest event read; an
update therefore finds the *cut*: the earliest time among the new rows and the old rows of
the blocks they touch (same ``allocation_id`` in the process).  What lies before it is kept
as it is: the events and their levels, the curves, the markers; only the suffix is built
again from the old suffix and the new rows (sorted), its levels continuing from the
prefix's last ones.  Blocks of untouched keys stay; the touched ones are paired again from
all their rows.  Block and stack ids are renumbered as a fresh open numbers them (a
gather, no sort of the events).

The cost is proportional to the new rows plus the suffix, and a few narrow passes
(numpy gathers, a semi-join on two integer columns) over what was read.  Where an update
would change what the prefix shows (rows without ``allocation_id``, rows before the
capture's start, a block allocated before the capture appearing or going, a device's
reserved-bytes rule changing, a warning) the model is built again from every row: the
result is always the model a fresh open of the same rows builds
(``tests/sources/test_live_build.py`` checks that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from memtui.model import MemoryTrace, TraceMeta, conform
from memtui.sources.common.event_axis import RAW_COLUMN, time_ordered_axis
from memtui.sources.memscope import build as B
from memtui.sources.memscope.timeline import calls_of, marker_kind, markers_of

#: Rows looked at first, from the end of the prefix, for each group's last value.
_WINDOW = 8192
_EVENT_COLUMNS = ["t", "seq", "device", "action", "addr", "size", "stream", "pool", "block_id",
                  "stack_id", "owner", "allocated", "active", "reserved", "id", "event_type",
                  "name", "process", "thread", "attr", "c_stack_id"]
_BLOCK_ORDER = B.BLOCK_ORDER


class _Rebuild(Exception):
    """This update cannot keep the prefix: build the model from every row."""


@dataclass
class _Model:
    """The model so far, with what extending it needs."""

    events: pl.DataFrame  # _EVENT_COLUMNS + total + row, in (t, row) order, seq = 0..
    blocks: pl.DataFrame  # conformed, in block_id order
    alloc_curves: pl.DataFrame  # Allocated curve rows, in event order
    reserved_curves: pl.DataFrame
    levels: pl.DataFrame  # per device: has_total, has_driver, start_alloc, start_driver
    texts: dict[str, int]  # stack text -> stack_id
    frames: pl.DataFrame
    stacks: pl.DataFrame
    markers: pl.DataFrame
    marker_pairs: set = field(default_factory=set)  # (event, etype) of the other rows
    calls: pl.DataFrame | None = None
    start: int | None = None
    end: int | None = None
    build_warnings: list[str] = field(default_factory=list)  # pairing's
    call_warnings: list[str] = field(default_factory=list)
    groups: dict[str, pl.DataFrame] = field(default_factory=dict)  # see _groups
    levelled: int = 0  # events the last update levelled (the suffix)


@dataclass
class LiveBuild:
    """See the module docstring.  ``update(memory, other, trace, new_*)`` takes every
    row read so far and which of them are new (the parts appended since the last call)."""

    path: Path
    layout: str = ""
    model: _Model | None = None
    rebuilds: int = 0  # how many updates built from every row (for tests and benchmarks)
    extended: int = 0  # how many extended the model
    last_rebuild: str = ""  # why the last update could not extend the model
    last_suffix: int = 0  # events levelled again by the last update (all, if built anew)

    def update(self, memory: list[pl.DataFrame], other: list[pl.DataFrame],
               trace: list[pl.DataFrame], new_memory: list[pl.DataFrame],
               new_other: list[pl.DataFrame], new_trace: list[pl.DataFrame],
               warnings: list[str]) -> MemoryTrace:
        all_rows = (_frame(memory, B.MEMORY_EMPTY), _frame(other, B.OTHER_EMPTY),
                    _frame(trace, B.TRACE_EMPTY))
        new_rows = (_frame(new_memory, B.MEMORY_EMPTY), _frame(new_other, B.OTHER_EMPTY),
                    _frame(new_trace, B.TRACE_EMPTY))
        if self.model is not None:
            try:
                self.model = _extend(self.model, all_rows, new_rows)
                self.extended += 1
                self.last_suffix = self.model.levelled
                return self._trace(warnings)
            except _Rebuild as why:
                self.last_rebuild = str(why)
        self.model = _build(all_rows)
        self.rebuilds += 1
        self.last_suffix = self.model.events.height
        return self._trace(warnings)

    def _trace(self, read_warnings: list[str]) -> MemoryTrace:
        model = self.model
        segments = B.driver_segments(model.blocks)
        devices = B.device_infos(model.levels.select("device"), model.blocks,
                             _level_facts(model), model.markers, model.calls, segments)
        meta = TraceMeta(
            source=B.SOURCE, path=str(self.path), devices=devices,
            warnings=[*read_warnings, *model.build_warnings, *model.call_warnings],
            extra={"files": [str(self.path)], "layouts": [self.layout] if self.layout else [],
                   "trace_start_ns": model.start, "trace_end_ns": model.end})
        # The model's frames are kept conformed: handing them over copies nothing.
        curves = pl.concat([model.alloc_curves, model.reserved_curves], rechunk=False)
        return MemoryTrace(
            meta=meta, events=model.events.drop("total"),
            blocks=model.blocks, segments=conform(segments, "segments"),
            frames=model.frames, stacks=model.stacks, calls=conform(model.calls, "calls"),
            curves=curves, markers=model.markers)


def _frame(parts: list[pl.DataFrame], schema: dict) -> pl.DataFrame:
    parts = [p for p in parts if p is not None and p.height]
    return B.stacked_parts(parts, schema)


def _level_facts(model: _Model) -> pl.DataFrame:
    """The per-device facts ``build._devices`` reads, ``reserved_at_end`` from the events."""
    ends = _last_per_group(model.events, ["device"],
                           {"reserved_at_end": pl.col("reserved").last()},
                           model.groups["reserved"], pl.col("reserved").is_not_null())
    return model.levels.join(ends, on="device", how="left")


# -- building from every row --------------------------------------------------------------


def _build(rows: tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]) -> _Model:
    memory, other, trace = rows
    start, end = B.time_bounds(memory, other, trace)
    build_warnings: list[str] = []
    mem, blocks = _pair(memory, start, build_warnings)
    texts, frames, stacks = _intern({}, _texts(mem))
    mem, blocks = _with_stack_ids(mem, texts), conform(_with_stack_ids(blocks, texts), "blocks")
    events = _event_rows(mem)
    events = events.sort("t", "seq") if not B.in_time_order(events) else events
    events, blocks = time_ordered_axis(events, blocks)
    levels = _facts(events, blocks)
    events = _with_levels(events, blocks, levels, _Carry.empty())
    alloc, reserved = _curves(events, blocks, _Carry.empty())
    markers = conform(markers_of(other), "markers")
    pairs = set(other.select("event", pl.col("etype").fill_null("")).unique().iter_rows())
    call_warnings: list[str] = []
    calls = calls_of(trace, events, start, end, call_warnings)
    model = _Model(events=events, blocks=blocks, alloc_curves=alloc, reserved_curves=reserved,
                   levels=levels, texts=texts, frames=frames, stacks=stacks, markers=markers,
                   marker_pairs=pairs, calls=calls, start=start, end=end,
                   build_warnings=build_warnings, call_warnings=call_warnings)
    model.groups = _groups(events, blocks, alloc, reserved)
    return model


def _groups(events: pl.DataFrame, blocks: pl.DataFrame, alloc: pl.DataFrame,
            reserved: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The groups whose last values an update carries over (known, so that a look at the
    tail of the prefix can tell it has found them all)."""
    total = pl.col("total").is_not_null()
    framework = blocks["pool"].gather(events["block_id"]).is_in(B.FRAMEWORK_POOLS)
    return {
        "device": events.select("device").unique(),
        "reserved": events.filter(pl.col("reserved").is_not_null()).select("device").unique(),
        "total": events.filter(total).select("device", "process", "pool").unique(),
        "curve_total": events.filter(total & framework).select(
            "device", "process", block_pool=blocks["pool"].gather(
                events.filter(total & framework)["block_id"])).unique(),
        "alloc": alloc.select("device", "component").unique(),
        "reserved_curve": reserved.select("device", "component").unique(),
    }


def _union_groups(old: dict[str, pl.DataFrame], new: dict[str, pl.DataFrame]):
    return {key: pl.concat([old[key], new[key]]).unique() for key in old}


def _pair(memory: pl.DataFrame, start: int | None,
          warnings: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Memory rows with device/addr/pool and local ``block_id``, and their blocks."""
    memory = B.resolved_memory_columns(memory.clone(), warnings)  # (the rows read stay as read)
    return B.pair_blocks(memory, start, warnings)


def _remap(ids: pl.Series, mapping: np.ndarray) -> pl.Series:
    values = ids.to_numpy()
    return pl.Series(mapping[values] if values.size else values, dtype=pl.Int64)


def _remap_mixed(ids: pl.Series, fresh: pl.Series, old_to_new: np.ndarray,
                 local_to_new: np.ndarray) -> pl.Series:
    """Block ids of rows that are old ids (``fresh`` false) or local ids (true), merged."""
    values = ids.to_numpy().copy()
    is_fresh = fresh.to_numpy()
    values[is_fresh] = local_to_new[values[is_fresh]]
    values[~is_fresh] = old_to_new[values[~is_fresh]]
    return pl.Series(values, dtype=pl.Int64)


def _seqs_from(blocks: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """``blocks`` (in block_id order, ids 0..) with ``seq_alloc``/``seq_free`` taken from
    ``events`` where they hold the block's alloc or free (each block has one of each at
    most): a block's numbers follow its events when these are numbered again."""
    if events.is_empty():
        return blocks
    columns = {}
    for column, action in (("seq_alloc", "alloc"), ("seq_free", "free")):
        rows = events.filter(pl.col("action") == action)
        columns[column] = blocks[column].scatter(rows["block_id"].to_numpy(),
                                                 rows["seq"]) if rows.height else blocks[column]
    return blocks.with_columns(**columns)


# -- stacks -------------------------------------------------------------------------------


def _texts(mem: pl.DataFrame) -> set[str]:
    distinct = pl.concat([mem["py_stack"].unique(), mem["c_stack"].unique()]).drop_nulls()
    return set(distinct.cast(pl.String).to_list())


def _intern(known: dict[str, int | None], texts: set[str]):
    """(text -> stack_id, frames, stacks) over every text seen, as a fresh open numbers
    them (ids follow the sorted frames; texts without a frame map to None)."""
    every = sorted(set(known) | texts)
    frames, stack_of_text = B.parse_stacks(pl.Series(every, dtype=pl.String))
    mapping: dict[str, int | None] = dict.fromkeys(every)
    mapping.update(zip(stack_of_text["text"].to_list(), stack_of_text["stack_id"].to_list(),
                       strict=True))
    frames_df = conform(frames, "frames")
    stacks_df = conform(stack_of_text.select("stack_id", "frame_ids").unique("stack_id")
                        .sort("stack_id"), "stacks")
    return mapping, frames_df, stacks_df


def _with_stack_ids(df: pl.DataFrame, texts: dict[str, int]) -> pl.DataFrame:
    """``py_stack``/``c_stack`` texts replaced by ``stack_id`` (Python, else C) and
    ``c_stack_id`` (as ``build._stacks`` does)."""
    def ids(column: pl.Series) -> pl.Series:
        return column.cast(pl.String).replace_strict(texts, default=None, return_dtype=pl.Int32)

    py, c = ids(df["py_stack"]), ids(df["c_stack"])
    return df.with_columns(stack_id=py.fill_null(c), c_stack_id=c).drop("py_stack", "c_stack")


def _stack_mapping(old: dict[str, int], new: dict[str, int]) -> np.ndarray | None:
    """old stack_id -> new stack_id (None where nothing moved)."""
    if all(new.get(text) == sid for text, sid in old.items()):
        return None
    size = max((v for v in old.values() if v is not None), default=-1) + 1
    mapping = np.arange(size, dtype=np.int64)
    for text, sid in old.items():
        if sid is not None:
            mapping[sid] = new[text]
    return mapping


def _restack(df: pl.DataFrame, mapping: np.ndarray | None) -> pl.DataFrame:
    if mapping is None or df.is_empty():
        return df
    table = pl.Series(mapping, dtype=pl.Int32)
    return df.with_columns(
        stack_id=pl.col("stack_id").replace_strict(
            pl.Series(np.arange(mapping.size), dtype=pl.Int32), table, default=None),
        c_stack_id=pl.col("c_stack_id").replace_strict(
            pl.Series(np.arange(mapping.size), dtype=pl.Int32), table, default=None))


# -- events and levels --------------------------------------------------------------------


def _event_rows(mem: pl.DataFrame) -> pl.DataFrame:
    """Paired memory rows as event rows (no levels yet), with ``total`` kept."""
    return mem.drop("aid", "ineff").with_columns(
        action=pl.col("event").replace_strict(B.ACTIONS, return_dtype=pl.String),
        stream=pl.lit(None, pl.Int64),
    ).rename({"etype": "event_type", "pid": "process", "tid": "thread"}).drop("event")


@dataclass
class _Carry:
    """The levels just before the cut, per device and per group (empty: the start)."""

    allocated: dict = field(default_factory=dict)  # device -> allocated
    reserved: dict = field(default_factory=dict)  # device -> reserved (None: not yet)
    total: pl.DataFrame | None = None  # device, process, pool, last_total
    curve_alloc: pl.DataFrame | None = None  # device, component, last bytes
    curve_reserved: pl.DataFrame | None = None
    curve_total: pl.DataFrame | None = None  # device, process, block_pool, last_total

    @classmethod
    def empty(cls) -> _Carry:
        return cls()


def _facts(events: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    """Per device: whether its pools report a total, whether it has driver blocks, and the
    start levels from the ghosts (``build._events``' facts)."""
    block_pool = blocks["pool"].gather(events["block_id"])
    framework = block_pool.is_in(B.FRAMEWORK_POOLS)
    driver = block_pool.is_in(B.DRIVER_POOLS)
    frame = pl.DataFrame({"device": events["device"],
                          "reported": framework & events["total"].is_not_null(),
                          "driver": driver})
    ghosts = blocks.filter(pl.col("ghost"))
    return frame.group_by("device").agg(
        has_total=pl.col("reported").any(), has_driver=pl.col("driver").any(),
    ).join(ghosts.group_by("device").agg(
        start_alloc=pl.col("size").filter(pl.col("pool").is_in(B.FRAMEWORK_POOLS)).sum(),
        start_driver=pl.col("size").filter(pl.col("pool").is_in(B.DRIVER_POOLS)).sum(),
    ), on="device", how="left").with_columns(pl.col("start_alloc", "start_driver").fill_null(0))


def _with_levels(events: pl.DataFrame, blocks: pl.DataFrame, levels: pl.DataFrame,
                 carry: _Carry) -> pl.DataFrame:
    """``allocated``/``active``/``reserved`` of events in (t, seq) order, continuing from
    ``carry`` (``build._events``' rules)."""
    if events.is_empty():
        return conform(events.with_columns(
            allocated=pl.lit(None, pl.Int64), active=pl.lit(None, pl.Int64),
            reserved=pl.lit(None, pl.Int64)).select(*_EVENT_COLUMNS, "total", RAW_COLUMN), "events")
    block = events["block_id"]
    frame = events.select("device", "process", "pool", "action", "total").with_columns(
        block_size=blocks["size"].fill_null(0).gather(block),
        block_pool=blocks["pool"].gather(block))
    frame = frame.with_columns(pool=pl.col("pool").fill_null(pl.col("block_pool")))
    facts = levels.with_columns(
        a0=pl.col("device").replace_strict(carry.allocated, default=None,
                                           return_dtype=pl.Int64).fill_null(pl.col("start_alloc")),
        r0=pl.col("device").replace_strict(
            {d: v for d, v in carry.reserved.items() if v is not None}, default=None,
            return_dtype=pl.Int64),
    ).with_columns(
        seen=pl.col("r0").is_not_null(),
        d0=pl.col("r0").fill_null(pl.col("start_driver")),
        r0=pl.col("r0").fill_null(0),
    )

    def per_device(column: str) -> pl.Expr:
        mapping = dict(zip(facts["device"].to_list(), facts[column].to_list(), strict=True))
        return pl.col("device").replace_strict(mapping, default=None,
                                               return_dtype=facts.schema[column])

    def running(expr: pl.Expr) -> pl.Expr:
        return expr.cum_sum().over("device")

    sign = pl.when(pl.col("action") == "alloc").then(1).when(pl.col("action") == "free").then(
        -1).otherwise(0)
    pool = pl.col("block_pool")
    framework = pool.is_in(B.FRAMEWORK_POOLS)
    driver = pool.is_in(B.DRIVER_POOLS)
    reported = framework & pl.col("total").is_not_null()
    previous = pl.col("total").forward_fill().shift(1).over(["device", "process", "pool"])
    if carry.total is not None and carry.total.height:
        frame = frame.join(carry.total, on=["device", "process", "pool"], how="left",
                           maintain_order="left")
        previous = previous.fill_null(pl.col("last_total"))
    total_delta = pl.when(reported).then(pl.col("total") - previous.fill_null(0)).otherwise(0)
    levels_frame = frame.select(
        allocated=per_device("a0") + running(
            pl.when(framework).then(sign * pl.col("block_size")).otherwise(0)),
        reserved=pl.when(per_device("has_total")).then(
            pl.when(per_device("seen") | (running(reported) > 0)).then(
                per_device("r0") + running(total_delta)))
        .when(per_device("has_driver")).then(
            per_device("d0") + running(
                pl.when(driver).then(sign * pl.col("block_size")).otherwise(0))),
        pool=pl.col("pool"),
        size=pl.col("block_size"),
    )
    return events.with_columns(
        pool=levels_frame["pool"],
        size=pl.col("size").fill_null(levels_frame["size"]),
        allocated=levels_frame["allocated"], active=levels_frame["allocated"],
        reserved=levels_frame["reserved"],
    ).select(*_EVENT_COLUMNS, "total", RAW_COLUMN).pipe(conform, "events")


def _curves(events: pl.DataFrame, blocks: pl.DataFrame,
            carry: _Carry) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The per-pool ``Allocated`` and ``Reserved`` rows of ``events`` (``build._pool_curves``),
    continuing from ``carry``."""
    block = events["block_id"]
    frame = events.select("t", "device", "process", "action", "total").with_columns(
        block_pool=blocks["pool"].gather(block),
        block_size=blocks["size"].fill_null(0).gather(block))
    ghosts = blocks.filter(pl.col("ghost"))
    starts = ghosts.group_by("device", "pool").agg(start=pl.col("size").sum())
    if carry.curve_alloc is not None and carry.curve_alloc.height:
        starts = starts.join(carry.curve_alloc.rename({"component": "pool"}),
                             on=["device", "pool"], how="full", coalesce=True).select(
            "device", "pool", start=pl.col("last").fill_null(pl.col("start")))
    sign = pl.when(pl.col("action") == "alloc").then(1).otherwise(-1)
    allocated = frame.filter(pl.col("action").is_in(["alloc", "free"])).select(
        "t", "device", pl.col("block_pool").alias("pool"), delta=sign * pl.col("block_size"),
    ).join(starts, on=["device", "pool"], how="left", maintain_order="left").select(
        "t", "device", series=pl.lit("Allocated"), component="pool",
        bytes=pl.col("start").fill_null(0) + pl.col("delta").cum_sum().over("device", "pool"))
    reported = frame.filter(pl.col("block_pool").is_in(B.FRAMEWORK_POOLS)
                            & pl.col("total").is_not_null())
    previous = pl.col("total").shift(1).over("device", "process", "block_pool")
    if carry.curve_total is not None and carry.curve_total.height:
        reported = reported.join(carry.curve_total, on=["device", "process", "block_pool"],
                                 how="left", maintain_order="left")
        previous = previous.fill_null(pl.col("last_total"))
    base = pl.lit(0, pl.Int64)
    if carry.curve_reserved is not None and carry.curve_reserved.height:
        reported = reported.join(
            carry.curve_reserved.rename({"component": "block_pool", "last": "base"}),
            on=["device", "block_pool"], how="left", maintain_order="left")
        base = pl.col("base").fill_null(0)
    reserved = reported.select(
        "t", "device", series=pl.lit("Reserved"), component="block_pool",
        bytes=base + (pl.col("total") - previous.fill_null(0)).cum_sum().over(
            "device", "block_pool"))
    return conform(allocated, "curves"), conform(reserved, "curves")


# -- extending ----------------------------------------------------------------------------


def _extend(model: _Model, rows, new_rows) -> _Model:
    memory, other, trace = rows
    new_memory, new_other, new_trace = new_rows
    start, end = B.time_bounds(new_memory, new_other, new_trace)
    if model.start is None or (start is not None and start < model.start):
        raise _Rebuild("rows before the capture's start")
    start = model.start
    end = max(v for v in (model.end, end) if v is not None) if (
        model.end is not None or end is not None) else None
    if new_memory.height and new_memory["aid"].null_count():
        raise _Rebuild("rows without allocation_id")  # pairing may reach far back
    touched = memory.join(new_memory.select("pid", "aid").unique(), on=["pid", "aid"],
                          how="semi") if new_memory.height else new_memory
    if touched.height:
        model = _extend_memory(model, touched, int(touched["t"].min()), start)
    markers, pairs = _extend_markers(model, other, new_other)
    calls, call_warnings = model.calls, model.call_warnings
    if new_trace.height or (touched.height and trace.height):
        call_warnings = []
        calls = calls_of(trace, model.events, start, end, call_warnings)
    levelled = model.levelled if touched.height else 0
    return _Model(**{**model.__dict__, "levelled": levelled, "markers": markers,
                     "marker_pairs": pairs, "calls": calls, "call_warnings": call_warnings,
                     "start": start, "end": end})


def _extend_memory(model: _Model, touched: pl.DataFrame, cut: int, start: int | None) -> _Model:
    """The model with every row of the touched blocks paired again and the events from
    ``cut`` on (the earliest of those rows) levelled again."""
    build_warnings: list[str] = []
    mem, new_blocks = _pair(touched, start, build_warnings)
    if build_warnings:
        raise _Rebuild("pairing warned")
    old = model.events
    at = old["t"].search_sorted(cut, "left")
    prefix, suffix_old = old.slice(0, at), old.slice(at)
    is_touched = pl.col(RAW_COLUMN).is_in(mem["seq"].implode())
    gone_blocks = suffix_old.filter(is_touched)["block_id"].unique()
    suffix_old = suffix_old.filter(~is_touched)
    _check_ghosts(model.blocks.filter(pl.col("block_id").is_in(gone_blocks.implode())),
                  new_blocks)
    texts, frames, stacks = model.texts, model.frames, model.stacks
    found = _texts(mem)
    if not found <= texts.keys():
        texts, frames, stacks = _intern(model.texts, found)
    restack = _stack_mapping(model.texts, texts)
    mem = _with_stack_ids(mem, texts)
    new_blocks = conform(_with_stack_ids(new_blocks, texts), "blocks")
    fresh = _event_rows(mem).with_columns(
        allocated=pl.lit(None, pl.Int64), active=pl.lit(None, pl.Int64),
        reserved=pl.lit(None, pl.Int64), **{RAW_COLUMN: pl.col("seq")}).select(
        *_EVENT_COLUMNS, "total", RAW_COLUMN).pipe(conform, "events")
    # The suffix in time order, numbered on from the prefix; the blocks of its events
    # (old ones by their old ids, the touched ones by their local ids) take their numbers.
    suffix = pl.concat([_restack(suffix_old, restack).with_columns(_fresh=pl.lit(False)),
                        fresh.with_columns(_fresh=pl.lit(True))]).sort("t", RAW_COLUMN)
    suffix = suffix.with_columns(seq=pl.int_range(at, at + pl.len(), dtype=pl.Int64))
    is_fresh = pl.col("_fresh")
    old_blocks = _seqs_from(model.blocks, suffix.filter(~is_fresh))
    new_blocks = _seqs_from(new_blocks, suffix.filter(is_fresh))
    blocks, old_to_new, local_to_new = _merge_blocks(old_blocks, gone_blocks, new_blocks,
                                                     restack)
    prefix = _restack(prefix, restack).with_columns(
        block_id=_remap(prefix["block_id"], old_to_new))
    suffix = suffix.with_columns(
        block_id=_remap_mixed(suffix["block_id"], suffix["_fresh"], old_to_new, local_to_new),
    )
    levels = _merge_facts(model.levels, _facts(suffix.filter(is_fresh), blocks))
    suffix = suffix.drop("_fresh")
    carry = _carry(prefix, model, blocks)
    suffix = _with_levels(suffix, blocks, levels, carry)
    alloc_suffix, reserved_suffix = _curves(suffix, blocks, carry)
    alloc = _before(model.alloc_curves, cut)
    reserved = _before(model.reserved_curves, cut)
    groups = _union_groups(model.groups, _groups(suffix, blocks, alloc_suffix, reserved_suffix))
    return _Model(**{
        **model.__dict__, "levelled": suffix.height,
        "events": _compact(pl.concat([prefix, suffix], rechunk=False)),
        "blocks": _compact(blocks), "levels": levels, "texts": texts, "frames": frames,
        "stacks": stacks, "groups": groups,
        "alloc_curves": _compact(pl.concat([alloc, alloc_suffix], rechunk=False)),
        "reserved_curves": _compact(pl.concat([reserved, reserved_suffix], rechunk=False))})


#: Chunks a kept frame may gather (one or two per update) before it is made one again.
_MAX_CHUNKS = 48


def _compact(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame``, rechunked once its columns hold many chunks (each update appends a
    chunk; gathers over many chunks are slower): a copy every few dozen updates."""
    return frame.rechunk() if frame.n_chunks() > _MAX_CHUNKS else frame


def _before(frame: pl.DataFrame, cut: int) -> pl.DataFrame:
    """The rows of a frame in time order before ``cut``."""
    return frame.slice(0, frame["t"].search_sorted(cut, "left"))


def _merge_blocks(old: pl.DataFrame, gone: pl.Series, new: pl.DataFrame,
                  restack: np.ndarray | None) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """The blocks in a fresh open's order (``_BLOCK_ORDER``) without the ``gone`` ones and
    with the ``new`` ones, and old and new ids to the merged ids.  The blocks sorting
    before every new one (device, then allocation time) keep their place and ids: only
    the rest is sorted again."""
    first = new.select("device", "t_alloc").row(0) if new.height else None
    head = 0
    if first is not None and first[1] is not None:
        device, t_alloc = pl.col("device"), pl.col("t_alloc")
        head = old.select(((device < first[0]) | ((device == first[0]) & (t_alloc < first[1])))
                          .sum()).item()
    rest = old.slice(head).filter(~pl.col("block_id").is_in(gone.implode()))
    merged = pl.concat([
        _restack(rest, restack).with_columns(_old=pl.col("block_id"),
                                             _local=pl.lit(None, pl.Int64)),
        new.with_columns(_old=pl.lit(None, pl.Int64), _local=pl.col("block_id")),
    ]).sort(_BLOCK_ORDER, nulls_last=False).with_columns(
        block_id=pl.int_range(head, head + pl.len(), dtype=pl.Int64))
    old_to_new = np.arange(old.height, dtype=np.int64)
    old_to_new[head:] = -1
    _map_into(old_to_new, merged, "_old")
    local_to_new = np.full(new.height, -1, dtype=np.int64)
    _map_into(local_to_new, merged, "_local")
    blocks = pl.concat([_restack(old.slice(0, head), restack), merged.drop("_old", "_local")],
                       rechunk=False)
    return blocks, old_to_new, local_to_new


def _map_into(mapping: np.ndarray, blocks: pl.DataFrame, column: str) -> None:
    rows = blocks.select(column, "block_id").drop_nulls(column)
    mapping[rows[column].to_numpy()] = rows["block_id"].to_numpy()


def _check_ghosts(gone: pl.DataFrame, new_blocks: pl.DataFrame) -> None:
    """Blocks from before the capture set every level's start: the same ones must stay."""
    def sums(blocks: pl.DataFrame) -> set:
        ghosts = blocks.filter(pl.col("ghost"))
        return set(ghosts.group_by("device", "pool").agg(pl.col("size").sum()).iter_rows())

    if sums(gone) != sums(new_blocks):
        raise _Rebuild("blocks from before the capture changed")


def _merge_facts(old: pl.DataFrame, fresh: pl.DataFrame) -> pl.DataFrame:
    """The device facts with the touched rows': a device's rule changing means a rebuild."""
    joined = old.join(fresh, on="device", how="full", coalesce=True, suffix="_new")
    changed = joined.filter(
        pl.col("has_total").is_not_null() & pl.col("has_total_new").is_not_null()
        & ((pl.col("has_total_new") & ~pl.col("has_total"))
           | (pl.col("has_driver_new") & ~pl.col("has_driver"))))
    if changed.height:
        raise _Rebuild("a device's reserved rule changed")
    return joined.select(
        "device",
        has_total=pl.col("has_total").fill_null(pl.col("has_total_new")),
        has_driver=pl.col("has_driver").fill_null(pl.col("has_driver_new")),
        start_alloc=pl.col("start_alloc").fill_null(pl.col("start_alloc_new")),
        start_driver=pl.col("start_driver").fill_null(pl.col("start_driver_new")),
    ).sort("device")


def _last_per_group(frame: pl.DataFrame, keys: list[str], aggs: dict[str, pl.Expr],
                    known: pl.DataFrame, where: pl.Expr | None = None,
                    prepare=None) -> pl.DataFrame:
    """Each group's last values in ``frame``, looking at its tail first: a window holding
    every ``known`` group answers as the whole frame would; else a wider one.
    ``prepare(part)`` adds columns first, ``where`` keeps some rows."""
    window = _WINDOW
    while True:
        whole = window >= frame.height
        part = frame if whole else frame.tail(window)
        if prepare is not None:
            part = prepare(part)
        if where is not None:
            part = part.filter(where)
        found = part.group_by(keys).agg(**aggs)
        if whole or found.height >= known.height:
            return found
        window *= 8


def _carry(prefix: pl.DataFrame, model: _Model, blocks: pl.DataFrame) -> _Carry:
    """The levels at the end of the prefix, per device and per group."""
    if prefix.is_empty():
        return _Carry.empty()
    groups = model.groups
    last = _last_per_group(prefix, ["device"], {"allocated": pl.col("allocated").last(),
                                               "reserved": pl.col("reserved").last()},
                           groups["device"])
    totals = _last_per_group(prefix, ["device", "process", "pool"],
                             {"last_total": pl.col("total").last()}, groups["total"],
                             pl.col("total").is_not_null())
    cut = int(prefix["t"][-1]) + 1
    alloc = _before(model.alloc_curves, cut)
    reserved = _before(model.reserved_curves, cut)
    reported = pl.col("block_pool").is_in(B.FRAMEWORK_POOLS) & pl.col("total").is_not_null()

    def with_pool(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.select("device", "process", "total").with_columns(
            block_pool=blocks["pool"].gather(frame["block_id"]))

    curve_total = _last_per_group(
        prefix, ["device", "process", "block_pool"], {"last_total": pl.col("total").last()},
        groups["curve_total"], reported, prepare=with_pool)
    return _Carry(
        allocated=dict(zip(last["device"].to_list(), last["allocated"].to_list(), strict=True)),
        reserved=dict(zip(last["device"].to_list(), last["reserved"].to_list(), strict=True)),
        total=totals,
        curve_alloc=_last_per_group(alloc, ["device", "component"],
                                    {"last": pl.col("bytes").last()}, groups["alloc"]),
        curve_reserved=_last_per_group(reserved, ["device", "component"],
                                       {"last": pl.col("bytes").last()},
                                       groups["reserved_curve"]),
        curve_total=curve_total,
    )


# -- markers ------------------------------------------------------------------------------


def _extend_markers(model: _Model, other: pl.DataFrame,
                    new_other: pl.DataFrame) -> tuple[pl.DataFrame, set]:
    """Markers before the markers' cut kept, those from it on made again from the rows.

    The cut is the earliest new row, moved back before any range that crosses it, so that
    before it every start is paired with an end before it, as ``timeline._marker_ranges``
    pairs them (first-in first-out per key).  A range still open before the cut (a start
    whose end has not come: a training step) goes with the rows after it, its start row
    first, as the first start of its key there; a lonely end moves the cut back to it."""
    if not new_other.height:
        return model.markers, model.marker_pairs
    pairs = model.marker_pairs | set(
        new_other.select("event", pl.col("etype").fill_null("")).unique().iter_rows())
    kinds = {pair: marker_kind(*pair) for pair in pairs}
    ranged = {k[0] for k in kinds.values() if k[1] is not None}
    instant = {k[0] for k in kinds.values() if k[1] is None}
    old = model.markers
    if ranged & instant or old.is_empty():
        return conform(markers_of(other), "markers"), pairs
    ranges = old.filter(pl.col("kind").is_in(list(ranged)))
    cut = int(new_other["t"].min())
    for _ in range(16):
        cut = _uncrossed(ranges, cut)
        opened = ranges.filter(pl.col("t_end").is_null() & (pl.col("t") < cut))
        starts = _open_starts(old, other, opened, cut, kinds)
        if starts is not None:
            break
        cut = int(opened["t"].min())  # a lonely end (or a start we cannot tell): from it
    else:
        return conform(markers_of(other), "markers"), pairs
    kept = _before(old, cut)
    made = conform(markers_of(pl.concat([starts, other.filter(pl.col("t") >= cut)])), "markers")
    if starts.height:  # the open starts' markers, in place: their ends may have come
        reopened = made.filter(pl.col("t") < cut).select("t", new_end="t_end")
        made = made.filter(pl.col("t") >= cut)
        at = kept.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("at"), "t").filter(
            pl.col("t").is_in(reopened["t"].implode())).join(reopened, on="t")
        kept = kept.with_columns(t_end=kept["t_end"].scatter(at["at"], at["new_end"]))
    return _compact(pl.concat([kept, made], rechunk=False)), pairs


def _uncrossed(ranges: pl.DataFrame, cut: int) -> int:
    """``cut`` moved back until no paired range has one end before it and one from it."""
    low = pl.min_horizontal("t", "t_end")
    high = pl.max_horizontal("t", "t_end")
    paired = ranges.filter(pl.col("t_end").is_not_null())
    while True:
        earliest = paired.filter((low < cut) & (high >= cut)).select(low.min()).item()
        if earliest is None:
            return cut
        cut = int(earliest)


def _open_starts(old: pl.DataFrame, other: pl.DataFrame, opened: pl.DataFrame, cut: int,
                 kinds: dict) -> pl.DataFrame | None:
    """The rows of the ranges still open before ``cut``, where each is a start row alone
    at its time (no other marker there); None where one is not (a lonely end)."""
    if not opened.height:
        return other.clear()
    times = opened["t"].unique().implode()
    rows = other.filter(pl.col("t").is_in(times) & (pl.col("t") < cut))
    phases = {kinds.get((e, t or ""), (None, None))[1]
              for e, t in rows.select("event", "etype").iter_rows()}
    alone = old.filter(pl.col("t").is_in(times)).height == rows.height == opened.height
    return rows if phases == {"start"} and alone else None
