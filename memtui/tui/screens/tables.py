"""Screen 5, Tables: the Block View and the Event View, as in MindStudio Insight.

Both are :class:`~memtui.tui.widgets.table.VirtualTable` over a
:class:`~memtui.analysis.tables.TableModel`, built for the device on first show.
Sorting and filtering run in a worker (a 10M-row sort takes a few tenths of a second);
the table says what it is doing meanwhile.  Enter on a row moves the cursor to its time
and selects its block; when the cursor moves, the Event View follows it and the Block View
marks the selected block.  The side pane (bottom pane when narrow) shows the highlighted
row's full call stack.

Keys: ``tab`` Blocks/Events, ``s`` sort by the highlighted column (again: reverse),
``f`` filter (``size>=1M size<1G t>1.5s t<3s addr=0x.. text``), ``/`` search and ``n`` next,
``w`` scope (all / window / alive at the cursor: the header sums their bytes and names
the level's bytes no row shows, such as a profiler's memory alive before the capture),
``c`` copy the rows on screen as CSV,
``C`` save every shown row to a CSV file, ``i`` only the blocks flagged inefficient
(Insight's "Filter inefficient memory blocks"), ``I`` edit its three thresholds (early
allocation, late deallocation, temporary idleness: a time and/or a share of the block's
life; the flags are computed again by ``analysis.inefficient.with_inefficient_flags``).
The columns are Insight's: Block View with Process and Thread ID, Attr, First/Last
Access, Max Access Interval and the flags; Event View with Event Type, Name, Process,
Thread and Device ID, Attr; the side pane shows the Python and the C call stack.
The filter takes ranges of Size, of Malloc and Free times (``malloc>1s free<3s``) and of
the time (``t``).  ``f`` on the Stacks screen shows here only the
blocks under a node of its tree (``app.filter_blocks``); ``F`` shows all blocks again.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Static

from memtui.analysis.findings.flags import (
    DEFAULT_THRESHOLDS,
    Thresholds,
    format_thresholds,
    parse_thresholds,
    with_inefficient_flags,
)
from memtui.analysis.roles import role_table_blocks
from memtui.analysis.stacks.callstack import stack_lines
from memtui.analysis.tables import INEFFICIENT_WORDS, Filter, TableModel, format_time
from memtui.analysis.timeline.at_time import block_positions
from memtui.analysis.timeline.attribution import remainder_rows, remainder_text
from memtui.errors import printable
from memtui.tui.widgets.key_bar import KeyBar
from memtui.tui.widgets.status import StatusBar
from memtui.tui.widgets.table import VirtualTable
from memtui.units import counted, format_bytes

SCOPES = {"blocks": ("all", "window", "cursor"), "events": ("all", "window")}
SCOPE_NAMES = {"all": "all", "window": "in the window", "cursor": "alive at the cursor"}


class TablesScreen(Screen):
    """See the module docstring."""

    BINDINGS = [
        Binding("tab", "switch_view", "Blocks/Events", priority=True, id="tables.switch_view"),
        Binding("s", "sort", "Sort", id="tables.sort"),
        Binding("f", "filter", "Filter", id="tables.filter"),
        Binding("slash", "search", "Search", show=False, id="tables.search"),
        Binding("n", "next_match", "Next match", show=False, id="tables.next_match"),
        Binding("w", "scope", "Scope", id="tables.scope"),
        Binding("F", "clear_only", "All stacks", show=False, id="tables.clear_only"),
        Binding("i", "inefficient", "Inefficient", id="tables.inefficient"),
        Binding("I", "thresholds", "Thresholds", show=False, id="tables.thresholds"),
        Binding("c", "copy", "Copy CSV", id="tables.copy"),
        Binding("C", "export", "Export CSV", show=False, id="tables.export"),
        Binding("escape", "close_input", "Close", show=False, id="tables.close_input"),
    ]
    #: What each key does, said by its entry in the command palette (ctrl+p).
    PALETTE_HELP: ClassVar[dict[str, str]] = {
        "tables.switch_view": "Show the Block View or the Event View",
        "tables.sort": "Sort by the column under the cursor (again: the other way)",
        "tables.filter": "Show only the rows matching a filter: size>=1M t>1.5s addr=0x... text",
        "tables.search": "Find rows holding a text (n: the next one)",
        "tables.next_match": "Go to the next row holding the searched text",
        "tables.scope": "All rows, those in the window, or the blocks alive at the cursor",
        "tables.clear_only": "Show the blocks of every stack again (after Stacks' f)",
        "tables.inefficient": "Only the blocks flagged inefficient, or all of them",
        "tables.thresholds": "Edit the thresholds of the inefficient flags",
        "tables.copy": "Copy the rows on screen as CSV to the clipboard (and a file)",
        "tables.export": "Save every shown row to a CSV file (here, else the temp folder)",
        "tables.close_input": "Close the filter or search line",
    }

    def __init__(self) -> None:
        super().__init__()
        self.view_kind = "blocks"
        self.models: dict[tuple[str, str], TableModel] = {}
        self.scope = {"blocks": "all", "events": "all"}
        self.filters = {"blocks": "", "events": ""}
        self.only_label = ""  # the Stacks screen's node whose blocks alone are shown
        self._only: tuple[str, object, str] | None = None  # (device, block ids, label)
        self._input_mode = ""  # "filter" or "search" while the input is open
        self._search = ""
        self._device: str | None = None
        self._match_cache: tuple | None = None
        self._scoped_at: dict[str, int | None] = {}  # the cursor time a view's scope used
        # (kind, device) -> (sort key, descending) of tables built again (--follow)
        self._sorts: dict[tuple[str, str], tuple[str, bool]] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="tables-header")
        with Horizontal(id="tables-body"):
            with Vertical(id="tables-main"):
                yield VirtualTable(id="blocks-table")
                yield VirtualTable(id="events-table")
                yield Input(id="tables-input")
            with VerticalScroll(id="stack-pane"):
                yield Static(id="stack-text")
        yield StatusBar()
        yield KeyBar(compact=True)

    # -- set-up ---------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.query_one("#tables-input", Input).display = False
        self.query_one("#events-table").display = False
        self.watch(self.app, "cursor", self._cursor_changed, init=False)
        self.watch(self.app, "top_rule", self._top_rule_changed, init=False)
        self._show_device(self.app.cursor.device)
        self._take_block_filter()
        self.call_after_refresh(self.app.mark_painted, "tables")

    def on_screen_resume(self) -> None:
        cursor = self.app.cursor
        if cursor.device != self._device:
            self._show_device(cursor.device)
        else:
            self._follow(cursor)
            self._refresh_cursor_scope(cursor)
        self._take_block_filter()
        self.table.focus()

    def _refresh_cursor_scope(self, cursor) -> None:
        """Re-filter the views scoped to the cursor whose rows are of another time."""
        for kind, scope in self.scope.items():
            if scope == "cursor" and self._scoped_at.get(kind) != cursor.t:
                self._reapply(kind)

    def _forget_models(self) -> None:
        """Drop the built tables, remembering their sort order for when they are built
        again."""
        self._sorts.update({key: (model.sort_key, model.descending)
                            for key, model in self.models.items() if model.sort_key is not None})
        self.models.clear()

    def _top_rule_changed(self) -> None:
        """Stacks are named by another frame: the tables are built again."""
        self._forget_models()
        if self.app.cursor is not None and self.is_attached:
            self._show_device(self.app.cursor.device)

    # -- the blocks of a call stack (from the Stacks screen) ------------------------------

    def _take_block_filter(self) -> None:
        """Show only the blocks the app was asked to (``app.filter_blocks``)."""
        request = getattr(self.app, "block_filter", None)
        if request is None:
            return
        self.app.block_filter = None
        self._only = request
        if self.view_kind != "blocks":
            self.action_switch_view()
        self._apply_only()

    def _apply_only(self) -> None:
        if self._only is None:
            return
        device, ids, label = self._only
        model = self.models.get(("blocks", device))
        if model is None or device != self._device:
            return  # applied when the device's Block View is built
        self._only = None
        model.only = ids
        self.only_label = label
        self._reapply("blocks")

    def action_clear_only(self) -> None:
        model = self.model("blocks")
        if model is not None and model.only is not None:
            model.only = None
            self.only_label = ""
            self._reapply("blocks")

    @property
    def table(self) -> VirtualTable:
        return self.query_one(f"#{self.view_kind}-table", VirtualTable)

    def model(self, kind: str | None = None) -> TableModel | None:
        return self.models.get((kind or self.view_kind, self._device or ""))

    def _show_device(self, device: str) -> None:
        self._device = device
        for kind in ("blocks", "events"):
            table = self.query_one(f"#{kind}-table", VirtualTable)
            if (kind, device) in self.models:
                table.set_model(self.models[(kind, device)])
            else:
                table.busy = f"reading the {kind}…"
                table.refresh()
                self._build_model(kind, device)
        self._update_header()
        self.table.focus()

    @work(thread=True, group="build", description="building the table",
          exit_on_error=False)
    def _build_model(self, kind: str, device: str) -> None:
        app = self.app
        timeline = app.timeline(device)
        unit = app.trace.meta.time_unit
        tops = app.stack_tops()
        if kind == "blocks":
            model = TableModel.for_blocks(role_table_blocks(app.trace, device), timeline.start,
                                          unit, tops, events=app.trace.device_events(device),
                                          positions=block_positions(app.trace, device))
        else:
            model = TableModel.for_events(app.trace.device_events(device), timeline.start, unit,
                                          tops)
        sort = self._sorts.get((kind, device))
        if sort is not None and any(column.key == sort[0] for column in model.columns):
            model.sort(sort[0], sort[1], app.cursor.t)  # a table built again keeps its order
        app.call_from_thread(self._model_built, kind, device, model)

    def _model_built(self, kind: str, device: str, model: TableModel) -> None:
        self.models[(kind, device)] = model
        self._sorts.pop((kind, device), None)
        if device != self._device:
            return
        table = self.query_one(f"#{kind}-table", VirtualTable)
        table.busy = ""
        table.cursor_t = self.app.cursor.t
        model.cursor_event = self.app.cursor.event
        table.selected_block = self.app.cursor.block_id
        table.set_model(model)
        self._follow(self.app.cursor, force=True)
        self._update_header()
        if kind == "blocks":
            self._apply_only()
        if self.filters[kind] or self.scope[kind] != "all":
            self._reapply(kind)  # a table built again (--follow) keeps its filter

    def on_worker_state_changed(self, event) -> None:
        """Failed workers go to the app's one handler (``report_worker``)."""
        report = getattr(self.app, "report_worker", None)
        if report is not None:
            report(event)

    def worker_failed(self, worker) -> None:
        """A worker of this screen failed (the app said so): no table stays "busy"."""
        for kind in ("blocks", "events"):
            table = self.query_one(f"#{kind}-table", VirtualTable)
            if table.busy:
                table.busy = f"{worker.description or worker.group} failed"
                table.refresh()

    def trace_replaced(self) -> None:
        """The app shows a grown trace (``--follow``): the tables are built again (their
        filters and sort order kept), now if this screen is shown, else when it is."""
        self._forget_models()
        if self.is_attached and self.app.screen is self:
            self._show_device(self.app.cursor.device)
        else:
            self._device = None

    # -- following the cursor -------------------------------------------------------------

    def _cursor_changed(self, cursor) -> None:
        if cursor is None or not self.is_attached:
            return
        if cursor.device != self._device:
            self._show_device(cursor.device)
            return
        if self.app.screen is self:
            self._follow(cursor)
            self._refresh_cursor_scope(cursor)

    def _follow(self, cursor, force: bool = False) -> None:
        """Event View to the cursor's event; Block View to the selected block."""
        for kind in ("blocks", "events"):
            table = self.query_one(f"#{kind}-table", VirtualTable)
            model = self.model(kind)
            old_block = table.selected_block
            table.cursor_t = cursor.t
            if model is not None:
                model.cursor_event = cursor.event
            table.selected_block = cursor.block_id
            table.refresh()
            if model is None or table.busy or model.rows.size == 0:
                continue
            if kind == "events":
                event = self.app.timeline(cursor.device).event_of(cursor)
                current = table.cursor_row
                if not force and current < model.rows.size and model.event_of(current) == event:
                    continue
                position = model.position_of_event(event, cursor.t)
                if position is not None:
                    table.centre_on(position)
            elif cursor.block_id is not None and (force or cursor.block_id != old_block):
                position = model.position_of_block(cursor.block_id)
                if position is not None:
                    table.centre_on(position)

    # -- header and stack pane ------------------------------------------------------------

    def _update_header(self) -> None:
        kind = self.view_kind
        model = self.model()
        text = Text(no_wrap=True, overflow="ellipsis")
        for name in ("blocks", "events"):
            label = "Blocks" if name == "blocks" else "Events"
            if name == kind:
                text.append(f"[{label}]", style="bold reverse")
            else:
                text.append(f" {label} ", style="dim")
            text.append(" ")
        text.append("(tab)  ", style="dim")
        if model is not None:
            text.append(f"{model.rows.size:,} of {counted(model.total, 'row')}")
            if model.sort_key is not None:
                title = model.column(model.sort_key).title
                text.append(f" · sort {title} {'▼' if model.descending else '▲'}")
            if self.filters[kind]:
                text.append(f" · filter {self.filters[kind]}")
                if any(w.lower() in INEFFICIENT_WORDS for w in self.filters[kind].split()):
                    text.append(f" ({format_thresholds(self._thresholds())}, I: change)")
            if kind == "blocks" and model.only is not None:
                text.append(f" · stack {self.only_label} (F: all)")
            if self.scope[kind] == "cursor" and self._scoped_at.get(kind) is not None:
                when = format_time(self._scoped_at[kind], model.start, model.unit)
                text.append(f" · alive at {when}")
                if kind != "blocks" or not self._alive_sum(text, model):
                    text.append(" (the cursor)")
            elif self.scope[kind] != "all":
                text.append(f" · {SCOPE_NAMES[self.scope[kind]]}")
        header = self.query_one("#tables-header", Static)
        header.styles.height = text.plain.count("\n") + 1
        header.update(text)

    def _alive_sum(self, text: Text, model: TableModel) -> bool:
        """The bytes of the blocks alive at the cursor and, where they are not all of the
        status bar's level, the rest named on a second line (no row shows it): "5.8 GiB in
        these rows + 4.2 GiB alive before the capture = 10.0 GiB"; False where the rows are
        not all the blocks alive."""
        cursor = self.app.cursor
        if self.filters["blocks"] or model.only is not None or "size" not in model.frame.columns \
                or self._scoped_at.get("blocks") != cursor.t:
            return False
        held = int(model.frame["size"].gather(model.rows).fill_null(0).sum())
        timeline = self.app.timeline(cursor.device)
        level = timeline.levels_at_event(timeline.event_of(cursor)).allocated
        rest = remainder_rows(self.app.trace, cursor.device, level, held)
        text.append(f": {format_bytes(held)}")
        if rest:  # on a line of its own: the whole sum shows in a narrow pane too
            text.append(f"\n{format_bytes(held)} in these rows + {remainder_text(rest)} = "
                        f"{format_bytes(level)}", style="bold")
        return True

    def on_virtual_table_highlighted(self, message: VirtualTable.Highlighted) -> None:
        if message.table is not self.table:
            return
        self._show_stack(message.position)

    def _show_stack(self, position: int) -> None:
        model = self.model()
        pane = self.query_one("#stack-text", Static)
        if model is None or position >= model.rows.size:
            pane.update("")
            return
        record = model.record(position)
        stack_id = record.get("stack_id")
        text = Text()
        what = f"block {record['block_id']}" if self.view_kind == "blocks" else (
            f"event {record.get('event')}")  # the event number every screen shows
        text.append(f"Call stack of {what}", style="bold")
        text.append(" (innermost first)\n", style="dim")
        _append_stack(text, self.app.trace, stack_id, model.top_of(stack_id))
        c_stack = record.get("c_stack_id")
        if c_stack is not None and c_stack != stack_id:  # msMemScope: the C stack too
            text.append("\nC call stack", style="bold")
            text.append(" (innermost first)\n", style="dim")
            _append_stack(text, self.app.trace, c_stack, None)
        pane.update(text)

    # -- rows to the cursor ---------------------------------------------------------------

    def on_virtual_table_activated(self, message: VirtualTable.Activated) -> None:
        model = self.model()
        if model is None or message.table is not self.table:
            return
        record = model.record(message.position)
        block = record.get("block_id")
        cursor = self.app.cursor
        block = block if block is not None else cursor.block_id
        if record.get("event") is not None:  # an Event View row: exactly that event
            self.app.move_cursor(event=int(record["event"]), block_id=block)
        else:
            self.app.move_cursor(t=model.time_of(message.position), block_id=block)

    def on_virtual_table_header_clicked(self, message: VirtualTable.HeaderClicked) -> None:
        self._sort(message.column.key)

    # -- actions --------------------------------------------------------------------------

    def action_switch_view(self) -> None:
        if self.query_one("#tables-input", Input).has_focus:
            return
        self.query_one(f"#{self.view_kind}-table").display = False
        self.view_kind = "events" if self.view_kind == "blocks" else "blocks"
        table = self.table
        table.display = True
        table.focus()
        self._show_stack(table.cursor_row)
        self._update_header()

    def action_sort(self) -> None:
        column = self.table.current_column
        if column is not None:
            self._sort(column.key)

    def _sort(self, key: str) -> None:
        model = self.model()
        if model is None or self.table.busy:
            return
        descending = not model.descending if model.sort_key == key else column_default_desc(
            model.column(key).kind)
        self.table.busy = f"sorting {model.rows.size:,} rows by {model.column(key).title}…"
        self.table.refresh()
        self._run_sort(self.view_kind, model, key, descending)

    @work(thread=True, exclusive=True, group="sort", description="sorting",
          exit_on_error=False)
    def _run_sort(self, kind: str, model: TableModel, key: str, descending: bool) -> None:
        model.sort(key, descending, self.app.cursor.t)
        self.app.call_from_thread(self._rows_changed, kind, 0)

    def _rows_changed(self, kind: str, position: int | None = None) -> None:
        table = self.query_one(f"#{kind}-table", VirtualTable)
        table.busy = ""
        table.refresh_rows(keep=position)
        self._match_cache = None
        if position is None:  # filtered: back to the cursor's event or selected block
            self._follow(self.app.cursor, force=True)
        self._update_header()

    def action_filter(self) -> None:
        self._open_input("filter", self.filters[self.view_kind],
                         "size>=1M size<1G t>1.5s malloc<2s free>3s addr=0x… inefficient "
                         "text  (Enter apply, Esc close)")

    def action_inefficient(self) -> None:
        """Insight's "Filter inefficient memory blocks": only the flagged blocks, or all."""
        if self.view_kind != "blocks":
            self.action_switch_view()
        words = self.filters["blocks"].split()
        kept = [w for w in words if w.lower() not in INEFFICIENT_WORDS]
        if len(kept) == len(words):
            kept.append("inefficient")
            model = self.model("blocks")
            if model is not None and not any(c.key == "flags" for c in model.columns):
                self.notify("No block is flagged inefficient under the thresholds "
                            f"({format_thresholds(self._thresholds())}); I changes them.")
        self.filters["blocks"] = " ".join(kept)
        self._reapply("blocks")

    def _thresholds(self) -> Thresholds:
        return self.app.trace.meta.extra.get("thresholds", DEFAULT_THRESHOLDS)

    def action_thresholds(self) -> None:
        """Edit the three thresholds of the inefficient flags (early, late, idle)."""
        self._open_input("thresholds", format_thresholds(self._thresholds()),
                         "early=50% late=2s idle=1s,20%  (time and/or % of the block's "
                         "life; off)  Enter apply, Esc close")

    def _apply_thresholds(self, value: str) -> None:
        try:
            thresholds = parse_thresholds(value, self._thresholds())
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        self.action_close_input()
        trace = self.app.trace
        if trace.blocks.is_empty() or trace.blocks["first_access"].null_count() == \
                trace.blocks.height:
            self.notify("This capture records no accesses: no block can be flagged.")
            return
        self.notify(f"Flagging blocks under {format_thresholds(thresholds)}…")
        self._run_thresholds(thresholds)

    @work(thread=True, exclusive=True, group="thresholds", description="inefficient flags",
          exit_on_error=False)
    def _run_thresholds(self, thresholds: Thresholds) -> None:
        trace = with_inefficient_flags(self.app.trace, thresholds)
        self.app.call_from_thread(self.app.replace_trace, trace, self.app._timelines)

    def action_search(self) -> None:
        self._open_input("search", self._search, "text to find (Enter: next match, Esc close)")

    def _open_input(self, mode: str, value: str, placeholder: str) -> None:
        field = self.query_one("#tables-input", Input)
        self._input_mode = mode
        field.value = value
        field.placeholder = placeholder
        field.display = True
        field.focus()

    def action_close_input(self) -> None:
        field = self.query_one("#tables-input", Input)
        if field.display:
            field.display = False
            self._input_mode = ""
            self.table.focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        value = message.value.strip()
        if self._input_mode == "filter":
            model = self.model()
            if model is None:
                return
            try:
                Filter.parse(value, model.start, model.unit)
            except ValueError as exc:
                self.notify(str(exc), severity="error")
                return
            self.filters[self.view_kind] = value
            self.action_close_input()
            self._reapply(self.view_kind)
        elif self._input_mode == "thresholds":
            self._apply_thresholds(value)
        elif self._input_mode == "search":
            self._search = value
            self.action_close_input()
            self.action_next_match()

    def _scope_range(self, kind: str) -> tuple[int, int] | int | None:
        cursor = self.app.cursor
        scope = self.scope[kind]
        if scope == "window" and cursor.window is not None:
            return cursor.window
        if scope == "cursor":  # exactly the blocks alive just after the cursor's event
            return self.app.timeline(cursor.device).event_of(cursor)
        return None

    def _reapply(self, kind: str) -> None:
        model = self.model(kind)
        if model is None:
            return
        table = self.query_one(f"#{kind}-table", VirtualTable)
        table.busy = f"filtering {model.total:,} rows…"
        table.refresh()
        spec = Filter.parse(self.filters[kind], model.start, model.unit)
        self._scoped_at[kind] = self.app.cursor.t if self.scope[kind] == "cursor" else None
        self._run_filter(kind, model, spec, self._scope_range(kind))

    @work(thread=True, exclusive=True, group="filter", description="filtering",
          exit_on_error=False)
    def _run_filter(self, kind: str, model: TableModel, spec: Filter,
                    scope: tuple[int, int] | int | None) -> None:
        model.apply(spec, scope, self.app.cursor.t)
        self.app.call_from_thread(self._rows_changed, kind, None)

    def action_scope(self) -> None:
        kind = self.view_kind
        scopes = SCOPES[kind]
        scope = scopes[(scopes.index(self.scope[kind]) + 1) % len(scopes)]
        if scope == "window" and self.app.cursor.window is None:
            self.notify("No window selected: [ and ] (or a drag on the Trend) select one.")
            scope = scopes[(scopes.index(scope) + 1) % len(scopes)]
        self.scope[kind] = scope
        self._reapply(kind)

    def action_next_match(self) -> None:
        model = self.model()
        if model is None or not self._search:
            return
        key = (self._search, id(model.rows), self.view_kind)
        if self._match_cache is None or self._match_cache[0] != key:
            spec = Filter(text=self._search)
            saved, model.filter = model.filter, spec
            try:
                mask = model._mask()
            finally:
                model.filter = saved
            hits = np.flatnonzero(mask[model.rows]) if mask is not None else np.arange(0)
            self._match_cache = (key, hits)
        hits = self._match_cache[1]
        if hits.size == 0:
            self.notify(f"no row matches {self._search!r}")
            return
        after = hits[hits > self.table.cursor_row]
        position = int(after[0]) if after.size else int(hits[0])
        self.table.centre_on(position)

    def action_copy(self) -> None:
        model = self.model()
        if model is None:
            return
        first, count = self.table.visible_range()
        text = model.csv(first, count)
        self.app.copy_to_clipboard(text)
        path = None if _served() else _write_csv(text, self.view_kind)
        where = f" and saved them to {path}" if path else ""
        self.notify(f"Copied {counted(count, 'row')} as CSV to the clipboard (if the terminal "
                    f"allows OSC 52){where}.", timeout=8)

    def action_export(self) -> None:
        model = self.model()
        if model is not None:
            self.notify(f"Saving {model.rows.size:,} rows…")
            self._run_export(model, self.view_kind)

    def _deliver_to_browser(self, text: str, kind: str) -> None:
        """``memtui serve``: the CSV goes to the browser as a download, never to a file
        on the server (the page's visitor must not write there)."""
        import io

        self.app.deliver_text(io.StringIO(text), save_filename=_csv_name(kind))

    @work(thread=True, group="export", description="saving the CSV",
          exit_on_error=False)
    def _run_export(self, model: TableModel, kind: str) -> None:
        text = model.export().write_csv(float_precision=9)
        if _served():
            self.app.call_from_thread(self._deliver_to_browser, text, kind)
            return
        path = _write_csv(text, kind)
        message = f"Saved {counted(model.rows.size, 'row')} to {path}" if path else \
            "Could not save"
        self.app.call_from_thread(self.notify, message, timeout=8)


