"""The message a map widget sends when the user moves or selects something in it.

Widgets never change the shared cursor themselves: they post :class:`CursorRequest`
with the changes (``t``, ``view``, ``window``, ``block_id``, ``segment_id``) and the
screen passes them to ``app.move_cursor``, so every view follows.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message


class CursorRequest(Message):
    """Move the shared cursor: ``changes`` are CursorState fields."""

    def __init__(self, **changes: Any) -> None:
        super().__init__()
        self.changes = changes
