"""Work-arounds for Textual bugs that memtui's users can reach (imported by the app).

* ``OptionList._move_page`` raises ``KeyError: 0`` when Page Up/Down comes before the
  list has been laid out (Ctrl+P then PageDown right after loading): its line cache is
  still empty.  A page move before the first layout now does nothing.
* A screen mounted while the app closes (the Findings screen, switched to by the
  findings' arrival just before ``q``) has its widgets removed under it, and its own
  ``on_mount``, ``on_screen_resume`` or ``on_resize`` raised ``NoMatches``: a crash on
  quitting.  While the app closes, those messages reach only Textual's own handlers.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual import events
from textual.message import Message
from textual.screen import Screen
from textual.widgets import OptionList

from memtui.tui.exits import closing

_move_page = OptionList._move_page


def _move_page_once_laid_out(self: OptionList, direction) -> None:
    if (self.highlighted or 0) not in self._index_to_line:
        return
    _move_page(self, direction)


OptionList._move_page = _move_page_once_laid_out

#: what a screen receives as it is shown: the messages its own handlers skip while closing
_ARRIVALS = (events.Mount, events.ScreenResume, events.Resize)
_screen_dispatch_methods = Screen._get_dispatch_methods


def _only_textual_handlers_while_closing(self: Screen, method_name: str,
                                         message: Message) -> Iterable:
    methods = _screen_dispatch_methods(self, method_name, message)
    if not isinstance(message, _ARRIVALS) or not closing(self.app):
        return methods
    return ((cls, method) for cls, method in methods
            if cls.__module__.split(".")[0] == "textual")


Screen._get_dispatch_methods = _only_textual_handlers_while_closing
