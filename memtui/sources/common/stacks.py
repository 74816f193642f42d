"""Interning call stacks into the ``frames`` and ``stacks`` tables.

Captures repeat the same frames and stacks millions of times (a PyTorch pickle shares the
very same list objects through its memo), so each distinct stack is turned into frame ids
once: first by object identity, then by content.  Sources hand over one list of stacks
per batch of events and get a column of ``stack_id`` back (null for an empty stack).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import polars as pl

from memtui.model import conform

FrameKey = tuple[str, int, str]  # (filename, line, name)


def frame_key(frame: dict) -> FrameKey:
    """(filename, line, name) of a frame dict from a file: text only where it is text and
    a line only where it is a number (a hostile value never goes through ``str()``)."""
    filename, line, name = frame.get("filename"), frame.get("line"), frame.get("name")
    return (filename[:4096] if isinstance(filename, str) else "",
            line if type(line) is int and 0 <= line < 2**31 else 0,
            name[:4096] if isinstance(name, str) else "")


class StackInterner:
    """Accumulates distinct frames and stacks; see the module docstring."""

    def __init__(self) -> None:
        self._frame_ids: dict[FrameKey, int] = {}
        self._stack_ids: dict[tuple[int, ...], int] = {}
        self._by_object: dict[int, int | None] = {}
        self._alive: list[Any] = []  # keeps interned objects alive so their ids stay unique

    def frame_id(self, key: FrameKey) -> int:
        frame_id = self._frame_ids.get(key)
        if frame_id is None:
            frame_id = self._frame_ids[key] = len(self._frame_ids)
        return frame_id

    def stack_id_of_keys(self, keys: Iterable[FrameKey]) -> int | None:
        """Stack id of frames given as (filename, line, name), innermost first."""
        ids = tuple(self.frame_id(key) for key in keys)
        if not ids:
            return None
        stack_id = self._stack_ids.get(ids)
        if stack_id is None:
            stack_id = self._stack_ids[ids] = len(self._stack_ids)
        return stack_id

    def _stack_id_of_dicts(self, frames: Sequence[dict] | None) -> int | None:
        if not frames or not isinstance(frames, list | tuple):
            return None
        return self.stack_id_of_keys(frame_key(f) for f in frames if isinstance(f, dict))

    def stack_ids(self, stacks: list[Sequence[dict] | None]) -> pl.Series:
        """``stack_id`` for each stack of frame dicts (PyTorch form), interning new ones."""
        keys = np.fromiter(map(id, stacks), dtype=np.uint64, count=len(stacks))
        return self.stack_ids_by_identity(keys, stacks.__getitem__)

    def stack_ids_by_identity(self, keys: np.ndarray, stack_at: Callable[[int], Any]
                              ) -> pl.Series:
        """``stack_id`` for each row whose stack object has identity ``keys[row]``;
        ``stack_at(row)`` is that object (looked at once per distinct object only).

        Stacks are told apart by object identity first (the pickle memo shares them):
        only the first row of each distinct object is looked at in Python.
        """
        ids = pl.Series(keys, dtype=pl.UInt64)
        lookup = self._by_object
        for index in ids.arg_unique().sort().to_list():  # in order of appearance
            object_id = int(keys[index])
            if object_id not in lookup:
                frames = stack_at(index)
                lookup[object_id] = self._stack_id_of_dicts(frames)
                self._alive.append(frames)
        return ids.replace_strict(
            list(lookup.keys()), list(lookup.values()), default=None, return_dtype=pl.Int32
        ).alias("stack_id")

    def frames(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The ``frames`` and ``stacks`` tables of everything interned so far."""
        keys = list(self._frame_ids)
        frames = pl.DataFrame(
            {
                "frame_id": list(range(len(keys))),
                "filename": [k[0] for k in keys],
                "line": [k[1] for k in keys],
                "name": [k[2] for k in keys],
            }
        )
        stacks = pl.DataFrame(
            {
                "stack_id": list(self._stack_ids.values()),
                "frame_ids": [list(ids) for ids in self._stack_ids],
            },
            schema={"stack_id": pl.Int32, "frame_ids": pl.List(pl.Int32)},
        )
        return conform(frames, "frames"), conform(stacks, "stacks")
