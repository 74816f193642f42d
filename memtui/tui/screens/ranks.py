"""The Ranks screen: every rank and device of a run side by side, the outliers named.

One row per rank and device: peak allocated, peak reserved, allocated at the end, when
the peak happened, leak bytes per step and fragmentation where those analyses gave them,
and a sparkline of the allocated curve (all rows on one scale, so heights compare).
Rows arrive as the ranks finish loading (the title says ``12/64 ranks``); outliers are
marked ``!`` and the line under the table says why for the highlighted row.

It reads the app's ``rank_table`` (a :class:`memtui.rankload.RankTable`: ``rows``,
``done``, ``expected``, ``warnings``) and redraws when the app's ``ranks_version``
changes.  Enter asks the app to open the row's rank (``app.open_rank(row)``); ``s`` / ``S``
change the sort, as does a click on a column header.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.markup import escape
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from memtui.analysis.across.ranks import RankRow, sparkline
from memtui.text.ranks import format_peak_time
from memtui.tui.widgets.key_bar import KeyBar
from memtui.tui.widgets.status import short_bytes
from memtui.units import counted

#: Sparkline width: narrow terminals (under WIDE columns) get the short one.
SPARK_WIDTH = (10, 24)
WIDE = 100


def _fragmentation(row: RankRow) -> str:
    return "-" if row.fragmentation is None else f"{row.fragmentation:.0%}"


#: (column key, header, text of a row, sort key of a row, optional: shown only when known)
COLUMNS: list[tuple[str, str, Callable[[RankRow], str], Callable[[RankRow], Any], bool]] = [
    ("rank", "Rank", lambda r: "-" if r.rank is None else str(r.rank),
     lambda r: (r.rank is None, r.rank or 0, r.path, r.device), False),
    ("device", "Device", lambda r: r.device, lambda r: (r.device, r.rank or 0), False),
    ("peak", "Peak", lambda r: short_bytes(r.peak_allocated), lambda r: r.peak_allocated, False),
    ("reserved", "Resv", lambda r: short_bytes(r.peak_reserved),
     lambda r: r.peak_reserved or 0, False),
    ("end", "At end", lambda r: short_bytes(r.allocated_at_end),
     lambda r: r.allocated_at_end, False),
    ("when", "Peak at", format_peak_time, lambda r: r.peak_time or 0, False),
    ("leak", "Leak/step", lambda r: short_bytes(r.leak_bytes_per_step),
     lambda r: r.leak_bytes_per_step or 0, True),
    ("frag", "Frag", _fragmentation, lambda r: r.fragmentation or 0.0, True),
]
SORTABLE = [key for key, *_ in COLUMNS]
_DESCENDING_FIRST = {"peak", "reserved", "end", "leak", "frag"}


def row_key(row: RankRow) -> str:
    return f"{row.path}\0{row.device}"


class RanksScreen(Screen):
    """See the module docstring."""

    DEFAULT_CSS = """
    #ranks-title { height: 1; padding: 0 1; background: $panel; }
    #ranks-table { height: 1fr; }
    #ranks-detail { height: 3; padding: 0 1; background: $panel; }
    """

    BINDINGS = [
        Binding("enter", "open", "Open rank"),
        Binding("s", "sort(1)", "Sort"),
        Binding("S", "sort(-1)", "Sort back", show=False),
        Binding("minus", "reverse", "Reverse", show=False),
        Binding("o", "next_outlier", "Next outlier"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = "rank"
        self.descending = False
        self._shown: list[RankRow] = []
        self._columns: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(id="ranks-title")
        table = DataTable(id="ranks-table", cursor_type="row", zebra_stripes=False)
        yield table
        yield Static(id="ranks-detail")
        yield KeyBar(compact=True)

    def on_mount(self) -> None:
        self.watch(self.app, "ranks_version", self._ranks_changed, init=False)
        self.query_one(DataTable).focus()
        self.refresh_rows()
        self.app.mark_painted("ranks")

    def _ranks_changed(self, _version: int) -> None:
        self.refresh_rows()

    # -- drawing -----------------------------------------------------------------------

    def _table_rows(self) -> list[RankRow]:
        table = getattr(self.app, "rank_table", None)
        return list(table.rows) if table is not None else []

    def refresh_rows(self) -> None:
        rows = self._table_rows()
        sort = next(c for c in COLUMNS if c[0] == self.sort_key)[3]
        rows.sort(key=sort, reverse=self.descending)
        columns = [key for key, _, _, _, optional in COLUMNS
                   if not optional or any(_known(row, key) for row in rows)]
        table = self.query_one(DataTable)
        current = self._highlighted_key(table)
        if columns != self._columns:
            table.clear(columns=True)
            table.add_column(" ", key="flag")
            for key, header, *_ in COLUMNS:
                if key in columns:
                    table.add_column(self._header(key, header), key=key)
            table.add_column("Curve", key="curve")
            self._columns = columns
        else:
            table.clear()
            for key, header, *_ in COLUMNS:
                if key in columns:
                    table.columns[key].label = Text(self._header(key, header))
        top = max((int(row.curve.max()) for row in rows if row.curve.size), default=1)
        spark_width = SPARK_WIDTH[self.app.size.width >= WIDE]
        for row in rows:
            cells = [Text("!", style="bold reverse") if row.outlier else Text(" ")]
            cells += [Text(text(row), style="bold" if row.outlier else "")
                      for key, _, text, _, _ in COLUMNS if key in columns]
            cells.append(Text(sparkline(row.curve, top, spark_width)))
            table.add_row(*cells, key=row_key(row))
        self._shown = rows
        keys = [row_key(row) for row in rows]
        loading = getattr(self.app, "rank_table", None)
        if loading is not None and loading.done < loading.expected:
            pass  # rows still arrive: the cursor keeps its place (the first row)
        elif current in keys:
            table.move_cursor(row=keys.index(current), animate=False)
        self._show_title()
        self._show_detail()

    def _header(self, key: str, header: str) -> str:
        if key != self.sort_key:
            return header
        return header + (" ▼" if self.descending else " ▲")

    def _highlighted_key(self, table: DataTable) -> str | None:
        if not self._shown or table.cursor_row is None:
            return None
        index = table.cursor_row
        return row_key(self._shown[index]) if 0 <= index < len(self._shown) else None

    def highlighted(self) -> RankRow | None:
        """The row under the table's cursor."""
        table = self.query_one(DataTable)
        index = table.cursor_row
        if not self._shown or index is None or not 0 <= index < len(self._shown):
            return None
        return self._shown[index]

    def _show_title(self) -> None:
        table = getattr(self.app, "rank_table", None)
        if table is None:
            return
        outliers = sum(row.outlier for row in self._shown)
        parts = [("Ranks", "bold"), f"  {table.done}/{table.expected} ranks",
                 f"  {counted(len(self._shown), 'row')}"]
        stopped = getattr(self.app, "stream_error", None)
        if stopped:
            parts.append((f"  stopped: {stopped}", "bold red"))
        elif table.done < table.expected:
            parts.append(("  loading…", "italic"))
        if outliers:
            parts.append((f"  ! {outliers} outlier{'s' if outliers > 1 else ''}", "bold"))
        if table.warnings:
            parts.append(f"  {counted(len(table.warnings), 'warning')}")
        self.query_one("#ranks-title", Static).update(Text.assemble(*parts))

    def _show_detail(self) -> None:
        row = self.highlighted()
        detail = self.query_one("#ranks-detail", Static)
        if row is None:
            table = getattr(self.app, "rank_table", None)
            warning = table.warnings[-1] if table is not None and table.warnings else ""
            detail.update(Text(warning or "waiting for the first rank…"))
            return
        why = f"! {row.why}" if row.outlier else \
            "within median + 3 MAD of the other ranks  (Enter: open this rank)"
        detail.update(Text.assemble((row.path, "bold"), f"  {row.device}\n",
                                    (why, "bold" if row.outlier else "")))

    def on_data_table_row_highlighted(self, _message: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        message.stop()
        self.action_open()

    def on_data_table_header_selected(self, message: DataTable.HeaderSelected) -> None:
        key = message.column_key.value
        if key in SORTABLE:
            self._sort_by(key, not self.descending if key == self.sort_key
                          else key in _DESCENDING_FIRST)

    # -- actions -----------------------------------------------------------------------

    def action_open(self) -> None:
        row = self.highlighted()
        if row is not None:
            self.app.open_rank(row)  # type: ignore[attr-defined]

    def action_sort(self, step: int) -> None:
        shown = [key for key in SORTABLE if key in self._columns]
        index = shown.index(self.sort_key) if self.sort_key in shown else 0
        key = shown[(index + step) % len(shown)]
        self._sort_by(key, key in _DESCENDING_FIRST)

    def action_reverse(self) -> None:
        self._sort_by(self.sort_key, not self.descending)

    def _sort_by(self, key: str, descending: bool) -> None:
        self.sort_key, self.descending = key, descending
        self.refresh_rows()
        self.notify(f"Sorted by {escape(key)} ({'high' if descending else 'low'} first)",
                    timeout=2)

    def action_next_outlier(self) -> None:
        table = self.query_one(DataTable)
        flagged = [i for i, row in enumerate(self._shown) if row.outlier]
        if not flagged:
            self.notify("No rank is an outlier (median + 3 MAD).", timeout=3)
            return
        after = [i for i in flagged if i > (table.cursor_row or 0)]
        table.move_cursor(row=(after or flagged)[0])


def _known(row: RankRow, key: str) -> bool:
    return {"leak": row.leak_bytes_per_step, "frag": row.fragmentation}.get(key) is not None


__all__ = ["COLUMNS", "RanksScreen", "row_key"]
