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
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import traceback
from functools import partial
from pathlib import Path
from typing import ClassVar

import polars as pl
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from memtui.analysis.at_time import LiveBlocks, Timeline, block_positions
from memtui.analysis.callstack import TOP_RULES, stack_tops
from memtui.analysis.layers import default_layers, has_layers, layer_view, layers_of
from memtui.errors import CaptureError, printable
from memtui.loading import check_input
from memtui.model import MemoryTrace
from memtui.tui import textual_fixes
from memtui.tui.cursor import CursorState, settle, zoom
from memtui.tui.follow import FollowController
from memtui.tui.keymap import load_keymap
from memtui.tui.screens import SCREEN_KEYS, SCREEN_TITLES, SCREENS, screen_modes
from memtui.tui.screens.modals import DeviceScreen, FactsScreen, HelpScreen, LoadingScreen

EXIT_CRASH = 1
EXIT_BAD_INPUT = 2
LEGEND_TITLE = "Legend (colours and marks of this screen)"
DEFAULT_THEME = "ansi-dark"  # the terminal's own colours


class MemtuiApp(App[int]):
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
                 findings_first: bool | None = None, keymap_file: Path | None = None) -> None:
        super().__init__()
        #: the user's keymap (memtui.tui.keymap): None reads $XDG_CONFIG_HOME's
        self.keymap_file = keymap_file
        if isinstance(source, MemoryTrace):
            trace = source
        elif source is not None:
            trace_path = source
        self.trace_path = Path(trace_path) if trace_path is not None else None
        self.trace: MemoryTrace = trace  # type: ignore[assignment]
        self.load_error: str | None = None
        self.loading = False  # the loader thread is still reading the file
        self.crash: BaseException | None = None
        self.crash_log: Path | None = None
        self.started_at = time.perf_counter()
        self.painted: dict[str, float] = {}
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

    # -- loading --------------------------------------------------------------------------

    def on_mount(self) -> None:
        keymap, problem = load_keymap(self.keymap_file)
        if keymap:
            self.set_keymap(keymap)
        if problem:
            self.notify(problem, title="keymap", severity="warning", timeout=10)
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
                self.call_from_thread(screen.set_progress, fraction, message)

        try:
            trace = self._layered(load_trace(self.trace_path, progress,
                                             store_in_background=True))
            device = initial_device(trace)
            if device is not None:
                self._timelines[device] = Timeline.build(trace, device)
        except CaptureError as exc:
            self.call_from_thread(self._load_failed, str(exc))
            return
        finally:
            self.loading = False
        self.call_from_thread(self._start, trace)

    def _load_failed(self, message: str) -> None:
        self.load_error = message
        self.exit(EXIT_BAD_INPUT, return_code=EXIT_BAD_INPUT)

    def layer_choice(self, trace: MemoryTrace) -> dict[str, str]:
        """The memory layer each device of a layered ``trace`` is shown with: the user's
        choice while the capture still has it, else the default.  Reads only: the
        follower calls it in its worker to build the view beside the trace."""
        chosen = default_layers(trace)
        for device, layer in dict(self.layers).items():
            if device in chosen and layer in layers_of(trace, device):
                chosen[device] = layer
        return chosen

    def _layered(self, trace: MemoryTrace, view: MemoryTrace | None = None) -> MemoryTrace:
        """``trace`` as the chosen memory layer of each device shows it (layered sources;
        others, or a view already, come back as they are); ``view``, built beside it in a
        worker, is taken where it shows the layers chosen now."""
        if not has_layers(trace) or "layers" in trace.meta.extra:
            return trace
        self.full_trace = trace
        chosen = self.layer_choice(trace)
        self.layers = chosen
        if view is not None and view.meta.extra.get("layers") == chosen:
            return view
        return layer_view(trace, chosen)

    def layer_label(self, device: str) -> str | None:
        """The memory layer shown for ``device`` (None for a source without layers)."""
        return self.layers.get(device) if self.full_trace is not None else None

    def action_cycle_layer(self) -> None:
        """Show the next memory layer of the cursor's device (msMemScope: PTA, HAL, ...)."""
        if not self._has_cursor():
            return
        device = self.cursor.device
        if self.full_trace is None:
            self.notify("This capture has one memory layer.")
            return
        layers = layers_of(self.full_trace, device)
        if len(layers) < 2:
            self.notify(f"{device} has one memory layer: {', '.join(layers) or 'none'}.")
            return
        current = self.layers.get(device, layers[0])
        self.layers[device] = layers[(layers.index(current) + 1) % len(layers)] \
            if current in layers else layers[0]
        self.replace_trace(layer_view(self.full_trace, self.layers))
        self.notify(f"{device}: memory layer {self.layers[device]}", timeout=3)

    def _start(self, trace: MemoryTrace) -> None:
        trace = self._layered(trace)
        self.trace = trace
        device = initial_device(trace)
        if device is None:
            self._load_failed(f"{trace.meta.path}: no device has events, blocks or levels")
            return
        timeline = self.timeline(device)
        self.cursor = CursorState(device=device, t=timeline.start,
                                  view=(timeline.start, max(timeline.end, timeline.start + 1)),
                                  event=0)
        self._first_cursor = self.cursor
        self.sub_title = printable(Path(trace.meta.path).name)
        for warning in trace.meta.warnings[:3]:
            self.notify(warning, title="warning", severity="warning", timeout=10)
        self.switch_mode("trend")

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
        name = filename or f"memtui-{time.strftime('%Y%m%d-%H%M%S')}.svg"
        for folder in screenshot_folders(path):
            target = folder / name
            try:
                target.write_text(self.export_screenshot(), encoding="utf-8")
            except OSError:
                continue
            self.notify(f"Screenshot saved to {target}", title="screenshot", timeout=8)
            return str(target)
        self.notify("Could not save the screenshot: no writable folder", severity="error")
        return None

    # -- failed workers: one handler ----------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.report_worker(event)

    def report_worker(self, event: Worker.StateChanged) -> None:
        """Every worker that fails ends here (the app's own, and the screens' through
        their ``on_worker_state_changed``: the message does not bubble): one clear message
        in the UI (what failed and why, where the traceback went), and the screen that
        started it is told (``worker_failed``) so that nothing waits for it."""
        worker = event.worker
        if event.state != WorkerState.ERROR:
            return
        error = worker.error
        log = _write_crash_log(error) if isinstance(error, BaseException) else None
        what = worker.description or worker.group or worker.name or "background work"
        where = f"; details in {log}" if log else ""
        self.notify(f"{what} failed: {type(error).__name__}: {error}{where}",
                    title="error", severity="error", timeout=20)
        failed = getattr(worker.node, "worker_failed", None)
        if failed is not None:
            failed(worker)

    def worker_failed(self, worker: Worker) -> None:
        """One of the app's own workers failed (``report_worker`` said why in a toast):
        the findings say so on the Findings screen instead of waiting for ever."""
        if worker.group == "findings":
            self.findings_error = f"{type(worker.error).__name__}: {worker.error}"
            self.findings = {}

    # -- crashes --------------------------------------------------------------------------

    def _handle_exception(self, error: Exception) -> None:
        """Any unhandled exception: keep it and its traceback (in a file), then exit 1."""
        if self.crash is None:
            self.crash = error
            self.crash_log = _write_crash_log(error)
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        """Exit without printing Textual's full traceback: run_app says one line."""
        self.bell()
        self._close_messages_no_wait()

    def mark_painted(self, name: str) -> None:
        """Screens call this after their first paint (benchmarks read ``painted``); the
        first paint starts the findings worker."""
        self.painted.setdefault(name, time.perf_counter())
        if not self._findings_started and self.trace is not None:
            self._findings_started = True
            self._find()
            from memtui.tui.screens import linked

            if self.cursor is not None and self.trace.blocks.height > linked.BACKGROUND_BLOCKS:
                self._warm_up(self.trace, self.cursor.device)

    # -- the other screens' indexes (after the first paint, in a thread) ----------------------

    @work(thread=True, exclusive=True, group="warm", description="indexing the screens",
          exit_on_error=False)
    def _warm_up(self, trace: MemoryTrace, device: str) -> None:
        """Build what the Blocks, Pool and Stacks screens need for ``device`` before they are
        visited (into the shared analysis cache: a screen asking meanwhile waits for the
        build under way instead of starting its own), so a first visit does not index."""
        from textual.worker import get_current_worker

        from memtui.loading import keep_block_map

        worker = get_current_worker()
        for screen_class in SCREENS.values():
            warm = getattr(screen_class, "warm", None)
            if warm is None:
                continue
            if worker.is_cancelled or trace is not self.trace:  # quitting, or replaced
                return
            try:
                warm(trace, device)
            except Exception:  # noqa: BLE001 - the screen builds (and reports) it on a visit
                continue
        if self.follow is None and not worker.is_cancelled:
            keep_block_map(trace, device)  # for the next open (unless it came from there)

    # -- findings (after the first paint, in a thread) --------------------------------------

    @work(thread=True, exclusive=True, group="findings", description="the findings",
          exit_on_error=False)
    def _find(self) -> None:
        from memtui.analysis.findings import find_all

        trace = self.trace
        self.findings_error = None
        found = find_all(trace)  # a finder bug: report_worker says so, worker_failed shows it
        self.call_from_thread(self._findings_ready, trace, found)

    def _findings_ready(self, trace: MemoryTrace, found: dict) -> None:
        if trace is not self.trace:  # replaced meanwhile (--follow): its own worker runs
            return
        self.findings = found
        high = any(f.severity == "high" for items in found.values() for f in items)
        untouched = self.cursor == self._first_cursor and self.current_mode == "trend"
        if high and self.findings_first and untouched:
            self.switch_mode("findings")

    # -- following a growing capture (--follow; tui/follow.py polls) -----------------------

    def _start_following(self) -> None:
        try:
            self.follow.start()
        except CaptureError as exc:
            self._load_failed(str(exc))

    def show_followed(self, trace: MemoryTrace, timelines: dict | None = None,
                      view: MemoryTrace | None = None) -> None:
        """A new trace from the follower (with the timelines, and for a layered source the
        layer view, built beside it in its worker): the first one starts the app, later
        ones replace the shown one in place (the cursor pinned to the end while it is
        there)."""
        if has_layers(trace):
            layered = self._layered(trace, view)
            if layered is not view:  # built here: the worker's timelines were of another
                timelines = None
            trace = layered
        if self.trace is None or self.cursor is None:
            self._timelines.update(timelines or {})
            self._start(trace)
            if self.cursor is not None:
                self.move_cursor(event=self.timeline(self.cursor.device).positions - 1)
            return
        self.replace_trace(trace, timelines)

    def follow_polled(self) -> None:
        """A poll found nothing new: say why on the loading screen, refresh the badge."""
        if isinstance(self.screen, LoadingScreen) and self.follow is not None:
            waiting = self.follow.state.waiting or self.follow.state.problem or "waiting"
            self.screen.set_progress(0.0, waiting)  # shown as plain text, never markup
        for bar in self.screen.query("StatusBar"):
            bar.refresh()

    def at_end(self) -> bool:
        """Whether the cursor is on the device's last event (following pins it there)."""
        cursor = self.cursor
        if cursor is None:
            return False
        timeline = self.timeline(cursor.device)
        return timeline.event_of(cursor) >= timeline.positions - 1 or cursor.t > timeline.end

    def follow_badge(self) -> tuple[str, str] | None:
        """The status bar's follow part (None when not following)."""
        if self.follow is None or self.cursor is None:
            return None
        return self.follow.badge(self.at_end())

    def replace_trace(self, trace: MemoryTrace, timelines: dict | None = None) -> None:
        """Show ``trace`` (the same capture, grown) in place of the current one.

        The derived analyses are dropped and rebuilt from the new frames; each screen
        redraws (``trace_replaced``).  A cursor on the last event moves to the new last
        event, its view growing with the trace where it showed all of it."""
        if has_layers(trace) and "layers" not in trace.meta.extra:
            trace, timelines = self._layered(trace), None
        old = self.cursor
        old_layers = self.trace.meta.extra.get("layers") if self.trace is not None else None
        old_timeline = self.timeline(old.device)
        pinned = self.at_end()  # as the badge says: on the last event
        whole = old.view[0] <= old_timeline.start and old.view[1] >= old_timeline.end
        self.trace = trace
        self._timelines = dict(timelines or {})
        self._live.clear()
        self._tops = None
        if self._findings_started:
            self._find()
        device = old.device if old.device in trace.meta.device_names else initial_device(trace)
        if device is None:
            return
        timeline = self.timeline(device)
        for screen in self._screens_built():
            replaced = getattr(screen, "trace_replaced", None)
            if replaced is not None:
                replaced()
        if device != old.device:
            self.move_cursor(device=device, t=timeline.end)
        elif pinned:
            view = (timeline.start, timeline.end) if whole else (
                timeline.end - (old.view[1] - old.view[0]), timeline.end)
            # the last event, not the last time: rows may come that are not later (a
            # profiler CSV grouped by component), and the end pins the last one
            self.move_cursor(event=timeline.positions - 1, view=view)
        elif old_layers != trace.meta.extra.get("layers") or old.event is None:
            # another layer: other events; the cursor goes to the same time
            self.move_cursor(event=timeline.event_at(old.t))
        else:  # the same events, grown: the cursor stays on its event
            self.move_cursor(event=old.event)
        for bar in self.screen.query("StatusBar"):
            bar.refresh()

    def _screens_built(self) -> list[Screen]:
        """The mode screens made so far (each mode's stack; the current one first)."""
        screens: list[Screen] = []
        for stack in self._screen_stacks.values():
            screens.extend(s for s in stack if s not in screens)
        return screens

    def action_reload(self) -> None:
        """Read the followed file again from its start (after a truncation, a rotation)."""
        if self.follow is not None:
            self.follow.restart()

    # -- cached analyses ------------------------------------------------------------------

    def timeline(self, device: str) -> Timeline:
        if device not in self._timelines:
            self._timelines[device] = Timeline.build(self.trace, device)
        return self._timelines[device]

    def stack_tops(self) -> pl.DataFrame:
        """stack_id -> ``top``, the label of the frame that names the stack under the
        current ``top_rule``."""
        if self._tops is None:
            self._tops = stack_tops(self.trace, self.top_rule)
        return self._tops

    def watch_top_rule(self) -> None:
        self._tops = None
        self._live.clear()

    def action_stack_top(self) -> None:
        """Cycle the frame that names a stack: innermost user frame, outermost user frame,
        innermost frame."""
        rules = list(TOP_RULES)
        self.top_rule = rules[(rules.index(self.top_rule) + 1) % len(rules)]
        self.notify(f"Stacks are named by their {TOP_RULES[self.top_rule]} (T: change)")

    def live_blocks(self, device: str) -> LiveBlocks:
        if device not in self._live:
            self._live[device] = LiveBlocks(self.trace.device_blocks(device), self.stack_tops(),
                                            block_positions(self.trace, device))
        return self._live[device]

    # -- the cursor -----------------------------------------------------------------------

    def move_cursor(self, **changes) -> CursorState:
        """Change the shared cursor (see CursorState's fields), kept valid: the time inside
        the device's range and the view, the window in order.  A new device starts with its
        whole range in view and no window or block.

        ``event=K`` puts the cursor on the device's event at position K (its time follows);
        ``t=T`` on the last event at or before T.  Without either the cursor stays on its
        event."""
        old = self.cursor
        if old is None:
            raise RuntimeError("no trace is loaded yet")
        device = changes.get("device", old.device)
        event = changes.pop("event", None)
        if device != old.device:
            timeline = self.timeline(device)
            base = CursorState(device=device, t=old.t, view=(timeline.start, timeline.end))
            changes = {k: v for k, v in changes.items() if k != "device"}
            state = base.with_changes(**changes)
        else:
            state = old.with_changes(**changes)
        timeline = self.timeline(state.device)
        if event is not None:
            event = timeline.clamp_event(event)
            state = state.with_changes(t=timeline.time_of(event))
        state = settle(state, (timeline.start, timeline.end))
        if event is None:
            moved = device != old.device or ("t" in changes and state.t != old.t) \
                or old.event is None
            event = timeline.event_at(state.t) if moved else old.event
        self.cursor = state.with_changes(event=event)
        return self.cursor

    def filter_blocks(self, block_ids, label: str) -> None:
        """Show the Tables screen's Block View with only ``block_ids`` (of the cursor's
        device), saying ``label`` (the Stacks screen's chosen node)."""
        self.block_filter = (self.cursor.device, block_ids, label)
        if self.current_mode == "tables":
            self.screen._take_block_filter()  # type: ignore[attr-defined]
        else:
            self.switch_mode("tables")

    def show_stack(self, stack_id: int, frame_id: int | None = None) -> None:
        """Show the Stacks screen with the node of ``stack_id`` (at frame ``frame_id``)
        selected, on the cursor's device (taken by the screen once its tree is ready)."""
        self.stack_request = (self.cursor.device, stack_id, frame_id)
        if self.current_mode == "stacks":
            if self.screen.select_stack(stack_id, frame_id):  # type: ignore[attr-defined]
                self.stack_request = None
        else:
            self.switch_mode("stacks")

    def zoom_view(self, factor: float, around: int | None = None) -> None:
        cursor = self.cursor
        timeline = self.timeline(cursor.device)
        centre = cursor.t if around is None else around
        view = zoom(cursor.view, centre, factor, (timeline.start, timeline.end))
        t = cursor.t if view[0] <= cursor.t <= view[1] else centre
        self.move_cursor(view=view, t=t)

    # -- actions --------------------------------------------------------------------------

    def _has_cursor(self, quiet: bool = False) -> bool:
        """Whether the cursor keys apply now (``quiet``: say nothing when they do not)."""
        return self.cursor is not None

    def action_show_screen(self, name: str) -> None:
        if self._has_cursor() and self.current_mode != name:
            self.switch_mode(name)

    def action_step(self, count: int) -> None:
        if self._has_cursor():
            timeline = self.timeline(self.cursor.device)
            self.move_cursor(event=timeline.event_of(self.cursor) + count)

    def action_jump(self, share: float) -> None:
        if self._has_cursor():
            v0, v1 = self.cursor.view
            delta = int(round((v1 - v0) * share)) or (1 if share > 0 else -1)
            self.move_cursor(t=self.cursor.t + delta)

    def action_peak(self) -> None:
        if self._has_cursor():
            self.move_cursor(event=self.timeline(self.cursor.device).peak_event)

    def action_start(self) -> None:
        if self._has_cursor():
            self.move_cursor(event=0)

    def action_end(self) -> None:
        if self._has_cursor():
            self.move_cursor(event=self.timeline(self.cursor.device).positions - 1)

    def action_window_start(self) -> None:
        if self._has_cursor():
            cursor = self.cursor
            end = cursor.window[1] if cursor.window else cursor.view[1]
            self._set_window(cursor.t, max(end, cursor.t), "start")

    def action_window_end(self) -> None:
        if self._has_cursor():
            cursor = self.cursor
            begin = cursor.window[0] if cursor.window else cursor.view[0]
            self._set_window(min(begin, cursor.t), cursor.t, "end")

    def _set_window(self, t0: int, t1: int, edge: str) -> None:
        """Select [t0, t1]; an empty one (both edges at one time) is refused with a toast
        and the window stays as it was."""
        if t1 <= t0:
            other = "end" if edge == "start" else "start"
            key = "[" if edge == "start" else "]"
            self.notify(f"No empty window: its {other} is at this time too. Move the cursor, "
                        f"then press {key} again (x clears the window).", title="window",
                        severity="warning", timeout=5)
            return
        self.move_cursor(window=(t0, t1))

    def action_clear_window(self) -> None:
        if self._has_cursor():
            self.move_cursor(window=None)

    def action_zoom_in(self) -> None:
        if not self._has_cursor():
            return
        cursor = self.cursor
        if cursor.window is not None and cursor.window[1] > cursor.window[0] \
                and cursor.window != cursor.view:
            t = min(max(cursor.t, cursor.window[0]), cursor.window[1])
            self.move_cursor(view=cursor.window, t=t)
        else:
            self.zoom_view(0.5)

    def action_zoom_out(self) -> None:
        if self._has_cursor():
            self.zoom_view(2.0)

    def action_device(self) -> None:
        if not self._has_cursor():
            return
        names = self.trace.meta.device_names
        if len(names) < 2:
            self.notify(f"This capture has one device: {self.cursor.device}.")
            return
        choices = [(name, self._device_label(name)) for name in names]
        self.push_screen(DeviceScreen(choices, self.cursor.device), self._device_picked)

    def _device_label(self, name: str) -> str:
        events = self.trace.device_events(name).height
        blocks = self.trace.device_blocks(name).height
        return f"{name}  {events:,} events, {blocks:,} blocks"

    def _device_picked(self, name: str | None) -> None:
        if name and name != self.cursor.device:
            self.move_cursor(device=name)

    def action_facts(self) -> None:
        """The Capture facts view: source, devices, history kept, stacks, allocator
        settings, warnings."""
        from memtui.analysis.capture_facts import capture_facts

        if self.trace is not None and not isinstance(self.screen, FactsScreen):
            self.push_screen(FactsScreen(capture_facts(self.trace)))

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.help_sections()))

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """(title, [(keys, description)]) for the app and the current screen."""
        screen = self.screen
        sections = [("Everywhere", _binding_rows(self, self.BINDINGS))]
        if self.follow is not None:
            sections.append(("Following", [("G", "back to the end: LIVE again"),
                                           ("R", "read the followed file again")]))
        screen_rows = _binding_rows(self, getattr(screen, "BINDINGS", []))
        focused = screen.focused
        if focused is not None:
            screen_rows += _binding_rows(self, getattr(focused, "BINDINGS", []))
        if screen_rows:
            title = SCREEN_TITLES.get(self.current_mode, "This screen")
            sections.append((f"{title} screen", screen_rows))
        sections.append(("Palette", [("ctrl+p", "the command palette: screens, actions, themes")]))
        legend = getattr(screen, "legend_rows", None)
        if legend is not None:
            sections.append((LEGEND_TITLE, legend()))
        return sections

    def get_system_commands(self, screen: Screen):
        for command in super().get_system_commands(screen):
            if command.title not in ("Keys", "Screenshot"):  # ours below, once each
                yield command
        yield SystemCommand("Screenshot", "Save an SVG picture of the screen (the folder "
                            "is $XDG_PICTURES_DIR, else the current one)",
                            lambda: self.set_timer(0.1, self.deliver_screenshot))
        if not self._has_cursor(quiet=True):
            return
        for key, name in SCREEN_KEYS.items():
            yield SystemCommand(f"{SCREEN_TITLES[name]} screen ({key})",
                                f"Show the {SCREEN_TITLES[name]} screen",
                                lambda name=name: self.action_show_screen(name))
        actions = [
            ("Go to the peak", "app.peak", "Move the cursor to the allocated peak",
             self.action_peak),
            ("Go to the start", "app.start", "Move the cursor to the first event",
             self.action_start),
            ("Go to the end", "app.end", "Move the cursor to the last event", self.action_end),
            ("Zoom in", "app.zoom_in", "Zoom to the window, or in around the cursor",
             self.action_zoom_in),
            ("Zoom out", "app.zoom_out", "Show twice as much time", self.action_zoom_out),
            ("Clear the window", "app.clear_window", "Forget the selected window",
             self.action_clear_window),
            ("Switch device", "app.device", "Pick another device or rank", self.action_device),
            ("Stack top rule", "app.stack_top", "Name stacks by their innermost user frame, "
             "outermost user frame or innermost frame", self.action_stack_top),
            ("Capture facts", "app.facts", "How the capture was recorded: devices, history "
             "kept, call stacks, allocator settings, warnings", self.action_facts),
            ("Keys", "app.help", "Show every key binding (and its id for keymap.toml)",
             self.action_help),
        ]
        by_id = {b.id: b for b in self.BINDINGS if isinstance(b, Binding) and b.id}
        for title, binding_id, help_text, callback in actions:
            keys = key_display(self, by_id[binding_id]) if binding_id in by_id else ""
            yield SystemCommand(f"{title} ({keys})" if keys else title, help_text, callback)
        yield from self._screen_commands(screen)

    def _screen_commands(self, screen: Screen):
        """A palette entry for each key of the screen shown (its description and keys)."""
        mode = SCREEN_TITLES.get(self.current_mode, "")
        for binding in getattr(screen, "BINDINGS", []):
            if not isinstance(binding, Binding) or not binding.description:
                continue
            yield SystemCommand(f"{mode}: {binding.description} ({key_display(self, binding)})",
                                f"The {mode} screen's key", partial(screen.run_action,
                                                                    binding.action))


