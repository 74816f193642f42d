"""Naming a call stack, and a stack's frames as evidence.

A finding names code, not the allocator, by the one rule every screen follows
(:func:`memtui.analysis.stacks.callstack.stack_top_frames`): the innermost user frame, and for
stacks recorded only in C++ the forward line or the autograd node; ``user`` says whether
the naming frame is the user's code.
"""

from __future__ import annotations

import polars as pl

from memtui.analysis.findings.model import StackFrame
from memtui.analysis.stacks.callstack import internal_frame, stack_top_frames
from memtui.model import MemoryTrace

NO_STACK = "(no stack recorded)"


def stack_frames(trace: MemoryTrace) -> pl.DataFrame:
    """One row per stack: ``stack_id``, the naming frame (``frame_id``, ``filename``,
    ``line``, ``name``, ``label``) and ``user`` (True where it is user code)."""
    tops = stack_top_frames(trace)
    return tops.select(
        "stack_id", "frame_id", "filename", "line", "name", label="top",
        user=pl.col("kind") == "user",
    )


def evidence_stack(trace: MemoryTrace, stack_id: int | None,
                   limit: int = 30) -> tuple[StackFrame, ...]:
    """The frames of ``stack_id``, innermost first (at most ``limit``), without the
    internals that never name a stack (the unwinder, the allocator: ``internal_frame``)
    unless they are all it has."""
    if stack_id is None or trace.stacks.is_empty():
        return ()
    row = trace.stacks.filter(pl.col("stack_id") == stack_id)
    if row.is_empty():
        return ()
    ids = pl.DataFrame({"frame_id": row["frame_ids"][0]}, schema={"frame_id": pl.Int32})
    frames = ids.with_row_index("pos").join(trace.frames, on="frame_id", how="left").sort("pos")
    shown = frames.filter(~internal_frame().fill_null(False))
    frames = (shown if shown.height else frames).head(limit)
    return tuple(StackFrame(r["filename"], r["line"], r["name"])
                 for r in frames.iter_rows(named=True))


__all__ = ["NO_STACK", "evidence_stack", "stack_frames"]
