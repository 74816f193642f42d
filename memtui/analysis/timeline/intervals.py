"""Which of many half-open intervals ``[start, end)`` contain a time: fast, for any time.

Block and segment lifetimes are intervals on the time (or event) axis.  The pool map and
the stack tree need "everything alive at t" on every cursor move, at millions of
intervals, so :class:`IntervalIndex` keeps *checkpoints*: the intervals are sorted by
start and, every ``chunk`` starts, the positions of those still open are stored.  A query
takes the checkpoint at or before ``t``, drops what ended by ``t`` and adds the at most
``chunk`` intervals that started since: ``O(alive + chunk)`` numpy work, no Python loop.

The chunk is chosen so that all checkpoints together stay under a memory budget, so long
lived intervals (never freed blocks) cannot blow it up.
"""

from __future__ import annotations

import numpy as np

INT64_MIN = np.iinfo(np.int64).min
INT64_MAX = np.iinfo(np.int64).max

#: Checkpoint entries kept at most (int32 positions: 4 bytes each).
CHECKPOINT_BUDGET = 8_000_000
_MIN_CHUNK = 1024


class IntervalIndex:
    """Stabbing queries over ``[start[i], end[i])``; see the module docstring.

    ``start``/``end`` are int64 arrays (use :data:`INT64_MIN` for "since before the
    trace" and :data:`INT64_MAX` for "still open at the end").  Results are indices into
    the original arrays, in order of start (ties in input order).
    """

    def __init__(self, start: np.ndarray, end: np.ndarray, chunk: int | None = None) -> None:
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        self.size = int(start.size)
        self.order = np.argsort(start, kind="stable").astype(np.int64)
        self.start = start[self.order]
        self.end = end[self.order]
        self.chunk = chunk or self._pick_chunk()
        self._build()

    #: The arrays that make an index (:meth:`arrays`, :meth:`from_arrays`).
    PARTS = ("order", "start", "end", "cp_time", "cp_offsets", "cp_members")

    def arrays(self) -> dict[str, np.ndarray]:
        """What :meth:`from_arrays` needs to make this index again without building it
        (kept in the reopen cache); the chunk is the step between checkpoint times."""
        return {**{part: getattr(self, part) for part in self.PARTS},
                "chunk": np.array([self.chunk], dtype=np.int64)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> IntervalIndex:
        """The index :meth:`arrays` described; a ValueError where the arrays do not fit
        together (lengths, dtypes, order, offsets, members out of range): a broken cache
        file is never trusted."""
        parts = {part: np.asarray(arrays[part]) for part in cls.PARTS}
        chunk = np.asarray(arrays["chunk"])
        size = parts["order"].size
        checks = [
            chunk.shape == (1,) and int(chunk[0]) > 0,
            all(parts[p].dtype == np.int64 for p in cls.PARTS if p != "cp_members"),
            parts["cp_members"].dtype == np.int32,
            parts["start"].size == size and parts["end"].size == size,
            parts["cp_offsets"].size == parts["cp_time"].size + 1,
        ]
        if not all(checks):
            raise ValueError("interval index arrays that do not fit together")
        index = cls.__new__(cls)
        index.size, index.chunk = size, int(chunk[0])
        for part, array in parts.items():
            setattr(index, part, array)
        offsets, members = index.cp_offsets, index.cp_members
        if size and not (
                index.cp_time.size == -(-size // index.chunk)
                and offsets[0] == 0 and offsets[-1] == members.size
                and bool(np.all(np.diff(offsets) >= 0))
                and bool(np.all(np.diff(index.start) >= 0))
                and (members.size == 0 or (members.min() >= 0 and members.max() < size))
                and index.order.min() >= 0 and index.order.max() < size):
            raise ValueError("interval index arrays that do not fit together")
        return index

    # -- building -----------------------------------------------------------------------

    def _spans(self, chunk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Checkpoint times and, per interval, the first and last checkpoint holding it."""
        cp_pos = np.arange(0, self.size, chunk, dtype=np.int64)
        cp_time = self.start[cp_pos]
        first = np.arange(self.size, dtype=np.int64) // chunk + 1
        last = np.searchsorted(cp_time, self.end, side="left") - 1
        return cp_time, first, last

    def _pick_chunk(self) -> int:
        """The smallest power-of-two chunk whose checkpoints fit the budget.

        With chunk ``c`` an interval sits in about ``1/c`` of the starts that follow it
        before it ends, so one count of those starts sizes every chunk at once.
        """
        later = np.searchsorted(self.start, self.end, side="left") - np.arange(self.size) - 1
        entries = int(np.clip(later, 0, None).sum())
        chunk = _MIN_CHUNK
        while chunk < self.size and entries // chunk > CHECKPOINT_BUDGET:
            chunk *= 2
        return chunk

    def _build(self) -> None:
        if self.size == 0:
            self.cp_time = np.zeros(0, dtype=np.int64)
            self.cp_offsets = np.zeros(1, dtype=np.int64)
            self.cp_members = np.zeros(0, dtype=np.int32)
            return
        cp_time, first, last = self._spans(self.chunk)
        counts = np.clip(last - first + 1, 0, None)
        total = int(counts.sum())
        # Interval i sits in checkpoints first[i] .. last[i]: expand, then group by checkpoint.
        owner = np.repeat(np.arange(self.size, dtype=np.int64), counts)
        step = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        checkpoint = np.repeat(first, counts) + step
        by_cp = np.argsort(checkpoint, kind="stable")  # stable: positions stay ascending
        self.cp_time = cp_time
        self.cp_members = owner[by_cp].astype(np.int32)
        per_cp = np.bincount(checkpoint, minlength=cp_time.size)
        self.cp_offsets = np.concatenate([[0], np.cumsum(per_cp)]).astype(np.int64)

    # -- queries ------------------------------------------------------------------------

    def positions_at(self, t: int) -> np.ndarray:
        """Positions (in start order) of the intervals with ``start <= t < end``."""
        k = int(np.searchsorted(self.start, t, side="right"))
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        j = (k - 1) // self.chunk
        lo, hi = self.cp_offsets[j], self.cp_offsets[j + 1]
        base = self.cp_members[lo:hi].astype(np.int64)
        tail = np.arange(j * self.chunk, k, dtype=np.int64)
        candidates = np.concatenate([base, tail])
        return candidates[self.end[candidates] > t]

    def at(self, t: int) -> np.ndarray:
        """Indices (into the original arrays) of the intervals alive at ``t``."""
        return self.order[self.positions_at(t)]

    def overlapping(self, t0: int, t1: int) -> np.ndarray:
        """Indices of the intervals meeting ``[t0, t1]`` (alive at some time in it)."""
        k = int(np.searchsorted(self.start, t1, side="right"))
        alive = self.positions_at(t0)
        started = np.arange(
            int(np.searchsorted(self.start, t0, side="right")), k, dtype=np.int64
        )
        return self.order[np.concatenate([alive, started])]

    def count_at(self, t: int) -> int:
        return int(self.positions_at(t).size)
