"""The app's cursor moves: ``move_cursor`` (the one way to change the shared cursor), the
keys that move it (events, tenths of the view, peak, start, end, window, zoom, device) and
the requests that take another screen to a block set or a stack.

:class:`CursorMoves` is a part of :class:`~memtui.tui.app.MemtuiApp` (a mixin): it reads
``self.cursor``, ``self.trace`` and ``self.timeline(device)`` (memtui.tui.cached_analyses).
The pure rules it applies are in memtui.tui.cursor.
"""

from __future__ import annotations

from memtui.model import MemoryTrace
from memtui.tui.cursor import CursorState, settle, zoom
from memtui.tui.screens.modals import DeviceScreen
from memtui.units import counted


class CursorMoves:
    """See the module docstring."""

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
        return f"{name}  {counted(events, 'event')}, {counted(blocks, 'block')}"

    def _device_picked(self, name: str | None) -> None:
        if name and name != self.cursor.device:
            self.move_cursor(device=name)


def initial_device(trace: MemoryTrace) -> str | None:
    """The device to open on: the one with the most events, then the most blocks."""
    names = trace.meta.device_names
    if not names:
        return None

    def weight(name: str) -> tuple[int, int]:
        return trace.device_events(name).height, trace.device_blocks(name).height

    return max(names, key=weight)


__all__ = ["CursorMoves", "initial_device"]
