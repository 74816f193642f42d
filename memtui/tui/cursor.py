"""The one shared state every view follows: device, cursor event, window, selected block.

:class:`CursorState` is immutable; the app holds the current one in a reactive attribute
(``MemtuiApp.cursor``) and every screen and widget watches it
(``self.watch(self.app, "cursor", self.on_cursor)``) and changes it only through
``app.move_cursor(...)``, so moving the cursor anywhere moves it everywhere.

The cursor addresses an *event*: ``event`` is its position in the device's trace (0-based,
:class:`~memtui.analysis.timeline.at_time.Timeline` ``times``), and ``t`` is that event's time,
derived from it.  Every event is reachable, also when several share a timestamp, and the
position is the one event number shown everywhere (status bar, Event View ``#`` column,
``memtui state --event``); a source's own event ID is shown in its own column.  A state
built by hand with no ``event`` addresses the last event at or before ``t``
(``Timeline.event_of``).

Times are in the trace's unit (ns, or event numbers where the capture has no clock).
``view`` is the visible time range (zoom); ``window`` the selected range ``[t0, t1]``
(None while nothing is selected).

The functions below are the pure rules ``move_cursor`` applies: :func:`settle` keeps a
state inside a device's time range (the cursor inside the view, the view inside the
trace), :func:`zoom` and :func:`pan` compute views.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class CursorState:
    device: str
    t: int
    view: tuple[int, int]
    window: tuple[int, int] | None = None
    block_id: int | None = None
    segment_id: int | None = None
    event: int | None = None

    def with_changes(self, **changes) -> CursorState:
        """A copy with ``changes`` applied; a window is kept in order (``t0 <= t1``)."""
        state = replace(self, **changes)
        if state.window is not None:
            t0, t1 = state.window
            state = replace(state, window=(min(t0, t1), max(t0, t1)))
        return state


def _clamp(value: int, low: int, high: int) -> int:
    return int(min(max(int(value), low), high))


def pan(view: tuple[int, int], t: int, bounds: tuple[int, int]) -> tuple[int, int]:
    """``view`` shifted (not resized) just enough to contain ``t``, kept inside ``bounds``."""
    v0, v1 = view
    width = v1 - v0
    if t < v0:
        v0, v1 = t, t + width
    elif t > v1:
        v0, v1 = t - width, t
    return fit(v0, v1, bounds)


def fit(v0: int, v1: int, bounds: tuple[int, int]) -> tuple[int, int]:
    """A view ``[v0, v1]`` moved and shrunk to lie inside ``bounds``; at least 1 wide."""
    lo, hi = bounds
    hi = max(hi, lo + 1)
    width = max(min(v1 - v0, hi - lo), 1)
    v0 = _clamp(v0, lo, hi - width)
    return v0, v0 + width


def zoom(view: tuple[int, int], around: int, factor: float,
         bounds: tuple[int, int]) -> tuple[int, int]:
    """``view`` scaled by ``factor`` (< 1 zooms in) keeping ``around`` at the same place."""
    v0, v1 = view
    width = max(v1 - v0, 1)
    new_width = max(int(round(width * factor)), 1)
    share = (around - v0) / width if width else 0.5
    share = min(max(share, 0.0), 1.0)
    start = int(round(around - share * new_width))
    return fit(start, start + new_width, bounds)


def settle(state: CursorState, bounds: tuple[int, int]) -> CursorState:
    """``state`` with the cursor and window inside ``bounds`` and the view around the cursor."""
    lo, hi = bounds
    t = _clamp(state.t, lo, hi)
    view = fit(*state.view, bounds)
    view = pan(view, t, bounds)
    window = state.window
    if window is not None:
        w0, w1 = sorted((_clamp(window[0], lo, hi), _clamp(window[1], lo, hi)))
        window = (w0, w1)
    return replace(state, t=t, view=view, window=window)
