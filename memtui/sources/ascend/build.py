"""From the Ascend profiler's intermediate frames (one :class:`RankData` per rank) to the model.

Owns the rules of ../shared/formats/ascend_profiler.md section 5 (how MindStudio Insight
draws the Memory tab) and section 6 (the PTA+GE running sum), the device names, and the
time origin: every time of a rank is in ns from that rank's first timestamp (the least of
its memory records, operator times, GE events and module samples), as Insight's x axis
is; the absolute start is kept in ``meta.extra["rank_start_ns"][device]``.  The series
names are listed in ``sources/ascend/__init__.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from memtui.model import DeviceInfo, MemoryTrace, TraceMeta, conform
from memtui.sources.ascend import frames
from memtui.sources.common.event_axis import time_ordered_axis
from memtui.sources.common.lifetimes import pair_by_address

SOURCE = "ascend_profiler"
UINT32_MAX = 4294967295
MERGED = ("PTA+GE", "MindSpore+GE")
FRAMEWORKS = {"PTA+GE": "PTA", "MindSpore+GE": "MindSpore"}

# Series names (documented in sources/ascend/__init__.py).
OPERATORS_ALLOCATED = "Operators Allocated"
OPERATORS_ACTIVATED = "Operators Activated"
OPERATORS_RESERVED = "Operators Reserved"
APP_RESERVED = "App Reserved"
WORKSPACE_ALLOCATED = "Workspace Allocated"
WORKSPACE_RESERVED = "Workspace Reserved"
GROUP_ALLOCATED = "Allocated"
GROUP_ACTIVATED = "Activated"
GROUP_RESERVED = "Reserved"
MODULE_RESERVED = "Module Reserved"
STATIC_SIZE = "Static Size"
STATIC_TOTAL = "Static Total Size"

_BLOCK_EXTRAS = ("t_active_free", "alloc_allocated", "alloc_reserved", "alloc_active",
                 "free_allocated", "free_reserved", "free_active")


@dataclass
class RankData:
    """Everything read for one rank (one profiler folder, or one file)."""

    root: Path
    rank: int | None = None
    host: str | None = None
    framework: str = "pytorch"  # "pytorch", "mindspore" or "msprof"
    records: pl.DataFrame = field(default_factory=lambda: frames.empty("records"))
    operators: pl.DataFrame = field(default_factory=lambda: frames.empty("operators"))
    op_events: pl.DataFrame = field(default_factory=lambda: frames.empty("op_events"))
    modules: pl.DataFrame = field(default_factory=lambda: frames.empty("modules"))
    static: pl.DataFrame = field(default_factory=lambda: frames.empty("static"))
    rank_of_device: dict[int, int] = field(default_factory=dict)
    chips: dict[int, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.root.name or str(self.root)

    def tables(self) -> list[pl.DataFrame]:
        return [self.records, self.operators, self.op_events, self.modules, self.static]

    def start_ns(self) -> int | None:
        """The rank's first timestamp (its time origin)."""
        candidates = [self.records["ts"].min(), self.operators["ts_alloc"].min(),
                      self.operators["ts_free"].min(), self.op_events["ts"].min(),
                      self.modules["ts"].min()]
        values = [int(v) for v in candidates if v is not None]
        return min(values) if values else None


def build_trace(path: Path, ranks: list[RankData], warnings: list[str]) -> MemoryTrace:
    """The MemoryTrace of ``ranks`` (device names made unique across them)."""
    names = _device_names(ranks)
    devices: list[DeviceInfo] = []
    parts: dict[str, list[pl.DataFrame]] = {k: [] for k in ("events", "blocks", "curves")}
    starts: dict[str, int] = {}
    inference: dict[str, bool] = {}
    static_ops = []
    for index, rank in enumerate(ranks):
        start = rank.start_ns() or 0
        mapping = names[index]
        rank_tables = _with_devices(rank, mapping, start)
        curve_records = _curve_records(rank_tables)
        for dev, name in mapping.items():
            starts[name] = start
            curves, is_inference = _device_curves(curve_records, name)
            inference[name] = is_inference
            parts["curves"].append(curves)
            devices.append(_device_info(rank, dev, name, curves))
        parts["curves"].append(_module_curves(rank_tables["modules"]))
        static_curves, ops = _static_curves(rank_tables["static"])
        parts["curves"].append(static_curves)
        static_ops.append(ops)
        events, blocks = _events_and_blocks(rank, rank_tables, warnings)
        parts["events"].append(events)
        parts["blocks"].append(blocks)
    blocks = _concat(parts["blocks"], "blocks")
    blocks = blocks.with_columns(block_id=pl.int_range(0, pl.len(), dtype=pl.Int64))
    events = _relink_block_ids(_concat(parts["events"], "events"), blocks)
    events = events.sort("t", "device", "seq", maintain_order=True)
    # memory records and GE events are numbered table by table: one time-ordered axis
    events, blocks = time_ordered_axis(events, blocks, per_device=True)
    curves = _concat(parts["curves"], "curves")
    hosts = {r.host for r in ranks if r.host}
    meta = TraceMeta(
        source=SOURCE, path=str(path), devices=devices, time_unit="ns",
        host=hosts.pop() if len(hosts) == 1 else None, warnings=warnings,
        extra={
            "rank_start_ns": starts,
            "inference": inference,
            "ranks": [_rank_extra(r, names[i]) for i, r in enumerate(ranks)],
            "static_ops": pl.concat(static_ops) if static_ops else None,
        },
    )
    return MemoryTrace(meta=meta, events=events, blocks=blocks.drop("link", strict=False),
                       curves=curves)