def _binding_rows(app: App, bindings) -> list[tuple[str, str, str]]:
    """(keys as the user's keymap sets them, description, binding id) of ``bindings``."""
    rows = []
    for binding in bindings:
        if not isinstance(binding, Binding) or not binding.description:
            continue  # a binding without a description is an internal one: never raw names
        rows.append((key_display(app, binding), binding.description, binding.id or ""))
    return rows


def key_display(app: App, binding: Binding) -> str:
    """The keys of ``binding`` as shown (``↑, k``), the user's keymap applied."""
    keys = getattr(app, "_keymap", {}).get(binding.id, binding.key) if binding.id else \
        binding.key
    return ", ".join(app.get_key_display(Binding(key, "")) for key in keys.split(","))


def screenshot_folders(path: str | None = None) -> list[Path]:
    """Where a screenshot may go, best first: ``path``, $XDG_PICTURES_DIR, the current
    folder, the temp folder (only folders that exist)."""
    import tempfile

    candidates = [path, os.environ.get("XDG_PICTURES_DIR"), os.getcwd(), tempfile.gettempdir()]
    return [Path(c).expanduser() for c in candidates if c and Path(c).expanduser().is_dir()]


def initial_device(trace: MemoryTrace) -> str | None:
    """The device to open on: the one with the most events, then the most blocks."""
    names = trace.meta.device_names
    if not names:
        return None

    def weight(name: str) -> tuple[int, int]:
        return trace.device_events(name).height, trace.device_blocks(name).height

    return max(names, key=weight)


