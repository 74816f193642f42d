"""One trace's entries as checked columns (:class:`TraceColumns`): what the checker
(``validate.py``) and the compiled reader (``columnar.py``) both hand the builder.  A
module of its own that imports neither, so that they import it and not each other."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.arrays import unique_sorted


@dataclass
class TraceColumns:
    """One trace's entries as checked columns, in entry order.

    ``action`` is the action text as written; ``addr``, ``size``, ``stream`` and
    ``time_us`` the integers (null where an entry has none); ``frames`` each entry's
    ``frames`` list object itself (or None): stacks are interned by object identity.
    From the compiled reader ``frames`` is empty and each entry's stack is
    ``frame_lists[frame_codes[i]]`` instead (-1: none), a list of frame lists where
    those holding the same frame objects are one; ``action`` is None and each entry's
    action is ``action_names[action_codes[i]]`` (:meth:`actions` makes the texts where
    a caller wants them: the builder reads the codes).
    """

    action: pl.Series | None
    addr: pl.Series
    size: pl.Series
    stream: pl.Series
    time_us: pl.Series
    frames: list
    frame_codes: np.ndarray | None = None
    frame_lists: list | None = None
    action_codes: np.ndarray | None = None
    action_names: list[str] | None = None

    def actions(self) -> pl.Series:
        """Each entry's action as written (Categorical from the compiled reader)."""
        if self.action is not None:
            return self.action
        assert self.action_codes is not None and self.action_names is not None
        names = pl.Series("action", self.action_names, pl.Categorical)
        return names.gather(pl.Series(self.action_codes))

    def rows_with_action(self, names: tuple[str, ...]) -> list[int]:
        """The rows whose action is one of ``names``, rising."""
        if self.action is not None:
            return self.action.is_in(list(names)).arg_true().to_list()
        return np.flatnonzero(self._codes_in(names)[self.action_codes]).tolist()

    def action_names_at(self, where: np.ndarray) -> list[str]:
        """The distinct actions (as written) of the entries where ``where`` holds, sorted."""
        if self.action is not None:
            return sorted(self.action.filter(pl.Series(where)).unique().to_list())
        assert self.action_codes is not None and self.action_names is not None
        return sorted({self.action_names[code]
                       for code in unique_sorted(self.action_codes[where]).tolist()})

    def _codes_in(self, names: tuple[str, ...]) -> np.ndarray:
        """Per action code, whether its name is one of ``names``."""
        assert self.action_names is not None
        return np.isin(np.asarray(self.action_names, dtype=object), list(names))

    def frame(self) -> pl.DataFrame:
        """The numbers as one frame (``addr, size, stream, time_us``), each column
        contiguous (they come in pieces)."""
        return pl.DataFrame([self.addr, self.size, self.stream, self.time_us]).rechunk()


__all__ = ["TraceColumns"]