# -- devices -----------------------------------------------------------------------------

def _device_names(ranks: list[RankData]) -> list[dict[int | None, str]]:
    """Per rank: NPU index (None: host / unnamed) -> device name, unique across ranks."""
    wanted: list[dict[int | None, tuple[int | None, str]]] = []
    for rank in ranks:
        devs = set()
        for df in rank.tables():
            devs |= set(df["dev"].unique().to_list())
        named = sorted(d for d in devs if d is not None)
        if None in devs and len(named) != 1:
            named_devs: list[int | None] = [*named, None]
        else:
            named_devs = list(named)
        wanted.append({d: (rank.rank_of_device.get(d, rank.rank) if d is not None else rank.rank,
                           f"npu{d}" if d is not None else "host") for d in named_devs})
    counts: dict[str, int] = {}
    for mapping in wanted:
        for r, dev_name in mapping.values():
            base = f"rank{r}/{dev_name}" if r is not None else dev_name
            counts[base] = counts.get(base, 0) + 1
    out = []
    for rank, mapping in zip(ranks, wanted, strict=True):
        names = {}
        for d, (r, dev_name) in mapping.items():
            base = f"rank{r}/{dev_name}" if r is not None else dev_name
            names[d] = base if counts[base] == 1 else f"{rank.label}/{base}"
        out.append(names)
    return out


def _with_devices(rank: RankData, mapping: dict[int | None, str],
                  start: int) -> dict[str, pl.DataFrame]:
    """Each table with ``device`` (name) and its times relative to the rank's start."""
    single = next(iter(mapping.values())) if len(mapping) == 1 else None
    keys = pl.DataFrame({"dev": [d for d in mapping if d is not None],
                         "device": [n for d, n in mapping.items() if d is not None]},
                        schema={"dev": pl.Int64, "device": pl.String})
    fallback = mapping.get(None, single)
    out = {}
    for kind in ("records", "operators", "op_events", "modules", "static"):
        df = getattr(rank, kind).join(keys, on="dev", how="left", maintain_order="left")
        df = df.with_columns(device=pl.col("device").fill_null(pl.lit(fallback, pl.String)))
        times = [c for c in ("ts", "ts_alloc", "ts_free", "ts_active_free") if c in df.columns]
        out[kind] = df.with_columns([(pl.col(c) - start).alias(c) for c in times])
    return out


def _device_info(rank: RankData, dev: int | None, name: str, curves: pl.DataFrame) -> DeviceInfo:
    overall = curves.filter(pl.col("component").is_null() & pl.col("stream").is_null())
    first_alloc = overall.filter(pl.col("series") == OPERATORS_ALLOCATED)["bytes"].first()
    first_resv = overall.filter(pl.col("series") == OPERATORS_RESERVED)["bytes"].first()
    return DeviceInfo(
        name=name, kind="npu" if dev is not None else "host",
        rank=rank.rank_of_device.get(dev, rank.rank) if dev is not None else rank.rank,
        host=rank.host, has_segments=False,
        start_allocated=int(first_alloc) if first_alloc is not None else 0,
        start_reserved=int(first_resv) if first_resv is not None else None,
    )