def _write_crash_log(error: BaseException) -> Path | None:
    """The traceback of ``error`` in a temporary file (None where none can be written)."""
    try:
        handle, name = tempfile.mkstemp(prefix="memtui-crash-", suffix=".txt")
        with os.fdopen(handle, "w", encoding="utf-8", errors="replace") as log:
            log.write("".join(traceback.format_exception(error)))
        return Path(name)
    except OSError:
        return None


def crash_line(app: MemtuiApp) -> str:
    """The one line said on stderr after a crash."""
    error = app.crash
    what = printable(f"{type(error).__name__}: {error}") if error is not None else "unknown"
    where = f"; the traceback is in {app.crash_log}" if app.crash_log else ""
    return f"memtui: internal error ({what[:200]}){where}"


def exit_status(app: MemtuiApp) -> int:
    """0 only for a clean quit: 2 for a capture that cannot be read, 1 for any crash."""
    if app.load_error:
        return EXIT_BAD_INPUT
    if app.crash is not None or app.return_code not in (None, 0):
        return EXIT_CRASH
    return 0


def run_app(path: str | Path, follow: bool = False, follow_rank: int | None = None) -> int:
    """Open ``path`` in the UI (``follow``: keep reading it as it grows; ``follow_rank``:
    the rank followed of a folder holding several); the exit status (see
    :func:`exit_status`)."""
    path = Path(path)
    try:
        check_input(path, allow_empty=follow)
    except CaptureError as exc:
        print(f"memtui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return run_to_exit(MemtuiApp(path, follow=follow, follow_rank=follow_rank))


def run_to_exit(app: MemtuiApp) -> int:
    """Run ``app`` and say how it ended: the one-line error of a capture that could not be
    read, or of a crash, on stderr; the exit status (see :func:`exit_status`)."""
    try:
        app.run()
    except Exception as error:  # raised outside Textual's own handling
        app.crash = app.crash or error
        app.crash_log = app.crash_log or _write_crash_log(error)
    finally:
        if app.follow is not None:
            app.follow.stop()
    status = exit_status(app)
    if app.load_error:
        print(f"memtui: {app.load_error}", file=sys.stderr)
    elif status == EXIT_CRASH:
        print(crash_line(app), file=sys.stderr)
    if app.loading:  # quit while the loader thread reads: do not wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


__all__ = ["MemtuiApp", "exit_status", "initial_device", "run_app", "run_to_exit",
           "textual_fixes"]
