"""Figures a screen must show, worked out from a capture's frames by the plainest means
(polars filters and sums, a loop over a hundred segments), never by memtui's analyses: the
SVG snapshot tests check the looks, and these their figures, so a baseline accepted with a
wrong number still fails.

:class:`Shown` is a ``run_before`` for ``snap_compare`` that presses keys and keeps the
screen's text and the app's cursor at the moment the picture is taken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from memtui.model import MemoryTrace
from memtui.units import format_bytes
from tests.helpers.map_pilot import screen_text
from tests.helpers.toy_traces import ready, settle

#: The demo captures' own code lies under /work (torch's under /opt/torch).
USER_FILES = "/work/"


class Shown:
    """A ``run_before``: wait for the app, press ``keys`` (settling after each), and keep
    what the screen then shows (``text``, its ``lines``) and the cursor's event."""

    def __init__(self, *keys: str) -> None:
        self.keys = keys
        self.text = ""
        self.event: int | None = None
        self.window: tuple[int, int] | None = None
        self.app = None

    async def __call__(self, pilot) -> None:
        await ready(pilot)
        for key in self.keys:
            await pilot.press(key)
            await settle(pilot)
        await settle(pilot)
        self.app = pilot.app
        self.text = screen_text(pilot.app)
        cursor = getattr(pilot.app, "cursor", None)
        self.event = getattr(cursor, "event", None)
        window = getattr(cursor, "window", None)
        self.window = tuple(window) if window else None

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def has(self, *parts: str) -> None:
        """Assert that each of ``parts`` is on the screen."""
        for part in parts:
            assert part in self.text, (part, self.text)

    def line_with(self, pattern: str) -> str:
        """The first line matching ``pattern`` (a regex)."""
        for line in self.lines:
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matches {pattern!r}:\n{self.text}")


def events_of(trace: MemoryTrace, device: str) -> pl.DataFrame:
    return trace.events.filter(pl.col("device") == device).sort("seq")


def peak_event(trace: MemoryTrace, device: str) -> int:
    """The event (its number on the device) where ``allocated`` first reaches its maximum."""
    return int(events_of(trace, device)["allocated"].arg_max())


def alive_at(trace: MemoryTrace, device: str, event: int) -> pl.DataFrame:
    """The blocks alive just after event ``event``: allocated at it or before (ghosts from
    the start), not yet freed (the free completed after it, or never)."""
    seq = int(events_of(trace, device)["seq"][event])
    return trace.blocks.filter(
        (pl.col("device") == device)
        & (pl.col("ghost") | (pl.col("seq_alloc") <= seq))
        & (pl.col("seq_free").is_null() | (pl.col("seq_free") > seq)))


def innermost_user_frame(trace: MemoryTrace, blocks: pl.DataFrame) -> pl.DataFrame:
    """``blocks`` with ``frame``: ``name (file.py:line)`` of their innermost frame under
    :data:`USER_FILES`."""
    frames = trace.frames.filter(pl.col("filename").str.starts_with(USER_FILES)).select(
        "frame_id", frame=pl.format("{} ({}:{})", "name",
                                    pl.col("filename").str.split("/").list.last(), "line"))
    first = trace.stacks.explode("frame_ids").rename({"frame_ids": "frame_id"}).join(
        frames, on="frame_id", how="inner", maintain_order="left").group_by(
        "stack_id", maintain_order=True).agg(pl.col("frame").first())
    return blocks.join(first, on="stack_id", how="left")


def bytes_by_frame(trace: MemoryTrace, blocks: pl.DataFrame) -> list[tuple[str, int, int]]:
    """(frame, bytes, blocks) of ``blocks`` by innermost user frame, largest first."""
    grouped = innermost_user_frame(trace, blocks).group_by("frame").agg(
        bytes=pl.col("size").sum(), blocks=pl.len()).sort(["bytes", "frame"],
                                                           descending=[True, False])
    return list(grouped.iter_rows())


@dataclass(frozen=True)
class PoolFigures:
    segments: int
    reserved: int
    allocated: int
    gaps: int
    largest_gap: int
    fragmented: int = 0  # free inside segments that hold a block
    fragmented_largest_gap: int = 0

    @property
    def free(self) -> int:
        return self.reserved - self.allocated

    def fragmented_text(self) -> str:
        """The Pool header's words for the fragmented bytes."""
        return (f"fragmented {format_bytes(self.fragmented)} "
                f"({self.fragmented / self.reserved:.0%} of reserved, largest gap "
                f"{format_bytes(self.fragmented_largest_gap)})")


def pool_at(trace: MemoryTrace, device: str, event: int) -> PoolFigures:
    """Segments alive after ``event`` and the free gaps between the blocks alive in them
    (each segment walked by address: a handful of rows a segment)."""
    seq = int(events_of(trace, device)["seq"][event])
    segments = trace.segments.filter(
        (pl.col("device") == device)
        & (pl.col("ghost") | (pl.col("seq_alloc") <= seq))
        & (pl.col("seq_free").is_null() | (pl.col("seq_free") > seq))).sort("addr")
    blocks = alive_at(trace, device, event).sort("addr")
    addrs, sizes = blocks["addr"].to_list(), blocks["size"].to_list()
    gaps, largest, fragmented, fragmented_largest = 0, 0, 0, 0
    for start, size in segments.select("addr", "size").iter_rows():
        at, end = start, start + size
        free = []
        for addr, block_size in zip(addrs, sizes, strict=True):
            if start <= addr < end:
                if addr > at:
                    free.append(addr - at)
                at = addr + block_size
        holds = at > start  # a block in it
        if end > at:
            free.append(end - at)
        gaps, largest = gaps + len(free), max([largest, *free])
        if holds:
            fragmented += sum(free)
            fragmented_largest = max([fragmented_largest, *free])
    return PoolFigures(segments=segments.height, reserved=int(segments["size"].sum()),
                       allocated=int(blocks["size"].sum()), gaps=gaps, largest_gap=largest,
                       fragmented=fragmented, fragmented_largest_gap=fragmented_largest)


def seconds(t_ns: int, start_ns: int = 0) -> str:
    """A time as the status bar writes it: ``+0.314935 s`` (microseconds)."""
    return f"+{(t_ns - start_ns) / 1e9:.6f} s"


def count(n: int) -> str:
    return f"{n:,}"


__all__ = ["Shown", "alive_at", "bytes_by_frame", "count", "events_of", "format_bytes",
           "innermost_user_frame", "peak_event", "pool_at", "seconds"]
