"""The Textual app: loading, the five screens, the shared cursor and the global keys.

API that every screen builds on (see also memtui/tui/README.md):

* ``MemtuiApp(trace_path | trace)``: a path is loaded in a thread worker behind a progress
  bar; a :class:`~memtui.model.MemoryTrace` is shown at once (tests).
* ``run_app(path) -> int``: runs the app; a capture that cannot be read ends it with the
  one-line error on stderr and exit status 2, as ``memtui summary`` does; a crash ends it
  with exit status 1 and one line on stderr naming the file that holds the traceback
  (never 0); quitting while the capture is still loading ends the process at once.
* ``app.trace``: the MemoryTrace.  ``app.cursor``: the reactive
  :class:`~memtui.tui.cursor.CursorState`; watch it with
  ``self.watch(self.app, "cursor", callback)``.  ``app.move_cursor(**changes)`` is the one
  way to change it: it clamps the time into the device's range, keeps the cursor inside the
  view and the window in order.  ``app.zoom_view(factor, around)`` zooms.
* ``app.timeline(device)`` (levels, event times, peak), ``app.live_blocks(device)`` (blocks
  alive at a time), ``app.stack_tops()`` (a label per call stack): built once, cached.
* ``app.filter_blocks(block_ids, label)``: the Tables screen's Block View with only those
  blocks (the Stacks screen's chosen node).
* Screens are modes named ``trend, blocks, pool, stacks, tables`` on keys 1 to 5; each
  screen class takes no arguments and yields a ``StatusBar`` and a ``Footer``.

This module owns the app's state, the loading and the start; each other part of the app
is a mixin in a module of its own: ``cursor_moves`` (the cursor and its keys),
``cached_analyses`` (timelines, stack labels, live blocks), ``layer_choice`` (the memory
layer shown), ``follow`` (``--follow``, and showing a replaced trace), ``background``
(the findings and the screens' indexes after the first paint), ``commands`` (help,
palette, capture facts) and ``exits`` (failed workers, crashes, the exit status).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import polars as pl
from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.reactive import reactive

from memtui.analysis.timeline.at_time import LiveBlocks, Timeline
from memtui.analysis.timeline.layers import layer_view  # noqa: F401 - patched here by tests/tui/test_follow.py
from memtui.errors import CaptureError, printable
from memtui.loading import check_input, require_a_device
from memtui.model import MemoryTrace
from memtui.tui import textual_fixes
from memtui.tui.answer import CursorNote, peak_note
from memtui.tui.background import BackgroundWork
from memtui.tui.cached_analyses import CachedAnalyses
from memtui.tui.commands import LEGEND_TITLE, Commands, key_display
from memtui.tui.cursor import CursorState
from memtui.tui.cursor_moves import CursorMoves, initial_device
from memtui.tui.exits import (
    EXIT_BAD_INPUT,
    EXIT_CRASH,
    CrashHandling,
    crash_line,
    exit_status,
    run_to_exit,
)
from memtui.tui.follow import FollowController, Following
from memtui.tui.keymap import keep_quit_and_help, keymap_path, load_keymap
from memtui.tui.layer_choice import LayerChoice
from memtui.tui.screens import SCREEN_KEYS, SCREEN_TITLES, screen_modes
from memtui.tui.screens.modals import LoadingScreen

DEFAULT_THEME = "ansi-dark"  # the terminal's own colours


class MemtuiApp(CursorMoves, CachedAnalyses, LayerChoice, Following, BackgroundWork,
                Commands, CrashHandling, App[int]):
    """See the module docstring."""

    CSS_PATH = "memtui.tcss"
    TITLE = "memtui"
    MODES: ClassVar = screen_modes()  # a screen's module is imported on its first visit
    HORIZONTAL_BREAKPOINTS: ClassVar = [(0, "-narrow"), (90, "-normal"), (150, "-wide")]

    BINDINGS: ClassVar[list[BindingType]] = [
        *[Binding(key, f"show_screen('{name}')", SCREEN_TITLES[name], show=False,
                  id=f"app.screen_{name}")
          for key, name in SCREEN_KEYS.items()],
        Binding("left,h", "step(-1)", "Previous event", show=False, id="app.previous_event"),
        Binding("right,l", "step(1)", "Next event", show=False, id="app.next_event"),
        Binding("H", "jump(-0.1)", "Back a tenth of the view", show=False, id="app.back_a_tenth"),
        Binding("L", "jump(0.1)", "Ahead a tenth of the view", show=False, id="app.ahead_a_tenth"),
        Binding("p", "peak", "Peak", id="app.peak"),
        Binding("g", "start", "Start", show=False, id="app.start"),
        Binding("G", "end", "End", show=False, id="app.end"),
        Binding("left_square_bracket", "window_start", "Window from here", show=False,
                id="app.window_start"),
        Binding("right_square_bracket", "window_end", "Window to here", show=False,
                id="app.window_end"),
        Binding("x", "clear_window", "Clear the window", show=False, id="app.clear_window"),
        Binding("z", "zoom_in", "Zoom", id="app.zoom_in"),
        Binding("Z", "zoom_out", "Zoom out", show=False, id="app.zoom_out"),
        Binding("d", "device", "Device", id="app.device"),
        Binding("t", "cycle_layer", "Memory layer", show=False, id="app.cycle_layer"),
        Binding("T", "stack_top", "Stack top rule", show=False, id="app.stack_top"),
        Binding("A", "facts", "Capture facts", show=False, id="app.facts"),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    cursor: reactive[CursorState | None] = reactive(None, init=False)
    #: which frame names a stack (analysis.callstack.TOP_RULES); ``T`` cycles it
    top_rule: reactive[str] = reactive("user", init=False)
    #: Findings per device (memtui.analysis.findings), None until the worker is done.
    findings: reactive[dict | None] = reactive(None, init=False)

    def __init__(self, source: str | Path | MemoryTrace | None = None, *,
                 trace: MemoryTrace | None = None, trace_path: str | Path | None = None,
                 follow: bool = False, poll: tuple[float, float] | None = None,
                 follow_rank: int | None = None,
                 findings_first: bool | None = None, keymap_file: Path | None = None,
                 open_at_answer: bool | None = None, role_rules=None) -> None:
        super().__init__()
        #: the user's role rules (``--roles``, ``[tool.memtui.roles]``), None: memtui's own
        self.role_rules = role_rules
        #: the user's keymap (memtui.tui.keymap): None reads $XDG_CONFIG_HOME's
        self.keymap_file = keymap_file
        #: the binding ids the user's keymap names (empty without one)
        self.keymap_ids: set[str] = set()
        if isinstance(source, MemoryTrace):
            trace = source
        elif source is not None:
            trace_path = source
        self.trace_path = Path(trace_path) if trace_path is not None else None
        self.trace: MemoryTrace = trace  # type: ignore[assignment]
        self.load_error: str | None = None
        self.loading = False  # the loader thread is still reading the file
        #: a long read's preview is shown (``{"rows": read, "of": total}``): a model of the
        #: rows read so far, replaced by the whole capture's when it is built
        self.preview: dict | None = None
        #: ``time.perf_counter()`` when the loaded capture was first shown (after its
        #: preview where there was one; benchmarks read it)
        self.whole_shown: float | None = None
        self.crash: BaseException | None = None
        self.crash_log: Path | None = None
        self.started_at = time.perf_counter()
        self.painted: dict[str, float] = {}
        #: set at the first paint: a new cache entry is written from then on (its writing
        #: would take a core from the work before the first screen)
        self.first_paint = threading.Event()
        #: what the app itself warned of (the keymap): the status bar counts these with the
        #: capture's warnings, the Capture facts (A) list them; nothing pops up over figures
        self.app_warnings: list[str] = []
        self._timelines: dict[str, Timeline] = {}
        self._live: dict[str, LiveBlocks] = {}
        self._tops: pl.DataFrame | None = None
        self.block_filter: tuple | None = None  # (device, block ids, label) for the Tables
        self.stack_request: tuple | None = None  # (device, stack id, frame id) for Stacks
        # Show the Findings screen once findings are found, when one is of high severity
        # and the user has not moved yet: by default for a capture opened from a path.
        self.findings_first = trace is None if findings_first is None else findings_first
        self._findings_started = False
        #: Why finding failed (shown on the Findings screen), None while nothing failed.
        self.findings_error: str | None = None
        self._first_cursor: CursorState | None = None
        # Open with the cursor at the answer (tui/answer.py: the peak, then the top finding's
        # evidence), and say so on the status bar: by default for a capture opened from a
        # path and not followed (a test's trace opens at its first event).
        self.open_at_answer = (trace is None and not follow if open_at_answer is None
                               else open_at_answer)
        #: what the status bar says of the cursor while it stays where the app put it
        self.cursor_note: CursorNote | None = None
        #: a key or a click came from the user: the app no longer moves the cursor or the
        #: screen by itself (pressing p at the peak it opened on moves nothing, yet counts)
        self.user_acted = False
        # Layered sources (msMemScope): the whole capture, and the layer shown per device;
        # ``trace`` is then the chosen layers' view of it (analysis.layers.layer_view).
        self.full_trace: MemoryTrace | None = None
        self.layers: dict[str, str] = {}
        if os.environ.get("TEXTUAL_THEME") is None:
            self.theme = DEFAULT_THEME
        self.follow: FollowController | None = None
        if follow and self.trace_path is not None:
            self.follow = FollowController(self, self.trace_path, *(poll or ()),
                                           rank=follow_rank)
            self.bind("R", "reload", description="Read the followed file again", show=False)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key | events.MouseDown) and not event.is_forwarded:
            self.user_acted = True
        await super().on_event(event)

    # -- loading --------------------------------------------------------------------------

    def on_mount(self) -> None:
        keymap, problem = load_keymap(self.keymap_file)
        if keymap:
            own = {b.id: b.key for b in self.BINDINGS if isinstance(b, Binding) and b.id}
            keymap, taking = keep_quit_and_help(keymap, own)
            if taking:
                where = self.keymap_file or keymap_path()
                problem = "; ".join(p for p in (problem, f"{where}: {taking}") if p)
            self.set_keymap(keymap)
            self.keymap_ids = set(keymap)  # checked after the first paint (background)
        if problem:  # said once, at the start: the status bar counts it, A shows it
            self.add_warning(problem)
        if self.trace is not None:
            self._start(self.trace)
            return
        name = printable(self.trace_path.name) if self.trace_path else "?"
        self.sub_title = name
        self.push_screen(LoadingScreen(name))
        if self.follow is not None:
            self._start_following()
            return
        self.loading = True
        # A daemon thread, not a Textual worker: those run on asyncio's default executor,
        # which App.run waits for on exit, so a quit during a long load would never end.
        threading.Thread(target=self._load, name="memtui-load", daemon=True).start()

    def _load(self) -> None:
        """Load the capture (in the loader thread); a quit meanwhile abandons it, a bug
        crashes the app as one in its own loop would (exit 1)."""
        try:
            self._load_and_report()
        except Exception as error:
            if self.is_running:  # else the app exited under us: nobody to tell
                self.call_from_thread(self._handle_exception, error)

    def _load_and_report(self) -> None:
        from memtui.loading import load_trace

        screen = self.screen

        def progress(fraction: float, message: str) -> None:
            if isinstance(screen, LoadingScreen):
                screen.report_from_thread(fraction, message)

        try:
            shown = self._beside(self._with_rules(load_trace(
                self.trace_path, progress, store_in_background=True,
                store_after=self.first_paint, preview=self._preview_from_thread)))
        except CaptureError as exc:
            self.call_from_thread(self._load_failed, str(exc))
            return
        finally:
            self.loading = False
        self.call_from_thread(self._start_loaded, *shown)

    def _beside(self, trace: MemoryTrace) -> tuple[MemoryTrace, MemoryTrace | None, dict]:
        """What the loader thread builds for the UI thread to take in (never touching what
        the app shows meanwhile, a preview): ``trace``, its layer view (None without
        layers) and the timeline of the device it opens on."""
        view = self.view_beside(trace)
        shown = view if view is not None else trace
        device = initial_device(shown)
        return trace, view, {} if device is None else {device: Timeline.build(shown, device)}

    def _preview_from_thread(self, trace: MemoryTrace) -> None:
        """Show a long read's preview (called once by the loader thread, which goes on
        reading meanwhile): the rows read so far, until the whole capture replaces it."""
        if not self.is_running:
            return
        self.call_from_thread(self._start_preview, *self._beside(self._with_rules(trace)))

    def _start_preview(self, trace: MemoryTrace, view: MemoryTrace | None,
                       timelines: dict[str, Timeline]) -> None:
        """Open on the preview as on a capture (the status bar says it is one)."""
        if self.trace is not None or initial_device(trace) is None:
            return
        self.preview = trace.meta.extra.get("preview")
        self._start_with(trace, view, timelines)

    def _start_with(self, trace: MemoryTrace, view: MemoryTrace | None,
                    timelines: dict[str, Timeline]) -> None:
        """Open on ``trace`` as the chosen layers show it (``view`` where it still does)."""
        shown = self._layered(trace, view)
        if shown is view or view is None:  # (else the layers chosen changed meanwhile)
            self._timelines.update(timelines)
        self._start(shown)

    def _start_loaded(self, trace: MemoryTrace, view: MemoryTrace | None,
                      timelines: dict[str, Timeline]) -> None:
        """Show the loaded capture (``trace``, its layer view, the timeline of the device
        it opens on: :meth:`_beside`): in place of its preview where one is shown."""
        self.whole_shown = time.perf_counter()
        if self.preview is None or self.trace is None:
            self._start_with(trace, view, timelines)
            return
        self.preview = None
        user_t = self.cursor.t if self.cursor is not None and self.user_acted else None
        shown = self._layered(trace, view)
        self.replace_trace(shown, timelines if shown is view or view is None else None)
        if self.cursor is not None:
            timeline = self.timeline(self.cursor.device)
            if user_t is not None:  # the user's time, in the whole capture
                self.move_cursor(event=timeline.event_at(user_t))
            else:  # as a first open shows it: the whole capture, the cursor at its peak
                self._open_on(timeline)
        if self.painted:  # the first paint was the preview's: the background work waits
            self._start_background()

    def _load_failed(self, message: str) -> None:
        self.load_error = message
        self.exit(EXIT_BAD_INPUT, return_code=EXIT_BAD_INPUT)

    def _with_rules(self, trace: MemoryTrace) -> MemoryTrace:
        """``trace`` carrying the user's role rules (the same object where it does)."""
        from memtui.analysis.roles.user_rules import rules_of, with_rules

        if self.role_rules is None or rules_of(trace) is self.role_rules:
            return trace
        return with_rules(trace, self.role_rules)

    def _start(self, trace: MemoryTrace) -> None:
        trace = self._layered(self._with_rules(trace))
        self.trace = trace
        device = initial_device(trace)
        if device is None:  # a capture of nothing: the rule of every command (loading)
            try:
                require_a_device(trace)
            except CaptureError as exc:
                self._load_failed(str(exc))
            return
        self._open_on(self.timeline(device))
        self.sub_title = printable(Path(trace.meta.path).name)
        self.switch_mode("trend")  # the status bar counts the capture's warnings (A: them)

    def _open_on(self, timeline: Timeline) -> None:
        """The cursor as a capture opens: the whole of ``timeline`` in view, at its peak
        where the app opens at the answer (until the findings are in), else its start."""
        self.cursor = CursorState(device=timeline.device, t=timeline.start,
                                  view=(timeline.start, max(timeline.end, timeline.start + 1)),
                                  event=0)
        if self.open_at_answer and timeline.positions:
            self.move_cursor(event=timeline.peak_event)
            self.cursor_note = peak_note(self.cursor)
        self._first_cursor = self.cursor

    def notify(self, message: str, *, title: str = "", severity="information",
               timeout: float | None = None, markup: bool = False) -> None:
        """A toast, always plain text: key names (``[`` ``]``) and names from files are
        never read as Rich markup (``markup`` is accepted and ignored: a screen's
        ``self.notify`` passes ``markup=True``)."""
        super().notify(printable(message), title=title, severity=severity, timeout=timeout,
                       markup=False)

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """Save an SVG of the screen where a server has room for it ($XDG_PICTURES_DIR,
        else the current folder, else the temp folder) and say where; in a browser
        (``memtui serve``) the browser downloads it."""
        if self.is_web:
            return super().deliver_screenshot(filename, path, time_format)
        from memtui.outputs import write_atomically

        name = filename or f"memtui-{time.strftime('%Y%m%d-%H%M%S')}.svg"
        for folder in screenshot_folders(path):
            target = folder / name
            try:  # (an exclusive temporary renamed into place: never through a link)
                write_atomically(target, self.export_screenshot())
            except OSError:
                continue
            self.notify(f"Screenshot saved to {target}", title="screenshot", timeout=8)
            return str(target)
        self.notify("Could not save the screenshot: no writable folder", severity="error")
        return None

    def action_show_screen(self, name: str) -> None:
        if self._has_cursor() and self.current_mode != name:
            self.switch_mode(name)


