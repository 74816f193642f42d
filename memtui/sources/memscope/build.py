"""msMemScope rows into the canonical model: events, blocks, levels, markers, stacks, calls.

Takes the :class:`~memtui.sources.memscope.read.RawFile` s of one capture (one file or every
file of a result folder) and builds the MemoryTrace, all in polars/numpy:

* blocks pair MALLOC and FREE (and the ACCESS rows between) on ``allocation_id`` within a
  process, or on (process, device, pointer, pool) where there is none.  In key and time
  order every MALLOC opens a block; a FREE closes the open one or, with none open, is a
  ghost block of its own; ACCESS rows belong to the block open at their time (or to the
  ghost the next FREE closes).  FREE rows without a device (2025 host frees) take the
  device of their pointer's MALLOC;
* events are the MALLOC/FREE/ACCESS rows sorted by time (then row), numbered in that
  order (``seq``, :mod:`~memtui.sources.common.event_axis`: the writer's row order is not
  time order), each with its place among the files' rows (``row``) and the DB's ``id``;
  blocks' ``seq_alloc``/``seq_free`` name their events on that axis; ``allocated`` counts the
  framework pools (PTA, PTA_WORKSPACE, ATB, MINDSPORE) per device, starting from the
  ghosts, which lived before the trace; ``reserved`` is the sum of each pool's last
  reported ``total`` or, on a device whose pools report none, the live driver allocations
  (HAL, HOST_PINNED).  ``curves`` hold the same per pool (series ``Allocated`` and
  ``Reserved``, ``component`` = the pool), as Insight draws a line per Event Type;
* stacks: distinct Python and C call-stack texts parsed once into frames;
* segments: the HAL blocks (driver allocations, aclrtMalloc) that the framework caching
  allocators carve their blocks from, kind ``driver``, with ``block_id`` (an extension
  column) naming the HAL block each one is; the HAL blocks stay in ``blocks`` too;
* markers and calls: :mod:`memscope_timeline`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

from memtui.model import (
    DeviceInfo,
    MemoryTrace,
    TraceMeta,
    conform,
    constants_as_scalars,
    empty_frame,
)
from memtui.progress import Phases
from memtui.sources.common.event_axis import time_ordered_axis
from memtui.sources.memscope.pairing import EVENT_CODES, Runs, block_runs, row_keys
from memtui.sources.memscope.read import ATTR_SIZE, MEMORY_COLUMNS, RAW_COLUMNS, RawFile
from memtui.sources.memscope.timeline import calls_of, markers_of

SOURCE = "msmemscope"
FRAMEWORK_POOLS = ("PTA", "PTA_WORKSPACE", "ATB", "MINDSPORE")
DRIVER_POOLS = ("HAL", "HOST_PINNED")
SEGMENT_POOL = "HAL"
ACTIONS = {"MALLOC": "alloc", "FREE": "free", "ACCESS": "access"}
#: The order of block ids: by allocation, blocks from before the capture by their free.
#: (A time, then a row: the same order whether rows are numbered as written or in time
#: order, as ``live`` numbers the blocks it pairs again.)
BLOCK_ORDER = ["device", "t_alloc", "seq_alloc", "t_free", "seq_free"]

Progress = Callable[[float, str], None] | None
#: The share of the progress bar reading the rows fills (the build fills the rest).
READ_SHARE = 0.6


def build_trace(files: list[RawFile], path: Path, progress: Progress = None) -> MemoryTrace:
    """The MemoryTrace of ``files`` (all of one capture)."""
    warnings = [w for f in files for w in f.warnings]
    memory, other, trace = _concat(files)
    start, end = time_bounds(memory, other, trace)
    phases = Phases(progress)
    # The markers need only the other rows: built in a thread meanwhile (polars lets go of
    # the GIL), on the core the memory rows' many small steps leave idle.
    with ThreadPoolExecutor(max_workers=1) as worker:
        marking = worker.submit(markers_of, other)
        # the other rows are the markers' alone: they go as soon as the markers are built
        # (with the pairing's peak still ahead) instead of living through the build
        other_rows = other.height
        del other
        rows = memory.height
        pairing = phases.start("pairing allocations", (READ_SHARE, 0.75), rows)
        memory = resolved_memory_columns(memory, warnings)
        memory, blocks = pair_blocks(memory, start, warnings)
        pairing.finish(rows)
        interning = phases.start("interning call stacks", (0.75, 0.8), rows)
        memory, blocks, frames, stacks = _stacks(memory, blocks)
        interning.finish(rows)
        levelling = phases.start("levels", (0.8, 0.9), rows, unit="events")
        events, levels, curves = _events(memory, blocks)
        del memory
        events, blocks = time_ordered_axis(events, blocks)
        levelling.finish(events.height)
        marking_phase = phases.start("markers and calls", (0.9, 0.99), other_rows)
        calls = calls_of(trace, events, start, end, warnings)
        markers = marking.result()
        marking_phase.finish()
    segments = driver_segments(blocks)
    devices = device_infos(events, blocks, levels, markers, calls, segments)
    meta = TraceMeta(
        source=SOURCE, path=str(path), devices=devices, warnings=warnings,
        extra={"files": [str(f.path) for f in files],
               "layouts": sorted({f.layout for f in files if f.layout}),
               "trace_start_ns": start, "trace_end_ns": end},
    )
    return MemoryTrace(
        meta=meta, events=_model_frame(events, "events", _EVENT_CONSTANTS),
        blocks=_model_frame(blocks, "blocks", _BLOCK_CONSTANTS),
        segments=_model_frame(segments, "segments"),
        frames=frames, stacks=stacks, calls=_model_frame(calls, "calls"),
        curves=_model_frame(curves, "curves"),
        markers=_model_frame(markers, "markers"),
    )


def _model_frame(frame: pl.DataFrame, name: str, constants: tuple[str, ...] = ()
                 ) -> pl.DataFrame:
    """``frame`` as the model holds it: ``constants`` of one value kept as one value, the
    schema's columns in its types, and the texts the reader held as categoricals (its
    ``_MEMORY_LABELS``) back to texts."""
    frame = conform(constants_as_scalars(frame, constants), name)
    labels = [column for column, dtype in frame.schema.items() if dtype == pl.Categorical]
    return frame.with_columns(pl.col(labels).cast(pl.String)) if labels else frame


#: Columns often of one value in a whole capture (one device, one process and thread, no
#: stream, no C stacks): kept as one value, not 8 to 16 bytes a row in the trace and again
#: in each layer's view (see :func:`~memtui.model.constants_as_scalars`).
_EVENT_CONSTANTS = ("device", "stream", "pool", "owner", "process", "thread", "c_stack_id",
                    "event_type", "name")
_BLOCK_CONSTANTS = ("device", "stream", "pool", "owner", "process", "thread", "c_stack_id",
                    "requested_size", "flags", "t_free_requested", "seq_free_requested",
                    "inefficient_type", "first_access", "last_access", "max_access_gap")


# -- gathering the files ----------------------------------------------------------------


def _concat(files: list[RawFile]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Memory, other and trace rows of every file, with a ``seq`` unique across files.

    The files give their frames up, so that each stage can drop what it no longer needs.
    """
    memory, other, trace = [], [], []
    offset = 0
    for f in files:
        size = 0
        for frame, out in ((f.memory, memory), (f.other, other), (f.trace, trace)):
            if frame is not None and frame.height:
                # (Only later files pay for a new column: it realigns the frame's chunks.)
                out.append(frame.with_columns(seq=pl.col("seq") + offset) if offset else frame)
                size = max(size, int(frame["seq"].max()) + 1)
        f.memory = f.other = f.trace = None  # the rows live on in the frames built here only
        offset += size
    return (stacked_parts(memory, MEMORY_EMPTY), stacked_parts(other, OTHER_EMPTY),
            stacked_parts(trace, TRACE_EMPTY))