def _rank_extra(rank: RankData, names: dict[int | None, str]) -> dict:
    return {
        "label": rank.label, "root": str(rank.root), "rank": rank.rank, "host": rank.host,
        "framework": rank.framework, "files": rank.files, "devices": list(names.values()),
        "chips": {names[d]: chip for d, chip in rank.chips.items() if d in names},
        **rank.extra,
    }


# -- curves ------------------------------------------------------------------------------

def _curve_records(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The records the curves come from: memory_record rows, plus, for msprof DBs (no
    MEMORY_RECORD), the GE pool levels after each NPU_OP_MEM event, which is what msprof's
    own memory_record CSV is made of."""
    op_events = tables["op_events"]
    if op_events.is_empty():
        return tables["records"]
    offset = int(tables["records"]["seq"].max() or 0) + 1 if tables["records"].height else 0
    ge = op_events.select(
        "ts", seq=pl.col("seq") + offset, dev=pl.col("dev"), component=pl.lit("GE"),
        allocated=pl.col("allocated"), reserved=pl.col("reserved"),
        active=pl.lit(None, pl.Int64), stream=pl.lit(None, pl.Int64), device=pl.col("device"),
    )
    return pl.concat([tables["records"], ge], how="diagonal_relaxed")


def _curve(df: pl.DataFrame, value: str, series: str, component: str | None = None,
           stream: bool = False) -> pl.DataFrame:
    rows = df.filter(pl.col(value).is_not_null())
    return rows.select(
        t=pl.col("ts"), device=pl.col("device"), series=pl.lit(series),
        component=pl.lit(component, pl.String),
        stream=pl.col("stream") if stream else pl.lit(None, pl.Int64),
        bytes=pl.col(value),
    )


def _device_curves(records: pl.DataFrame, device: str) -> tuple[pl.DataFrame, bool]:
    """Overall, Stream and Component curves of one device; and whether it is inference
    data (GE rows only, drawn as the Operators curves)."""
    rec = records.filter(pl.col("device") == device).sort("ts", "seq", maintain_order=True)
    components = set(rec["component"].unique().to_list())
    operators, inference = _operator_rows(rec, components)
    has_stream = rec.filter(pl.col("component") != "PTA")["stream"].is_not_null().any()
    by = pl.col("component")
    app, workspace = rec.filter(by == "APP"), rec.filter(by == "WORKSPACE")
    parts = [
        _curve(operators, "allocated", OPERATORS_ALLOCATED),
        _curve(operators, "active", OPERATORS_ACTIVATED) if has_stream else None,
        _curve(operators, "reserved", OPERATORS_RESERVED),
        _curve(app, "reserved", APP_RESERVED),
        _curve(workspace, "allocated", WORKSPACE_ALLOCATED),
        _curve(workspace, "reserved", WORKSPACE_RESERVED),
    ]
    # Group By Stream: the PTA+GE rows that name a stream.
    streams = operators.filter(pl.col("stream").is_not_null()) if not inference else None
    if streams is not None and streams.height:
        parts += [_curve(streams, "allocated", GROUP_ALLOCATED, stream=True),
                  _curve(streams, "active", GROUP_ACTIVATED, stream=True),
                  _curve(streams, "reserved", GROUP_RESERVED, stream=True)]
    # Group By Component: PTA and GE rows, and App Reserved.
    for component in ("PTA", "GE"):
        rows = rec.filter(by == component)
        parts += [_curve(rows, "allocated", GROUP_ALLOCATED, component),
                  _curve(rows, "active", GROUP_ACTIVATED, component),
                  _curve(rows, "reserved", GROUP_RESERVED, component)]
    parts.append(_curve(app, "reserved", GROUP_RESERVED, "APP"))
    return _concat([p for p in parts if p is not None], "curves"), inference


def _operator_rows(rec: pl.DataFrame, components: set) -> tuple[pl.DataFrame, bool]:
    """The rows the Operators curves are drawn from: PTA+GE (MindSpore+GE); derived from
    PTA and GE where the file lacks them; or GE alone (inference)."""
    merged = [c for c in MERGED if c in components]
    if merged:
        return rec.filter(pl.col("component").is_in(merged)), False
    framework = next((FRAMEWORKS[c] for c in MERGED if FRAMEWORKS[c] in components), None)
    if framework is not None:
        return derive_merged(rec, framework), False
    if "GE" in components:
        return rec.filter(pl.col("component") == "GE"), True
    return rec.clear(), False


def derive_merged(rec: pl.DataFrame, framework: str) -> pl.DataFrame:
    """The PTA+GE rows torch_npu would write (section 6): each framework or GE row plus
    the last row of the other component; on equal times the framework row comes first."""
    rows = rec.filter(pl.col("component").is_in([framework, "GE"])).with_columns(
        is_ge=pl.col("component") == "GE"
    ).sort("ts", "is_ge", "seq", maintain_order=True)

    def last(value: str, of_ge: bool) -> pl.Expr:
        mine = pl.col("is_ge") if of_ge else ~pl.col("is_ge")
        return pl.when(mine).then(pl.col(value)).otherwise(None).forward_fill()

    def total(value: str) -> pl.Expr:
        fw, ge = last(value, False), last(value, True)
        both_null = fw.is_null() & ge.is_null()
        return pl.when(both_null).then(None).otherwise(fw.fill_null(0) + ge.fill_null(0))

    return rows.with_columns(
        allocated=total("allocated"), reserved=total("reserved"),
        active=pl.when(pl.col("active").is_not_null().any()).then(total("active")),
        stream=pl.col("stream").fill_null(last("stream", False)),
        component=pl.lit(f"{framework}+GE"),
    ).drop("is_ge")


def _module_curves(modules: pl.DataFrame) -> pl.DataFrame:
    return modules.sort("device", "module", "ts", maintain_order=True).select(
        t=pl.col("ts"), device=pl.col("device"), series=pl.lit(MODULE_RESERVED),
        component=pl.col("module"), stream=pl.lit(None, pl.Int64), bytes=pl.col("reserved"),
    )


def _static_curves(static: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Insight's static-graph curve per (device, graph, model): the running sum of the
    sizes by node index (+size at Node Index Start, -size at Node Index End), and the
    graph's TOTAL; ``t`` is the node index, 4294967295 (end of the graph) is plotted at
    the graph's largest real index + 1.  Also the static operator table (no TOTAL rows)."""
    label = pl.when(pl.col("model").is_null() | (pl.col("model") == "0")).then(
        pl.format("graph {}", pl.col("graph"))
    ).otherwise(pl.format("graph {} model {}", pl.col("graph"), pl.col("model")))
    static = static.with_columns(component=label)
    keys = ["device", "component"]
    is_total = pl.col("name") == "TOTAL"
    ops = static.filter(~is_total)
    live = ops.filter(pl.col("size") != 0)
    real = pl.concat([live.select(*keys, idx=pl.col("start")),
                      live.select(*keys, idx=pl.col("end"))])
    top = real.filter(pl.col("idx") != UINT32_MAX).group_by(keys).agg(top=pl.col("idx").max())
    deltas = pl.concat([
        live.select(*keys, idx=pl.col("start"), delta=pl.col("size")),
        live.select(*keys, idx=pl.col("end"), delta=-pl.col("size")),
    ]).join(top, on=keys, how="left").with_columns(
        idx=pl.when(pl.col("idx") == UINT32_MAX).then(pl.col("top").fill_null(0) + 1)
        .otherwise(pl.col("idx"))
    )
    points = deltas.group_by(*keys, "idx").agg(pl.col("delta").sum()).sort(*keys, "idx")
    points = points.with_columns(bytes=pl.col("delta").cum_sum().over(keys))
    totals = static.filter(is_total).group_by(keys, maintain_order=True).agg(
        total=pl.col("size").first())
    size = points.select(t=pl.col("idx"), device=pl.col("device"), series=pl.lit(STATIC_SIZE),
                         component=pl.col("component"), stream=pl.lit(None, pl.Int64),
                         bytes=pl.col("bytes"))
    total = points.join(totals, on=keys, how="inner").select(
        t=pl.col("idx"), device=pl.col("device"), series=pl.lit(STATIC_TOTAL),
        component=pl.col("component"), stream=pl.lit(None, pl.Int64), bytes=pl.col("total"))
    table = ops.select("device", "graph", "model", "name", "start", "end", "size")
    return _concat([size, total], "curves"), table


# -- events and blocks -------------------------------------------------------------------

def _events_and_blocks(rank: RankData, tables: dict[str, pl.DataFrame], warnings: list[str]
                       ) -> tuple[pl.DataFrame, pl.DataFrame]:
    records = tables["records"].select(
        t=pl.col("ts"), seq=pl.col("seq"), device=pl.col("device"), action=pl.lit("snapshot"),
        stream=pl.col("stream"), pool=pl.col("component"), allocated=pl.col("allocated"),
        active=pl.col("active"), reserved=pl.col("reserved"),
    )
    offset = int(records["seq"].max() or 0) + 1 if records.height else 0
    default_pool = "MindSpore" if rank.framework == "mindspore" else "PTA"
    blocks = _operator_blocks(tables["operators"], default_pool)
    op_events = tables["op_events"].with_columns(seq=pl.col("seq") + offset)
    events = [records]
    if op_events.height:
        ge_events, ge_blocks, extra = _paired_blocks(op_events)
        if extra:
            warnings.append(f"{rank.label}: {extra} GE releases of an address already "
                            "released were ignored")
        events.append(ge_events)
        if blocks.is_empty():
            blocks = ge_blocks
    return _concat(events, "events"), blocks


def _operator_blocks(ops: pl.DataFrame, default_pool: str) -> pl.DataFrame:
    """One block per operator_memory row; negative size or no allocation time: a ghost
    (alive from the start); no release time: alive at the end."""
    ghost = (pl.col("size") < 0) | pl.col("ts_alloc").is_null()
    return ops.select(
        device=pl.col("device"), size=pl.col("size").abs(),
        t_alloc=pl.when(ghost).then(0).otherwise(pl.col("ts_alloc")),
        t_free=pl.col("ts_free"), owner=pl.col("name"),
        pool=pl.col("pool").fill_null(pl.lit(default_pool)), stream=pl.col("stream"),
        ghost=ghost, t_active_free=pl.col("ts_active_free"),
        **{c: pl.col(c) for c in _BLOCK_EXTRAS if c != "t_active_free"},
    ).sort("device", "t_alloc", maintain_order=True)


def _paired_blocks(op_events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """GE allocate/release events (msprof NPU_OP_MEM) into events and blocks by address,
    and the number of releases that found their address already released."""
    events = op_events.select(
        t=pl.col("ts"), seq=pl.col("seq"), device=pl.col("device"), action=pl.col("action"),
        addr=pl.col("addr"), size=pl.col("size"), pool=pl.lit("GE"), owner=pl.col("name"),
        allocated=pl.col("allocated"), reserved=pl.col("reserved"),
        stack_id=pl.lit(None, pl.Int32), stream=pl.lit(None, pl.Int64),
    )
    event_parts, block_parts, extra = [], [], 0
    for device in events["device"].unique(maintain_order=True).to_list():
        mine = events.filter(pl.col("device") == device).sort("seq")
        lifetimes, ops = pair_by_address(mine, ["alloc"], ["free"])
        extra += int(lifetimes["extra_closes"].sum() or 0)
        link = pl.struct(device=pl.lit(device), lifetime=pl.col("lifetime"))
        at = mine.select("seq", "owner", "allocated", "reserved")
        block_parts.append(lifetimes.join(
            at.rename({"seq": "seq_alloc", "owner": "owner_a", "allocated": "alloc_allocated",
                       "reserved": "alloc_reserved"}), on="seq_alloc", how="left",
        ).join(
            at.rename({"seq": "seq_free", "owner": "owner_f", "allocated": "free_allocated",
                       "reserved": "free_reserved"}), on="seq_free", how="left",
        ).select(
            "addr", "seq_alloc", "seq_free", "t_free", "alloc_allocated", "alloc_reserved",
            "free_allocated", "free_reserved", device=pl.lit(device),
            size=pl.col("size").fill_null(pl.col("free_size")),
            t_alloc=pl.col("t_alloc").fill_null(0),
            owner=pl.col("owner_a").fill_null(pl.col("owner_f")),
            pool=pl.lit("GE"), ghost=pl.col("seq_alloc").is_null(), link=link,
        ).sort("t_alloc", "seq_alloc", maintain_order=True))
        event_parts.append(mine.join(ops.select("seq", link=link), on="seq", how="left"))
    return pl.concat(event_parts), pl.concat(block_parts), extra


def _relink_block_ids(events: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    if "link" not in events.columns or "link" not in blocks.columns:
        return events.drop("link", strict=False)
    ids = blocks.filter(pl.col("link").is_not_null()).select("link", linked=pl.col("block_id"))
    return events.join(ids, on="link", how="left", maintain_order="left").with_columns(
        block_id=pl.col("linked")).drop("link", "linked")


def _concat(parts: list[pl.DataFrame], name: str) -> pl.DataFrame:
    parts = [p for p in parts if p is not None and p.height]
    if not parts:
        return conform(None, name)
    return conform(pl.concat(parts, how="diagonal_relaxed"), name)
