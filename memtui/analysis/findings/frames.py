"""Naming a call stack, and a stack's frames as evidence.

A finding names code, not the allocator, by the one rule every screen follows
(:func:`memtui.analysis.stacks.callstack.stack_top_frames`): the innermost user frame, and for
stacks recorded only in C++ the forward line or the autograd node; ``user`` says whether
the naming frame is the user's code.

A finding's evidence stack (:func:`evidence_stack`) starts at that naming frame and goes
outward, so the first frame a person (or a CI annotation, a report, a Perfetto arg) reads
is the user's line, never the allocator's internals, a cuBLAS workspace or the framework
code between the user's call and the allocation; :func:`full_stack` keeps every frame
(``findings --json --stacks``).
"""

from __future__ import annotations

import polars as pl

from memtui.analysis.findings.model import StackFrame
from memtui.analysis.stacks.callstack import internal_frame, python_frame, stack_top_frames
from memtui.analysis.timeline.live import cached
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


def _stack_rows(trace: MemoryTrace, stack_id: int | None) -> pl.DataFrame | None:
    """The frames of ``stack_id`` joined to their texts, innermost first (None: none)."""
    if stack_id is None or trace.stacks.is_empty():
        return None
    row = trace.stacks.filter(pl.col("stack_id") == stack_id)
    if row.is_empty():
        return None
    ids = pl.DataFrame({"frame_id": row["frame_ids"][0]}, schema={"frame_id": pl.Int32})
    return ids.with_row_index("pos").join(trace.frames, on="frame_id", how="left").sort("pos")


def _as_frames(frames: pl.DataFrame, limit: int) -> tuple[StackFrame, ...]:
    return tuple(StackFrame(r["filename"], r["line"], r["name"])
                 for r in frames.head(limit).iter_rows(named=True))


def naming_frame(trace: MemoryTrace, stack_id: int) -> int | None:
    """The ``frame_id`` that names ``stack_id`` (:func:`stack_top_frames`, whose rule
    looks at one stack and its own blocks at a time, worked out once for the trace), or
    None."""
    tops = cached(trace, ("stack_top_frames", "user"), lambda: stack_top_frames(trace))
    row = tops.filter(pl.col("stack_id") == stack_id)
    return None if row.is_empty() else row["frame_id"][0]


def evidence_stack(trace: MemoryTrace, stack_id: int | None,
                   limit: int = 30) -> tuple[StackFrame, ...]:
    """The frames of ``stack_id`` from the frame that names it outward (at most
    ``limit``), without the internals that never name a stack (``internal_frame``): the
    innermost frame is the user's line wherever the stack has one.  From a Python frame
    outward only the Python frames follow (the interpreter's C frames between them,
    ``slot_tp_call`` or ``pymain_run_file``, say nothing to a person)."""
    frames = _stack_rows(trace, stack_id)
    if frames is None:
        return ()
    named = naming_frame(trace, stack_id)
    start = frames.filter(pl.col("frame_id") == named)["pos"].min() if named is not None \
        else None
    if start is not None:
        frames = frames.filter(pl.col("pos") >= start)
        if frames.head(1).select(python_frame().fill_null(False)).item():
            frames = frames.filter(python_frame().fill_null(False))
    shown = frames.filter(~internal_frame().fill_null(False))
    return _as_frames(shown if shown.height else frames, limit)


def full_stack_frames(trace: MemoryTrace, stack_id: int | None) -> tuple[StackFrame, ...]:
    """Every frame of ``stack_id``, innermost first, but the internals that never name a
    stack (unless they are all it has)."""
    frames = _stack_rows(trace, stack_id)
    if frames is None:
        return ()
    shown = frames.filter(~internal_frame().fill_null(False))
    return _as_frames(shown if shown.height else frames, frames.height)


__all__ = ["NO_STACK", "evidence_stack", "full_stack_frames", "naming_frame", "stack_frames"]
