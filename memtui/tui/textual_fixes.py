"""Work-arounds for Textual bugs that memtui's users can reach (imported by the app).

* ``OptionList._move_page`` raises ``KeyError: 0`` when Page Up/Down comes before the
  list has been laid out (Ctrl+P then PageDown right after loading): its line cache is
  still empty.  A page move before the first layout now does nothing.
"""

from __future__ import annotations

from textual.widgets import OptionList

_move_page = OptionList._move_page


def _move_page_once_laid_out(self: OptionList, direction) -> None:
    if (self.highlighted or 0) not in self._index_to_line:
        return
    _move_page(self, direction)


OptionList._move_page = _move_page_once_laid_out
