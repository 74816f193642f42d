"""Screen 3, Pool: the allocator's segments at the cursor, with the Slice Detail below.

``up``/``down`` (``k``/``j``) select a segment, ``,``/``.`` the previous or next block in
it; a click selects the block (or segment) under the pointer.  ``/`` finds an address
here and in the block map.  ``w`` switches the bars between full width and one scale
for all segments.  ``o`` moves the cursor to the next out-of-memory event, where the
header says why the request failed and the largest usable free gaps are green.  The
header's allocated is the status bar's level; where blocks do not explain all of it (a
profiler folder's memory alive before the profile) the rest is named there.
"""

from __future__ import annotations

import numpy as np
from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from memtui.analysis.findings.oom import oom_finding
from memtui.analysis.layout.addresses import AddressBook
from memtui.analysis.layout.pool_state import (
    OomExplanation,
    PoolState,
    explain_oom,
    oom_events,
)
from memtui.analysis.layout.pool_walk import pool_walk
from memtui.analysis.timeline.attribution import remainder_rows, remainder_text
from memtui.analysis.timeline.levels import reserved_is_floor
from memtui.analysis.timeline.live import DeviceIndex, cached, device_index, event_blocks
from memtui.model import MemoryTrace
from memtui.tui.cursor import CursorState
from memtui.tui.screens.linked import (
    LinkedScreen,
    block_details,
    find_address,
    select_event_block,
)
from memtui.tui.widgets import paint
from memtui.tui.widgets.pool_map import PoolMap, legend_rows
from memtui.units import at_least, counted, format_bytes


def pool_analyses(trace: MemoryTrace, device: str) -> tuple:
    """The device index, address book and event blocks of ``device`` (shared cache), its
    pool walk made."""
    index = device_index(trace, device)
    pool_walk(trace, device)
    book = cached(trace, ("addresses", device), lambda: AddressBook(index))
    return index, book, event_blocks(trace, device)


#: The header's long words, and what they become below 80 columns (the figures stay).
SHORT_WORDS = (("reserved ", "resv "), ("allocated ", "alloc "), ("fragmented ", "frag "),
               ("segments ", "segs "), ("pending ", "pend "), ("of reserved,", "of resv,"),
               ("largest gap ", "gap "))


def narrow_header(text: str, width: int) -> str:
    """The Pool header for a pane ``width`` columns wide: below 80 its long words
    abbreviated (it wraps too: no figure is ever dropped, issue 23)."""
    if width >= 80:
        return text
    for word, short in SHORT_WORDS:
        text = text.replace(word, short)
    return text


