"""A virtual table over a :class:`~memtui.analysis.tables.TableModel` (Line API).

Only the rows on screen are formatted and painted, so 10M rows scroll like 10: the widget
asks the model for the text of the visible rows on each paint.  The header stays on the
first line; a gutter marks the highlighted row (``›``) and the rows of the selected block
(``●``) so neither depends on colour.  Keys: up/down/page/home/end move the highlight,
left/right move the column cursor (its header drawn reversed: ``s`` sorts by that column;
it starts on the first column of bytes), Enter activates; a click highlights, a double click
activates, a click on the header sorts.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memtui.analysis.tables import Column, TableModel
from memtui.errors import printable
from memtui.tui.widgets import paint

GUTTER = 2
_RIGHT = ("int", "bytes", "time", "span")


class VirtualTable(ScrollView, can_focus=True):
    """See the module docstring."""

    BINDINGS = [
        Binding("up", "move(-1)", "Up", show=False, id="table.move_minus_1"),
        Binding("down", "move(1)", "Down", show=False, id="table.move_1"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="table.page_minus_1"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="table.page_1"),
        Binding("home", "jump(0)", "First row", show=False, id="table.jump_0"),
        Binding("end", "jump(-1)", "Last row", show=False, id="table.jump_minus_1"),
        Binding("left", "column(-1)", "Column left", show=False, id="table.column_minus_1"),
        Binding("right", "column(1)", "Column right", show=False, id="table.column_1"),
        Binding("enter", "activate", "Go to row", show=True, id="table.activate"),
    ]

    COMPONENT_CLASSES = {
        "vtable--header", "vtable--header-sorted", "vtable--header-cursor", "vtable--cursor",
        "vtable--selected",
        "vtable--column", "vtable--empty",
    }

    DEFAULT_CSS = """
    VirtualTable { height: 1fr; scrollbar-size-horizontal: 0; }
    VirtualTable > .vtable--header { text-style: bold; color: $foreground; background: $panel; }
    VirtualTable > .vtable--header-sorted { text-style: bold underline; color: $accent;
                                            background: $panel; }
    VirtualTable > .vtable--header-cursor { text-style: reverse; }
    VirtualTable > .vtable--cursor { background: $primary; color: $foreground; }
    VirtualTable:focus > .vtable--cursor { text-style: reverse bold; }
    VirtualTable > .vtable--selected { text-style: bold; }
    VirtualTable > .vtable--column { text-style: underline; }
    VirtualTable > .vtable--empty { color: $foreground-muted; }
    """

    cursor_row: reactive[int] = reactive(0, init=False)
    cursor_column: reactive[int] = reactive(0, init=False)

    class Highlighted(Message):
        def __init__(self, table: VirtualTable, position: int) -> None:
            super().__init__()
            self.table = table
            self.position = position

    class Activated(Message):
        def __init__(self, table: VirtualTable, position: int) -> None:
            super().__init__()
            self.table = table
            self.position = position

    class HeaderClicked(Message):
        def __init__(self, table: VirtualTable, column: Column) -> None:
            super().__init__()
            self.table = table
            self.column = column

    def __init__(self, model: TableModel | None = None, *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.model = model
        self.cursor_t: int | None = None  # for the State column
        self.selected_block: int | None = None
        self.busy = ""  # shown in place of the rows while a sort or filter runs
        self._widths: list[int] = []
        self._cache_key: tuple | None = None
        self._cache: list[list[str]] = []

    # -- model ----------------------------------------------------------------------------

    def set_model(self, model: TableModel) -> None:
        """Show ``model``; the first one puts the column cursor (``s`` sorts by its column)
        on the first column of bytes, the one most often sorted."""
        if self.model is None:
            kinds = [column.kind for column in model.columns]
            self.set_reactive(VirtualTable.cursor_column,
                              kinds.index("bytes") if "bytes" in kinds else 0)
        self.model = model
        self.refresh_rows()

    def refresh_rows(self, keep: int | None = None) -> None:
        """Call after the model's rows changed (sort, filter); ``keep`` is the new position."""
        self._cache_key = None
        self._layout_columns()
        rows = self.row_count
        self.virtual_size = Size(self._total_width(), rows + 1)
        position = self.cursor_row if keep is None else keep
        self.set_reactive(VirtualTable.cursor_row, max(min(position, rows - 1), 0))
        self.scroll_to_row(self.cursor_row)
        self.refresh()
        self.post_message(self.Highlighted(self, self.cursor_row))

    @property
    def row_count(self) -> int:
        return 0 if self.model is None else int(self.model.rows.size)

    def _layout_columns(self) -> None:
        if self.model is None:
            self._widths = []
            return
        columns = self.model.columns
        widths = [max(c.width, cell_len(c.title) + 2) for c in columns]
        # The stack column (else the last) takes the room that is left.
        used = sum(w + 1 for w in widths) + GUTTER
        spare = self.size.width - used
        if widths and spare > 0:
            kinds = [c.kind for c in columns]
            widths[kinds.index("top") if "top" in kinds else -1] += spare
        self._widths = widths

    def _total_width(self) -> int:
        return GUTTER + sum(w + 1 for w in self._widths)

    def on_resize(self, _event: events.Resize) -> None:
        self._layout_columns()
        self.virtual_size = Size(self._total_width(), self.row_count + 1)
        self._cache_key = None
        # A table shown again (or resized) keeps its highlighted row in sight.
        self.call_after_refresh(self._recentre)

    def _recentre(self) -> None:
        first = self.first_row
        if not first <= self.cursor_row < first + self.page_rows:
            self.scroll_to(y=max(self.cursor_row - self.page_rows // 2, 0), animate=False)

    # -- positions ------------------------------------------------------------------------

    @property
    def page_rows(self) -> int:
        return max(self.size.height - 1, 1)

    @property
    def first_row(self) -> int:
        return int(self.scroll_y)

    def scroll_to_row(self, position: int) -> None:
        first = self.first_row
        if position < first:
            self.scroll_to(y=position, animate=False)
        elif position >= first + self.page_rows:
            self.scroll_to(y=position - self.page_rows + 1, animate=False)

    def move_to(self, position: int, announce: bool = True) -> None:
        if self.row_count == 0:
            return
        position = max(min(position, self.row_count - 1), 0)
        self.set_reactive(VirtualTable.cursor_row, position)
        self.scroll_to_row(position)
        self.refresh()
        if announce:
            self.post_message(self.Highlighted(self, position))

    def centre_on(self, position: int) -> None:
        """Highlight ``position`` and scroll so that it sits mid-screen."""
        if self.row_count == 0:
            return
        position = max(min(position, self.row_count - 1), 0)
        self.set_reactive(VirtualTable.cursor_row, position)
        self.scroll_to(y=max(position - self.page_rows // 2, 0), animate=False)
        # rows just filtered or sorted are laid out at the next refresh: a scroll clamped
        # to the old size until then is made again there (the row stays in sight)
        self.call_after_refresh(self._recentre)
        self.refresh()
        self.post_message(self.Highlighted(self, position))

    def action_move(self, delta: int) -> None:
        self.move_to(self.cursor_row + delta)

    def action_page(self, delta: int) -> None:
        self.move_to(self.cursor_row + delta * self.page_rows)
        self.scroll_to(y=max(self.cursor_row - self.page_rows // 2, 0), animate=False)

    def action_jump(self, where: int) -> None:
        self.move_to(0 if where == 0 else self.row_count - 1)

    def action_column(self, delta: int) -> None:
        if not self._widths:
            return
        self.cursor_column = max(min(self.cursor_column + delta, len(self._widths) - 1), 0)
        start = GUTTER + sum(w + 1 for w in self._widths[: self.cursor_column])
        end = start + self._widths[self.cursor_column]
        if start < self.scroll_x:
            self.scroll_to(x=start - GUTTER, animate=False)
        elif end > self.scroll_x + self.size.width:
            self.scroll_to(x=end - self.size.width, animate=False)
        self.refresh()

    def action_activate(self) -> None:
        if self.row_count:
            self.post_message(self.Activated(self, self.cursor_row))

    @property
    def current_column(self) -> Column | None:
        if self.model is None or not self.model.columns:
            return None
        return self.model.columns[min(self.cursor_column, len(self.model.columns) - 1)]

    def visible_range(self) -> tuple[int, int]:
        """``(first, count)`` of the rows on screen."""
        first = self.first_row
        return first, max(min(self.page_rows, self.row_count - first), 0)

    # -- painting -------------------------------------------------------------------------

    def _rows_text(self, first: int, count: int) -> list[list[str]]:
        key = (first, count, self.cursor_t, id(self.model.rows) if self.model else None)
        if key != self._cache_key:
            self._cache = self.model.cells(first, count, self.cursor_t) if self.model else []
            self._cache_key = key
        return self._cache

    def _line_text(self, cells: list[str]) -> str:
        parts = []
        for column, width, raw in zip(self.model.columns, self._widths, cells, strict=False):
            cell = printable(raw)  # a frame name's CR or bidi override would move the row
            text = cell if cell_len(cell) <= width else set_cell_size(cell, width - 1) + "…"
            if column.kind in _RIGHT:
                text = " " * (width - cell_len(text)) + text
            else:
                text = set_cell_size(text, width)
            parts.append(text)
        return " ".join(parts) + " "

    def _header_text(self) -> str:
        parts = []
        model = self.model
        for column, width in zip(model.columns, self._widths, strict=False):
            title = column.title
            if model.sort_key == column.key:
                title += " ▼" if model.descending else " ▲"
            text = set_cell_size(title, width) if column.kind not in _RIGHT else \
                title.rjust(width)[-width:]
            parts.append(text)
        return " ".join(parts) + " "

    def _column_span(self, index: int) -> tuple[int, int]:
        start = GUTTER + sum(w + 1 for w in self._widths[:index])
        return start, start + self._widths[index]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x = int(self.scroll_x)
        if self.model is None:
            return Strip.blank(width, paint.PLAIN)
        if y == 0:
            return self._header_strip(scroll_x, width)
        if self.busy:
            if y == 1:
                style = self.get_component_rich_style("vtable--empty")
                return Strip([Segment(f"  {self.busy}", style)]).crop_extend(0, width, style)
            return Strip.blank(width, paint.PLAIN)
        first, count = self.first_row, self.page_rows
        position = first + y - 1
        if position >= self.row_count:
            if self.row_count == 0 and y == 1:
                style = self.get_component_rich_style("vtable--empty")
                return Strip([Segment("  no rows match", style)]).crop_extend(0, width, style)
            return Strip.blank(width, paint.PLAIN)
        rows = self._rows_text(first, count)
        cells = rows[y - 1] if y - 1 < len(rows) else []
        return self._row_strip(position, cells, scroll_x, width)

    def _header_strip(self, scroll_x: int, width: int) -> Strip:
        header = self.get_component_rich_style("vtable--header")
        sorted_style = self.get_component_rich_style("vtable--header-sorted")
        text = " " * GUTTER + self._header_text()
        styles = [header] * len(text)
        for index, column in enumerate(self.model.columns):
            style = None
            if column.key == self.model.sort_key:
                style = sorted_style
            if index == self.cursor_column and self._widths:  # what s sorts by
                style = (style or header) + self.get_component_rich_style("vtable--header-cursor")
            if style is not None:
                a, b = self._column_span(index)
                styles[a:b] = [style] * (min(b, len(text)) - a)
        segments = [Segment(text[a:b], styles[a]) for a, b in _runs(styles)]
        return Strip(segments).crop_extend(scroll_x, scroll_x + width, header)

    def _row_strip(self, position: int, cells: list[str], scroll_x: int, width: int) -> Strip:
        base = self.rich_style
        is_cursor = position == self.cursor_row
        selected = self._is_selected(position)
        gutter = ("›" if is_cursor else " ") + ("●" if selected else " ")
        text = gutter + self._line_text(cells)
        style = base
        if selected:
            style = style + self.get_component_rich_style("vtable--selected")
        if is_cursor:
            style = style + self.get_component_rich_style("vtable--cursor")
        segments = [Segment(text, style)]
        if is_cursor and self.has_focus and self._widths:
            a, b = self._column_span(min(self.cursor_column, len(self._widths) - 1))
            column_style = style + self.get_component_rich_style("vtable--column")
            segments = [Segment(text[:a], style), Segment(text[a:b], column_style),
                        Segment(text[b:], style)]
        return Strip(segments).crop_extend(scroll_x, scroll_x + width, style)

    def _is_selected(self, position: int) -> bool:
        if self.selected_block is None or self.model is None:
            return False
        if "block_id" not in self.model.frame.columns:
            return False
        row = int(self.model.rows[position])
        value = self.model.frame["block_id"][row]
        return value is not None and value == self.selected_block

    def watch_cursor_column(self, _old: int, _new: int) -> None:
        self.refresh()

    # -- mouse ----------------------------------------------------------------------------

    def on_click(self, event: events.Click) -> None:
        if self.model is None:
            return
        if event.y == 0:
            x = event.x + int(self.scroll_x)
            for index in range(len(self._widths)):
                a, b = self._column_span(index)
                if a <= x < b:
                    self.cursor_column = index
                    self.post_message(self.HeaderClicked(self, self.model.columns[index]))
                    break
            return
        position = self.first_row + event.y - 1
        if 0 <= position < self.row_count:
            self.move_to(position)
            if event.chain >= 2:
                self.post_message(self.Activated(self, position))


def _runs(styles: list) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of equal styles."""
    runs, start = [], 0
    for index in range(1, len(styles) + 1):
        if index == len(styles) or styles[index] != styles[start]:
            runs.append((start, index))
            start = index
    return runs
