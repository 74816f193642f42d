"""``memtui --follow PATH``: the app polls a growing capture and shows what is new in place.

:class:`FollowController` owns the polling: a timer whose interval adapts (it starts at
``min_interval``, grows by half after each poll that found nothing, up to ``max_interval``,
and drops back to ``min_interval``, or to the time the last read and build took if longer,
as soon as data comes), a thread worker that calls the
source's follower (:func:`memtui.sources.follow.open_follower`: reading only what is new,
building the model from the frames read), and the hand-over of each new trace to the app
(``app.replace_trace``).  Nothing is parsed here.

The cursor stays pinned to the end while it is there (the ``LIVE`` badge): each new trace
moves it to the new end; once the user moves it away it stays put (``paused``) until ``G``
takes it back to the end.  A file truncated, replaced or deleted is said in the status bar
and the last good view stays; ``R`` reads the file again from its start.

:class:`Following` is the app's side (a part of :class:`~memtui.tui.app.MemtuiApp`, a
mixin): it shows each new trace in place (``replace_trace``), answers the follower's
polls and gives the status bar its badge.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from textual.screen import Screen
from textual.timer import Timer

from memtui.analysis.timeline import layers as layer_analysis
from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from memtui.tui.cursor_moves import initial_device
from memtui.tui.screens.modals import LoadingScreen

if TYPE_CHECKING:
    from memtui.sources.follow import Follower, FollowUpdate

MIN_INTERVAL = 0.5
MAX_INTERVAL = 5.0
GROWTH = 1.5


@dataclass
class FollowState:
    """What the status bar says about following (read by ``StatusBar``)."""

    polls: int = 0
    updates: int = 0
    rows: int = 0  # rows (or events) read since the start
    waiting: str | None = None
    problem: str | None = None
    stale: str | None = None  # the capture moved on, what is new cannot be read
    restarted: bool = False  # R read from the start; nothing new shown since
    last_update: float | None = None  # time.monotonic() of the last new data
    scope: str | None = None  # the rank followed of several ("rank 0 of 4")


class FollowController:
    """See the module docstring."""

    def __init__(self, app, path: Path, min_interval: float = MIN_INTERVAL,
                 max_interval: float = MAX_INTERVAL, rank: int | None = None) -> None:
        self.app = app
        self.path = Path(path)
        self.rank = rank
        self.min_interval = min_interval
        self.max_interval = max(max_interval, min_interval)
        self.interval = min_interval
        self.state = FollowState()
        self.follower: Follower | None = None
        self._timer: Timer | None = None
        self._polling = False
        self._stopped = False
        self.last_poll_seconds = 0.0
        self._restart_wanted = False

    def start(self) -> None:
        """Open the follower (a CaptureError for what cannot be followed) and poll now."""
        from memtui.sources.follow import open_follower

        self.follower = open_follower(self.path, self.rank)
        self._poll()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.stop()
        if self.follower is not None:
            self.follower.close()

    def restart(self) -> None:
        """Read the file again from its start (after a truncation or a rotation).  While a
        poll runs in the worker, the restart waits for it (its result is dropped)."""
        if self.follower is None:
            return
        if self._polling:
            self._restart_wanted = True
            return
        self._restart_now()

    def _restart_now(self) -> None:
        self._restart_wanted = False
        self.follower.restart()
        self.state.problem = None
        self.state.stale = None
        self.state.restarted = self.state.updates > 0  # an older view stays shown
        self.interval = self.min_interval
        if self._timer is not None:
            self._timer.stop()
        self._poll()

    # -- the loop -----------------------------------------------------------------------

    def _poll(self) -> None:
        if self._stopped or self._polling:
            return
        self._polling = True
        self.app.run_worker(self._read, thread=True, group="follow", exit_on_error=False)

    def _read(self) -> None:
        timelines, view = {}, None
        started = time.monotonic()
        try:
            update = self.follower.poll()
            if update.trace is not None:
                timelines, view = self._prepare(update)
        except CaptureError as exc:
            from memtui.sources.follow import FollowUpdate

            update = FollowUpdate(problem=str(exc))
        except Exception as exc:  # a reader bug must not end the live view
            from memtui.sources.follow import FollowUpdate

            update = FollowUpdate(problem=f"reading failed ({type(exc).__name__}: {exc})")
        self.last_poll_seconds = time.monotonic() - started
        if not self._stopped:
            self.app.call_from_thread(self._done, update, timelines, view)

    def _prepare(self, update: FollowUpdate) -> tuple[dict, object]:
        """In the worker: the load-time analyses, the layer view of a layered source, and
        the shown device's timeline, so that the UI thread only swaps them in."""
        from memtui.analysis.timeline.at_time import Timeline
        from memtui.loading import prepare_trace

        trace = update.trace = prepare_trace(update.trace)
        view = self.app.view_beside(trace)
        shown = view if view is not None else trace
        cursor = self.app.cursor
        names = shown.meta.device_names
        device = cursor.device if cursor is not None and cursor.device in names else None
        if device is None:
            device = initial_device(shown)
        timelines = {} if device is None else {device: Timeline.build(shown, device)}
        return timelines, view

    def _done(self, update: FollowUpdate, timelines: dict, view=None) -> None:
        self._polling = False
        if self._restart_wanted:  # asked for while this poll ran: read from the start
            self._restart_now()
            return
        try:
            self._apply(update, timelines, view)
        finally:  # whatever showing it did, the polling goes on
            if not self._stopped:
                self._timer = self.app.set_timer(self.interval, self._poll)

    def _apply(self, update: FollowUpdate, timelines: dict, view=None) -> None:
        state = self.state
        state.polls += 1
        state.waiting = update.waiting
        self._say_scope()
        if update.notice:
            self.app.notify(escape(update.notice), title="follow", severity="warning",
                            timeout=10)
        if update.stale != state.stale:
            state.stale = update.stale
            if update.stale:
                self.app.notify(f"{escape(update.stale)}: the last good view stays",
                                title="follow", severity="warning", timeout=10)
        if update.problem != state.problem:
            state.problem = update.problem
            if update.problem:
                self.app.notify(f"{escape(update.problem)}: the last good view stays; R reads "
                                "it again from the start", title="follow", severity="warning",
                                timeout=10)
        if update.trace is not None:
            state.restarted = False
            state.updates += 1
            state.rows += update.new_rows
            state.last_update = time.monotonic()
            # As long as the last read and build took, at least: while rows stream in, a
            # big capture's rebuilds keep to about half of one core.
            self.interval = min(max(self.min_interval, self.last_poll_seconds),
                                self.max_interval)
            self.app.show_followed(update.trace, timelines, view)
        else:
            self.interval = min(self.interval * GROWTH, self.max_interval)
            self.app.follow_polled()

    def _say_scope(self) -> None:
        """A folder of several ranks: which one is followed, said once it is known (and
        again when it changes: a lower rank appeared)."""
        scope = self.follower.scope if self.follower is not None else None
        if scope == self.state.scope:
            return
        self.state.scope = scope
        if scope is not None:
            listing = self.follower.rank_choice().listing()
            self.app.notify(f"{escape(self.path.name)} holds several ranks' dumps: following "
                            f"{escape(scope)} ({escape(listing)}); memtui --follow PATH "
                            "--rank N follows another", title="follow", timeout=10)

    # -- what the status bar shows --------------------------------------------------------

    def badge(self, at_end: bool) -> tuple[str, str] | None:
        """``(full, short)`` text of the status bar's follow part."""
        problem = self.state.problem
        if problem:
            word = next((w for w in ("truncated", "deleted", "replaced") if w in problem),
                        "stopped")
            return f"⚠ {problem}", f"⚠ {word}"
        stale = self.state.stale or (self.state.waiting if self.state.restarted else None)
        if stale:  # the view shown is older than the capture: never "LIVE" over it
            return f"⚠ {stale} (the last good view stays)", "⚠ stale"
        scope = self.state.scope
        full, short = (f" · {scope}", " " + scope.split(" of ")[0].replace("rank ", "r")) \
            if scope else ("", "")
        if at_end:
            return f"● LIVE{full}", f"● LIVE{short}"
        return f"⏸ paused (G: live){full}", f"⏸ G: live{short}"


class Following:
    """The app's side of following (a part of :class:`~memtui.tui.app.MemtuiApp`, a
    mixin): each new trace from the :class:`FollowController` shown in place, the cursor
    pinned to the end while it is there, the status bar's badge, ``R``.  ``replace_trace``
    also shows another memory layer (memtui.tui.layer_choice)."""

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
        if layer_analysis.has_layers(trace):
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
        if layer_analysis.has_layers(trace) and "layers" not in trace.meta.extra:
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


__all__ = ["FollowController", "FollowState", "Following"]
