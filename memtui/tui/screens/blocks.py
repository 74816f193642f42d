"""Screen 2, Blocks: the block-lifetime map under the trend slider, with block details.

Moving the cursor selects the block of the event under it; ``up``/``down`` (``k``/``j``)
walk the stack of blocks alive at the cursor; a click selects the band under the
pointer, a drag selects a window, the wheel zooms, and dragging on the trend slider
pans the view.  ``+``/``-`` change how many blocks are drawn on their own; ``/`` finds an
address (in any form, see :mod:`memtui.analysis.addresses`) here and in the pool map.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Static

from memtui.analysis.addresses import AddressBook
from memtui.analysis.block_map import BlockMapData, PeakFinder, bands_at
from memtui.analysis.live import DeviceIndex, cached, device_index, event_blocks
from memtui.model import MemoryTrace
from memtui.tui.cursor import CursorState
from memtui.tui.screens.linked import LinkedScreen, block_details, find_address, select_event_block
from memtui.tui.widgets import paint
from memtui.tui.widgets.block_map import BlockMap, TrendSlider, legend, legend_rows

DETAIL_LEVELS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def block_analyses(trace: MemoryTrace, device: str) -> tuple:
    """What the screen shows of ``device``, built once per trace (shared cache): the
    device index, the block map's data, its peaks, the address book, the event blocks."""
    index = device_index(trace, device)
    data = cached(trace, ("block_map", device), lambda: BlockMapData(index))
    peaks = cached(trace, ("block_peaks", device), lambda: PeakFinder(data.level()))
    book = cached(trace, ("addresses", device), lambda: AddressBook(index))
    return index, data, peaks, book, event_blocks(trace, device)


class BlocksScreen(LinkedScreen):
    """The block-lifetime map (see the module docstring)."""

    NAME = "blocks"
    SEARCH_PLACEHOLDER = "address: 0x7f06..., 139665..., b7f064c000000_0, s7f06..._1"
    DEFAULT_CSS = """
    BlocksScreen #status-line { height: 1; color: $text-muted; }
    BlocksScreen #detail { height: 7; border-top: solid $primary-darken-2; padding: 0 1; }
    BlocksScreen TrendSlider { height: 3; }
    """
    BINDINGS = [
        Binding("up,k", "band(1)", "Block above", show=False, id="blocks.band_1"),
        Binding("down,j", "band(-1)", "Block below", show=False, id="blocks.band_minus_1"),
        Binding("plus,equals_sign", "detail(1)", "More detail", id="blocks.detail_1"),
        Binding("minus", "detail(-1)", "Less detail", id="blocks.detail_minus_1"),
        Binding("slash", "search", "Find address", id="blocks.search"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.detail = 1024
        self.index: DeviceIndex | None = None

    def compose(self) -> ComposeResult:
        yield from self.compose_layout()

    # -- preparing and building ---------------------------------------------------------------

    @staticmethod
    def warm(trace: MemoryTrace, device: str) -> None:
        block_analyses(trace, device)

    def prepare(self, device: str) -> None:
        self.index, self.data, self.peaks, self.book, self.events = block_analyses(
            self.trace, device)

    async def build(self) -> None:
        await self.query("BlockMap, TrendSlider").remove()
        ix = self.index
        ooms = self.trace.device_events(self.device).filter(pl.col("action") == "oom")
        self.slider = TrendSlider(self.peaks, ix.t_start, ix.t_end, marks=ooms["t"].to_list())
        self.slider.styles.height = 2 if self.size.height < 30 else 3
        self.map = BlockMap(self.data, self.peaks, detail=self.detail, id="block-map")
        detail = self.query_one("#detail", Static)
        await self.main_area().mount(self.slider, self.map, before=detail)
        self.map.focus()

    def main_widget(self) -> Widget:
        return self.map

    # -- following the cursor -----------------------------------------------------------------

    def follow(self, old: CursorState | None, new: CursorState) -> None:
        if select_event_block(self, old, new):
            return
        self.map.show(new)
        self.slider.show(new)
        self._details(new)
        self.call_after_refresh(self._header, new)  # the header counts the drawn blocks

    def _header(self, cursor: CursorState) -> None:
        trace, (t0, t1) = self.trace, cursor.view
        raster = self.map.raster
        drawn = f"{raster.drawn.size:,}/{raster.candidates:,}" if raster else "-"
        origin = self.index.t_start
        text = (f"[b]Blocks[/b] {paint.plain(cursor.device)}  "
                f"{paint.format_time(trace, t0, origin, 3)}"
                f" .. {paint.format_time(trace, t1, origin, 3)}"
                f" ({paint.format_span(trace, t0, t1)})  detail {drawn} (+/-)")
        if self.size.width >= 120:
            text += "  " + legend()
        self.query_one("#status-line", Static).update(text)

    def on_resize(self) -> None:
        """Smaller panels in small terminals (80x24: the map keeps 9 rows)."""
        small = self.size.height < 30
        self.query_one("#detail").styles.height = 5 if small else 7
        for slider in self.query(TrendSlider):
            slider.styles.height = 2 if small else 3

    def _details(self, cursor: CursorState) -> None:
        self.query_one("#detail", Static).update(block_details(self, cursor))

    # -- keys ---------------------------------------------------------------------------------

    def action_band(self, step: int) -> None:
        """Select the block above (1) or below (-1) at the cursor."""
        if not self._ready:
            return
        rows, _ = bands_at(self.index, self.data.rank, self.cursor.t)
        if rows.size == 0:
            return
        current = self.index.row_of_block(self.cursor.block_id)
        at = np.flatnonzero(rows == current)
        if at.size:
            new = min(max(int(at[0]) + step, 0), rows.size - 1)
        else:
            new = rows.size - 1 if step < 0 else 0
        self.move_cursor(block_id=int(self.index.block_id[rows[new]]))

    def action_detail(self, step: int) -> None:
        if not self._ready:
            return
        levels = list(DETAIL_LEVELS)
        at = min(range(len(levels)), key=lambda i: abs(levels[i] - self.detail))
        self.detail = levels[min(max(at + step, 0), len(levels) - 1)]
        self.map.set_detail(self.detail)
        self._header(self.cursor)

    def search(self, text: str) -> None:
        find_address(self, text)

    def legend_rows(self) -> list[tuple[str, str]]:
        return legend_rows()
