"""A stand-in for the app shell (issue 5) while it is not on main: the contract only.

``app.trace``, a reactive ``app.cursor`` (CursorState), ``app.move_cursor(**changes)``,
the three screens installed by name, and ``filter_blocks`` recording its calls.
"""

from __future__ import annotations

from textual.app import App
from textual.reactive import reactive

from memtui.analysis.live import time_range
from memtui.model import MemoryTrace
from memtui.tui.cursor import CursorState
from memtui.tui.screens.blocks import BlocksScreen
from memtui.tui.screens.pool import PoolScreen
from memtui.tui.screens.stacks import StacksScreen


class StandInApp(App):
    cursor: reactive[CursorState | None] = reactive(None, always_update=False)
    BINDINGS = [("2", "switch_screen('blocks')", "Blocks"), ("3", "switch_screen('pool')", "Pool"),
                ("4", "switch_screen('stacks')", "Stacks")]

    def __init__(self, trace: MemoryTrace, first: str = "blocks") -> None:
        super().__init__()
        self.trace = trace
        self.first = first
        device = trace.meta.device_names[0]
        t0, t1 = time_range(trace, device)
        t1 = max(t1, t0 + 1)
        self.set_reactive(StandInApp.cursor, CursorState(device=device, t=t1, view=(t0, t1)))
        self.filtered: list = []

    def on_mount(self) -> None:
        self.install_screen(BlocksScreen(), "blocks")
        self.install_screen(PoolScreen(), "pool")
        self.install_screen(StacksScreen(), "stacks")
        self.push_screen(self.first)

    def move_cursor(self, **changes) -> None:
        self.cursor = self.cursor.with_changes(**changes)

    def filter_blocks(self, block_ids, label: str) -> None:
        self.filtered.append((list(block_ids), label))
