"""Pilot helpers for the tests of the Blocks, Pool and Stacks screens in the real app."""

from __future__ import annotations

from memtui.model import MemoryTrace
from memtui.tui.app import MemtuiApp

KEYS = {"trend": "1", "blocks": "2", "pool": "3", "stacks": "4", "tables": "5"}


def maps_app(trace: MemoryTrace) -> MemtuiApp:
    return MemtuiApp(trace)


async def open_screen(pilot, name: str, at_end: bool = True) -> None:
    """Show screen ``name`` (after moving the cursor to the device's last time)."""
    await pilot.pause()
    if at_end:
        app = pilot.app
        app.move_cursor(t=app.timeline(app.cursor.device).end)
    await pilot.press(KEYS[name])
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def screen_text(app) -> str:
    """Every line the current screen shows, as plain text (toasts and modals included)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)
