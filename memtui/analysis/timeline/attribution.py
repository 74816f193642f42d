"""Every byte attributed: the part of a level that no block explains, named.

Wherever a level is split into rows (by stack, owner, operator, pool), the rows sum to the
level (DESIGN.md section 3).  On PyTorch snapshots and msMemScope captures the level is
built from the blocks, so the blocks explain all of it.  Where the level is the source's own
figure, the blocks may explain less: an Ascend profiler folder's ``memory_record`` counts
the weights and optimizer state alive before the profile began, and ``operator_memory`` has
no rows for them.  :func:`unexplained` gives, for every event position (as the cursor counts
them), the bytes of the level that no block alive there explains, and :func:`remainder_rows`
names them:

* **alive before the capture**: the part of the level already unexplained at the first
  event (memory allocated before the capture began, which no row of the capture shows),
  for as long as the level keeps it (never more than it was at the start);
* **in no operator** (profiler) / **in no block** (other sources): the rest, memory the
  level counts and no block row shows.
* A level *below* its blocks (the operator table's times lag the level's by a few
  microseconds) gives a negative row, **counted by blocks before the level**, so the rows
  still sum to the level.

:func:`static_memory` is what pt-snap-cli calls "static": the blocks alive before the
capture that are never freed in it (ghosts without a free), and :func:`before_capture` the
whole of what was alive before it (every ghost plus the unexplained start).  Everything is
numpy over the device's blocks and levels, cached per trace and device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.analysis.timeline.at_time import BEFORE_CAPTURE, Timeline, block_positions
from memtui.analysis.timeline.live import cached
from memtui.model import MemoryTrace

IN_NO_OPERATOR = "in no operator"
IN_NO_BLOCK = "in no block"
BLOCKS_AHEAD = "counted by blocks before the level"
#: Labels of the rows that stand for bytes no block explains (never a stack or owner).
REMAINDER_LABELS = (BEFORE_CAPTURE, IN_NO_OPERATOR, IN_NO_BLOCK, BLOCKS_AHEAD)
PROFILER = "ascend_profiler"
#: Sources whose level is the bytes of their blocks (:func:`level_is_reported`).
LEVEL_FROM_BLOCKS = ("torch_snapshot", "msmemscope")


@dataclass(frozen=True)
class Remainder:
    """One named row of bytes that no block explains."""

    label: str
    bytes: int


@dataclass(frozen=True)
class Unexplained:
    """Per event position: the level, the bytes of the blocks alive, their difference."""

    level: np.ndarray
    blocks: np.ndarray
    start: int  # the level's unexplained bytes at the first position (>= 0)

    @property
    def gap(self) -> np.ndarray:
        return self.level - self.blocks

    def at(self, event: int) -> int:
        """The unexplained bytes just after the event at position ``event``."""
        if self.level.size == 0:
            return 0
        event = min(max(int(event), 0), self.level.size - 1)
        return int(self.level[event] - self.blocks[event])


def grouping_noun(trace: MemoryTrace) -> str:
    """What the rest of a level is in none of: operators (profiler), blocks (others)."""
    return IN_NO_OPERATOR if trace.meta.source == PROFILER else IN_NO_BLOCK


def groups_by_operator(trace: MemoryTrace) -> bool:
    """Whether the capture's bytes are grouped by operator (owner) by default: profiler
    captures, whose blocks carry an operator name and no call stack."""
    return trace.meta.source == PROFILER


def level_is_reported(trace: MemoryTrace) -> bool:
    """Whether the level is the source's own figure (profiler ``memory_record``), which its
    blocks may not explain; PyTorch snapshots and msMemScope build the level from their
    blocks (ghosts included), so nothing is left over there (tests/analysis/
    test_one_truth.py and test_attribution.py check it on every real capture)."""
    return trace.meta.source not in LEVEL_FROM_BLOCKS


def unexplained(trace: MemoryTrace, device: str, timeline: Timeline | None = None
                ) -> Unexplained:
    """The level and the blocks' bytes at every event position of ``device`` (cached;
    nothing to compute where the level is built from the blocks)."""
    if not level_is_reported(trace):
        empty = np.zeros(0, dtype=np.int64)
        return Unexplained(level=empty, blocks=empty, start=0)

    return cached(trace, ("unexplained", device),
                  lambda: measure_unexplained(trace, device, timeline))


def measure_unexplained(trace: MemoryTrace, device: str, timeline: Timeline | None = None
                        ) -> Unexplained:
    """:func:`unexplained` computed, whatever the source (the tests check with it that the
    sources building their level from blocks leave nothing over)."""
    tl = timeline if timeline is not None else Timeline.build(trace, device)
    positions = tl.positions
    level = _levels_per_position(tl)
    blocks = _block_bytes_per_position(trace, device, positions)
    start = max(int(level[0] - blocks[0]), 0) if positions else 0
    return Unexplained(level=level, blocks=blocks, start=start)


def _levels_per_position(tl: Timeline) -> np.ndarray:
    """allocated just after each event position (vectorised levels_at_event)."""
    level = tl.allocated
    if tl._aligned(level):
        return level.values[1:].astype(np.int64)
    if level.values.size == 0:
        return np.zeros(tl.positions, dtype=np.int64)
    index = np.searchsorted(level.t, tl.times, side="right") - 1
    values = level.values[np.clip(index, 0, None)].astype(np.int64)
    return np.where(index < 0, 0, values)


def _block_bytes_per_position(trace: MemoryTrace, device: str, positions: int) -> np.ndarray:
    """Bytes of the blocks alive just after each event position (``pos_alloc <= K <
    pos_free``, :func:`~memtui.analysis.timeline.at_time.block_positions`)."""
    out = np.zeros(positions + 1, dtype=np.int64)
    if positions == 0:
        return out[:0]
    blocks = trace.device_blocks(device)
    if blocks.is_empty():
        return out[:-1]
    pos = block_positions(trace, device)
    sizes = blocks.select("block_id", "size").join(pos, on="block_id", how="left",
                                                   maintain_order="left")
    size = sizes["size"].fill_null(0).to_numpy().astype(np.int64, copy=False)
    start = np.clip(sizes["pos_alloc"].fill_null(positions).to_numpy(), 0, positions)
    end = np.clip(sizes["pos_free"].fill_null(positions).to_numpy(), 0, positions)
    live = start < end
    np.add.at(out, start[live], size[live])
    np.add.at(out, end[live], -size[live])
    return np.cumsum(out)[:-1]


def split_remainder(trace: MemoryTrace, device: str, gap: int) -> list[Remainder]:
    """``gap`` bytes of a level that its blocks do not explain, as named rows (none when
    the blocks explain it all): alive before the capture (up to what was unexplained at
    the start), then in no operator / in no block, or counted by blocks before the level."""
    if gap == 0:
        return []
    start = unexplained(trace, device).start
    before = min(max(gap, 0), start)
    rows = [Remainder(BEFORE_CAPTURE, before)] if before else []
    rest = gap - before
    if rest > 0:
        rows.append(Remainder(grouping_noun(trace), rest))
    elif rest < 0:
        rows.append(Remainder(BLOCKS_AHEAD, rest))
    return rows


def remainder_rows(trace: MemoryTrace, device: str, level: int, shown: int) -> list[Remainder]:
    """The named rows that make rows summing to ``shown`` bytes add up to ``level``."""
    return split_remainder(trace, device, int(level) - int(shown))


def remainder_at(trace: MemoryTrace, device: str, event: int) -> list[Remainder]:
    """The named rows of the bytes no block explains just after event position ``event``."""
    return split_remainder(trace, device, unexplained(trace, device).at(event))


def remainder_text(rest: list[Remainder]) -> str:
    """``4.2 GiB alive before the capture, 5.0 MiB in no operator`` (empty for none)."""
    from memtui.units import format_bytes

    return ", ".join(f"{format_bytes(r.bytes)} {r.label}" for r in rest)


@dataclass(frozen=True)
class BeforeCapture:
    """What was alive before the capture began (see the module docstring)."""

    static_bytes: int  # ghosts never freed (pt-snap-cli's "static")
    static_blocks: int
    freed_bytes: int  # ghosts freed during the capture (pt-snap-cli's "preexisting")
    freed_blocks: int
    unexplained_bytes: int  # the start level no block explains (profiler folders)

    @property
    def bytes(self) -> int:
        return self.static_bytes + self.freed_bytes + self.unexplained_bytes

    def to_dict(self) -> dict[str, int]:
        return {"bytes": self.bytes, "static_bytes": self.static_bytes,
                "static_blocks": self.static_blocks, "freed_bytes": self.freed_bytes,
                "freed_blocks": self.freed_blocks, "no_block_bytes": self.unexplained_bytes}


def before_capture(trace: MemoryTrace, device: str) -> BeforeCapture:
    """Bytes and blocks alive before the capture began on ``device``."""
    blocks = trace.device_blocks(device)
    ghost = blocks["ghost"].fill_null(False)
    ghosts = blocks.filter(ghost).select("size", never=pl.col("t_free").is_null())
    static = ghosts.filter(pl.col("never"))
    freed = ghosts.filter(~pl.col("never"))
    return BeforeCapture(
        static_bytes=int(static["size"].sum() or 0), static_blocks=static.height,
        freed_bytes=int(freed["size"].sum() or 0), freed_blocks=freed.height,
        unexplained_bytes=unexplained(trace, device).start,
    )


def static_memory(trace: MemoryTrace, device: str) -> tuple[int, int]:
    """(bytes, blocks) alive before the capture and never freed in it (pt-snap-cli's
    "static"), plus, where the level holds bytes no block explains from the start
    (profiler folders), those bytes (no block)."""
    b = before_capture(trace, device)
    return b.static_bytes + b.unexplained_bytes, b.static_blocks


__all__ = [
    "BEFORE_CAPTURE", "BLOCKS_AHEAD", "IN_NO_BLOCK", "IN_NO_OPERATOR", "REMAINDER_LABELS",
    "BeforeCapture", "Remainder", "Unexplained", "before_capture", "groups_by_operator",
    "grouping_noun", "level_is_reported", "measure_unexplained", "remainder_at",
    "remainder_rows", "remainder_text", "split_remainder", "static_memory", "unexplained",
]