def column_default_desc(kind: str) -> bool:
    """Sizes and durations sort largest first at the first press; the rest ascending."""
    return kind in ("bytes", "span")


def _served() -> bool:
    """Whether this app runs behind ``memtui serve`` (memtui.serve_web.SERVED_ENV)."""
    return os.environ.get("MEMTUI_SERVED") == "1"


def _csv_name(kind: str) -> str:
    return f"memtui-{kind}-{time.strftime('%Y%m%d-%H%M%S')}.csv"


def _write_csv(text: str, kind: str) -> Path | None:
    """Write CSV text to ``memtui-KIND-TIME.csv`` here, or in the temp folder (through an
    exclusive temporary renamed into place: a link planted at that predictable name in a
    shared folder is replaced, never written through)."""
    from memtui.outputs import write_atomically

    name = _csv_name(kind)
    for folder in _writable_folders():
        if os.access(folder, os.W_OK):
            path = folder / name
            try:
                return write_atomically(path, text)
            except OSError:
                continue
    return None


def _writable_folders() -> list[Path]:
    """The current folder (where it still exists), then the temp folder."""
    try:
        return [Path.cwd(), Path(tempfile.gettempdir())]
    except OSError:  # the current folder was removed
        return [Path(tempfile.gettempdir())]


def _append_stack(text: Text, trace, stack_id: int | None, name: str | None) -> None:
    """A stack for the panel: the name every screen gives it, then its frames without
    the unwinder's and allocator's internals (their count said instead)."""
    lines = stack_lines(trace, stack_id)
    if not lines:
        text.append("no call stack recorded", style="italic")
        return
    if name:
        text.append("named ", style="dim")
        text.append(printable(name) + "\n", style="bold")
    hidden = sum(1 for _, internal in lines if internal)
    for label, internal in lines:
        if not internal:
            text.append("• " + printable(label) + "\n")  # U+2028 in a name breaks a line
    if hidden:
        text.append(f"({hidden} allocator, unwinder and interpreter frames hidden)\n",
                    style="dim")

