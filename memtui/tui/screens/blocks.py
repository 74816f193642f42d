"""Screen 2, Blocks: the block-lifetime map under the trend slider, with block details.

Moving the cursor selects the block of the event under it; ``up``/``down`` (``k``/``j``)
walk the stack of blocks alive at the cursor; a click selects the band under the
pointer, a drag selects a window, the wheel zooms, and dragging on the trend slider
pans the view.  ``+``/``-`` change how many blocks are drawn on their own; ``/`` finds an
address (in any form, see :mod:`memtui.analysis.layout.addresses`) here and in the pool map;
``R`` draws only the blocks of one role (memory by role), the next role each time.
The header names the bytes of the level at the cursor that no block explains (a profiler
folder's memory alive before the capture): the map cannot draw them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Static

from memtui.analysis.layout.addresses import AddressBook
from memtui.analysis.layout.block_map import BlockMapData, PeakFinder, bands_at, segment_index
from memtui.analysis.layout.pool_state import event_in_life, event_seq
from memtui.analysis.roles import ROLE_LABELS, ROLES, block_roles, role_codes, rules_key
from memtui.analysis.timeline.attribution import remainder_at, remainder_text
from memtui.analysis.timeline.live import DeviceIndex, cached, device_index, event_blocks
from memtui.loading import kept_block_map
from memtui.model import MemoryTrace
from memtui.tui.cursor import CursorState
from memtui.tui.screens.linked import LinkedScreen, block_details, find_address, select_event_block
from memtui.tui.widgets import paint
from memtui.tui.widgets.block_map import BlockMap, TrendSlider, legend, legend_rows

DETAIL_LEVELS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def role_analyses(trace: MemoryTrace, device: str, role: str) -> tuple:
    """The device index, block map data and peaks of ``device``'s blocks of ``role``
    alone (shared cache, per set of role rules)."""
    def build() -> tuple:
        index = device_index(trace, device)
        codes = role_codes(trace, device, index.block_id)
        blocks = index.blocks.filter(pl.Series(codes == ROLES.index(role)))
        only = DeviceIndex(device, blocks, index.segments, index.t_start, index.t_end)
        data = BlockMapData(only)
        return only, data, PeakFinder(data.level())

    return cached(trace, ("block_map_role", device, role, rules_key(trace)), build)


def next_role(trace: MemoryTrace, device: str, role: str | None) -> str | None:
    """The role after ``role`` among those the device's blocks have (None: all blocks,
    after the last)."""
    present = [r for r in ROLES if r in set(block_roles(trace, device).frame["role"]
                                               .cast(pl.String).to_list())]
    if not present:
        return None
    if role is None:
        return present[0]
    later = present[present.index(role) + 1:] if role in present else []
    return later[0] if later else None


def block_analyses(trace: MemoryTrace, device: str) -> tuple:
    """What the screen shows of ``device``, built once per trace (shared cache): the
    device index, the block map's data (kept beside the reopen cache's entry after the
    first open), its peaks, the address book, the event blocks."""
    index = device_index(trace, device)
    data = cached(trace, ("block_map", device),
                  lambda: kept_block_map(trace, device, index) or BlockMapData(index))
    peaks = cached(trace, ("block_peaks", device), lambda: PeakFinder(data.level()))
    book = cached(trace, ("addresses", device), lambda: AddressBook(index))
    return index, data, peaks, book, event_blocks(trace, device)


class BlocksScreen(LinkedScreen):
    """The block-lifetime map (see the module docstring)."""

    NAME = "blocks"
    SEARCH_PLACEHOLDER = "block 5083, address 0x7f06..., 139665..., b7f064c000000_0, s7f06..._1"
    DEFAULT_CSS = """
    BlocksScreen #status-line { height: auto; max-height: 2; color: $text-muted; }
    BlocksScreen #detail { height: 7; border-top: solid $primary-darken-2; padding: 0 1; }
    BlocksScreen TrendSlider { height: 3; }
    """
    BINDINGS = [
        Binding("up,k", "band(1)", "Block above", show=False, id="blocks.band_1"),
        Binding("down,j", "band(-1)", "Block below", show=False, id="blocks.band_minus_1"),
        Binding("plus,equals_sign", "detail(1)", "More detail", id="blocks.detail_1"),
        Binding("minus", "detail(-1)", "Less detail", id="blocks.detail_minus_1"),
        Binding("slash", "search", "Find address", id="blocks.search"),
        Binding("s", "segments", "Segments", id="blocks.segments"),
        Binding("R", "role", "Role", id="blocks.role"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.detail = 1024
        self.index: DeviceIndex | None = None
        self.segments_mode = False  # s: segments over time instead of blocks
        self.role: str | None = None  # r: only the blocks of one role (memory by role)

    def compose(self) -> ComposeResult:
        yield from self.compose_layout()

    # -- preparing and building ---------------------------------------------------------------

    @staticmethod
    def warm(trace: MemoryTrace, device: str) -> None:
        block_analyses(trace, device)

    def prepare(self, device: str) -> None:
        self.index, self.data, self.peaks, self.book, self.events = block_analyses(
            self.trace, device)
        if self.role is not None:
            self.index, self.data, self.peaks = role_analyses(self.trace, device, self.role)
        if self.segments_mode:
            trace = self.trace
            self.seg_index = cached(trace, ("segment_index", device),
                                    lambda: segment_index(trace, device))
            self.seg_data = cached(trace, ("segment_map", device),
                                   lambda: BlockMapData(self.seg_index))
            self.seg_peaks = cached(trace, ("segment_peaks", device),
                                    lambda: PeakFinder(self.seg_data.level()))

    def shown(self) -> tuple:
        """(index, map data, peaks) drawn now: the blocks', or the segments'."""
        if self.segments_mode:
            return self.seg_index, self.seg_data, self.seg_peaks
        return self.index, self.data, self.peaks

    def shown_cursor(self, cursor: CursorState) -> CursorState:
        """The cursor as the map sees it: in segment mode its selected segment."""
        if self.segments_mode:
            return dataclasses.replace(cursor, block_id=cursor.segment_id)
        return cursor

    async def build(self) -> None:
        await self.query("BlockMap, TrendSlider").remove()
        ix, data, peaks = self.shown()
        ooms = self.trace.device_events(self.device).filter(pl.col("action") == "oom")
        self.slider = TrendSlider(peaks, ix.t_start, ix.t_end, marks=ooms["t"].to_list())
        self.slider.styles.height = 2 if self.size.height < 30 else 3
        self.map = BlockMap(data, peaks, detail=self.detail, id="block-map")
        detail = self.query_one("#detail", Static)
        await self.main_area().mount(self.slider, self.map, before=detail)
        self.map.focus()

    def main_widget(self) -> Widget:
        return self.map

    # -- following the cursor -----------------------------------------------------------------

    def follow(self, old: CursorState | None, new: CursorState) -> None:
        if not self.segments_mode and select_event_block(self, old, new):
            return
        self.map.show(self.shown_cursor(new))
        self.slider.show(new)
        self._details(new)
        self.call_after_refresh(self._header, new)  # the header counts the drawn blocks

    def _header(self, cursor: CursorState) -> None:
        trace, (t0, t1) = self.trace, cursor.view
        raster = self.map.raster
        drawn = f"{raster.drawn.size:,}/{raster.candidates:,}" if raster else "-"
        origin = self.index.t_start
        what = "Segments" if self.segments_mode else "Blocks"
        if not self.segments_mode and self.role is not None:
            what += f" of role {ROLE_LABELS[self.role]} (R)"
        rest = [] if self.segments_mode else remainder_at(
            trace, cursor.device, self.app.timeline(cursor.device).event_of(cursor))
        # bytes of the level at the cursor that no band can draw: said first, never a gap
        unseen = f"[b]+ {paint.plain(remainder_text(rest))}[/b] not drawn  " if rest else ""
        text = (f"[b]{what}[/b] {paint.plain(cursor.device)}  {unseen}"
                f"{paint.format_time(trace, t0, origin, 3)}"
                f" .. {paint.format_time(trace, t1, origin, 3)}"
                f" ({paint.format_span(trace, t0, t1)})  detail {drawn} (+/-)")
        if self.segments_mode:
            peak = self.seg_peaks.level
            if peak.values.size:
                at = int(np.argmax(peak.values))
                text += (f"  △ peak reserved {paint.short_bytes(int(peak.values[at]))} at "
                         f"{paint.format_time(trace, int(peak.t[at]), origin, 3)} (s: blocks)")
        elif self.size.width >= 120 and not rest:  # the legend where it fits whole (? has it)
            key = "  " + legend()
            if Text.from_markup(text + key).cell_len <= self.size.width:
                text += key
        self.query_one("#status-line", Static).update(text)

    def on_resize(self) -> None:
        """Smaller panels in small terminals (80x24: the map keeps 9 rows)."""
        small = self.size.height < 30
        self.query_one("#detail").styles.height = 5 if small else 7
        for slider in self.query(TrendSlider):
            slider.styles.height = 2 if small else 3

    def _details(self, cursor: CursorState) -> None:
        if self.segments_mode:
            self.query_one("#detail", Static).update(self._segment_details(cursor))
            return
        self.query_one("#detail", Static).update(block_details(self, cursor))

    def _segment_details(self, cursor: CursorState) -> str:
        ix = self.seg_index
        row = ix.row_of_block(cursor.segment_id)
        if row is None:
            return ("[dim]Segments over time (memory_viz's Active Cached Segment Timeline): "
                    "up/down or a click selects one; s shows the blocks again.[/]")
        seg = ix.blocks.row(row, named=True)
        origin = ix.t_start
        born = "before the trace" if ix.ghost[row] else paint.format_time(
            self.trace, seg["t_alloc"], origin)
        gone = paint.format_time(self.trace, seg["t_free"], origin) if seg["t_free"] \
            is not None else "never (alive at the end)"
        return (f"[b]segment {cursor.segment_id}[/b] at 0x{int(ix.addr[row]):x}  "
                f"{paint.short_bytes(int(ix.size[row]))} {paint.plain(seg['pool'] or '')}  "
                f"stream {seg['stream']}\nallocated {born}, released {gone}")

    def on_cursor_request(self, message) -> None:
        """In segment mode a band is a segment: it selects the segment, not a block."""
        message.stop()
        changes = dict(message.changes)
        if self.segments_mode and "block_id" in changes:
            changes["segment_id"] = changes.pop("block_id")
        elif changes.get("block_id") is not None and "t" in changes:
            # a click on a band: the cursor on an event just after which that block is
            # alive (the cursor is an event; several events can share the clicked time)
            event = event_in_life(self.trace, self.cursor.device, changes["block_id"],
                                  changes["t"])
            if event is not None:
                del changes["t"]
                changes["event"] = event
        self.move_cursor(**changes)

    def action_role(self) -> None:
        """Draw only the blocks of one role, the next role present each time (memory by
        role), then every block again."""
        if not self._ready or self.segments_mode:
            return
        self.role = next_role(self.trace, self.cursor.device, self.role)
        self.notify(f"Blocks of role {ROLE_LABELS[self.role]}" if self.role is not None
                    else "Blocks of every role", timeout=3)
        self._start(self.cursor.device)

    def action_segments(self) -> None:
        """Draw the segments over time (memory_viz's Active Cached Segment Timeline,
        reserved peak marked) instead of the blocks, or the blocks again."""
        if not self._ready:
            return
        if not self.trace.meta.device(self.cursor.device).has_segments:
            self.notify("This capture records no pool segments: only blocks.")
            return
        self.segments_mode = not self.segments_mode
        self._start(self.cursor.device)

    # -- keys ---------------------------------------------------------------------------------

    def action_band(self, step: int) -> None:
        """Select the block above (1) or below (-1) at the cursor."""
        if not self._ready:
            return
        index, data, _ = self.shown()
        cursor = self.cursor
        seq = event_seq(self.trace, cursor.device, cursor.event)
        rows, _ = bands_at(index, data.rank, cursor.t, seq)
        if rows.size == 0:
            return
        current = index.row_of_block(self.shown_cursor(self.cursor).block_id)
        at = np.flatnonzero(rows == current)
        if at.size:
            new = min(max(int(at[0]) + step, 0), rows.size - 1)
        else:
            new = rows.size - 1 if step < 0 else 0
        chosen = int(index.block_id[rows[new]])
        if self.segments_mode:
            self.move_cursor(segment_id=chosen)
        else:
            self.move_cursor(block_id=chosen)

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
