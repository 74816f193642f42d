"""Screen 7 in compare mode, Diff: where the difference between the two runs sits.

A header with both files, the alignment and the peak / end figures of the cursor's device
pair; then every attributed delta (by stack, owner and op, at each run's peak and at its
end, :func:`memtui.analysis.across.compare.diff_rows`), largest change first, keys seen in one
run only marked so; under the table the highlighted row's "where" in full (a narrow
pane cuts the column).  Enter on a row asks the app to select it
(``app.select_difference``): both runs' Stacks screens search its frame and both Block
tables show only its blocks.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from memtui.analysis.across.compare import diff_rows
from memtui.tui.widgets.key_bar import KeyBar
from memtui.tui.widgets.status import StatusBar
from memtui.units import counted, format_bytes, signed_bytes

MAX_ROWS = 5000
_ONLY = {"a": "A", "b": "B"}  # the "only" column: the run the key appears in alone


class DiffScreen(Screen):
    """See the module docstring."""

    BINDINGS = [Binding("enter", "choose", "Select in both runs")]
    DEFAULT_CSS = """
    DiffScreen #diff-header { height: auto; max-height: 4; padding: 0 1; }
    DiffScreen #diff-table { height: 1fr; }
    DiffScreen #diff-row { height: auto; max-height: 2; padding: 0 1; background: $panel; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._key: tuple | None = None
        self._rows = None

    def compose(self) -> ComposeResult:
        yield Static(id="diff-header")
        table = DataTable(id="diff-table", cursor_type="row", zebra_stripes=False)
        yield table
        yield Static(id="diff-row")
        yield StatusBar()
        yield KeyBar(compact=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, width in (("B - A", 10), ("at", 4), ("A", 9), ("B", 9), ("by", 5),
                             ("only", 4), ("where", None)):
            table.add_column(label, key=label, width=width)
        self.watch(self.app, "cursor", self._refresh, init=False)
        self.watch(self.app, "comparison_key", self._comparison_changed, init=False)
        self._refresh(self.app.cursor)
        table.focus()
        self.call_after_refresh(self.app.mark_painted, "diff")

    def on_screen_resume(self) -> None:
        self._refresh(self.app.cursor)
        self.query_one(DataTable).focus()

    def _comparison_changed(self, _key) -> None:
        self._key = None
        self._refresh(self.app.cursor)

    def _refresh(self, cursor) -> None:
        if cursor is None or not self.is_attached:
            return
        app = self.app
        pair = app.comparison_for(cursor.device)
        key = (cursor.device, id(pair), app.side)
        if key == self._key:
            return
        self._key = key
        self._header(pair)
        table = self.query_one(DataTable)
        table.clear()
        self._rows = None
        # No loading indicator: mounting one takes the focus from the table, and whether
        # it is back when the rows come depends on the machine's load (the rows come in
        # well under a second; the table is empty until then).
        if pair is None:
            return
        self.run_worker(lambda: self._compute(key, pair), thread=True, exclusive=True,
                        group="diff", description="the differences", exit_on_error=False)

    def _compute(self, key: tuple, pair) -> None:
        """In a thread: the attributed deltas (a sort over every stack of both runs)."""
        rows = diff_rows(pair).head(MAX_ROWS)
        self.app.call_from_thread(self._show_rows, key, rows)

    def _show_rows(self, key: tuple, rows) -> None:
        if key != self._key or not self.is_attached:  # the cursor moved on meanwhile
            return
        table = self.query_one(DataTable)
        self._rows = rows
        for index, row in enumerate(rows.iter_rows(named=True)):
            where = Text(row["label"] or "", no_wrap=True, overflow="ellipsis")
            only = Text(_ONLY.get(row["only_in"] or "", ""), style="bold")
            launch_only = bool(row["launches"]) and not row["delta"]
            if row["launches"]:
                where.append(f"  launches {row['launches']}", style="italic")
            if launch_only:
                where.append(", none of its bytes live at the peaks or ends", style="italic")
            delta = Text(signed_bytes(row["delta"]), justify="right",
                         style="bold" if row["delta"] else "")
            table.add_row(delta, "-" if launch_only else row["at"],
                          Text(format_bytes(row["a_bytes"]), justify="right"),
                          Text(format_bytes(row["b_bytes"]), justify="right"), row["kind"],
                          only, where, key=str(index))
        self._show_row()

    def on_worker_state_changed(self, event) -> None:
        """Failed workers go to the app's one handler (``report_worker``)."""
        report = getattr(self.app, "report_worker", None)
        if report is not None:
            report(event)

    def worker_failed(self, worker) -> None:
        """The differences could not be worked out (the app said why in a toast): the
        header says so."""
        self._key = None  # moving the cursor tries again
        header = self.query_one("#diff-header", Static)
        header.update(Text.assemble((f"{worker.description} failed: ", "bold red"),
                                    f"{type(worker.error).__name__}: {worker.error}"))

    def _header(self, pair) -> None:
        app = self.app
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("Diff ", style="bold")
        text.append(f"{app.side_label('a')}  {app.side_label('b')}\n")
        if pair is None:
            text.append(f"{app.cursor.device} has no counterpart in the other run")
            self.query_one("#diff-header", Static).update(text)
            return
        text.append(f"{pair.device_a} vs {pair.device_b}, ")
        text.append(app.alignment_text(app.cursor.device) + "\n", style="dim")
        for name, a, b in (("peak", pair.a.peak, pair.b.peak),
                           ("end", pair.a.end_allocated, pair.b.end_allocated)):
            delta = b - a
            text.append(f"{name} {format_bytes(a)} -> {format_bytes(b)} ")
            text.append(f"({signed_bytes(delta)})  ", style="bold")
        if pair.new_blocks.height:
            text.append(f"new at B's end: {counted(int(pair.new_blocks['count'].sum()), 'block')} "
                        f"{format_bytes(int(pair.new_blocks['bytes'].sum()))}")
        self.query_one("#diff-header", Static).update(text)

    def selected_row(self) -> dict | None:
        if self._rows is None or self._rows.is_empty():
            return None
        table = self.query_one(DataTable)
        index = min(max(table.cursor_row, 0), self._rows.height - 1)
        return self._rows.row(index, named=True)

    def action_choose(self) -> None:
        row = self.selected_row()
        if row is not None:
            self.app.select_difference(row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_row()

    def _show_row(self) -> None:
        """The highlighted row's "where" in full, with its figures."""
        row = self.selected_row()
        pane = self.query_one("#diff-row", Static)
        if row is None:
            pane.update("")
            return
        only = f", only in {_ONLY[row['only_in']]}" if row["only_in"] in _ONLY else ""
        pane.update(Text.assemble(("▸ ", "bold"), (row["label"] or "", "bold"),
                                  f"  {signed_bytes(row['delta'])} at {row['at']} "
                                  f"by {row['kind']}{only}"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_choose()
