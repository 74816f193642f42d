"""Block and Event tables over millions of rows: columns, filters, sort, and formatting.

A :class:`TableModel` keeps the device's frame as it is and a numpy array ``rows`` of row
indices: the rows that pass the filter, in the sort order.  Sorting and filtering are
vectorised (polars ``arg_sort``, numpy masks), and only the rows on screen are ever
formatted as text, so a table of 10M rows costs what its visible rows cost.

Text filters never touch the millions of strings: each text column has few distinct
values (owners, pools, actions, stack tops), so the match runs on those and becomes an
``is_in`` over codes.  The columns are those of MindStudio Insight's Block View and Event
View (../shared/formats), shown only where the source fills them, and each block's role
(memory by role, :mod:`memtui.analysis.roles`) where the screen joins it (``role``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from memtui.model import FLAG_EARLY_ALLOCATION, FLAG_LATE_DEALLOCATION, FLAG_TEMPORARY_IDLENESS
from memtui.units import format_bytes

_NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Column:
    """A table column: ``key`` is the frame's column (or a derived one: ``state``,
    ``duration``, ``top``), ``kind`` says how to format and sort it."""

    key: str
    title: str
    kind: str  # int, bytes, time, span, addr, str, flags, state, top
    width: int


BLOCK_COLUMNS = (
    Column("block_id", "ID", "int", 7),
    Column("size", "Size", "bytes", 10),
    Column("state", "State", "state", 8),
    Column("role", "Role", "str", 15),
    Column("top", "Stack top", "top", 24),
    Column("t_alloc", "Alloc", "time", 12),
    Column("t_free", "Free", "time", 12),
    Column("duration", "Duration", "span", 10),
    Column("addr", "Address", "addr", 15),
    Column("requested_size", "Requested", "bytes", 10),
    Column("owner", "Owner", "str", 18),
    Column("pool", "Pool", "str", 6),
    Column("stream", "Stream", "int", 7),
    Column("process", "Process ID", "int", 10),
    Column("thread", "Thread ID", "int", 10),
    Column("attr", "Attr", "str", 28),
    Column("first_access", "First Access", "time", 12),
    Column("last_access", "Last Access", "time", 12),
    Column("max_access_gap", "Max Access Interval", "span", 12),
    Column("flags", "Inefficient", "flags", 11),
)

EVENT_COLUMNS = (
    Column("event", "#", "int", 8),
    Column("source_id", "Source ID", "int", 9),
    Column("t", "Time", "time", 12),
    Column("action", "Action", "str", 14),
    Column("size", "Size", "bytes", 10),
    Column("block_id", "Block", "int", 7),
    Column("top", "Stack top", "top", 24),
    Column("addr", "Address", "addr", 15),
    Column("allocated", "Allocated", "bytes", 10),
    Column("active", "Active", "bytes", 10),
    Column("reserved", "Reserved", "bytes", 10),
    Column("owner", "Owner", "str", 18),
    Column("pool", "Pool", "str", 6),
    Column("stream", "Stream", "int", 7),
    Column("event_type", "Event Type", "str", 11),
    Column("name", "Name", "str", 16),
    Column("process", "Process ID", "int", 10),
    Column("thread", "Thread ID", "int", 10),
    Column("device", "Device ID", "str", 9),
    Column("attr", "Attr", "str", 28),
)

_SOURCE_OF = {"top": "stack_id", "duration": "t_alloc", "state": "t_alloc"}


def format_time(t: int | None, start: int, unit: str) -> str:
    """A time relative to the trace start: ``+1.234567 s``, or ``#12`` in event numbers."""
    if t is None:
        return ""
    if unit == "event":
        return f"#{int(t)}"
    return f"+{(int(t) - start) / 1e9:.6f} s"


def format_span(ns: int | None, unit: str) -> str:
    """A duration to 4 digits: ``1.234 ms``, ``2.5 s``, or ``12 ev`` in event numbers."""
    if ns is None:
        return ""
    if unit == "event":
        return f"{int(ns)} ev"
    ns = int(ns)
    for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {name}"
    return f"{ns} ns"