def screenshot_folders(path: str | None = None) -> list[Path]:
    """Where a screenshot may go, best first: ``path``, $XDG_PICTURES_DIR, the current
    folder, the temp folder (only folders that exist)."""
    import tempfile

    candidates = [path, os.environ.get("XDG_PICTURES_DIR"), os.getcwd(), tempfile.gettempdir()]
    return [Path(c).expanduser() for c in candidates if c and Path(c).expanduser().is_dir()]


def run_app(path: str | Path, follow: bool = False, follow_rank: int | None = None,
            role_rules=None) -> int:
    """Open ``path`` in the UI (``follow``: keep reading it as it grows; ``follow_rank``:
    the rank followed of a folder holding several; ``role_rules``: the user's role
    rules); the exit status (see :func:`exit_status`)."""
    path = Path(path)
    try:
        check_input(path, allow_empty=follow)
    except CaptureError as exc:
        print(f"memtui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return run_to_exit(MemtuiApp(path, follow=follow, follow_rank=follow_rank,
                                 role_rules=role_rules))


__all__ = ["EXIT_BAD_INPUT", "EXIT_CRASH", "LEGEND_TITLE", "MemtuiApp", "crash_line",
           "exit_status", "initial_device", "key_display", "run_app", "run_to_exit",
           "screenshot_folders", "textual_fixes"]