_RAW_SCHEMA = {c: (pl.Int64 if c in ("id", "t", "pid", "tid") else pl.String) for c in RAW_COLUMNS}
_COMMON = {"row": pl.Int64, "seq": pl.Int64, "file_device": pl.String}
OTHER_EMPTY = {k: v for k, v in {**_COMMON, **_RAW_SCHEMA}.items()
                if k not in ("py_stack", "c_stack")}
_MEMORY_TYPES = {**_RAW_SCHEMA, "seq": pl.Int64, "py_stack": pl.Categorical,
                 "c_stack": pl.Categorical, "aid": pl.Int64, "size": pl.Int64,
                 "total": pl.Int64, "owner": pl.String, "ineff": pl.String, "device": pl.String,
                 "addr": pl.UInt64, "pool": pl.String}
MEMORY_EMPTY = {name: _MEMORY_TYPES[name] for name in MEMORY_COLUMNS}
TRACE_EMPTY = {**_COMMON, "func": pl.String, "start": pl.Int64, "end": pl.Int64,
                "tid": pl.Int64, "pid": pl.Int64}


def stacked_parts(parts: list[pl.DataFrame], schema: dict) -> pl.DataFrame:
    """The parts one above the other, without copying them where their columns agree."""
    if not parts:
        return pl.DataFrame(schema=schema)
    if len(parts) == 1:
        return parts[0]
    if all(p.schema == parts[0].schema for p in parts):
        return pl.concat(parts, rechunk=False)
    return pl.concat(parts, how="diagonal_relaxed")