def format_flags(flags: int | None) -> str:
    """``E`` early allocation, ``L`` late deallocation, ``T`` temporary idleness."""
    if not flags:
        return ""
    return "".join(
        letter for bit, letter in ((FLAG_EARLY_ALLOCATION, "E"), (FLAG_LATE_DEALLOCATION, "L"),
                                   (FLAG_TEMPORARY_IDLENESS, "T")) if flags & bit
    )


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
               "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
               "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
_TIME_UNITS = {"": 1e9, "s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}
_TOKEN = re.compile(r"^(size|t|time|timestamp|alloc|malloc|free|addr)(<=|>=|<|>|=)(.+)$",
                    re.IGNORECASE)
#: Words that keep only the blocks flagged inefficient (Insight's "Filter inefficient
#: memory blocks").
INEFFICIENT_WORDS = ("inefficient", "ineff")


def parse_size(text: str) -> int:
    """``4096``, ``1.5M``, ``2GiB`` -> bytes (binary units); ValueError if unreadable."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])


def parse_time(text: str, start: int, unit: str) -> int:
    """``1.5`` / ``+1.5s`` / ``250ms`` (relative to the start) or ``#120`` -> a trace time."""
    text = text.strip().lstrip("+")
    if text.startswith("#") or unit == "event":
        return int(float(text.lstrip("#")))
    match = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([a-z]*)", text.lower())
    if not match or match.group(2) not in _TIME_UNITS:
        raise ValueError(f"not a time: {text!r}")
    return start + round(float(match.group(1)) * _TIME_UNITS[match.group(2)])


@dataclass
class Filter:
    """What a table shows: ranges (inclusive) of size, of time (the event's; the
    block's lifetime overlapping it), of a block's Malloc and of its Free time, text, an
    address, and whether only the blocks flagged inefficient."""

    size_min: int | None = None
    size_max: int | None = None
    t_min: int | None = None
    t_max: int | None = None
    text: str = ""
    addr: int | None = None
    alloc_min: int | None = None
    alloc_max: int | None = None
    free_min: int | None = None
    free_max: int | None = None
    inefficient: bool = False

    @property
    def empty(self) -> bool:
        return self == Filter()

    @classmethod
    def parse(cls, spec: str, start: int, unit: str) -> Filter:
        """``size>=1M size<1G t>1.5s t<3s free<4s addr=0x7f.. inefficient words``.

        ``t`` (also ``time``, ``timestamp``) is the event's time, or a time the block was
        alive; ``malloc`` (``alloc``) and ``free`` a block's Malloc and Free times;
        ``inefficient`` keeps the flagged blocks; other words are text, all must match."""
        result = cls()
        words = []
        for token in spec.split():
            match = _TOKEN.match(token)
            if not match:
                if token.lower() in INEFFICIENT_WORDS:
                    result.inefficient = True
                else:
                    words.append(token)
                continue
            what, op, value = match.group(1).lower(), match.group(2), match.group(3)
            if what == "addr":
                result.addr = int(value, 16) if value.lower().startswith("0x") else int(value)
                continue
            number = parse_size(value) if what == "size" else parse_time(value, start, unit)
            low, high = {"size": ("size_min", "size_max"), "free": ("free_min", "free_max"),
                         "alloc": ("alloc_min", "alloc_max"),
                         "malloc": ("alloc_min", "alloc_max")}.get(what, ("t_min", "t_max"))
            strict = 1 if op in "<>" else 0
            if op in (">", ">="):
                setattr(result, low, number + strict)
            elif op in ("<", "<="):
                setattr(result, high, number - strict)
            else:
                setattr(result, low, number)
                setattr(result, high, number)
        result.text = " ".join(words)
        return result


def _between(values: np.ndarray, lo: int | None, hi: int | None) -> np.ndarray:
    """``lo <= values <= hi`` (a missing bound: no limit)."""
    lo = np.iinfo(np.int64).min if lo is None else lo
    hi = np.iinfo(np.int64).max if hi is None else hi
    return (values >= lo) & (values <= hi)


def hex_expr(expr: pl.Expr) -> pl.Expr:
    """An unsigned integer column as ``0x...`` text, vectorised (nibble by nibble)."""
    digits = pl.Series(list("0123456789abcdef"))
    nibbles = [
        ((expr.cast(pl.UInt64) // (1 << shift)) % 16).cast(pl.Int64).map_batches(
            lambda s: digits.gather(s), return_dtype=pl.String)
        for shift in range(60, -4, -4)
    ]
    text = pl.concat_str(nibbles).str.strip_chars_start("0")
    return pl.when(expr.is_null()).then(None).when(text == "").then(pl.lit("0x0")).otherwise(
        pl.lit("0x") + text)


def with_alloc_attr(blocks: pl.DataFrame, events: pl.DataFrame | None) -> pl.DataFrame:
    """``blocks`` with ``attr``: the Attr of each block's alloc event, where the events
    carry one (msMemScope); unchanged otherwise."""
    if events is None or "attr" not in events.columns or "attr" in blocks.columns \
            or blocks.is_empty():
        return blocks
    attrs = (events.filter((pl.col("action") == "alloc") & pl.col("block_id").is_not_null())
             .select("block_id", "attr").unique("block_id", keep="first"))
    return blocks.join(attrs, on="block_id", how="left", maintain_order="left")


@dataclass
class TableModel:
    """One table (see the module docstring).  ``kind`` is ``blocks`` or ``events``."""

    kind: str
    frame: pl.DataFrame
    columns: tuple[Column, ...]
    start: int
    unit: str
    tops: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(
        schema={"stack_id": pl.Int32, "top": pl.String}))
    rows: np.ndarray = field(init=False)
    sort_key: str | None = field(init=False, default=None)
    descending: bool = field(init=False, default=False)
    filter: Filter = field(init=False, default_factory=Filter)
    scope: tuple[int, int] | None = field(init=False, default=None)
    #: Block ids to keep (the blocks under a node of the Stacks screen's tree), or None.
    only: np.ndarray | None = field(init=False, default=None)
    #: The cursor's event position: with positions, the State column is exact at it.
    cursor_event: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.rows = np.arange(self.frame.height, dtype=np.int64)
        self.columns = tuple(c for c in self.columns if self._has_data(c))
        top_map = dict(zip(self.tops["stack_id"].to_list(), self.tops["top"].to_list(),
                           strict=True))
        self._top_of = top_map
        self._time_key = "t" if self.kind == "events" else "t_alloc"
        self._times = self.frame[self._time_key].fill_null(0).to_numpy()
        if self.kind == "blocks":
            self._t_free = self.frame["t_free"].fill_null(_NEVER).to_numpy()
        self._sorted_by_time = bool(self.frame[self._time_key].is_sorted())
        self._shown_key: np.ndarray | None = None
        self._shown = self._times

    @classmethod
    def for_blocks(cls, blocks: pl.DataFrame, start: int, unit: str,
                   tops: pl.DataFrame | None = None,
                   events: pl.DataFrame | None = None,
                   positions: pl.DataFrame | None = None) -> TableModel:
        """The Block View: blocks in order of allocation; with ``events``, each block's
        Attr is that of its alloc event (msMemScope).  With ``positions``
        (``analysis.at_time.block_positions``) the scope "alive at the cursor" is exact at
        the cursor's event (an ``int`` scope), also among events sharing a timestamp."""
        frame = with_alloc_attr(blocks, events)
        if positions is not None:
            frame = frame.join(positions, on="block_id", how="left", maintain_order="left")
        if blocks.height and not blocks["t_alloc"].is_sorted():
            frame = frame.sort("t_alloc", "block_id", nulls_last=False)
        model = cls("blocks", frame, BLOCK_COLUMNS, start, unit)
        return model if tops is None else model.with_tops(tops)

    @classmethod
    def for_events(cls, events: pl.DataFrame, start: int, unit: str,
                   tops: pl.DataFrame | None = None) -> TableModel:
        """The Event View: events in time order (as the model keeps them).  ``#`` is the
        event's position in the device's trace (the cursor's event number); the source's
        own ID (msMemScope's DB ``id``, else the source's own row order ``row`` where it
        is not time order, else ``seq``) has its own column where it differs."""
        own = next(c for c in ("id", "row", "seq") if c in events.columns or c == "seq")
        frame = events.with_columns(event=pl.int_range(0, pl.len(), dtype=pl.Int64),
                                    source_id=pl.col(own).cast(pl.Int64, strict=False))
        model = cls("events", frame, EVENT_COLUMNS, start, unit)
        return model if tops is None else model.with_tops(tops)

    def with_tops(self, tops: pl.DataFrame) -> TableModel:
        """Use ``tops`` (``stack_id, top`` from analysis.callstack) for the Stack top column."""
        self.tops = tops
        self._top_of = dict(zip(tops["stack_id"].to_list(), tops["top"].to_list(), strict=True))
        return self

    def top_of(self, stack_id: int | None) -> str | None:
        """The name of ``stack_id`` (the Stack top column's), None where it has none."""
        return None if stack_id is None else self._top_of.get(stack_id)

    # -- columns --------------------------------------------------------------------------

    def _has_data(self, column: Column) -> bool:
        source = _SOURCE_OF.get(column.key, column.key)
        if source not in self.frame.columns:
            return False
        if column.key in ("duration", "state"):
            return True
        if column.key == "requested_size" and "size" in self.frame.columns:
            same = (self.frame["requested_size"] == self.frame["size"]).all()
            return self.frame[source].null_count() < self.frame.height and not same
        if column.key == "source_id":
            same = (self.frame["source_id"] == self.frame["event"]).fill_null(False).all()
            return self.frame["source_id"].null_count() < self.frame.height and not same
        if column.key == "flags":
            return bool((self.frame[source].fill_null(0) > 0).any())
        return self.frame[source].null_count() < self.frame.height

    def column(self, key: str) -> Column:
        for column in self.columns:
            if column.key == key:
                return column
        raise KeyError(key)

    # -- filter and sort --------------------------------------------------------------------

    @property
    def total(self) -> int:
        return self.frame.height

    def apply(self, filter: Filter | None = None,
              scope: tuple[int, int] | int | None | str = "keep",
              cursor_t: int | None = None) -> None:
        """Set the filter and the scope (a time range to limit to, an event position whose
        live blocks to keep, or None), then re-sort."""
        if filter is not None:
            self.filter = filter
        if scope != "keep":
            self.scope = scope  # type: ignore[assignment]
        mask = self._mask()
        rows = np.flatnonzero(mask) if mask is not None else np.arange(self.total)
        self.rows = rows.astype(np.int64)
        if self.sort_key is not None:
            self.sort(self.sort_key, self.descending, cursor_t)

    def _mask(self) -> np.ndarray | None:
        f = self.filter
        masks = []
        size = self.frame["size"].fill_null(0).to_numpy() if "size" in self.frame.columns else None
        if size is not None and f.size_min is not None:
            masks.append(size >= f.size_min)
        if size is not None and f.size_max is not None:
            masks.append(size <= f.size_max)
        scope = self.scope
        if isinstance(scope, int):
            masks.append(self.alive_at_event(scope))
            scope = None
        for lo, hi in ((f.t_min, f.t_max), scope or (None, None)):
            if lo is not None or hi is not None:
                masks.append(self._time_mask(lo, hi))
        if f.alloc_min is not None or f.alloc_max is not None:
            masks.append(_between(self._times, f.alloc_min, f.alloc_max))
        if (f.free_min is not None or f.free_max is not None) and self.kind == "blocks":
            freed = self._t_free != _NEVER  # a block never freed has no Free time
            masks.append(freed & _between(self._t_free, f.free_min, f.free_max))
        if f.inefficient:
            flags = self.frame["flags"].fill_null(0).to_numpy() if "flags" in self.frame.columns \
                else np.zeros(self.total, dtype=np.uint8)
            masks.append(flags > 0)
        if self.only is not None and "block_id" in self.frame.columns:
            ids = self.frame["block_id"].fill_null(-1).to_numpy()
            masks.append(np.isin(ids, self.only))
        if f.addr is not None and "addr" in self.frame.columns:
            addr = self.frame["addr"]
            masks.append((addr == f.addr).fill_null(False).to_numpy())
        for word in f.text.lower().split():
            masks.append(self._text_mask(word))
        if not masks:
            return None
        mask = masks[0]
        for other in masks[1:]:
            mask = mask & other
        return mask

    def _time_mask(self, lo: int | None, hi: int | None) -> np.ndarray:
        """Events in ``[lo, hi]``; blocks whose lifetime overlaps it."""
        lo = np.iinfo(np.int64).min if lo is None else lo
        hi = np.iinfo(np.int64).max if hi is None else hi
        if self.kind == "events":
            return (self._times >= lo) & (self._times <= hi)
        return (self._times <= hi) & (self._t_free > lo)

    def alive_at_event(self, event: int) -> np.ndarray:
        """Blocks alive just after the event at position ``event`` (needs positions)."""
        if "pos_alloc" not in self.frame.columns:
            raise ValueError("this Block View was built without event positions")
        pos_alloc = self.frame["pos_alloc"].to_numpy()
        pos_free = self.frame["pos_free"].to_numpy()
        return (pos_alloc <= event) & (pos_free > event)

    def _text_mask(self, word: str) -> np.ndarray:
        mask = np.zeros(self.total, dtype=bool)
        for column in self.columns:
            if column.kind not in ("str", "top"):
                continue
            source = _SOURCE_OF.get(column.key, column.key)
            if column.kind == "top":
                ids = [k for k, v in self._top_of.items() if v and word in v.lower()]
                hit = self.frame[source].is_in(ids)
            else:
                values = self.frame[source].cast(pl.String).unique().drop_nulls()
                matching = values.filter(values.str.to_lowercase().str.contains(word, literal=True))
                if matching.is_empty():
                    continue
                hit = self.frame[source].cast(pl.String).is_in(matching.implode())
            mask |= hit.fill_null(False).to_numpy()
        return mask

    def sort_values(self, key: str, cursor_t: int | None = None) -> pl.Series:
        """The values a column sorts by, for all rows of the frame."""
        if key == "top":
            names = sorted({v for v in self._top_of.values() if v is not None})
            rank = {name: i for i, name in enumerate(names)}
            ids = list(self._top_of)
            return self.frame["stack_id"].replace_strict(
                ids, [rank.get(self._top_of[i], -1) for i in ids], default=None,
                return_dtype=pl.Int64)
        if key == "duration":
            return self.frame["t_free"] - self.frame["t_alloc"]
        if key == "state":
            return pl.Series(self.state_codes(np.arange(self.total), cursor_t))
        series = self.frame[key]
        if series.dtype == pl.Enum or series.dtype == pl.Categorical:
            series = series.cast(pl.String)
        return series

    def sort(self, key: str | None, descending: bool = False, cursor_t: int | None = None) -> None:
        """Order ``rows`` by ``key`` (None: the frame's own order, by time); nulls last."""
        self.sort_key, self.descending = key, descending
        if key is None or (key == self._time_key and self._sorted_by_time and not descending):
            self.rows = np.sort(self.rows)
            if key is not None and descending:
                self.rows = self.rows[::-1].copy()
            return
        values = self.sort_values(key, cursor_t).gather(self.rows).alias("v")
        order = values.to_frame().select(
            pl.arg_sort_by("v", descending=descending, nulls_last=True, maintain_order=True)
        ).to_series()
        self.rows = self.rows[order.to_numpy()]

    # -- positions ------------------------------------------------------------------------

    def position_of_row(self, row: int) -> int | None:
        """Where frame row ``row`` is shown, or None if it is filtered out."""
        if self.sort_key is None:
            pos = int(np.searchsorted(self.rows, row))
            return pos if pos < self.rows.size and self.rows[pos] == row else None
        hits = np.flatnonzero(self.rows == row)
        return int(hits[0]) if hits.size else None

    def _shown_times(self) -> np.ndarray:
        """The times of the shown rows, in time order (cached per ``rows``)."""
        if self._shown_key is not self.rows:
            if self.rows.size == self.total:  # every row, in the frame's order: no copy
                self._shown = self._times
            else:
                self._shown = self._times[self.rows]
            self._shown_key = self.rows
        return self._shown

    def row_at_time(self, t: int) -> int | None:
        """The frame row of the last event (or block allocation) at or before ``t``."""
        row = int(np.searchsorted(self._times, t, side="right")) - 1
        return row if row >= 0 and self._sorted_by_time else None

    def position_at_time(self, t: int) -> int | None:
        """Where the row at time ``t`` is shown; in time order, the nearest shown row."""
        if self.rows.size == 0:
            return None
        if self.sort_key is None or (self.sort_key == self._time_key and not self.descending):
            times = self._shown_times()
            return max(int(np.searchsorted(times, t, side="right")) - 1, 0)
        row = self.row_at_time(t)
        return None if row is None else self.position_of_row(row)

    def event_of(self, position: int) -> int | None:
        """The event position (``#``) of the row shown at ``position`` (Event View)."""
        if "event" not in self.frame.columns:
            return None
        return int(self.rows[position])  # the frame's row is the event's position

    def position_of_event(self, event: int, t: int) -> int | None:
        """Where event ``event`` is shown; if it is filtered out, the row nearest ``t``."""
        if "event" in self.frame.columns and 0 <= event < self.total:
            shown = self.position_of_row(event)
            if shown is not None:
                return shown
        return self.position_at_time(t)

    def position_of_block(self, block_id: int) -> int | None:
        if "block_id" not in self.frame.columns:
            return None
        rows = np.flatnonzero((self.frame["block_id"] == block_id).fill_null(False).to_numpy())
        if not rows.size:
            return None
        if self.kind == "events":  # the event of the block nearest the top
            shown = np.flatnonzero(np.isin(self.rows, rows))
            return int(shown[0]) if shown.size else None
        return self.position_of_row(int(rows[0]))

    # -- rows -----------------------------------------------------------------------------

    def record(self, position: int) -> dict:
        """The row shown at ``position`` as a dict of the frame's columns."""
        return self.frame.row(int(self.rows[position]), named=True)

    def time_of(self, position: int) -> int:
        return int(self._times[self.rows[position]])

    def state_codes(self, rows: np.ndarray, cursor_t: int | None) -> np.ndarray:
        """0 not yet allocated, 1 alive, 2 pending free, 3 freed (at the cursor)."""
        if (cursor_t is not None and self.cursor_event is not None
                and "pos_free_requested" in self.frame.columns):
            return self._state_codes_at_event(rows, self.cursor_event)
        t = _NEVER if cursor_t is None else cursor_t
        t_alloc = self._times[rows]
        t_free = self._t_free[rows]
        requested = self.frame["t_free_requested"].gather(rows).fill_null(_NEVER).to_numpy() \
            if "t_free_requested" in self.frame.columns else np.full(rows.size, _NEVER)
        codes = np.where(t_alloc > t, 0, np.where(t_free <= t, 3, np.where(requested <= t, 2, 1)))
        return codes.astype(np.int64)

    def _state_codes_at_event(self, rows: np.ndarray, event: int) -> np.ndarray:
        """:meth:`state_codes` just after the event at position ``event`` (event order,
        exact also among events sharing a timestamp, as the Pool screen)."""
        def pos(column: str) -> np.ndarray:
            return self.frame[column].gather(rows).fill_null(_NEVER).to_numpy()
        pos_alloc, pos_free, requested = (pos("pos_alloc"), pos("pos_free"),
                                          pos("pos_free_requested"))
        codes = np.where(pos_alloc > event, 0, np.where(
            pos_free <= event, 3, np.where(requested <= event, 2, 1)))
        return codes.astype(np.int64)

    def cells(self, first: int, count: int, cursor_t: int | None = None) -> list[list[str]]:
        """Text of the rows shown at ``first .. first + count`` (only these are formatted)."""
        rows = self.rows[first:first + count]
        if rows.size == 0:
            return []
        df = self.frame[rows]
        out_columns = []
        for column in self.columns:
            out_columns.append(self._format_column(column, df, rows, cursor_t))
        return [list(row) for row in zip(*out_columns, strict=True)]

    def _format_column(self, column: Column, df: pl.DataFrame, rows: np.ndarray,
                       cursor_t: int | None) -> list[str]:
        kind, key = column.kind, column.key
        if kind == "state":
            names = ("not yet", "alive", "pending", "freed")
            ghost = df["ghost"].fill_null(False).to_list() if "ghost" in df.columns else []
            codes = self.state_codes(rows, cursor_t)
            return [names[c] + ("*" if ghost and ghost[i] else "") for i, c in enumerate(codes)]
        if kind == "top":
            return [self._top_of.get(s, "") if s is not None else ""
                    for s in df["stack_id"].to_list()]
        if key == "duration":
            values = (df["t_free"] - df["t_alloc"]).to_list()
            return [format_span(v, self.unit) for v in values]
        values = df[key].to_list()
        if kind == "bytes":
            return ["" if v is None else format_bytes(v) for v in values]
        if kind == "time":
            return [format_time(v, self.start, self.unit) for v in values]
        if kind == "span":
            return [format_span(v, self.unit) for v in values]
        if kind == "addr":
            return ["" if v is None else f"0x{v:x}" for v in values]
        if kind == "flags":
            return [format_flags(v) for v in values]
        return ["" if v is None else str(v) for v in values]

    def csv(self, first: int, count: int) -> str:
        """The rows shown at ``first .. first + count`` as CSV with raw values (bytes, hex
        addresses, seconds since the start or event numbers)."""
        rows = self.rows[first:first + count]
        return self.export(rows).write_csv(float_precision=9)

    def export(self, rows: np.ndarray | None = None) -> pl.DataFrame:
        """The given rows (default: all shown) with the table's columns, raw values: write
        it with ``write_csv(float_precision=9)`` (times in seconds to the nanosecond)."""
        rows = self.rows if rows is None else rows
        df = self.frame[rows]
        exprs = []
        for column in self.columns:
            exprs.append(self._export_expr(column, df).alias(column.title))
        return df.select(exprs) if exprs else df

    def _export_expr(self, column: Column, df: pl.DataFrame) -> pl.Expr:
        key = column.key
        if column.kind == "top":
            ids = list(self._top_of)
            return pl.col("stack_id").replace_strict(
                ids, [self._top_of[i] for i in ids], default=None, return_dtype=pl.String)
        if key == "state":
            return pl.when(pl.col("t_free").is_null()).then(pl.lit("alive at end")).otherwise(
                pl.lit("freed"))
        if key == "duration":
            span = pl.col("t_free") - pl.col("t_alloc")
            return span if self.unit == "event" else span / 1e9
        if column.kind == "time":
            return pl.col(key) if self.unit == "event" else (pl.col(key) - self.start) / 1e9
        if column.kind == "span":
            return pl.col(key) if self.unit == "event" else pl.col(key) / 1e9
        if column.kind == "addr":
            return hex_expr(pl.col(key))
        return pl.col(key).cast(pl.String) if df[key].dtype == pl.Enum else pl.col(key)


__all__ = [
    "BLOCK_COLUMNS", "EVENT_COLUMNS", "Column", "Filter", "TableModel", "format_flags",
    "format_span", "format_time", "parse_size", "parse_time",
]
