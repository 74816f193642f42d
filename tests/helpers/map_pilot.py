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


def coloured_cells(app) -> set[str]:
    """The colours (``#rrggbb``) other than greys that the current screen would send to the
    terminal: its lines through the app's line filters (``NO_COLOR``'s among them), as
    the driver writes them."""
    background = app.screen.styles.background
    found: set[str] = set()
    for strip in app.screen._compositor.render_strips():
        segments = list(strip)
        for line_filter in app.get_line_filters():
            segments = line_filter.apply(segments, background)
        for segment in segments:
            style = segment.style
            for colour in (style.color, style.bgcolor) if style else ():
                if colour is None or colour.is_default:
                    continue
                red, green, blue = colour.get_truecolor()
                if not red == green == blue:
                    found.add(f"#{red:02x}{green:02x}{blue:02x}")
    return found
