"""msMemScope's non-memory rows and python traces into ``markers`` and ``calls``.

* markers: SYSTEM steps and trace start/stop, MSTX marks and ranges, op and kernel
  launches (start/end rows paired first-in first-out into ranges), SNAPSHOT and
  OOM_DETAIL rows; SYSTEM rows, which msMemScope copies into every device's file, once;
* calls: python-trace rows with their depth per thread as MindStudio Insight computes it
  (``N/A`` starts and ends become the capture's start and end).
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from memtui.arrays import unique_sorted
from memtui.model import empty_frame
from memtui.sources.common.compiled import pure_python_forced
from memtui.sources.memscope.read import device_column

try:
    from memtui.sources.memscope import _rows
except ImportError:  # built without a compiler: the Python replay only
    _rows = None

# -- markers ----------------------------------------------------------------------------


def marker_kind(event: str, etype: str) -> tuple[str, str | None, str, str, str]:
    """(kind, phase, family, label rule, fixed label) of one (Event, Event Type) pair."""
    upper = etype.upper()
    phase = "start" if upper.endswith("START") else "end" if upper.endswith("END") else None
    family = re.sub(r"_?(START|END)$", "", upper)
    words = etype.lower().replace("_", " ")
    if event == "OP_LAUNCH":
        return "op", phase, family, "name", ""
    if event == "KERNEL_LAUNCH":
        return "kernel", None if upper == "KERNEL_LAUNCH" else phase, family, "name_or", "kernel"
    if event == "MSTX":
        return ("mstx_range" if phase else "mstx"), phase, "RANGE", "unquote", ""
    if event == "SYSTEM" and upper == "STEP":
        return "step", None, family, "step", ""
    if event == "SYSTEM":
        return ("trace" if upper in ("START_TRACE", "STOP_TRACE") else "system"), None, family, \
            "fixed", words
    if event == "SNAPSHOT":
        return "snapshot", None, family, "unquote", ""
    if event == "OOM_DETAIL":
        return "oom", None, family, "fixed", words
    return event.lower(), None, family, "name_or", etype


def markers_of(other: pl.DataFrame) -> pl.DataFrame:
    """Marker rows from every non-memory row (see the module docstring).

    What each row becomes depends on its (Event, Event Type) pair only: the few distinct
    pairs are classified once, and each row takes its pair's classification by the pair's
    number (categoricals, not texts per row: a launch-heavy capture has millions of these
    rows, and wide texts carried through the sort and the pairing were most of the open's
    memory peak).
    """
    if other.is_empty():
        return empty_frame("markers")
    etype = pl.col("etype").fill_null("")
    pairs = other.select("event", etype).unique(maintain_order=True)
    kinds = pl.DataFrame(
        [(e, t, *marker_kind(e, t)) for e, t in pairs.iter_rows()],
        schema={"event": pl.String, "etype": pl.String, "kind": pl.String, "phase": pl.String,
                "family": pl.String, "rule": pl.String, "fixed": pl.String}, orient="row",
    ).with_columns(pl.col("kind", "phase", "family", "rule", "fixed").cast(pl.Categorical))
    pair = other.select("event", etype).join(
        kinds.select(pl.col("event").cast(pairs["event"].dtype),  # (the reader's categoricals)
                     pl.col("etype").cast(pairs["etype"].dtype),
                     pair=pl.int_range(pl.len(), dtype=pl.UInt32)),
        on=["event", "etype"], how="left", maintain_order="left")["pair"]
    per_row = kinds.select("kind", "phase", "family", "rule", "fixed")[pair]
    rows = other.select(
        "t", "seq", "pid", "tid", "name", "attr",
        device=device_column(other),  # N/A stays global: SYSTEM rows are copied per device
    ).hstack(per_row).select(
        "t", "seq", "device", "pid", "tid", "kind", "phase", "family",
        label=_labels(), detail=pl.when(~pl.col("attr").is_in(["", "{}"])).then(pl.col("attr")),
        rare=pl.col("rule").is_in(["unquote", "step"]), name="name", rule="rule",
    )
    rare = rows.select(pl.arg_where("rare")).to_series()
    if rare.len():  # (a when/then works out every branch for every row: these few alone)
        rows = rows.with_columns(label=rows["label"].scatter(
            rare, rows[rare].select(_labels(rare=True)).to_series()))
    rows = rows.drop("rare", "name", "rule").sort("t", "seq")
    ranges = _marker_ranges(rows.filter(pl.col("phase").is_not_null()))
    instants = rows.filter(pl.col("phase").is_null()).select(
        "t", pl.lit(None, pl.Int64).alias("t_end"), "device", "kind", pl.col("label").alias("name"),
        pl.col("pid").alias("process"), pl.col("tid").alias("thread"), "detail")
    markers = pl.concat([instants, ranges], how="vertical_relaxed")
    # SYSTEM rows are copied into every device's file: keep one of each.
    shared = markers.filter(pl.col("device").is_null()).unique(
        ["t", "kind", "name", "process"], keep="first", maintain_order=True)
    return pl.concat([markers.filter(pl.col("device").is_not_null()), shared]).sort(
        "t").with_columns(pl.col("kind").cast(pl.String))


def _labels(rare: bool = False) -> pl.Expr:
    """The marker's label by its pair's rule (:func:`marker_kind`): the name, the name
    unquoted, ``step N``, the fixed text, or the name unless empty or ``N/A``.  ``rare``:
    the rules few rows have (unquote, step), else the others."""
    rule = pl.col("rule")
    name = pl.col("name").fill_null("")
    fixed = pl.col("fixed").cast(pl.String)
    if rare:
        return pl.when(rule == "unquote").then(
            name.str.strip_prefix('"').str.strip_suffix('"').str.strip_chars()
        ).otherwise(pl.lit("step ") + name).alias("label")
    use_fixed = (rule == "fixed") | ((rule != "name") & name.is_in(["", "N/A"]))
    return pl.when(use_fixed).then(fixed).otherwise(name).alias("label")


def _marker_ranges(rows: pl.DataFrame) -> pl.DataFrame:
    """Start and end rows paired first-in first-out per (process, thread, device, name).

    MSTX range ends name their range differently from its start (old ones say "Range end
    from id N"), and may come from another thread: they pair per (process, device).

    Each key's rows get one number (the position of the key's first row), and the n-th
    start of a key pairs with its n-th end on one whole-number join key, ``number * 2**32
    + n``: a join on the six mixed keys took about twice as long.
    """
    is_mstx = pl.col("kind") == "mstx_range"
    key = [
        "kind", "family", "pid",
        pl.when(is_mstx | (pl.col("kind") == "kernel")).then(None).otherwise(pl.col("tid")),
        # (the texts in the key as categoricals: hashed as numbers by the window)
        pl.col("device").cast(pl.Categorical),
        pl.when(is_mstx).then(None).otherwise(pl.col("label")).cast(pl.Categorical),
    ]
    rows = rows.with_row_index("_row").with_columns(
        _group=pl.col("_row").cast(pl.Int64).first().over(key)).with_columns(
        _pair=pl.col("_group") * 2**32
        + pl.int_range(pl.len(), dtype=pl.Int64).over(["_group", "phase"]))
    starts = rows.filter(pl.col("phase") == "start")
    ends = rows.filter(pl.col("phase") == "end")
    paired = starts.join(ends.select("_pair", t_end=pl.col("t")), on="_pair", how="left")
    lonely = ends.join(starts.select("_pair"), on="_pair", how="anti").with_columns(
        t_end=pl.lit(None, pl.Int64), label=pl.col("label") + " (end)")
    cols = ["t", "t_end", "device", "kind", pl.col("label").alias("name"),
            pl.col("pid").alias("process"), pl.col("tid").alias("thread"), "detail"]
    return pl.concat([paired.select(cols), lonely.select(cols)], how="vertical_relaxed")


# -- python trace -----------------------------------------------------------------------


def calls_of(trace: pl.DataFrame, events: pl.DataFrame, start: int | None, end: int | None,
             warnings: list[str]) -> pl.DataFrame:
    """Completed Python calls with their depth per thread (MindStudio Insight's rule).

    ``N/A`` start (a return whose call came before tracing began) becomes the start of the
    capture, ``N/A`` end (a call still open at ``tracer.stop()``) its end.
    """
    if trace.is_empty():
        return empty_frame("calls")
    owner = (events.group_by("process", "device").len().sort("len", descending=True)
             .unique("process", keep="first").select(pid="process", pid_device="device"))
    calls = trace.join(owner, on="pid", how="left").with_columns(
        device=pl.col("file_device").fill_null(pl.col("pid_device")),
        t_start=pl.col("start").fill_null(start), t_end=pl.col("end").fill_null(end),
    )
    backwards = calls.filter(pl.col("t_end") < pl.col("t_start")).height
    if backwards:
        warnings.append(f"{backwards} python-trace rows ending before they start skipped")
    calls = calls.filter(pl.col("t_end") >= pl.col("t_start")).sort(
        "pid", "tid", "t_start", pl.col("t_end"), descending=[False, False, False, True])
    depth = call_depths(calls["pid"].fill_null(-1).to_numpy(),
                        calls["tid"].fill_null(-1).to_numpy(),
                        calls["t_start"].to_numpy(), calls["t_end"].to_numpy())
    return calls.select(
        "device", thread=pl.col("tid").cast(pl.String), t_start="t_start", t_end="t_end",
        depth=pl.Series(depth, dtype=pl.Int32), name=pl.col("func"), process=pl.col("pid"))


def call_depths(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each call: its thread's stack size when it starts, as Insight builds it.

    Insight pushes calls in start order onto a per-thread stack after popping every call
    that ended before (``end < start``).  Input is sorted by (pid, tid, start, -end).
    Where the calls of a thread nest properly (the usual case) the depth is the number
    of earlier calls of the thread not yet ended: computed vectorised, then checked (each
    call must end within the call it is counted under); threads that fail the check are
    replayed with Insight's stack.
    """
    n = start.size
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    new = np.ones(n, dtype=bool)
    new[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
    group = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    index_in_group = np.arange(n) - first[group]
    # Calls of the same thread that ended strictly before each start.
    order = np.lexsort((end, group))
    ended = _count_less(group[order], end[order], group, start) - first[group]
    depth = index_in_group - ended
    bad = _not_nested(group, depth, end)
    if bad.size:
        replayed = np.zeros(int(group[-1]) + 1, dtype=bool)
        replayed[bad] = True
        rows = np.flatnonzero(replayed[group])
        depth[rows] = replayed_depths(group[rows], start[rows], end[rows])
    return depth.astype(np.int32)


def _count_less(groups_sorted: np.ndarray, values_sorted: np.ndarray, groups: np.ndarray,
                queries: np.ndarray) -> np.ndarray:
    """For each query, how many (group, value) pairs sort before (its group, query)."""
    # Rank values within the whole array so (group, rank) packs into one int64 key.
    all_values = np.concatenate([values_sorted, queries])
    ranks = np.unique(all_values, return_inverse=True)[1]
    width = np.int64(ranks.max() + 1)
    keys = groups_sorted.astype(np.int64) * width + ranks[: values_sorted.size]
    probes = groups.astype(np.int64) * width + ranks[values_sorted.size:]
    return np.searchsorted(keys, probes, side="left")


def _not_nested(group: np.ndarray, depth: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Groups where some call outlives the latest earlier call one level up (its parent)."""
    n = depth.size
    child = np.flatnonzero(depth > 0)
    if child.size == 0:
        return np.zeros(0, dtype=np.int64)
    top = np.int64(depth.max() + 2)
    keys = (group.astype(np.int64) * top + depth) * n + np.arange(n)
    order = np.argsort(keys)
    probe = (group[child].astype(np.int64) * top + depth[child] - 1) * n + child
    at = np.searchsorted(keys[order], probe, side="left") - 1
    parent = order[np.clip(at, 0, n - 1)]
    valid = (at >= 0) & (group[parent] == group[child]) & (depth[parent] == depth[child] - 1)
    broken = ~valid | (end[child] > end[parent])
    return unique_sorted(group[child[broken]])


def replayed_depths(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Insight's stack replay, one stack per group (rows in (group, start) order): the
    compiled pass (``_rows.depths``), or the Python loop, its reference, where it is not
    built or ``MEMTUI_PURE_PYTHON=1``."""
    group, start, end = (np.ascontiguousarray(a, dtype=np.int64) for a in (group, start, end))
    if _rows is not None and not pure_python_forced():
        return np.frombuffer(_rows.depths(group, start, end), dtype=np.int64)
    depth = np.empty(start.size, dtype=np.int64)
    stack: list[int] = []
    previous = None
    for i, (g, s, e) in enumerate(zip(group.tolist(), start.tolist(), end.tolist(),
                                      strict=True)):
        if g != previous:
            stack.clear()
            previous = g
        while stack and stack[-1] < s:
            stack.pop()
        depth[i] = len(stack)
        stack.append(e)
    return depth