def time_bounds(memory: pl.DataFrame, other: pl.DataFrame,
            trace: pl.DataFrame) -> tuple[int | None, int | None]:
    """First and last timestamp of the capture (rows and known python-trace times)."""
    lows = [memory["t"].min(), other["t"].min(), trace["start"].min(), trace["end"].min()]
    highs = [memory["t"].max(), other["t"].max(), trace["start"].max(), trace["end"].max()]
    lows = [int(v) for v in lows if v is not None]
    highs = [int(v) for v in highs if v is not None]
    return (min(lows) if lows else None, max(highs) if highs else None)


# -- memory rows ------------------------------------------------------------------------


def resolved_memory_columns(memory: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """FREE rows without a device get their MALLOC's (the reader has read the rest:
    devices, addresses, pools)."""
    return _resolve_free_devices(memory, warnings)


def _resolve_free_devices(memory: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """Rows keyed by pointer with no device take that of the pointer's MALLOC in the process.

    The latest MALLOC before the row, else the first after it (a free of memory
    allocated before the trace, whose address is allocated again later).
    """
    lost = pl.col("device").is_null() & pl.col("aid").is_null()
    if not memory.select(lost.any()).item():
        return memory
    keys = ["pid", "addr", "pool"]
    mallocs = memory.filter((pl.col("event") == "MALLOC") & pl.col("device").is_not_null()).select(
        "t", *keys, found=pl.col("device")).sort("t")
    lost_rows = memory.filter(lost).select("seq", "t", *keys).sort("t")
    found = [lost_rows.join_asof(mallocs, on="t", by=keys, strategy=strategy,
                                 check_sortedness=False)
             .select("seq", pl.col("found").alias(strategy))
             for strategy in ("backward", "forward")]
    found = found[0].join(found[1], on="seq").select(
        "seq", found=pl.col("backward").fill_null(pl.col("forward")))
    memory = memory.join(found, on="seq", how="left", maintain_order="left").with_columns(
        device=pl.col("device").fill_null(pl.col("found"))).drop("found")
    still = memory.filter(lost).height
    if still:
        warnings.append(f"{still} memory rows with no device and no MALLOC of their pointer "
                        "skipped")
    return memory.filter(~lost)


def _time_ordered(memory: pl.DataFrame) -> pl.DataFrame:
    """The rows sorted by (time, row): ``memory``'s columns move one by one into the frame
    returned (never two copies of the rows at once; ``memory`` is left empty); rows already
    in that order (a DB written in time order) as they are."""
    if in_time_order(memory):
        return memory
    # (seq is unique; where the rows come in its order, as read, a stable sort by time
    # alone gives the same order, faster)
    keys = ["t"] if memory["seq"].is_sorted() else ["t", "seq"]
    order = memory.select(pl.arg_sort_by(keys, maintain_order=True)).to_series()
    return gathered(memory, order)


def gathered(frame: pl.DataFrame, order: pl.Series) -> pl.DataFrame:
    """``frame``'s rows at ``order``, its columns moved out one by one (``frame`` is left
    empty) and gathered two at a time: one more column held at once than one by one, half
    the time on two cores.  (Each column is made one chunk first: a gather across the
    chunks of each read costs five times one from a single chunk.)"""
    columns = [frame.drop_in_place(name) for name in list(frame.columns)]

    def gather(index: int) -> pl.Series:
        column, columns[index] = columns[index], None  # (the source goes once gathered)
        return column.rechunk().gather(order)

    with ThreadPoolExecutor(max_workers=2) as workers:
        return pl.DataFrame(list(workers.map(gather, range(len(columns)))))


def pair_blocks(memory: pl.DataFrame, start: int | None,
            warnings: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Pair rows into blocks (:mod:`memscope_pairing`); return the rows in time order with
    ``block_id``, and the blocks, numbered in :data:`BLOCK_ORDER`.  A block no row names a
    device of is dropped with its rows (one warning counts them).  ``memory`` is consumed
    (its columns move into the rows returned: pass a ``clone()`` to keep it)."""
    memory = _time_ordered(memory)
    keys = row_keys(memory)
    event = memory["event"].replace_strict(EVENT_CODES, default=3, return_dtype=pl.UInt8)
    runs = block_runs(keys, event.to_numpy(), memory["t"].to_numpy())
    del keys
    blocks = _block_rows(memory, runs, start)
    block_device = blocks["device"].gather(pl.Series(runs.block))
    missing = int(block_device.null_count())
    memory = memory.with_columns(device=pl.col("device").fill_null(block_device),
                                 _run=pl.Series(runs.block))
    if missing:
        warnings.append(f"{missing} memory rows whose block has no device skipped")
        memory = memory.filter(pl.col("device").is_not_null())
        blocks = blocks.filter(pl.col("device").is_not_null())
    # numbered in the model's order; blocks tied in it (alive from before the capture
    # and never freed, on one device) by their keys, then their first row
    ties = ["_family", "process", "_aid", "_device", "_addr", "_pool", "_first"]
    blocks = blocks.sort([*BLOCK_ORDER, *ties], descending=[False] * 5 + [True] + [False] * 6,
                         nulls_last=False, maintain_order=True).with_columns(
        block_id=pl.int_range(pl.len(), dtype=pl.Int64))
    block_of_run = np.full(runs.first_row.size, -1, dtype=np.int64)
    block_of_run[blocks["_run"].to_numpy()] = np.arange(blocks.height)
    memory = memory.with_columns(
        block_id=pl.Series(block_of_run[memory["_run"].to_numpy()], dtype=pl.Int64)
    ).drop("_run")
    return memory, blocks.drop("_run", *(c for c in ties if c.startswith("_")))


def _block_rows(memory: pl.DataFrame, runs: Runs, start: int | None) -> pl.DataFrame:
    """Blocks from their first and last rows (one per run, in the runs' order)."""
    cols = ["t", "seq", "event", "device", "addr", "pool", "size", "pid", "tid", "aid",
            "owner", "ineff", "py_stack", "c_stack"]
    narrow = memory.select(cols)
    first = narrow[runs.first_row]
    last = narrow[runs.last_row]
    opened = first["event"] == "MALLOC"
    closed = last["event"] == "FREE"
    n = runs.first_row.size
    accessed = pl.Series(runs.accesses > 0)
    blocks = pl.DataFrame({
        "_run": np.arange(n, dtype=np.int64),
        "device": first["device"].fill_null(last["device"]),
        "addr": first["addr"],
        "size": _pick(opened, first["size"], _pick(closed, last["size"], first["size"])),
        "t_alloc": _pick(opened, first["t"], pl.Series([start] * n, dtype=pl.Int64)),
        "seq_alloc": _pick(opened, first["seq"], None),
        "t_free": _pick(closed, last["t"], None),
        "seq_free": _pick(closed, last["seq"], None),
        "pool": _pick(opened | closed, _pick(opened, first["pool"], last["pool"]), first["pool"]),
        "owner": _pick(opened, first["owner"], None),
        "inefficient_type": _pick(opened, first["ineff"], None),
        "process": first["pid"], "thread": first["tid"],
        "py_stack": _pick(opened, first["py_stack"], last["py_stack"]),
        "c_stack": _pick(opened, first["c_stack"], last["c_stack"]),
        "ghost": ~opened,
        "first_access": _pick(accessed, pl.Series(runs.first_access), None),
        "last_access": _pick(accessed, pl.Series(runs.last_access), None),
        "max_access_gap": _pick(accessed, pl.Series(runs.max_gap), None),
        # the keys, to order blocks the model's order leaves tied
        "_family": first["aid"].is_not_null(), "_aid": first["aid"],
        "_device": first["device"], "_addr": first["addr"], "_pool": first["pool"],
        "_first": first["seq"],
    })
    return _sizes_from_access(blocks, memory, runs.first_row)


def _sizes_from_access(blocks: pl.DataFrame, memory: pl.DataFrame, first_rows: np.ndarray):
    """Blocks seen only through ACCESS rows take the size those rows' Attr names."""
    missing = blocks["size"].is_null().to_numpy()
    if not missing.any():
        return blocks
    attr = memory["attr"].gather(pl.Series(first_rows[missing]))
    found = attr.str.extract(ATTR_SIZE, 1).cast(pl.Int64, strict=False).abs()
    sizes = blocks["size"].scatter(np.flatnonzero(missing), found)
    return blocks.with_columns(size=sizes)


def _pick(mask: pl.Series, yes: pl.Series, no) -> pl.Series:
    """Element-wise ``yes where mask else no`` (``no`` a Series or None)."""
    frame = pl.DataFrame({"m": mask, "y": yes})
    if no is None:
        return frame.select(pl.when("m").then("y")).to_series()
    return frame.with_columns(n=no).select(pl.when("m").then("y").otherwise("n")).to_series()


# -- call stacks ------------------------------------------------------------------------

_PY_FRAME = r"^(?<filename>.*)\((?<line>\d+)\): (?<name>.*)$"
_C_FRAME = r"^(?<filename>[^(\[]*)\((?<name>[^)]*)\)\s*\[(?<addr>0x[0-9a-fA-F]+)\]$"


def _stacks(memory: pl.DataFrame, blocks: pl.DataFrame):
    """Intern the distinct stack texts of rows and blocks; replace texts by ``stack_id``.

    The texts are categoricals (read that way): only the distinct ones are parsed, and
    rows find their stack by category code.  ``stack_id`` is the Python stack, or the C
    stack where there is no Python one; ``c_stack_id`` (an extension column) is always
    the C stack.
    """
    distinct = pl.concat([memory["py_stack"].unique(), memory["c_stack"].unique()]).drop_nulls()
    distinct = distinct.unique()
    frames, stack_of_text = parse_stacks(distinct.cast(pl.String))
    frames_df = conform(frames, "frames")
    stacks_df = conform(stack_of_text.select("stack_id", "frame_ids").unique("stack_id")
                        .sort("stack_id"), "stacks")
    codes = distinct.to_physical().to_numpy().astype(np.int64)
    lookup = np.full(int(codes.max()) + 1 if codes.size else 1, -1, dtype=np.int64)
    by_text = dict(zip(stack_of_text["text"].to_list(), stack_of_text["stack_id"].to_list(),
                       strict=True))
    lookup[codes] = [by_text.get(t, -1) for t in distinct.cast(pl.String).to_list()]

    def ids(column: pl.Series) -> pl.Series:
        physical = column.to_physical()
        found = lookup[physical.fill_null(0).to_numpy().astype(np.int64)]
        found[physical.is_null().to_numpy()] = -1
        return pl.Series(found, dtype=pl.Int32).replace(-1, None)

    def with_ids(df: pl.DataFrame) -> pl.DataFrame:
        py, c = ids(df["py_stack"]), ids(df["c_stack"])
        return df.with_columns(stack_id=py.fill_null(c), c_stack_id=c).drop("py_stack", "c_stack")

    return with_ids(memory), with_ids(blocks), frames_df, stacks_df


def parse_stacks(texts: pl.Series) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(frames, one row per text with ``text, stack_id, frame_ids``), vectorised."""
    empty_stacks = pl.DataFrame(schema={"text": pl.String, "stack_id": pl.Int32,
                                        "frame_ids": pl.List(pl.Int32)})
    if texts.len() == 0:
        return empty_frame("frames"), empty_stacks
    clean = texts.str.strip_chars().str.replace(r'^"([\s\S]*)"$', "$1").str.strip_chars()
    table = pl.DataFrame({"text": texts, "clean": clean}).filter(
        (pl.col("clean") != "") & (pl.col("clean") != "NA"))
    lines = table.with_columns(line=pl.col("clean").str.split("\n")).explode("line").with_columns(
        pl.col("line").str.strip_chars()).filter(pl.col("line") != "")
    if lines.is_empty():
        return empty_frame("frames"), empty_stacks
    py = pl.col("line").str.extract_groups(_PY_FRAME)
    c = pl.col("line").str.extract_groups(_C_FRAME)
    lines = lines.with_columns(py=py, c=c).with_columns(
        filename=pl.coalesce(pl.col("py").struct.field("filename"),
                             pl.col("c").struct.field("filename").str.strip_chars(), pl.lit("")),
        line_no=pl.col("py").struct.field("line").cast(pl.Int64, strict=False).fill_null(0),
        name=pl.coalesce(pl.col("py").struct.field("name"),
                         pl.col("c").struct.field("name").replace("", None),
                         pl.col("c").struct.field("addr"), pl.col("line")),
    )
    frames = lines.select("filename", pl.col("line_no").alias("line"), "name").unique().sort(
        "filename", "line", "name").with_columns(frame_id=pl.int_range(pl.len(), dtype=pl.Int32))
    lines = lines.join(frames, left_on=["filename", "line_no", "name"],
                       right_on=["filename", "line", "name"], how="left", maintain_order="left")
    per_text = lines.group_by("text", maintain_order=True).agg(frame_ids=pl.col("frame_id"))
    keyed = per_text.with_columns(key=pl.col("frame_ids").cast(pl.List(pl.String)).list.join(","))
    distinct = keyed.select("key").unique().sort("key").with_columns(
        stack_id=pl.int_range(pl.len(), dtype=pl.Int32))
    stacks = keyed.join(distinct, on="key").select(
        "text", "stack_id", pl.col("frame_ids").cast(pl.List(pl.Int32)))
    return frames.select("frame_id", "filename", "line", "name"), stacks


# -- events and levels ------------------------------------------------------------------


def in_time_order(rows: pl.DataFrame) -> bool:
    """Whether ``rows`` are already sorted by (t, seq), strictly (one pass, no sort)."""
    if rows.height < 2 or rows["t"].null_count() or rows["seq"].null_count():
        return rows.height < 2
    if not rows["t"].is_sorted():  # (stops at the first row out of order)
        return False
    dt = np.diff(rows["t"].to_numpy())
    ds = np.diff(rows["seq"].to_numpy())
    return bool(np.all((dt > 0) | ((dt == 0) & (ds > 0))))


def _events(memory: pl.DataFrame, blocks: pl.DataFrame):
    """Events sorted by time with their levels, per-device level facts, per-pool curves.

    Blocks are indexed by ``block_id``; the wide rows are sorted once and never joined.
    ``memory`` is consumed: its columns move into the events one by one (so that the
    rows are never held twice, in file order and in time order).
    """
    block = pl.Series(memory["block_id"])
    memory.drop_in_place("aid")
    memory.drop_in_place("ineff")
    memory.insert_column(memory.width, blocks["size"].fill_null(0).gather(block)
                         .alias("block_size"))
    memory.insert_column(memory.width, blocks["pool"].gather(block).alias("block_pool"))
    del block
    if in_time_order(memory):  # rows written in time order need no sort of the wide rows
        events = memory.clone()
    else:  # (seq is unique: the order is total, as a sort by both would give)
        order = memory.select(pl.arg_sort_by("t", "seq")).to_series()
        events = gathered(memory, order)
    pool = pl.col("block_pool")
    sign = pl.when(pl.col("event") == "MALLOC").then(1).when(pl.col("event") == "FREE").then(
        -1).otherwise(0)
    framework = pool.is_in(FRAMEWORK_POOLS)
    driver = pool.is_in(DRIVER_POOLS)
    reported = framework & pl.col("total").is_not_null()
    ghosts = blocks.filter(pl.col("ghost"))
    facts = events.group_by("device").agg(
        has_total=reported.any(), has_driver=driver.any(),
    ).join(ghosts.group_by("device").agg(
        start_alloc=pl.col("size").filter(pl.col("pool").is_in(FRAMEWORK_POOLS)).sum(),
        start_driver=pl.col("size").filter(pl.col("pool").is_in(DRIVER_POOLS)).sum(),
    ), on="device", how="left").with_columns(pl.col("start_alloc", "start_driver").fill_null(0))

    def per_device(column: str) -> pl.Expr:  # (one device: its value, not a lookup a row)
        if facts.height == 1:
            return pl.lit(facts[column][0], dtype=facts.schema[column])
        mapping = dict(zip(facts["device"].to_list(), facts[column].to_list(), strict=True))
        return pl.col("device").replace_strict(mapping, default=None,
                                               return_dtype=facts.schema[column])

    def running(expr: pl.Expr) -> pl.Expr:  # a running sum per device (one: no grouping)
        return expr.cum_sum() if facts.height == 1 else expr.cum_sum().over("device")

    events = events.with_columns(pool=pl.col("pool").fill_null(pool))
    previous = over(pl.col("total").forward_fill().shift(1),
                    varying(events, ["device", "pid", "pool"]))
    total_delta = pl.when(reported).then(pl.col("total") - previous.fill_null(0)).otherwise(0)
    events = events.with_columns(
        allocated=per_device("start_alloc") + running(
            pl.when(framework).then(sign * pl.col("block_size")).otherwise(0)),
        reserved=pl.when(per_device("has_total")).then(
            pl.when(running(reported) > 0).then(running(total_delta)))
        .when(per_device("has_driver")).then(
            per_device("start_driver") + running(
                pl.when(driver).then(sign * pl.col("block_size")).otherwise(0))),
    ).with_columns(
        active=pl.col("allocated"),
        action=pl.col("event").replace_strict(ACTIONS, return_dtype=pl.String),
        stream=pl.lit(None, pl.Int64),
        size=pl.col("size").fill_null(pl.col("block_size")),
    ).rename({"etype": "event_type", "pid": "process", "tid": "thread"})
    ends = events.group_by("device").agg(reserved_at_end=pl.col("reserved").drop_nulls().last())
    levels = facts.join(ends, on="device", how="left")
    curves = _pool_curves(events.select("t", "device", "process", "event", "block_pool",
                                        "block_size", "total"), ghosts)
    keep = ["t", "seq", "device", "action", "addr", "size", "stream", "pool", "block_id",
            "stack_id", "owner", "allocated", "active", "reserved",
            "id", "event_type", "name", "process", "thread", "attr", "c_stack_id"]
    return events.select(keep), levels, curves


def _pool_curves(events: pl.DataFrame, ghosts: pl.DataFrame) -> pl.DataFrame:
    """One level per pool (``component``), as MindStudio Insight draws one line per Event
    Type: ``Allocated`` for every pool from the pairs (from its ghosts up), ``Reserved``
    for the framework pools from their reported ``total``."""
    pool = pl.col("block_pool")
    sign = pl.when(pl.col("event") == "MALLOC").then(1).otherwise(-1)
    starts = ghosts.group_by("device", "pool").agg(start=pl.col("size").sum())
    # (a key of one value in every event is one in any of their rows)
    device_pool = varying(events, ["device", "block_pool"])
    allocated = events.filter(pl.col("event").is_in(["MALLOC", "FREE"])).select(
        "t", "device", "block_pool", delta=sign * pl.col("block_size"),
    ).join(starts, left_on=["device", "block_pool"], right_on=["device", "pool"], how="left",
           maintain_order="left").select(
        "t", "device", series=pl.lit("Allocated"), component="block_pool",
        bytes=pl.col("start").fill_null(0) + over(pl.col("delta").cum_sum(), device_pool))
    reported = events.filter(pool.is_in(FRAMEWORK_POOLS) & pl.col("total").is_not_null())
    previous = over(pl.col("total").shift(1),
                    varying(events, ["device", "process", "block_pool"]))
    reserved = reported.select(
        "t", "device", series=pl.lit("Reserved"), component=pool,
        bytes=over((pl.col("total") - previous.fill_null(0)).cum_sum(), device_pool))
    return pl.concat([allocated, reserved])


def varying(frame: pl.DataFrame, keys: list[str]) -> list[str]:
    """``keys`` but those of one value in ``frame`` (one device, one process: the usual
    capture), which split no window."""
    def one_value(column: pl.Series) -> bool:
        nulls = column.null_count()
        if nulls:
            return nulls == column.len()
        physical = column.to_physical()
        return column.len() == 0 or physical.min() == physical.max()

    return [key for key in keys if not one_value(frame[key])]


def over(expr: pl.Expr, keys: list[str]) -> pl.Expr:
    """``expr`` per group of ``keys`` (:func:`varying`), or over all rows where there are
    none: the same values, and a window over three keys costs twice one over one."""
    return expr.over(keys) if keys else expr


# -- segments ---------------------------------------------------------------------------


def driver_segments(blocks: pl.DataFrame) -> pl.DataFrame:
    """One ``driver`` segment per HAL block, in (device, block_id) order; ``block_id`` is
    kept after the contract columns."""
    hal = blocks.filter(pl.col("pool") == SEGMENT_POOL).sort("device", "block_id")
    return hal.select(
        segment_id=pl.int_range(pl.len(), dtype=pl.Int64), device="device", addr="addr",
        size="size", t_alloc="t_alloc", t_free="t_free", stream=pl.lit(None, pl.Int64),
        pool_id=pl.lit(None, pl.String), kind=pl.lit("driver"), seq_alloc="seq_alloc",
        seq_free="seq_free", ghost="ghost", block_id="block_id",
    )


# -- devices ----------------------------------------------------------------------------


def device_infos(events: pl.DataFrame, blocks: pl.DataFrame, levels: pl.DataFrame,
             markers: pl.DataFrame, calls: pl.DataFrame,
             segments: pl.DataFrame) -> list[DeviceInfo]:
    names = set()
    for frame in (events, markers, calls):
        if frame.height:
            names |= set(frame["device"].drop_nulls().unique().to_list())
    facts = {row["device"]: row for row in levels.iter_rows(named=True)}
    live = blocks.filter(pl.col("t_free").is_null() & pl.col("pool").is_in(FRAMEWORK_POOLS))
    live = dict(live.group_by("device").agg(pl.col("size").sum()).iter_rows())
    segments_at_end = dict(segments.group_by("device").agg(
        pl.col("t_free").is_null().sum()).iter_rows())
    devices = []
    for name in sorted(names, key=_device_sort_key):
        fact = facts.get(name)
        info = DeviceInfo(name=name, kind="host" if name == "host" else "npu")
        if fact is not None:
            info.start_allocated = int(fact["start_alloc"])
            info.allocated_at_end = int(live.get(name) or 0)
            info.start_reserved = (None if fact["has_total"] or not fact["has_driver"]
                                   else int(fact["start_driver"]))
            info.reserved_at_end = fact["reserved_at_end"]
        if name in segments_at_end:
            info.has_segments = True
            info.segments_at_end = int(segments_at_end[name])
        devices.append(info)
    return devices


def _device_sort_key(name: str) -> tuple[int, int, str]:
    kind, _, index = name.partition(":")
    if index.isdigit():
        return (0, int(index), kind)
    return (1, 0, name)
