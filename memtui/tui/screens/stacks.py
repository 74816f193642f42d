"""Placeholder for StacksScreen: the stack tree of live bytes (issue 6).

The issue 6 work replaces this file.

It takes no constructor arguments and reads ``self.app.trace`` and ``self.app.cursor``,
as every screen does.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Static

from memtui.tui.widgets.status import StatusBar


class StacksScreen(Screen):
    """Shows what will be here, the status bar and the footer."""

    def compose(self) -> ComposeResult:
        yield Static(
            "Stacks: the stack tree of live bytes (issue 6). Not built yet.",
            classes="placeholder",
        )
        yield StatusBar()
        yield Footer(compact=True)
