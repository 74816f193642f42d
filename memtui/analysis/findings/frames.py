"""Naming a call stack by its innermost user frame, and a stack's frames as evidence.

A finding names code, not the allocator: of each stack (innermost first) it takes the
first Python frame outside torch (``user``), else the first Python frame, else the first
frame memory_viz does not omit, else the first frame, and says which it took.
"""

from __future__ import annotations

import polars as pl

from memtui.analysis.callstack import ALLOCATOR_NAMES, _omitted, frame_label
from memtui.analysis.findings.model import StackFrame
from memtui.model import MemoryTrace

NO_STACK = "(no stack recorded)"
_SCHEMA = {"stack_id": pl.Int32, "frame_id": pl.Int32, "filename": pl.String,
           "line": pl.Int64, "name": pl.String, "label": pl.String, "user": pl.Boolean}


def stack_frames(trace: MemoryTrace) -> pl.DataFrame:
    """One row per stack: ``stack_id``, the naming frame (``frame_id``, ``filename``,
    ``line``, ``name``, ``label``) and ``user`` (True where it is user code)."""
    if trace.stacks.is_empty():
        return pl.DataFrame(schema=_SCHEMA)
    filename = pl.col("filename").fill_null("")
    is_python = filename.str.ends_with(".py")
    in_torch = (filename.str.contains("/torch/", literal=True)
                | filename.str.contains("\\torch\\", literal=True)
                | filename.str.contains("/torch_npu/", literal=True))
    frames = trace.frames.with_columns(
        label=frame_label(), skip=_omitted(ALLOCATOR_NAMES).fill_null(False),
        user=(is_python & ~in_torch).fill_null(False), python=is_python.fill_null(False),
    )
    exploded = (
        trace.stacks.select("stack_id", "frame_ids")
        .explode("frame_ids")
        .with_columns(pos=pl.int_range(0, pl.len()).over("stack_id"))
        .join(frames, left_on="frame_ids", right_on="frame_id", how="left")
        .with_columns(
            choice=pl.when(pl.col("user")).then(0)
            .when(pl.col("python")).then(1)
            .when(~pl.col("skip")).then(2)
            .otherwise(3)
        )
        .filter(pl.col("frame_ids").is_not_null())
    )
    best = exploded.sort("stack_id", "choice", "pos").group_by(
        "stack_id", maintain_order=True).first()
    return best.select(
        pl.col("stack_id").cast(pl.Int32), pl.col("frame_ids").cast(pl.Int32).alias("frame_id"),
        "filename", pl.col("line").cast(pl.Int64), "name", "label",
        pl.col("user").fill_null(False),
    )


def evidence_stack(trace: MemoryTrace, stack_id: int | None,
                   limit: int = 30) -> tuple[StackFrame, ...]:
    """The frames of ``stack_id``, innermost first (at most ``limit``)."""
    if stack_id is None or trace.stacks.is_empty():
        return ()
    row = trace.stacks.filter(pl.col("stack_id") == stack_id)
    if row.is_empty():
        return ()
    ids = pl.DataFrame({"frame_id": row["frame_ids"][0]}, schema={"frame_id": pl.Int32})
    frames = (ids.with_row_index("pos").join(trace.frames, on="frame_id", how="left")
              .sort("pos").head(limit))
    return tuple(StackFrame(r["filename"], r["line"], r["name"])
                 for r in frames.iter_rows(named=True))


__all__ = ["NO_STACK", "evidence_stack", "stack_frames"]
