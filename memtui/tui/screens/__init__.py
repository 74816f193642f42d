"""The screens, by the name the app installs each under and the key that shows it.

Each is a Textual ``Screen`` class taking no arguments; it reads ``self.app.trace`` and
follows ``self.app.cursor`` (see memtui/tui/app.py).
"""

from __future__ import annotations

from memtui.tui.screens.blocks import BlocksScreen
from memtui.tui.screens.findings import FindingsScreen
from memtui.tui.screens.pool import PoolScreen
from memtui.tui.screens.stacks import StacksScreen
from memtui.tui.screens.tables import TablesScreen
from memtui.tui.screens.trend import TrendScreen

SCREENS = {
    "trend": TrendScreen,
    "blocks": BlocksScreen,
    "pool": PoolScreen,
    "stacks": StacksScreen,
    "tables": TablesScreen,
    "findings": FindingsScreen,
}
SCREEN_KEYS = {"1": "trend", "2": "blocks", "3": "pool", "4": "stacks", "5": "tables",
               "6": "findings"}
SCREEN_TITLES = {
    "trend": "Trend", "blocks": "Blocks", "pool": "Pool", "stacks": "Stacks", "tables": "Tables",
    "findings": "Findings",
}

__all__ = ["SCREENS", "SCREEN_KEYS", "SCREEN_TITLES", "BlocksScreen", "FindingsScreen",
           "PoolScreen",
           "StacksScreen", "TablesScreen", "TrendScreen"]
