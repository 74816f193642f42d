"""What the Blocks, Pool and Stacks screens share: following the app's cursor, and the parts
they show alike (a block's Slice Detail, address search, selecting the event's block).

A :class:`LinkedScreen` watches ``app.cursor`` and redraws from it, but only while it is
the current screen (a hidden one notes that it is stale and catches up when shown), so a
cursor move costs one screen's work.  Its analysis objects are built for the cursor's
device in :meth:`prepare`, in a thread for big traces.  It passes :class:`CursorRequest`
from its widgets to ``app.move_cursor`` and has a one-line search box (``/``).
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static

from memtui.analysis.layout.addresses import AddressBook
from memtui.analysis.stacks.callstack import stack_tops, top_names
from memtui.analysis.stacks.stack_tree import format_stack
from memtui.analysis.timeline.live import DeviceIndex, EventBlocks, cached
from memtui.errors import printable
from memtui.model import MemoryTrace
from memtui.tui.cursor import CursorState
from memtui.tui.widgets import paint
from memtui.tui.widgets.key_bar import KeyBar
from memtui.tui.widgets.requests import CursorRequest
from memtui.tui.widgets.status import StatusBar
from memtui.units import format_bytes

#: Above this many blocks the analysis objects are built in a thread.
BACKGROUND_BLOCKS = 200_000


def _app_keys(app) -> set[str]:
    """The keys the app itself binds (its merged bindings, Textual's own included)."""
    bindings = getattr(app, "_bindings", None)
    return set(getattr(bindings, "key_to_bindings", {}))


class SearchBox(Input):
    """The screen's search line: hidden until ``/``; Escape closes it."""

    DEFAULT_CSS = """
    SearchBox { display: none; border: none; height: 1; padding: 0 1; }
    SearchBox:focus { border: none; }
    SearchBox.-textual-compact { padding: 0 1; }
    SearchBox.-open { display: block; }
    """
    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def action_close(self) -> None:
        self.remove_class("-open")
        self.value = ""
        self.screen.set_focus(None)
        self.screen.focus_main()


class LinkedScreen(Screen):
    """Base of the screens that follow the shared cursor (see the module docstring)."""

    SEARCH_PLACEHOLDER = "search"
    NAME = ""  # the app's name of the screen (``app.mark_painted`` after the first paint)

    def __init__(self) -> None:
        super().__init__()
        self.device: str | None = None
        self._stale = True
        self._ready = False
        self._seen: CursorState | None = None  # the cursor last drawn
        self._trace_stale = False  # the app replaced the trace while this screen was hidden
        self._held_keys: list[str] = []  # pressed while indexing: replayed once ready

    # -- the app's contract -----------------------------------------------------------------

    @property
    def trace(self) -> MemoryTrace:
        return self.app.trace  # type: ignore[attr-defined]

    @property
    def cursor(self) -> CursorState:
        return self.app.cursor  # type: ignore[attr-defined]

    def move_cursor(self, **changes) -> None:
        self.app.move_cursor(**changes)  # type: ignore[attr-defined]

    # -- life --------------------------------------------------------------------------------

    def compose_search(self) -> SearchBox:
        return SearchBox(placeholder=self.SEARCH_PLACEHOLDER, id="search", compact=True)

    def compose_layout(self, *line_ids: str) -> ComposeResult:
        """The layout the three screens share: in ``#main`` a status line, the screen's own
        lines (``line_ids``) and the detail pane (its map is mounted there once prepared);
        then the search box, the status bar and the footer."""
        with Vertical(id="main"):
            yield Static("", id="status-line")
            for line_id in line_ids:
                yield Static("", id=line_id)
            yield Static("", id="detail")
        yield self.compose_search()
        yield StatusBar()
        yield KeyBar(compact=True)

    def on_mount(self) -> None:
        self.watch(self.app, "cursor", self._cursor_changed, init=False)
        self._start(self.cursor.device)

    def on_screen_resume(self) -> None:
        if self._trace_stale:
            self._trace_stale = False
            self._start(self.cursor.device)
        elif self._ready and (self._stale or self.cursor.device != self.device):
            self._cursor_changed(self._seen, self.cursor)
        self.focus_main()

    def _start(self, device: str) -> None:
        self.device = device
        self._ready = False
        if self.trace.blocks.height > BACKGROUND_BLOCKS:
            self.query_one("#status-line", Static).update(Text(f"indexing {printable(device)}..."))
            self.run_worker(lambda: self._prepare_then_ready(device), thread=True,
                            exclusive=True, group="prepare", exit_on_error=False,
                            description=f"indexing {device} for the {self.NAME} screen")
        else:
            self.prepare(device)
            self.call_later(self._become_ready, device)

    def on_worker_state_changed(self, event) -> None:
        """Failed workers go to the app's one handler (``report_worker``)."""
        report = getattr(self.app, "report_worker", None)
        if report is not None:
            report(event)

    def worker_failed(self, worker) -> None:
        """A worker of this screen failed (the app said so in a toast): say it here too,
        instead of "indexing..." forever."""
        self.query_one("#status-line", Static).update(
            Text(f"{worker.description or worker.group} failed: see the message", style="bold"))

    def _prepare_then_ready(self, device: str) -> None:
        self.prepare(device)
        self.app.call_from_thread(self._become_ready, device)

    async def _become_ready(self, device: str) -> None:
        if device != self.device:  # the cursor went to another device meanwhile
            return
        if self.cursor.device != device:
            self._start(self.cursor.device)
            return
        await self.build()
        self._ready = True
        self._stale = False
        self._follow(None, self.cursor)
        held, self._held_keys = self._held_keys, []
        for key in held:  # in the order pressed, now that the map or tree is there
            self.app.simulate_key(key)
        mark = getattr(self.app, "mark_painted", None)
        if mark is not None and self.NAME:
            self.call_after_refresh(mark, self.NAME)

    def on_key(self, event: events.Key) -> None:
        """A key for the screen's own map or tree pressed while it is still being indexed
        is held and replayed once the screen is ready: never lost.  The app's own keys
        (screens, cursor, quit) act at once."""
        if self._ready or event.key in _app_keys(self.app):
            return
        self._held_keys.append(event.key)
        self.query_one("#status-line", Static).update(
            f"indexing {self.device}... ({len(self._held_keys)} keys held until ready)")
        event.stop()
        event.prevent_default()

    def _cursor_changed(self, old: CursorState | None, new: CursorState) -> None:
        if not self._ready:
            return
        if new.device != self.device:
            self._start(new.device)
            return
        if not self.is_current:
            self._stale = True
            return
        self._stale = False
        self._follow(old if old is not None and old.device == new.device else None, new)

    def _follow(self, old: CursorState | None, new: CursorState) -> None:
        self._seen = new
        self.follow(old, new)

    def trace_replaced(self) -> None:
        """The app shows a grown trace (``--follow``): prepare and build again, now if this
        screen is shown, else when it is."""
        if not self.is_attached:
            return
        if self.is_current:
            self._start(self.cursor.device)
        else:
            self._trace_stale = True

    # -- for subclasses ----------------------------------------------------------------------

    @staticmethod
    def warm(trace: MemoryTrace, device: str) -> None:
        """Build into the shared analysis cache what :meth:`prepare` needs for ``device``
        (the app calls it in a thread right after the first paint, before any visit)."""

    def prepare(self, device: str) -> None:
        """Build the analysis objects of ``device`` (may run in a thread: no widgets)."""

    async def build(self) -> None:
        """Put the widgets for the prepared device in place (replacing any old ones)."""

    def follow(self, old: CursorState | None, new: CursorState) -> None:
        """Redraw from the cursor ``new`` (``old``: the one before, None on a full redraw)."""

    def main_widget(self) -> Widget:
        """The widget that holds the focus on this screen (its map or tree)."""
        raise NotImplementedError

    def focus_main(self) -> None:
        """Give the focus back to the screen's main widget, once it is built."""
        if self._ready:
            self.main_widget().focus()

    def search(self, text: str) -> None:
        """Run the search typed in the search box."""

    # -- search and requests -------------------------------------------------------------------

    def action_search(self) -> None:
        box = self.query_one(SearchBox)
        box.add_class("-open")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if isinstance(event.input, SearchBox):
            text = event.value
            event.input.action_close()
            if text.strip():
                self.search(text.strip())

    def on_cursor_request(self, message: CursorRequest) -> None:
        message.stop()
        self.move_cursor(**message.changes)

    def main_area(self) -> Vertical:
        return self.query_one("#main", Vertical)


# -- Parts the map screens share -----------------------------------------------------


class MapScreen(Protocol):
    """What the parts below read on a screen: a :class:`LinkedScreen`'s own (``trace``,
    ``cursor``, ``move_cursor``, ``notify``, ``app``) and what a map screen's
    :meth:`~LinkedScreen.prepare` sets (``index``, ``book``, ``events``: the Blocks and
    Pool screens).  ``tests/tui/test_app_parts.py`` holds both sides to it."""

    trace: MemoryTrace
    cursor: CursorState
    app: Any
    index: DeviceIndex | None
    book: AddressBook
    events: EventBlocks

    def move_cursor(self, **changes: Any) -> Any: ...

    def notify(self, message: str, *, severity: str = "information") -> None: ...


def select_event_block(screen: MapScreen, old: CursorState | None,
                       new: CursorState) -> bool:
    """Select the block of the event under the cursor when the cursor moved in time
    without choosing a block (or on first showing with none); True if it did."""
    moved = old is not None and (new.t, new.event) != (old.t, old.event) \
        and new.block_id == old.block_id
    if not (moved or (old is None and new.block_id is None)):
        return False
    block = screen.events.block_at(new.t) if new.event is None \
        else screen.events.block_at_event(new.event)
    if block is None or block == new.block_id:
        return False
    screen.move_cursor(block_id=block)
    return True


def find_address(screen: MapScreen, text: str) -> None:
    """Select what ``text`` names, moving the cursor (and the view) to when it lived."""
    book = screen.book
    cursor = screen.cursor
    hit = book.find_text(text, cursor.t)
    if hit is None:
        screen.notify(f"no block or segment at {text!r} on {cursor.device}",
                      severity="warning")
        return
    changes: dict = {"t": hit.t, "block_id": hit.block_id, "segment_id": hit.segment_id}
    t0, t1 = cursor.view
    if not t0 <= hit.t <= t1:
        half = (t1 - t0) // 2
        changes["view"] = (hit.t - half, hit.t + half)
    screen.move_cursor(**changes)


def _or_dash(value) -> str:
    """A figure the capture may lack (msMemScope blocks have no stream): ``-``, not None."""
    return "-" if value is None else str(value)


def block_details(screen: MapScreen, cursor: CursorState) -> str:
    """The Slice Detail of the selected block: what, when, whose, and its stack."""
    index: DeviceIndex = screen.index  # type: ignore[assignment] - prepared before
    trace = screen.trace
    row = index.row_of_block(cursor.block_id)
    if row is None:
        return ("[dim]No block selected: move the cursor onto an event, click a band, "
                "or press / to find an address.[/]")
    blocks = index.blocks.row(row, named=True)
    origin = index.t_start
    name = f"block {int(index.block_id[row])}"  # the one name of a block, as Tables say it
    marks = []
    if index.ghost[row]:
        marks.append("[b]ghost[/b]")
    if blocks["t_free"] is None:
        marks.append("[b]never freed[/b]")
    requested = index.requested[row]
    when = f"allocated {paint.format_time(trace, blocks['t_alloc'], origin)}"
    if index.ghost[row]:
        when = "allocated before the trace"
    if blocks["t_free_requested"] is not None:
        when += f", free requested {paint.format_time(trace, blocks['t_free_requested'], origin)}"
    if blocks["t_free"] is not None:
        when += f", freed {paint.format_time(trace, blocks['t_free'], origin)}"
    owner = blocks.get("owner") or "-"
    lines = [
        f"[b]{paint.plain(name)}[/b] at {int(index.addr[row]):#x}  "
        f"{format_bytes(int(index.size[row]))} "
        f"(requested {int(requested):,} B)  stream {_or_dash(blocks['stream'])}  "
        f"{paint.plain(blocks['pool'])}"
        + ("  " + ", ".join(marks) if marks else ""),
        f"{when}  owner {paint.plain(owner)}",
    ]
    noted = [f"{label} [b]{paint.plain(_one_line(blocks.get(key)))}[/b]"
             for key, label in (("user_metadata", "metadata"),
                                ("compile_context", "compiled region"))
             if blocks.get(key)]
    forward = [line for line in (blocks.get("forward_frames") or "").splitlines()
               if line.strip()]
    if forward:  # on the first lines too: a small pane shows no more than four
        noted.append(f"forward pass [b]{paint.plain(_innermost(forward))}[/b]")
    named = stack_name(screen, blocks["stack_id"])
    if named:
        noted.insert(0, f"stack [b]{paint.plain(named)}[/b]")
    if noted:
        lines.append("  ".join(noted))
    stack = format_stack(trace, blocks["stack_id"], limit=8 if forward else 12)
    lines += ["  " + paint.plain(frame) for frame in stack]
    if forward:
        lines.append("[b]forward pass[/b] (the forward op behind this block):")
        lines += ["  " + paint.plain(line.strip()) for line in forward[-6:]]
    return "\n".join(lines)


def stack_name(screen, stack_id: int | None) -> str | None:
    """The name every screen gives ``stack_id`` (the app's stack top rule where it has
    one: :func:`memtui.analysis.stacks.callstack.stack_top_frames`)."""
    if stack_id is None:
        return None
    names_of = getattr(screen.app, "stack_top_names", None) if _has_app(screen) else None
    names = names_of() if names_of is not None else cached(
        screen.trace, ("stack_top_names", "user"), lambda: top_names(stack_tops(screen.trace)))
    return names.get(int(stack_id))


def _has_app(screen) -> bool:
    try:
        return screen.app is not None
    except Exception:  # noqa: BLE001 - a screen not mounted (tests) has no app
        return False


_TRACEBACK_LINE = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<name>.+)')


def _innermost(lines: list[str]) -> str:
    """A forward traceback's innermost frame on one line (``forward model.py:10``), else
    its last line."""
    for line in reversed(lines):
        hit = _TRACEBACK_LINE.search(line)
        if hit:
            base = hit["file"].replace("\\", "/").rsplit("/", 1)[-1]
            return f"{hit['name'].strip()} {base}:{hit['line']}"
    return _one_line(lines[-1], 80)


def _one_line(text: str | None, width: int = 200) -> str:
    """A label from the capture on one line, cut to ``width`` characters."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
