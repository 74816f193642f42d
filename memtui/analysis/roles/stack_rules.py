"""What a call stack says about the phase that allocated (or freed) a block.

Each distinct stack gets one *kind*, read from its frames (innermost first) with these
rules, each from how PyTorch runs a training loop:

========== ===================================================================================
kind       evidence
========== ===================================================================================
backward   any frame of autograd's engine or of a backward function: a Python frame named
           ``backward`` (``Tensor.backward``, ``torch.autograd.backward``, a custom
           Function's or AOTAutograd's compiled ``backward``), one of torch's own named
           ``*_backward*`` (``_engine_run_backward``, ``_backward_impl``; never the
           user's ``forward_backward``, which runs both), ``torch/autograd/``
           (``_make_grads``, ``grad``), activation
           checkpointing's recomputation in ``torch/utils/checkpoint.py`` (``recompute``,
           ``unpack``), and C++ frames of the engine (``torch::autograd::Engine``,
           ``autograd::Node::operator()``, ``...Backward0::apply``, ``AccumulateGrad``,
           ``at::_ops::*_backward``).  A backward frame anywhere wins: recomputation in
           backward runs module forwards.
forward    a module call (``Module._call_impl`` / ``_wrapped_call_impl`` / ``__call__`` in
           ``torch/nn/modules/module.py``) or a Python frame named ``forward``
optimizer  a frame of an optimizer: ``torch/optim/``, ``torch/distributed/optim/``, an
           ``optim``/``optimizers``/``optimization`` package or module (bitsandbytes, apex,
           transformers, torchao), DeepSpeed's fused optimizer ops
module     module construction or loading: ``Module._apply`` / ``to`` / ``cuda`` / ``half``
           / ``to_empty`` / ``load_state_dict`` / ``register_parameter`` / ``register_buffer``,
           ``torch/nn/parameter.py``, ``torch/nn/init.py``, a module's ``__init__`` or
           ``reset_parameters``, ``torch/serialization.py`` (``torch.load``), safetensors,
           ``from_pretrained`` / ``load_checkpoint`` / ``set_module_tensor_to_device``
data       data loading: ``torch/utils/data/``, a ``collate`` or ``pin_memory`` function
step       (weak) the user's own function named ``step``: the optimizer API's method, for a
           hand-written optimizer (trusted only where the capture has backward passes)
init       (weak) the user's own ``__init__``: a module of the user's own making creates its
           parameters there (``nn.Parameter(torch.empty(..., device=...))``), as may a
           hand-written optimizer its state (told apart by pairing, :mod:`.lifetimes`)
neutral    Python frames and none of the above (the user's own code)
no stack   no frames at all: on a capture that records Python stacks, the autograd
           engine's thread (which runs no Python) made it
========== ===================================================================================

Of forward, optimizer, module and data the innermost wins (a forward run inside an
optimizer's ``closure`` is forward; an optimizer step is never inside a module call); the
weak kinds count only for a stack with none of those.  A frame named ``X.forward``,
``X.step`` or ``X.__init__`` (a qualified name, as some recorders write it) counts as
``forward``, ``step`` or ``__init__``.
Two flags ride along: ``accumulate_grad`` (autograd's ``AccumulateGrad``: a gradient)
and ``zero_grad`` (a frame named ``zero_grad``: on a free's stack, a ``.grad`` set to
None).  Everything is one pass of polars over the frames and the stacks.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.model import MemoryTrace

NEUTRAL, NO_STACK, FORWARD, BACKWARD, OPTIMIZER, MODULE, DATA, STEP, INIT = range(9)
KIND_NAMES = ("neutral", "no stack", "forward", "backward", "optimizer", "module", "data",
              "step", "init")
#: Kinds read from one frame: the innermost strong one wins, a weak one only without any.
STRONG = (FORWARD, OPTIMIZER, MODULE, DATA)
WEAK = (STEP, INIT)

_BACKWARD_NAME = r"(^|[_:.\s])backward([_:.(\s]|$)"
_BACKWARD_CPP = ("autograd::Engine", "autograd::Node::operator()", "AccumulateGrad",
                 "PythonEngine::thread_init", "Backward0::apply", "Backward1::apply",
                 "CopySlices::apply")
_CHECKPOINT_RECOMPUTE = r"(?i)recompute|unpack"
_MODULE_FILE = "/torch/nn/modules/module.py"
_CALLS = ("_call_impl", "_wrapped_call_impl", "__call__")
_CONSTRUCTION = ("_apply", "to", "cuda", "npu", "xpu", "half", "float", "double", "bfloat16",
                 "type", "to_empty", "load_state_dict", "_load_from_state_dict",
                 "register_parameter", "register_buffer", "share_memory")
_LOADING_NAMES = ("from_pretrained", "_load_pretrained_model", "_load_state_dict_into_model",
                  "load_checkpoint", "set_module_tensor_to_device", "reset_parameters",
                  "load_state_dict")
_OPTIMIZER_FILE = (r"(?i)(^|/)(optim|optimizers?|optimization|optimizer)(/|\.py$|_)"
                   r"|/ops/(adam|lamb|lion|adagrad)/|_optim(izer)?s?[/.]")
_DATA_FILE = "/torch/utils/data/"
_DATA_NAME = r"(?i)collate|pin_memory"
_INTERNAL_FILES = ("/torch/", "/torch_npu/", "<frozen ", "/site-packages/", "/dist-packages/")


def _path() -> pl.Expr:
    return pl.col("filename").fill_null("").str.replace_all("\\", "/", literal=True)


def _any(column: pl.Expr, parts: tuple[str, ...]) -> pl.Expr:
    expr = pl.lit(False)
    for part in parts:
        expr = expr | column.str.contains(part, literal=True)
    return expr


def frame_kinds(frames: pl.DataFrame) -> pl.DataFrame:
    """Per frame: ``frame_id``, ``backward`` (bool), ``kind`` (the strong category a frame
    gives when it is the innermost with one: forward, optimizer, module, data; null
    else), ``weak`` (step, init; null else), ``accumulate_grad`` and ``zero_grad``
    (bools)."""
    name = pl.col("name").fill_null("")
    base = name.str.split(".").list.last()  # "MLP.forward" -> "forward"
    path = _path()
    python = path.str.ends_with(".py")
    internal = _any(path, _INTERNAL_FILES)
    backward = (
        (python & (name == "backward"))
        | (python & internal & name.str.contains(_BACKWARD_NAME)
           & ~name.str.contains("forward", literal=True))
        | path.str.contains("/torch/autograd/", literal=True)
        & name.is_in(["backward", "grad", "_make_grads", "_engine_run_backward",
                      "run_backward"])
        | path.str.contains("/torch/utils/checkpoint.py", literal=True)
        & name.str.contains(_CHECKPOINT_RECOMPUTE)
        | (~python & (_any(name, _BACKWARD_CPP) | name.str.contains(r"_backward(::|\()")))
    )
    in_module_file = path.str.ends_with(_MODULE_FILE)
    forward = (in_module_file & name.is_in(_CALLS)) | (python & (base == "forward"))
    module = (
        (in_module_file & name.is_in(_CONSTRUCTION))
        | path.str.ends_with("/torch/nn/parameter.py") | path.str.ends_with("/torch/nn/init.py")
        | (path.str.contains("/torch/nn/modules/", literal=True) & (name == "__init__"))
        | path.str.ends_with("/torch/serialization.py")
        | path.str.contains("/safetensors/", literal=True)
        | (python & name.is_in(_LOADING_NAMES))
    )
    optimizer = python & path.str.contains(_OPTIMIZER_FILE)
    data = path.str.contains(_DATA_FILE, literal=True) | (python & name.str.contains(_DATA_NAME))
    step = python & ~internal & (base == "step")
    init = python & ~internal & (base == "__init__")
    kind = (pl.when(forward).then(pl.lit(FORWARD))
            .when(optimizer).then(pl.lit(OPTIMIZER))
            .when(module).then(pl.lit(MODULE))
            .when(data).then(pl.lit(DATA))
            .otherwise(None))
    weak = pl.when(step).then(pl.lit(STEP)).when(init).then(pl.lit(INIT)).otherwise(None)
    return frames.select(
        pl.col("frame_id").cast(pl.Int32), backward=backward.fill_null(False),
        kind=kind.cast(pl.Int8), weak=weak.cast(pl.Int8),
        accumulate_grad=name.str.contains("AccumulateGrad", literal=True),
        zero_grad=name.str.contains("zero_grad", literal=True),
    )


def stack_kinds(trace: MemoryTrace) -> pl.DataFrame:
    """Per stack: ``stack_id``, ``kind`` (see the module docstring: never NO_STACK, which
    is a block's lack of a stack), ``accumulate_grad`` and ``zero_grad``."""
    schema = {"stack_id": pl.Int32, "kind": pl.Int8, "accumulate_grad": pl.Boolean,
              "zero_grad": pl.Boolean}
    if trace.stacks.is_empty() or trace.frames.is_empty():
        return pl.DataFrame(schema=schema)
    kinds = frame_kinds(trace.frames)
    exploded = (trace.stacks.select(pl.col("stack_id").cast(pl.Int32), "frame_ids")
                .explode("frame_ids")
                .with_columns(pos=pl.int_range(0, pl.len()).over("stack_id"))
                .join(kinds, left_on="frame_ids", right_on="frame_id", how="left"))
    per_stack = exploded.sort("stack_id", "pos").group_by("stack_id").agg(
        backward=pl.col("backward").fill_null(False).any(),
        inner=pl.col("kind").drop_nulls().first(),
        weak=pl.col("weak").drop_nulls().first(),
        accumulate_grad=pl.col("accumulate_grad").fill_null(False).any(),
        zero_grad=pl.col("zero_grad").fill_null(False).any(),
        frames=pl.col("frame_ids").is_not_null().sum(),
    )
    return per_stack.select(
        "stack_id",
        kind=pl.when(pl.col("backward")).then(pl.lit(BACKWARD))
        .when(pl.col("inner").is_not_null()).then(pl.col("inner"))
        .when(pl.col("weak").is_not_null()).then(pl.col("weak"))
        .when(pl.col("frames") == 0).then(pl.lit(NO_STACK))
        .otherwise(pl.lit(NEUTRAL)).cast(pl.Int8),
        accumulate_grad="accumulate_grad", zero_grad="zero_grad",
    ).cast(schema)


def kinds_of(stack_ids: np.ndarray, table: pl.DataFrame, column: str = "kind",
             missing: int = NO_STACK) -> np.ndarray:
    """``column`` of :func:`stack_kinds` for each stack id (-1: none), ``missing`` where
    a block has no stack: int8 (kinds, flags and role codes are a few small numbers, and
    this is a block's worth of them)."""
    out = np.full(stack_ids.size, missing, dtype=np.int8)
    if table.is_empty() or stack_ids.size == 0:
        return out
    ids = table["stack_id"].to_numpy().astype(np.int64)
    values = table[column].cast(pl.Int64).to_numpy().astype(np.int8)
    lookup = np.full(int(max(ids.max(), stack_ids.max(initial=0))) + 2, missing,
                     dtype=np.int8)
    lookup[ids] = values
    known = stack_ids >= 0
    out[known] = lookup[stack_ids[known]]
    return out


__all__ = ["BACKWARD", "DATA", "FORWARD", "INIT", "KIND_NAMES", "MODULE", "NEUTRAL",
           "NO_STACK", "OPTIMIZER", "STEP", "STRONG", "WEAK", "frame_kinds", "kinds_of",
           "stack_kinds"]
