"""Call stacks for display: the one rule that names a stack, and a stack's lines.

Every screen, ``findings`` and ``compare`` name a call stack by :func:`stack_top_frames`
(one row per stack: the frame that names it and its label ``top``), so a block reads the
same in the Trend's panel, the Tables, the Stacks tree with ``u`` and a finding.

The rule, innermost frame first:

* a stack with Python frames is named by its innermost *user* frame (a ``.py`` file
  outside torch, the interpreter's machinery and installed libraries,
  :data:`INTERNAL_FILES`), else by its innermost Python frame outside torch (a library's),
  else by its innermost Python frame;
* a stack recorded only in C++ (PyTorch ``stacks='all'`` on the autograd thread, where no
  Python runs) is named by what a person knows: the forward line that created its blocks
  (the snapshot's ``forward_frames``, where every block of the stack agrees on it), else
  the autograd node that ran (``BmmBackward0 (autograd)``), else the autograd engine's
  step (``InputMetadata::reduce_grad (autograd)``), else the ATen op (``aten::bmm``),
  else the innermost frame that is neither hidden by memory_viz's omit lists nor an
  internal of the allocator, the unwinder or the kernels' output allocation
  (:data:`INTERNAL_NAMES`), else ``(C++ internals only)``.  Never the allocator's
  ``c10::cuda::CUDACachingAllocator...``, ``torch::unwind::unwind()`` or ``at::meta::...``.

:func:`stack_lines` gives a stack's frames for a panel, the internals left out unless
asked for.
"""

from __future__ import annotations

import re

import numpy as np
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
#: C++ frames that never name a stack: the allocator's, the kernels' output allocation and
#: shape checks, and the C library's and interpreter's entry points.
INTERNAL_NAMES = ALLOCATOR_NAMES + (
    "at::meta::", "at::detail::", "at::TensorIteratorBase::", "at::TensorBase at::detail",
    "at::(anonymous namespace)::create_out", "__libc", "_Py", "Py_", "PyRun_",
    "run_eval_code_obj", "run_mod", "pthread_", "execute_native_thread_routine",
    "start_thread", "clone3",
)
#: Files of the Python interpreter's own machinery, of torch and of installed libraries
#: (einops, transformers: ``site-packages``): a Python frame in one of them is not the user's.
INTERNAL_FILES = ("/torch/", "\\torch\\", "/torch_npu/", "\\torch_npu\\", "<frozen ",
                  "/runpy.py", "/threading.py", "/contextlib.py", "/functools.py",
                  "/site-packages/", "\\site-packages\\", "/dist-packages/")
#: Of those, torch's own: a stack without user frames is named by a library's frame
#: (``einsum (einops.py:..)``) before torch's (``_call_impl (module.py:..)``).
TORCH_FILES = INTERNAL_FILES[:4]

#: ``torch::autograd::generated::BmmBackward0::apply(`` -> ``BmmBackward0`` (also
#: ``CopySlices``, ``AccumulateGrad``; ``release_variables`` frees what a node saved).
_AUTOGRAD_NODE = (r"torch::autograd::(?:generated::)?([A-Za-z_][A-Za-z0-9_]*)"
                  r"::(?:apply|release_variables)\(")
#: ``torch::autograd::InputMetadata::reduce_grad(`` -> ``InputMetadata::reduce_grad``.
_AUTOGRAD_STEP = r"torch::autograd::((?:[A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)\("
#: ``at::_ops::bmm::call(`` -> ``bmm``.
_ATEN_OP = r"at::_ops::([A-Za-z_][A-Za-z0-9_]*)::call\("
#: One line of a Python traceback, as ``forward_frames`` holds them.
_TRACEBACK_LINE = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<name>[^\n]+)')

CPP_ONLY = "(C++ internals only)"


def _contains_any(column: pl.Expr, parts: tuple[str, ...]) -> pl.Expr:
    expr = pl.lit(False)
    for part in parts:
        expr = expr | column.str.contains(part, literal=True)
    return expr


def _omitted(extra: tuple[str, ...] = ()) -> pl.Expr:
    """True for the frames memory_viz hides (and those naming ``extra``)."""
    name = pl.col("name").fill_null("")
    filename = pl.col("filename").fill_null("")
    return (_contains_any(name, OMIT_NAMES + extra)
            | _contains_any(filename, OMIT_FILES + extra))


def internal_frame() -> pl.Expr:
    """True for a frame that never names a stack: omitted by memory_viz, or one of
    :data:`INTERNAL_NAMES`."""
    return _omitted() | _contains_any(pl.col("name").fill_null(""), INTERNAL_NAMES)


def python_frame() -> pl.Expr:
    return pl.col("filename").fill_null("").str.ends_with(".py")


def user_frame() -> pl.Expr:
    """True for the user's own Python frames (a .py file outside :data:`INTERNAL_FILES`)."""
    return python_frame() & ~_contains_any(pl.col("filename").fill_null(""), INTERNAL_FILES)


