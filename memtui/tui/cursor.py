"""The one shared state every view follows: device, cursor time, window, selected block.

:class:`CursorState` is immutable; the app holds the current one in a reactive attribute
(``MemtuiApp.cursor``) and every screen and widget watches it
(``self.watch(self.app, "cursor", self.on_cursor)``) and changes it only through
``app.move_cursor(...)``, so moving the cursor anywhere moves it everywhere.

Times are in the trace's unit (ns, or event numbers where the capture has no clock).
``view`` is the visible time range (zoom); ``window`` the selected range ``[t0, t1]``
(None while nothing is selected).
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

    def with_changes(self, **changes) -> CursorState:
        """A copy with ``changes`` applied; the time is kept inside the view."""
        state = replace(self, **changes)
        if state.window is not None:
            t0, t1 = state.window
            state = replace(state, window=(min(t0, t1), max(t0, t1)))
        return state
