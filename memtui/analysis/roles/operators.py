"""The phase kind of each allocation from the operator that made it (no call stacks).

An Ascend profiler folder's blocks are ``operator_memory`` rows, named by their operator
(``aten::mm``, ``npu::npu_rms_norm_backward``, ``cann::trans_TransData_24``); an
msMemScope capture records operator launches (markers of kind ``op``: ``torch._ops.aten.
addmm.default``), and an allocation made while one ran is that operator's.  The name
says the phase, as PyTorch and CANN name them:

* **backward**: ``*backward*``, ``*Backprop*`` and ``*_grad`` / ``*Grad`` (autograd's
  ``threshold_backward``, ``convolution_backward``, torch_npu's
  ``npu_fusion_attention_grad``, GE's ``ReluGrad``, ``Conv2DBackpropInput``);
* **optimizer**: the optimizers' fused and multi-tensor kernels (``_foreach_*``,
  ``_fused_adam(w)``, ``_fused_sgd``, GE's ``Apply*`` updates);
* **neutral**: collective communication (``hcom_*``, ``c10d::``, ``nccl``, HCCL), which
  runs in either pass;
* **forward**: any other operator.

Backward passes also run operators without a backward name (the matrix products of
``AddmmBackward``; under activation checkpointing, a layer's forward recomputed): a run of
forward operators between two backward ones is taken for part of that backward where it
is short beside the whole forward, under :data:`INSIDE_BACKWARD_SHARE` of the longest run
of forward operators (a whole forward: the next micro-batch's, under gradient
accumulation, is as long as the first and stays a forward).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.analysis.roles.stack_rules import BACKWARD, FORWARD, NEUTRAL, OPTIMIZER
from memtui.model import MemoryTrace

_BACKWARD = r"(?i)backward|backprop|_grad(_|\b|$)|[a-z]grad$|grad\d*$"
_OPTIMIZER = (r"(?i)_foreach_|fused_adam|fused_sgd|fused_lamb|_amp_foreach|"
              r"(^|[:_])apply(adam|adamw|momentum|gradientdescent|rmsprop|adagrad|lamb|ftrl)")
_COMMUNICATION = r"(?i)hcom_|c10d::|nccl|hccl|allreduce|all_reduce|allgather|reducescatter"
INSIDE_BACKWARD_SHARE = 0.5
PROFILER = "ascend_profiler"


def name_kinds(names: pl.Series) -> np.ndarray:
    """The kind each operator name says (NEUTRAL for none); the rules run once per distinct
    name (a capture repeats a few hundred operators over millions of allocations)."""
    names = names.cast(pl.String).rename("n")
    kind = (pl.when(pl.col("n").is_null() | (pl.col("n") == "")).then(pl.lit(NEUTRAL))
            .when(pl.col("n").str.contains(_COMMUNICATION)).then(pl.lit(NEUTRAL))
            .when(pl.col("n").str.contains(_OPTIMIZER)).then(pl.lit(OPTIMIZER))
            .when(pl.col("n").str.contains(_BACKWARD)).then(pl.lit(BACKWARD))
            .otherwise(pl.lit(FORWARD)).cast(pl.Int64).alias("kind"))
    table = names.drop_nulls().unique().to_frame().with_columns(kind)
    by_name = dict(zip(table["n"].to_list(), table["kind"].to_list(), strict=True))
    return names.replace_strict(by_name, default=NEUTRAL, return_dtype=pl.Int64) \
        .fill_null(NEUTRAL).to_numpy(writable=True)


def operator_names(trace: MemoryTrace, device: str, blocks: pl.DataFrame) -> pl.Series | None:
    """Each block's operator: its owner on a profiler capture, else the operator launch
    (msMemScope ``op`` marker) running when it was allocated; None where the capture has
    neither."""
    if trace.meta.source == PROFILER:
        return blocks["owner"] if "owner" in blocks.columns else None
    markers = trace.markers
    if markers.is_empty() or "kind" not in markers.columns:
        return None
    ops = markers.filter((pl.col("kind") == "op") & pl.col("t").is_not_null()
                         & (pl.col("device").is_null() | (pl.col("device") == device)))
    if ops.is_empty():
        return None
    ops = ops.select(pl.col("t").alias("t_op"), t_end=pl.col("t_end").fill_null(pl.col("t")),
                     op=pl.col("name")).sort("t_op")
    allocs = blocks.select(pl.int_range(0, pl.len()).alias("row"),
                           pl.col("t_alloc").fill_null(np.iinfo(np.int64).min)).sort("t_alloc")
    found = allocs.join_asof(ops, left_on="t_alloc", right_on="t_op", strategy="backward")
    found = found.with_columns(op=pl.when(pl.col("t_alloc") <= pl.col("t_end"))
                               .then(pl.col("op")).otherwise(None)).sort("row")
    return found["op"]


def operator_kinds(trace: MemoryTrace, device: str, blocks: pl.DataFrame) -> np.ndarray | None:
    """Per block: the kind its operator's name says, smoothed inside backward passes (see
    the module docstring); None where the capture names no operators."""
    names = operator_names(trace, device, blocks)
    if names is None or names.null_count() == names.len():
        return None
    kinds = name_kinds(names)
    order = np.argsort(blocks["t_alloc"].fill_null(np.iinfo(np.int64).min).to_numpy(),
                       kind="stable")
    kinds[order] = _inside_backward(kinds[order])
    return kinds


def _inside_backward(kinds: np.ndarray) -> np.ndarray:
    """Short forward runs between two backward runs become backward (module docstring)."""
    anchored = np.flatnonzero(kinds != NEUTRAL)
    if anchored.size < 3:
        return kinds
    seq = kinds[anchored]
    starts = np.flatnonzero(np.diff(seq, prepend=-1) != 0)
    lengths = np.diff(np.append(starts, seq.size))
    run_kind = seq[starts]
    before = np.roll(run_kind, 1)
    after = np.roll(run_kind, -1)
    inner = np.zeros(run_kind.size, dtype=bool)
    inner[1:-1] = True
    forward = run_kind == FORWARD
    whole = int(lengths[forward].max()) if forward.any() else 0
    flip = inner & forward & (before == BACKWARD) & (after == BACKWARD) \
        & (lengths < INSIDE_BACKWARD_SHARE * whole)
    flipped = np.repeat(flip, lengths)
    out = kinds.copy()
    out[anchored[flipped]] = BACKWARD
    return out


__all__ = ["INSIDE_BACKWARD_SHARE", "name_kinds", "operator_kinds", "operator_names"]