class PoolScreen(LinkedScreen):
    """The pool map (see the module docstring)."""

    NAME = "pool"
    SEARCH_PLACEHOLDER = "block 5083, address 0x7f06..., 139665..., b7f064c000000_0, s7f06..._1"
    DEFAULT_CSS = """
    PoolScreen #status-line { height: auto; min-height: 2; max-height: 4; }
    PoolScreen #oom { height: auto; display: none; background: $error 30%; padding: 0 1; }
    PoolScreen #oom.-shown { display: block; }
    PoolScreen #detail { height: 7; border-top: solid $primary-darken-2; padding: 0 1; }
    """
    BINDINGS = [
        Binding("up,k", "segment(-1)", "Segment up", show=False, id="pool.segment_minus_1"),
        Binding("down,j", "segment(1)", "Segment down", show=False, id="pool.segment_1"),
        Binding("pageup", "segment(-10)", "Ten segments up", show=False,
                id="pool.segment_minus_10"),
        Binding("pagedown", "segment(10)", "Ten segments down", show=False, id="pool.segment_10"),
        Binding("comma", "block(-1)", "Prev block", id="pool.block_minus_1"),
        Binding("full_stop", "block(1)", "Next block", id="pool.block_1"),
        Binding("slash", "search", "Find address", id="pool.search"),
        Binding("w", "proportional", "Scale", id="pool.proportional"),
        Binding("o", "next_oom", "Next OOM", id="pool.next_oom"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.index: DeviceIndex | None = None
        self.state: PoolState | None = None
        self.selected_segment: int | None = None
        self._header_height: int | None = None  # lines, where none wraps

    def compose(self) -> ComposeResult:
        yield from self.compose_layout("oom")

    @staticmethod
    def warm(trace: MemoryTrace, device: str) -> None:
        pool_analyses(trace, device)

    def prepare(self, device: str) -> None:
        self.index, self.book, self.events = pool_analyses(self.trace, device)
        self.ooms = oom_events(self.trace, device)

    async def build(self) -> None:
        await self.query(PoolMap).remove()
        self.map = PoolMap(self.index, id="pool-map")
        await self.main_area().mount(self.map, before=self.query_one("#detail"))
        self.map.focus()

    def main_widget(self) -> Widget:
        return self.map

    # -- following the cursor -----------------------------------------------------------------

    def follow(self, old: CursorState | None, new: CursorState) -> None:
        if select_event_block(self, old, new):
            return
        event = self.app.timeline(new.device).event_of(new)
        # stepped from the state at the last event shown (analysis.layout.pool_walk)
        state = self.state = pool_walk(self.trace, new.device).state_at_event(event, new.t)
        block_row = self.index.row_of_block(new.block_id)
        segment = self._segment_to_show(state, new, block_row)
        self.selected_segment = segment
        oom, oom_seq = self._oom_at(new.t)
        self.map.show(state, segment, block_row,
                      gap_floor=oom.largest_usable_gap if oom and oom.largest_usable_gap else None)
        self._header(state, new)
        self._oom_banner(oom, oom_seq)
        self._details(state, new, segment, block_row)

    def _segment_to_show(self, state: PoolState, cursor: CursorState,
                         block_row: int | None) -> int | None:
        if cursor.block_id is not None:
            segment = state.segment_of_block(cursor.block_id)
            if segment is not None:
                return segment
        if cursor.segment_id is not None:
            segment = state.segment_of_id(cursor.segment_id)
            if segment is not None:
                return segment
        if block_row is not None:  # a block not alive now: the segment at its address
            return state.segment_at_address(int(self.index.addr[block_row]))
        return self.selected_segment if self.selected_segment is not None and (
            self.selected_segment < state.seg_id.size) else (0 if state.seg_id.size else None)

    def _oom_at(self, t: int) -> tuple[OomExplanation | None, int | None]:
        """The OOM at time ``t`` and its event's seq, or (None, None)."""
        if self.ooms.is_empty():
            return None, None
        hit = self.ooms.filter(self.ooms["t"] == t)
        if hit.is_empty():
            return None, None
        seq = int(hit["seq"][0])
        return explain_oom(self.trace, self.device, seq), seq

    def _header(self, state: PoolState, cursor: CursorState) -> None:
        trace = self.trace
        when = paint.format_time(trace, cursor.t, self.index.t_start)
        # reserved as the status bar says it (a pool's own total where it reports one)
        timeline = self.app.timeline(cursor.device)
        levels = timeline.levels_at_event(timeline.event_of(cursor))
        reserved = state.reserved if levels.reserved is None else levels.reserved
        # allocated as the status bar says it; the bytes no block explains named
        held = state.allocated + state.pending
        rest = remainder_text(remainder_rows(trace, cursor.device, levels.allocated, held))
        reserved_text = at_least(reserved, reserved_is_floor(trace, cursor.device))
        line1 = (f"[b]Pool[/b] {paint.plain(cursor.device)} at {when}  "
                 f"{state.seg_id.size} segments  "
                 f"reserved {reserved_text}  allocated "
                 f"{format_bytes(state.allocated if not rest else levels.allocated)}")
        # the free bytes split as every output splits them (pool_state.Fragmentation):
        # fragmented (free inside partly used segments, as a share of reserved), cached
        # (wholly free segments: reusable, said where the line has room) and rounding
        measures = state.fragmentation_of(reserved)
        line2 = (f"pending {format_bytes(state.pending)}  free {format_bytes(state.free)} in "
                 f"{state.gap_size.size} gaps  fragmented "
                 f"{format_bytes(measures.fragmented)} ({measures.share:.0%} of reserved, "
                 f"largest gap {format_bytes(measures.largest_gap)})")
        if measures.cached_segments:
            cached = (f"  cached {format_bytes(measures.cached)} in "
                      f"{counted(measures.cached_segments, 'wholly free segment')}")
            if len(line2) + len(cached) <= self.size.width - 2:
                line2 += cached
        if measures.rounding:
            line2 += f"  rounding {format_bytes(measures.rounding)}"
        if state.orphans:
            line2 += f"  [b]{state.orphans} blocks outside any segment[/b]"
        if reserved is not None and reserved > state.reserved and \
                self.trace.meta.device(cursor.device).has_segments:
            # reserved in segments the file does not list (memtui state's unplaced_bytes)
            line2 += f"  {format_bytes(reserved - state.reserved)} in unlisted segments"
        if not self.ooms.is_empty():
            line2 += f"  [b red]{self.ooms.height} OOM[/] (o)"
        if not self.trace.meta.device(cursor.device).has_segments:
            line2 = "[dim]this capture records no pool segments: only blocks[/]"
            if rest:
                line2 = "[dim]no pool segments:[/] "
        if rest:
            line2 += f"  [b]{format_bytes(held)} in blocks + {paint.plain(rest)}[/b]"
        self._update_header(narrow_header(f"{line1}\n{line2}", self.size.width))

    def _update_header(self, text: str) -> None:
        """The header's text; the screen laid out again only where its height may change
        (a layout repaints the whole screen: most of a key's time on big traces)."""
        header = self.query_one("#status-line", Static)
        lines = Content.from_markup(text).plain.split("\n")
        width = header.content_size.width
        height = len(lines) if width and all(cell_len(x) <= width for x in lines) else None
        header.update(text, layout=height is None or height != self._header_height)
        self._header_height = height

    def on_resize(self) -> None:
        self.query_one("#detail").styles.height = 5 if self.size.height < 30 else 7

    def _oom_banner(self, oom: OomExplanation | None, seq: int | None) -> None:
        """The OOM at the cursor in the Findings' words: its cause once, in human units,
        with why the device's free memory did not help (analysis.findings.oom); the
        source's own message only where it says more than the figures."""
        banner = self.query_one("#oom", Static)
        if oom is None or seq is None:
            banner.remove_class("-shown")
            return
        banner.add_class("-shown")
        title = oom_finding(self.trace, self.device, seq).title
        text = Text.assemble(("OUT OF MEMORY", "bold"), title.removeprefix("out of memory"))
        if oom.message and oom.device_free is None:  # the torch message: figures only
            text.append(f"\n{paint.plain(oom.message)}", "dim")
        banner.update(text)

    def _details(self, state: PoolState, cursor: CursorState, segment: int | None,
                 block_row: int | None) -> None:
        detail = self.query_one("#detail", Static)
        if block_row is not None:
            text = block_details(self, cursor)
            if segment is not None:
                text = text.split("\n", 2)
                text.insert(2, "in " + self._segment_line(state, segment))
                text = "\n".join(text)
            detail.update(text, layout=False)  # its height is fixed (on_resize)
        elif segment is not None:
            detail.update(self._segment_line(state, segment) + "\n" + self._segment_figures(
                state, segment), layout=False)
        else:
            detail.update("[dim]No segment alive at the cursor.[/]", layout=False)

    def _segment_line(self, state: PoolState, i: int) -> str:
        row = int(state.seg_row[i])
        segs = self.index.segments
        name = self.book.segment_name(row)
        ghost = " (existed before the trace)" if self.index.seg_ghost[row] else ""
        return (f"[b]{name}[/b] {format_bytes(int(state.seg_size[i]))} "
                f"{paint.plain(segs['kind'][row] or '')} segment, stream "
                f"{_or_dash(segs['stream'][row])}, pool {paint.plain(segs['pool_id'][row] or '-')}"
                f"{ghost}")

    def _segment_figures(self, state: PoolState, i: int) -> str:
        return (f"allocated {format_bytes(int(state.seg_allocated[i]))} in "
                f"{counted(int(state.seg_blocks[i]), 'block')}, pending free "
                f"{format_bytes(int(state.seg_pending[i]))}, free "
                f"{format_bytes(int(state.seg_free[i]))} in "
                f"{state.gaps_of_segment(i).size} gaps, largest gap "
                f"{format_bytes(int(state.seg_largest_gap[i]))}"
                + (", fragmented (it holds blocks)" if state.seg_blocks[i] and
                   state.seg_free[i] else ", cached (wholly free)" if not state.seg_blocks[i]
                   else ""))

    # -- keys ---------------------------------------------------------------------------------

    def action_segment(self, step: int) -> None:
        state = self.state
        if not self._ready or state is None or state.seg_id.size == 0:
            return
        at = self.selected_segment if self.selected_segment is not None else 0
        at = min(max(at + step, 0), state.seg_id.size - 1)
        self.selected_segment = at
        self.move_cursor(segment_id=int(state.seg_id[at]), block_id=None)

    def action_block(self, step: int) -> None:
        state = self.state
        if not self._ready or state is None or self.selected_segment is None:
            return
        members = state.blocks_of_segment(self.selected_segment)
        if members.size == 0:
            return
        ids = state.blk_id[members]
        at = np.flatnonzero(ids == self.cursor.block_id)
        new = (int(at[0]) + step) % members.size if at.size else (0 if step > 0 else -1)
        self.move_cursor(block_id=int(ids[new]),
                         segment_id=int(state.seg_id[self.selected_segment]))

    def action_proportional(self) -> None:
        if self._ready:
            self.map.set_proportional(not self.map.proportional)

    def action_next_oom(self) -> None:
        if self.ooms.is_empty():
            self.notify("no out-of-memory event in this trace")
            return
        later = self.ooms.filter(self.ooms["t"] > self.cursor.t)
        t = int((later if later.height else self.ooms)["t"][0])
        self.move_cursor(t=t, block_id=None)

    def on_pool_map_picked(self, message: PoolMap.Picked) -> None:
        state = self.state
        block_id = None
        if message.block_row is not None:
            block_id = int(self.index.block_id[message.block_row])
        self.selected_segment = message.segment
        self.move_cursor(segment_id=int(state.seg_id[message.segment]), block_id=block_id)

    def search(self, text: str) -> None:
        find_address(self, text)

    def legend_rows(self) -> list[tuple[str, str]]:
        return legend_rows()


def _or_dash(value: object) -> str:
    """``value`` as text, ``-`` where it is null."""
    return "-" if value is None else str(value)