def library_frame() -> pl.Expr:
    """True for Python frames outside torch (:data:`TORCH_FILES`)."""
    return python_frame() & ~_contains_any(pl.col("filename").fill_null(""), TORCH_FILES)


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

_SCHEMA = {"stack_id": pl.Int32, "frame_id": pl.Int32, "name": pl.String,
           "filename": pl.String, "line": pl.Int64, "top": pl.String, "kind": pl.String}


def stack_top_frames(trace: MemoryTrace, rule: str = "user") -> pl.DataFrame:
    """One row per stack: ``stack_id``, the frame that names it (``frame_id``, ``name``,
    ``filename``, ``line``), its label ``top`` and ``kind``: how it was named (``user``,
    ``library``, ``python``, ``frame``, and for stacks recorded only in C++ ``forward``,
    ``autograd``, ``op``, ``native``, ``internal``; see the module docstring).

    Under ``rule="user"`` (the default) a stack with Python frames is named by its
    innermost user frame, else its innermost Python frame; ``"outer"`` takes the
    outermost user frame instead (the entry of the user's code: ``train``, ``main``);
    ``"innermost"`` takes the innermost frame that is not internal (often C++ or torch
    code).  Stacks without a Python frame follow the C++ rule under every rule.
    """
    if rule not in TOP_RULES:
        raise ValueError(f"unknown stack top rule {rule!r}: one of {', '.join(TOP_RULES)}")
    if trace.stacks.is_empty():
        return pl.DataFrame(schema=_SCHEMA)
    frames = trace.frames.with_columns(
        label=frame_label(), internal=internal_frame().fill_null(False),
        user=user_frame().fill_null(False), python=python_frame().fill_null(False),
        library=library_frame().fill_null(False),
        node=pl.col("name").fill_null("").str.extract(_AUTOGRAD_NODE, 1),
        step=pl.when(pl.col("name").fill_null("").str.contains("VariableType", literal=True))
        .then(None).otherwise(pl.col("name").fill_null("").str.extract(_AUTOGRAD_STEP, 1)),
        op=pl.col("name").fill_null("").str.extract(_ATEN_OP, 1),
    ).select("frame_id", "label", "internal", "user", "python", "library", "node", "step",
             "op")
    exploded = (
        trace.stacks.select("stack_id", "frame_ids")
        .explode("frame_ids")
        .filter(pl.col("frame_ids").is_not_null())
        .with_columns(pos=pl.int_range(0, pl.len()).over("stack_id"))
        .join(frames, left_on="frame_ids", right_on="frame_id", how="left")
        .sort("stack_id", "pos")
    )
    frame = pl.col("frame_ids")

    def first(expr: pl.Expr) -> pl.Expr:
        return frame.filter(expr.fill_null(False)).first()

    firsts = exploded.group_by("stack_id", maintain_order=True).agg(
        user=first(pl.col("user")), outer=frame.filter(pl.col("user").fill_null(False)).last(),
        python=first(pl.col("python")), library=first(pl.col("library")),
        keep=first(~pl.col("internal")),
        node_frame=first(pl.col("node").is_not_null()),
        node=pl.col("node").drop_nulls().first(),
        step_frame=first(pl.col("step").is_not_null()),
        step=pl.col("step").drop_nulls().first(),
        op_frame=frame.filter(pl.col("op").is_not_null()).last(),
        op=pl.col("op").drop_nulls().last(),
        any=frame.first(),
    )
    python_order = {"user": ("user", "library", "python"),
                    "outer": ("outer", "library", "python"),
                    "innermost": ("keep",)}[rule]
    named = trace.frames.with_columns(label=frame_label()).select(
        pl.col("frame_id").cast(pl.Int32), "name", "filename", "line", "label")
    forward = _forward_lines(trace)
    chosen = firsts.join(forward, on="stack_id", how="left").with_columns(
        has_python=pl.col("python").is_not_null(),
        frame_id=pl.coalesce(*python_order),
    )
    in_python = pl.col("has_python") & pl.col("frame_id").is_not_null()
    chosen = chosen.with_columns(
        kind=pl.when(in_python).then(
            pl.when(pl.col("frame_id") == pl.col("user")).then(pl.lit("user"))
            .when(pl.col("frame_id") == pl.col("outer")).then(pl.lit("user"))
            .when(pl.col("frame_id") == pl.col("library")).then(pl.lit("library"))
            .when(pl.col("frame_id") == pl.col("python")).then(pl.lit("python"))
            .otherwise(pl.lit("frame")))
        .when(pl.col("forward").is_not_null()).then(pl.lit("forward"))
        .when(pl.col("node").is_not_null()).then(pl.lit("autograd"))
        .when(pl.col("step").is_not_null()).then(pl.lit("autograd"))
        .when(pl.col("op").is_not_null()).then(pl.lit("op"))
        .when(pl.col("keep").is_not_null()).then(pl.lit("native"))
        .otherwise(pl.lit("internal")),
        frame_id=pl.when(in_python).then("frame_id")
        .otherwise(pl.coalesce("node_frame", "step_frame", "op_frame", "keep", "any")),
        text=pl.when(in_python).then(None)
        .when(pl.col("forward").is_not_null()).then("forward")
        .when(pl.col("node").is_not_null()).then(
            pl.concat_str([pl.col("node"), pl.lit(" (autograd)")]))
        .when(pl.col("step").is_not_null()).then(
            pl.concat_str([pl.col("step"), pl.lit(" (autograd)")]))
        .when(pl.col("op").is_not_null()).then(pl.concat_str([pl.lit("aten::"), pl.col("op")]))
        .when(pl.col("keep").is_not_null()).then(None)
        .otherwise(pl.lit(CPP_ONLY)),
    ).select(pl.col("stack_id").cast(pl.Int32), pl.col("frame_id").cast(pl.Int32), "kind",
             "text")
    return chosen.join(named, on="frame_id", how="left", maintain_order="left").select(
        "stack_id", "frame_id", "name", "filename", "line",
        top=pl.coalesce("text", "label"), kind="kind").cast(_SCHEMA)


