"""One trace's entries as checked columns (:class:`TraceColumns`): what the checker
(``validate.py``) and the compiled reader (``columnar.py``) both hand the builder.  A
module of its own that imports neither, so that they import it and not each other."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl


@dataclass
class TraceColumns:
    """One trace's entries as checked columns, in entry order.

    ``action`` is the action text as written; ``addr``, ``size``, ``stream`` and
    ``time_us`` the integers (null where an entry has none); ``frames`` each entry's
    ``frames`` list object itself (or None): stacks are interned by object identity.
    From the compiled reader ``frames`` is empty and each entry's stack is
    ``frame_lists[frame_codes[i]]`` instead (-1: none), a list of frame lists where
    those holding the same frame objects are one; ``action`` is Categorical and each
    entry's action is also ``action_names[action_codes[i]]``.
    """

    action: pl.Series
    addr: pl.Series
    size: pl.Series
    stream: pl.Series
    time_us: pl.Series
    frames: list
    frame_codes: np.ndarray | None = None
    frame_lists: list | None = None
    action_codes: np.ndarray | None = None
    action_names: list[str] | None = None

    def frame(self) -> pl.DataFrame:
        """The columns but ``frames`` as one frame (``action, addr, size, stream,
        time_us``), each column contiguous (they come in pieces)."""
        return pl.DataFrame([self.action, self.addr, self.size, self.stream, self.time_us]
                            ).rechunk()


__all__ = ["TraceColumns"]
