"""Call stacks for display: the frame that best names a stack, and a stack's lines.

Captures with C++ frames (PyTorch ``stacks='all'``) start every stack with the same
unwinding and allocator frames; memory_viz hides them with fixed omit lists, and so do we
when choosing the *top* frame of a stack (the first frame, innermost first, that is not
omitted).  The full stack is still shown, omitted frames included, in :func:`stack_lines`.
"""

from __future__ import annotations

import polars as pl

from memtui.model import MemoryTrace

#: memory_viz's omit lists (torch/cuda/_memory_viz.py and MemoryViz.js).
OMIT_NAMES = (
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
)
OMIT_FILES = (
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
)
#: Frames of the allocator itself: never the interesting end of a stack.
ALLOCATOR_NAMES = ("CUDACachingAllocator", "NPUCachingAllocator", "memory_snapshot", "c10::")


def _omitted(extra: tuple[str, ...] = ()) -> pl.Expr:
    name = pl.col("name").fill_null("")
    filename = pl.col("filename").fill_null("")
    expr = pl.lit(False)
    for part in OMIT_NAMES + extra:
        expr = expr | name.str.contains(part, literal=True)
    for part in OMIT_FILES + extra:
        expr = expr | filename.str.contains(part, literal=True)
    return expr


def frame_label() -> pl.Expr:
    """``name (file:line)`` with the file's base name; ``name`` alone where no file is known."""
    base = pl.col("filename").fill_null("").str.split("/").list.last().str.split("\\").list.last()
    has_file = (base != "") & (base != "??")
    where = pl.when(pl.col("line") > 0).then(
        pl.concat_str([base, pl.lit(":"), pl.col("line").cast(pl.String)])
    ).otherwise(base)
    return (
        pl.when(has_file)
        .then(pl.concat_str([pl.col("name").fill_null("?"), pl.lit(" ("), where, pl.lit(")")]))
        .otherwise(pl.col("name").fill_null("?"))
    )


#: The rules for the frame that names a stack, and how the screens say them.
TOP_RULES = {
    "user": "innermost user frame",
    "outer": "outermost user frame",
    "innermost": "innermost frame",
}


def stack_top_frames(trace: MemoryTrace, rule: str = "user") -> pl.DataFrame:
    """One row per stack: ``stack_id``, the frame that names it (``name``, ``filename``,
    ``line``) and its label ``top``.

    Under ``rule="user"`` (the default) that frame is the innermost Python frame outside
    torch itself (the user's code nearest the allocation), else the innermost Python
    frame, else the innermost frame that memory_viz does not omit and that is not the
    allocator's own, else the innermost frame.  ``"outer"`` takes the outermost user frame
    instead (the entry of the user's code: ``train``, ``main``), with the same fallbacks.
    ``"innermost"`` takes the innermost frame that is neither omitted nor the
    allocator's (often C++ or torch code), else the innermost frame.
    """
    if rule not in TOP_RULES:
        raise ValueError(f"unknown stack top rule {rule!r}: one of {', '.join(TOP_RULES)}")
    schema = {"stack_id": pl.Int32, "name": pl.String, "filename": pl.String,
              "line": pl.Int64, "top": pl.String}
    if trace.stacks.is_empty():
        return pl.DataFrame(schema=schema)
    filename = pl.col("filename").fill_null("")
    is_python = filename.str.ends_with(".py")
    in_torch = filename.str.contains("/torch/", literal=True) | filename.str.contains(
        "\\torch\\", literal=True
    )
    frames = trace.frames.with_columns(
        label=frame_label(),
        skip=_omitted(ALLOCATOR_NAMES),
        user=is_python & ~in_torch,
        python=is_python,
    ).select("frame_id", "label", "skip", "user", "python")
    exploded = (
        trace.stacks.select("stack_id", "frame_ids")
        .explode("frame_ids")
        .with_columns(pos=pl.int_range(0, pl.len()).over("stack_id"))
        .join(frames, left_on="frame_ids", right_on="frame_id", how="left")
    )
    frame = pl.col("frame_ids")
    firsts = (
        exploded.sort("stack_id", "pos")
        .group_by("stack_id", maintain_order=True)
        .agg(
            user=frame.filter(pl.col("user").fill_null(False)).first(),
            outer=frame.filter(pl.col("user").fill_null(False)).last(),
            python=frame.filter(pl.col("python").fill_null(False)).first(),
            keep=frame.filter(~pl.col("skip").fill_null(False)).first(),
            any=frame.first(),
        )
    )
    order = {"user": ("user", "python", "keep", "any"), "outer": ("outer", "python", "keep",
                                                                  "any"),
             "innermost": ("keep", "any")}[rule]
    chosen = firsts.select(pl.col("stack_id").cast(pl.Int32),
                           frame_id=pl.coalesce(*order))
    named = trace.frames.with_columns(top=frame_label()).select(
        "frame_id", "name", "filename", "line", "top")
    return chosen.join(named, on="frame_id", how="left", maintain_order="left").select(
        list(schema)).cast(schema)


def stack_tops(trace: MemoryTrace, rule: str = "user") -> pl.DataFrame:
    """One row per stack: ``stack_id`` and ``top``, the label of the frame that names it
    under ``rule`` (see :func:`stack_top_frames`)."""
    return stack_top_frames(trace, rule).select("stack_id", "top")


def stack_lines(trace: MemoryTrace, stack_id: int | None) -> list[tuple[str, bool]]:
    """The frames of one stack, innermost first, as ``(label, omitted)`` pairs."""
    if stack_id is None or trace.stacks.is_empty():
        return []
    row = trace.stacks.filter(pl.col("stack_id") == stack_id)
    if row.is_empty():
        return []
    ids = pl.DataFrame({"frame_id": row["frame_ids"][0]}, schema={"frame_id": pl.Int32})
    frames = ids.with_row_index("pos").join(trace.frames, on="frame_id", how="left").sort("pos")
    labelled = frames.with_columns(
        label=frame_label(), skip=_omitted().fill_null(False)
    )
    return list(zip(labelled["label"].to_list(), labelled["skip"].to_list(), strict=True))


__all__ = ["frame_label", "stack_lines", "stack_top_frames", "stack_tops"]
