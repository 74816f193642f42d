"""What each of :class:`~memtui.tui.app.MemtuiApp`'s mixins takes from the others: one
Protocol per mixin, declaring every attribute the mixin reads on ``self`` that neither it
nor Textual's ``App`` defines.  ``tests/tui/test_app_parts.py`` holds them true both ways:
a mixin reaching for an attribute its Protocol does not declare fails, and so does a
declared attribute that ``MemtuiApp`` does not provide.  A new mixin gets a Protocol here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import threading

    from memtui.analysis.timeline.at_time import LiveBlocks, Timeline
    from memtui.model import MemoryTrace
    from memtui.tui.cursor import CursorState
    from memtui.tui.follow import FollowController


class HoldsTrace(Protocol):
    """The capture shown (replaced as a followed file grows)."""

    trace: MemoryTrace


class CursorMovesNeeds(HoldsTrace, Protocol):
    def timeline(self, device: str) -> Timeline: ...


class CachedAnalysesNeeds(HoldsTrace, Protocol):
    _live: dict[str, LiveBlocks]
    _timelines: dict[str, Timeline]


class LayerChoiceNeeds(Protocol):
    cursor: CursorState | None

    def _has_cursor(self, quiet: bool = False) -> bool: ...

    def replace_trace(self, trace: MemoryTrace, timelines: dict | None = None) -> None: ...


class FollowingNeeds(Protocol):
    cursor: CursorState | None
    follow: FollowController | None
    _live: dict[str, LiveBlocks]
    _findings_started: bool

    def timeline(self, device: str) -> Timeline: ...

    def move_cursor(self, **changes: Any) -> CursorState: ...

    def _find(self) -> None: ...

    def _layered(self, trace: MemoryTrace, view: MemoryTrace | None = None) -> MemoryTrace: ...

    def _load_failed(self, message: str) -> None: ...

    def _start(self, trace: MemoryTrace) -> None: ...


class BackgroundWorkNeeds(HoldsTrace, Protocol):
    cursor: CursorState | None
    follow: FollowController | None
    findings_first: bool
    keymap_file: Any
    keymap_ids: set[str]
    open_at_answer: bool
    painted: dict[str, float]
    first_paint: threading.Event
    user_acted: bool
    preview: dict | None

    def add_warning(self, text: str) -> None: ...

    def move_cursor(self, **changes: Any) -> CursorState: ...


class CommandsNeeds(HoldsTrace, Protocol):
    app_warnings: list[str]
    follow: FollowController | None

    def _has_cursor(self, quiet: bool = False) -> bool: ...

    def action_clear_window(self) -> None: ...

    def action_device(self) -> None: ...

    def action_end(self) -> None: ...

    def action_peak(self) -> None: ...

    def action_show_screen(self, name: str) -> None: ...

    def action_stack_top(self) -> None: ...

    def action_start(self) -> None: ...

    def action_zoom_in(self) -> None: ...

    def action_zoom_out(self) -> None: ...


class CrashHandlingNeeds(Protocol):
    """Nothing beyond Textual's App."""


#: Each mixin's class name -> the Protocol of what it takes from the others.
NEEDS: dict[str, type] = {
    "CursorMoves": CursorMovesNeeds,
    "CachedAnalyses": CachedAnalysesNeeds,
    "LayerChoice": LayerChoiceNeeds,
    "Following": FollowingNeeds,
    "BackgroundWork": BackgroundWorkNeeds,
    "Commands": CommandsNeeds,
    "CrashHandling": CrashHandlingNeeds,
}


def declared(protocol: type) -> set[str]:
    """The attribute and method names ``protocol`` declares (its bases' too)."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls is object or cls is Protocol or not getattr(cls, "_is_protocol", False):
            continue
        names |= set(getattr(cls, "__annotations__", {}))
        names |= {n for n, v in vars(cls).items() if callable(v) and not n.startswith("__")}
    return names


__all__ = ["NEEDS", "declared"]