def _forward_lines(trace: MemoryTrace) -> pl.DataFrame:
    """Per stack whose blocks carry ``forward_frames`` and all agree on its innermost
    line: ``forward``, that line as ``name (file:line)``."""
    schema = {"stack_id": pl.Int32, "forward": pl.String}
    blocks = trace.blocks
    if "forward_frames" not in blocks.columns or blocks.is_empty():
        return pl.DataFrame(schema=schema)
    texts = (blocks.select(pl.col("stack_id").cast(pl.Int32), "forward_frames")
             .filter(pl.col("stack_id").is_not_null()
                     & (pl.col("forward_frames").fill_null("") != ""))
             .unique())
    if texts.is_empty():
        return pl.DataFrame(schema=schema)
    lines = [forward_line(text) for text in texts["forward_frames"].to_list()]
    per_stack = texts.with_columns(forward=pl.Series(lines, dtype=pl.String)).group_by(
        "stack_id").agg(pl.col("forward").n_unique().alias("n"),
                        pl.col("forward").first())
    return per_stack.filter((pl.col("n") == 1) & pl.col("forward").is_not_null()).select(
        list(schema)).cast(schema)


def forward_line(text: str | None) -> str | None:
    """The innermost frame of a forward traceback (``forward_frames``), as a stack's
    label reads (``forward (model.py:10)``); None where it holds no traceback line."""
    hits = list(_TRACEBACK_LINE.finditer(text or ""))
    if not hits:
        return None
    hit = hits[-1]
    base = hit["file"].replace("\\", "/").rsplit("/", 1)[-1]
    return f"{hit['name'].strip()} ({base}:{hit['line']})"


def stack_tops(trace: MemoryTrace, rule: str = "user") -> pl.DataFrame:
    """One row per stack: ``stack_id`` and ``top``, the label of the frame that names it
    under ``rule`` (see :func:`stack_top_frames`)."""
    return stack_top_frames(trace, rule).select("stack_id", "top")


def top_names(tops: pl.DataFrame) -> dict[int, str]:
    """:func:`stack_tops` as a dict, ``stack_id -> top`` (a lookup per key, not a query)."""
    return dict(zip(tops["stack_id"].to_list(), tops["top"].to_list(), strict=True))


def stack_lines(trace: MemoryTrace, stack_id: int | None,
                internals: bool = True) -> list[tuple[str, bool]]:
    """The frames of one stack, innermost first, as ``(label, hidden)`` pairs: ``hidden``
    for frames memory_viz omits and the internals that never name a stack
    (:func:`internal_frame`); ``internals=False`` leaves those out."""
    if stack_id is None or trace.stacks.is_empty():
        return []
    row = trace.stacks.filter(pl.col("stack_id") == stack_id)
    if row.is_empty():
        return []
    ids = pl.DataFrame({"frame_id": row["frame_ids"][0]}, schema={"frame_id": pl.Int32})
    frames = ids.with_row_index("pos").join(trace.frames, on="frame_id", how="left").sort("pos")
    labelled = frames.with_columns(label=frame_label(), skip=internal_frame().fill_null(False))
    if not internals:
        labelled = labelled.filter(~pl.col("skip"))
    return list(zip(labelled["label"].to_list(), labelled["skip"].to_list(), strict=True))


def user_frame_mask(frames: pl.DataFrame) -> np.ndarray:
    """Per row of ``frames``: True for the user's own Python frames."""
    return frames.select(user=user_frame().fill_null(False))["user"].to_numpy()


__all__ = ["CPP_ONLY", "INTERNAL_FILES", "forward_line", "frame_label", "internal_frame",
           "stack_lines", "stack_top_frames", "stack_tops", "top_names", "user_frame",
           "user_frame_mask"]
