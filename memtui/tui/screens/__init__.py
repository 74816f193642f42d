"""The screens, by the name the app installs each under and the key that shows it.

Each is a Textual ``Screen`` class taking no arguments; it reads ``self.app.trace`` and
follows ``self.app.cursor`` (see memtui/tui/app.py).

A screen's module is imported when the screen is first needed (:func:`screen_modes` gives
the app a factory per mode), not at start-up: the first paint pays only for the Trend.
``SCREENS`` maps each name to its class (reading a value imports that module).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.screen import Screen

#: name -> (module under memtui.tui.screens, class name), in key order.
_SCREEN_CLASSES: dict[str, tuple[str, str]] = {
    "trend": ("trend", "TrendScreen"),
    "blocks": ("blocks", "BlocksScreen"),
    "pool": ("pool", "PoolScreen"),
    "stacks": ("stacks", "StacksScreen"),
    "tables": ("tables", "TablesScreen"),
    "findings": ("findings", "FindingsScreen"),
}
SCREEN_KEYS = {"1": "trend", "2": "blocks", "3": "pool", "4": "stacks", "5": "tables",
               "6": "findings"}
SCREEN_TITLES = {
    "trend": "Trend", "blocks": "Blocks", "pool": "Pool", "stacks": "Stacks", "tables": "Tables",
    "findings": "Findings",
}


def screen_class(name: str) -> type[Screen]:
    """The class of the screen named ``name`` (its module imported on first use)."""
    module, class_name = _SCREEN_CLASSES[name]
    return getattr(importlib.import_module(f"memtui.tui.screens.{module}"), class_name)


class _Screens(Mapping[str, "type[Screen]"]):
    """name -> screen class; only the values read are imported."""

    def __getitem__(self, name: str) -> type[Screen]:
        return screen_class(name)

    def __iter__(self) -> Iterator[str]:
        return iter(_SCREEN_CLASSES)

    def __len__(self) -> int:
        return len(_SCREEN_CLASSES)


SCREENS: Mapping[str, type[Screen]] = _Screens()


def _new_screen(name: str) -> Screen:
    return screen_class(name)()


def screen_modes() -> dict[str, Callable[[], Screen]]:
    """An app's ``MODES``: a factory per screen, importing its module on the first visit."""
    from functools import partial

    return {name: partial(_new_screen, name) for name in _SCREEN_CLASSES}


def __getattr__(name: str) -> object:
    """``BlocksScreen`` and the other classes by name, imported on use."""
    for screen, (_, class_name) in _SCREEN_CLASSES.items():
        if class_name == name:
            return screen_class(screen)
    raise AttributeError(f"module 'memtui.tui.screens' has no attribute {name!r}")


__all__ = ["SCREENS", "SCREEN_KEYS", "SCREEN_TITLES", "BlocksScreen", "FindingsScreen",
           "PoolScreen", "StacksScreen", "TablesScreen", "TrendScreen", "screen_class",
           "screen_modes"]
