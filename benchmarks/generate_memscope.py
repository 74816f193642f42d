"""Synthetic msMemScope DBs of any size, shaped like what the tool writes (for benchmarks).

One process on NPU 0, a training loop of ``steps``: ATen ops (``OP_LAUNCH`` start/end pairs)
launching kernels, PTA blocks with their ``MALLOC``, ``ACCESS`` reads and writes and
``FREE``, a few HAL driver segments, ``SYSTEM`` steps and trace start/stop, ``MSTX`` ranges
around steps, and a ``python_trace_<pid>`` table of nested calls.  Every column is filled
as the current writer fills it (../shared/formats/msmemscope.md): hex ``Ptr``, JSON Attr
whose values are all strings with ``allocation_id``, ``total``/``used``, ``owner`` and
``inefficient_type``, quoted Python call stacks on memory rows, C stacks on HAL rows.
Memory rows are written when their block is freed (not in time order), IDs are the
per-process event counter.  Numbers are drawn with numpy, rows inserted in batches.

    python benchmarks/generate_memscope.py OUT.db --rows 10000000
    python benchmarks/generate_memscope.py live.db --rows 200000 --bursts 60 --pause 1

The second writes the rows in 60 commits a second apart, as a running job would: the
two-pane demo of ``memtui --follow live.db``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

PID = 4242
TID = 4243
T0 = 1_764_753_083_996_495_030
MB = 1 << 20
_OP_NS = 20_000  # one ATen op every 20 us

_COLUMNS = ('"ID" INTEGER, "Event" TEXT, "Event Type" TEXT, "Name" TEXT, "Timestamp(ns)" INTEGER, '
            '"Process Id" INTEGER, "Thread Id" INTEGER, "Device Id" TEXT, "Ptr" TEXT, "Attr" TEXT, '
            '"Call Stack(Python)" TEXT, "Call Stack(C)" TEXT')
_TRACE_COLUMNS = ('"FuncInfo" TEXT, "StartTime(ns)" TEXT, "EndTime(ns)" TEXT, "Thread Id" INTEGER, '
                  '"Process Id" INTEGER')

_OPS = ["torch._ops.aten.addmm.default", "torch._ops.aten.mm.default",
        "torch._ops.aten.add.Tensor", "torch._ops.aten.mul.Tensor",
        "torch._ops.aten.native_layer_norm.default", "torch._ops.aten.gelu.default",
        "torch._ops.aten.sum.dim_IntList", "torch._ops.aten.t.default"]
_OWNERS = ["PTA", "PTA@ops@aten", "PTA@model@weight", "PTA@model@gradient",
           "PTA@model@optimizer_state", "PTA@ops@aten@leaks_mem"]
#: The planted leak's owner and Python stack (``leak_bytes``): one never-freed block a step.
LEAK_OWNER = "PTA@leaks_mem"
LEAK_FUNCTION = "cache_for_debug"
_LEAK_STACK = ('"/home/user/train.py(42): cache_for_debug\n/home/user/train.py(90): '
               'train_one_step\n/home/user/train.py(120): <module>\n"')
#: Distinct allocation and free stacks (a training loop repeats its allocation sites).
ALLOC_STACKS, FREE_STACKS = 2000, 40
_INEFFICIENT = ["", "", "", "", "early_allocation", "late_deallocation",
                "early_allocation,temporary_idleness"]


_SITE = "/usr/lib/python3.11/site-packages"
#: The frames every training step's stacks share at their outer end (outermost first).
_OUTER = ["/home/user/train.py(131): <module>", "/home/user/train.py(118): main",
          "/home/user/train.py(90): train_one_step"]
#: One nn.Module level of a forward pass (outermost first): three frames.
_MODULE_LEVEL = [f"{_SITE}/torch/nn/modules/module.py(1773): _wrapped_call_impl",
                 f"{_SITE}/torch/nn/modules/module.py(1784): _call_impl",
                 "/home/user/model.py({line}): forward"]
#: Where an allocation is made, innermost (a torch function called from the model).
_LEAVES = [f"{_SITE}/torch/nn/functional.py(2573): layer_norm",
           f"{_SITE}/torch/nn/functional.py(1693): gelu",
           f"{_SITE}/torch/nn/modules/linear.py(125): forward",
           f"{_SITE}/torch_npu/utils/_module.py(749): npu_format_cast",
           f"{_SITE}/torch/functional.py(407): einsum",
           "/home/user/model.py(211): attention"]
#: Where a block is freed (outermost first, after the script's first two frames): the
#: autograd engine, the optimizer, the end of a step.
_FREE_SITES = [["/home/user/train.py({line}): train_one_step",
                f"{_SITE}/torch/_tensor.py(648): backward",
                f"{_SITE}/torch/autograd/__init__.py(353): backward",
                f"{_SITE}/torch/autograd/graph.py(825): _engine_run_backward"],
               ["/home/user/train.py({line}): train_one_step",
                f"{_SITE}/torch/optim/optimizer.py(485): wrapper",
                f"{_SITE}/torch/optim/adamw.py(227): step"],
               ["/home/user/train.py({line}): train_one_step",
                f"{_SITE}/torch/optim/optimizer.py(973): zero_grad"],
               ["/home/user/train.py({line}): train_one_step"]]


def _quoted(frames_outermost_first: list[str]) -> str:
    """One stack as the writer stores it: innermost frame first, a newline after each
    frame, the whole wrapped in literal double quotes (``cpython.cpp::PythonCallstack``)."""
    return '"' + "".join(f + "\n" for f in reversed(frames_outermost_first)) + '"'


def _python_stacks(rng: np.random.Generator, count: int) -> list[str]:
    """``count`` distinct allocation stacks of 3 to 30 frames, as a training step makes
    them: the script's outer frames, then nn.Module levels (three frames each: most
    allocations are a few levels deep, a few eight), then the torch function that
    allocates; some are the optimizer's own (3 frames).  Told apart by the model's lines."""
    stacks: set[str] = set()
    while len(stacks) < count:
        levels = min(int(rng.geometric(0.5)) - 1, 8)  # nn.Module levels: mostly 0 to 2
        if levels == 0 and rng.random() < 0.3:
            frames = [*_OUTER[:2], f"{_SITE}/torch/optim/adamw.py({rng.integers(200, 600)}): "
                                   "_single_tensor_adamw"]
        else:
            frames = list(_OUTER)
            for _ in range(levels):
                line = int(rng.integers(20, 400))
                frames += [f.format(line=line) for f in _MODULE_LEVEL]
            frames.append(_LEAVES[rng.integers(len(_LEAVES))])
            if levels == 8 and rng.random() < 0.5:  # the deepest: 30 frames
                frames += [f"{_SITE}/torch/_ops.py(723): __call__",
                           f"{_SITE}/torch_npu/utils/_tensor.py(88): wrapper"]
        stacks.add(_quoted(frames))
    return sorted(stacks)


def _free_stacks(count: int) -> list[str]:
    """``count`` distinct stacks of the places blocks are freed (3 to 6 frames)."""
    return [_quoted([*_OUTER[:2], *(f.format(line=60 + i // len(_FREE_SITES)) for f in site)])
            for i in range(count) for site in [_FREE_SITES[i % len(_FREE_SITES)]]]


def _c_stack(rng: np.random.Generator) -> str:
    hook = "/opt/msmemscope/lib64/libleaks_ascend_hal_hook.so"
    lines = [f"{hook}(halMemAlloc+0x118) [0xf79b279760c8]"]
    lines += [f"/usr/local/Ascend/latest/lib64/libruntime.so(+0x{rng.integers(1 << 22):x}) "
              f"[0xf79abf{rng.integers(1 << 24):06x}]" for _ in range(9)]
    return '"' + "\n".join(lines) + '\n"'


def _take(values, index: pl.Expr) -> pl.Expr:
    """``values[index]`` as an expression (a lookup table indexed by a column)."""
    return pl.lit(pl.Series(values)).gather(index)


class _Plan:
    """Numeric columns of every row, in event (time) order, before formatting."""

    def __init__(self, rows: int, rng: np.random.Generator, steps: int = 5,
                 leak_bytes: int = 0) -> None:
        # Row budget: per op 2 launch rows + 1 kernel; per block ~1 + 2 accesses + 1.
        n_ops = max(rows // 7, 1)
        n_blocks = max((rows - 3 * n_ops) // 4, 1)
        self.rng = rng
        self.n_ops = n_ops
        self.span = n_ops * _OP_NS
        # STOP_TRACE is written at span + 2; the blocks still alive after it (CLEAN_UP)
        self.clean_up = self.span + 3
        self.steps = steps
        self._ops(n_ops)
        self._blocks(n_blocks)
        if leak_bytes:
            self._leak(leak_bytes)

    def _ops(self, n_ops: int) -> None:
        start = np.arange(n_ops, dtype=np.int64) * _OP_NS
        self.op_start = start
        self.op_end = start + 12_000
        self.op_name = self.rng.integers(len(_OPS), size=n_ops)

    def _blocks(self, n_blocks: int) -> None:
        rng = self.rng
        t_alloc = np.sort(rng.integers(0, self.span, size=n_blocks))
        life = rng.exponential(self.span / 400, size=n_blocks).astype(np.int64) + 2_000
        t_free = t_alloc + life
        never = rng.random(n_blocks) < 0.02
        self.size = (rng.integers(1, 4096, size=n_blocks) * 512).astype(np.int64)
        self.t_alloc = t_alloc
        self.t_free = np.where(never | (t_free >= self.span), -1, t_free)
        self.n_access = rng.integers(0, 5, size=n_blocks)
        self.addr = (0x12C041400000 + np.arange(n_blocks, dtype=np.int64) * 0x2000)
        self.owner = rng.integers(len(_OWNERS), size=n_blocks)
        self.ineff = rng.integers(len(_INEFFICIENT), size=n_blocks)
        self.stack = rng.integers(ALLOC_STACKS, size=n_blocks)
        self.free_stack = rng.integers(FREE_STACKS, size=n_blocks)

    def step_times(self) -> np.ndarray:
        """When each ``SYSTEM``/``STEP`` row is written (the end of each step)."""
        return np.linspace(0, self.span, self.steps + 1).astype(np.int64)[1:]

    def _leak(self, size: int) -> None:
        """One never-freed block of ``size`` a third into each step, owner ``LEAK_OWNER``,
        stack ``_LEAK_STACK`` (stack number ``ALLOC_STACKS``), allocation ids after the others'."""
        starts = np.concatenate([[0], self.step_times()[:-1]])
        t = starts + (self.span // self.steps) // 3
        n = t.size
        base = 0x13C000000000
        self.size = np.concatenate([self.size, np.full(n, size, np.int64)])
        self.t_alloc = np.concatenate([self.t_alloc, t])
        self.t_free = np.concatenate([self.t_free, np.full(n, -1, np.int64)])
        self.n_access = np.concatenate([self.n_access, np.ones(n, self.n_access.dtype)])
        self.addr = np.concatenate([self.addr, base + np.arange(n, dtype=np.int64) * size])
        self.owner = np.concatenate([self.owner, np.full(n, len(_OWNERS), self.owner.dtype)])
        self.ineff = np.concatenate([self.ineff, np.zeros(n, self.ineff.dtype)])
        self.stack = np.concatenate([self.stack, np.full(n, ALLOC_STACKS, self.stack.dtype)])
        self.free_stack = np.concatenate([self.free_stack, np.zeros(n, self.free_stack.dtype)])


def _memory_rows(plan: _Plan) -> pl.DataFrame:
    """MALLOC / ACCESS / FREE rows of the PTA blocks with the pool's used and total."""
    n = plan.size.size
    block = np.arange(n)
    reps = plan.n_access
    acc_block = np.repeat(block, reps)
    end = np.where(plan.t_free < 0, plan.span, plan.t_free)
    frac = plan.rng.random(acc_block.size)
    acc_t = plan.t_alloc[acc_block] + (frac * (end - plan.t_alloc)[acc_block]).astype(np.int64)
    freed = block[plan.t_free >= 0]
    kind = np.concatenate([np.zeros(n, np.int8), np.full(acc_block.size, 2, np.int8),
                           np.ones(freed.size, np.int8)])
    blocks = np.concatenate([block, acc_block, freed])
    t = np.concatenate([plan.t_alloc, acc_t, plan.t_free[freed]])
    df = pl.DataFrame({"kind": kind, "block": blocks, "t": t})
    delta = pl.when(pl.col("kind") == 0).then(pl.col("size")).when(pl.col("kind") == 1).then(
        -pl.col("size")).otherwise(0)
    df = df.with_columns(size=_take(plan.size, pl.col("block"))).sort("t").with_columns(
        used=delta.cum_sum() + 2 * MB)
    total = ((df["used"].cum_max() // (20 * MB)) + 1) * (20 * MB)
    write_t = pl.Series(np.where(plan.t_free < 0, plan.clean_up, plan.t_free))
    # an ACCESS row names the ATen op running at its time
    op = np.clip(df["t"].to_numpy() // _OP_NS, 0, plan.n_ops - 1)
    return df.with_columns(total=total, write_t=_take(write_t, pl.col("block")),
                           op=pl.Series(plan.op_name[op]))


def _launch_rows(plan: _Plan) -> pl.DataFrame:
    n = plan.n_ops
    t = np.concatenate([plan.op_start, plan.op_end, plan.op_start + 3_000])
    kind = np.concatenate([np.full(n, 3, np.int8), np.full(n, 4, np.int8), np.full(n, 5, np.int8)])
    op = np.concatenate([plan.op_name, plan.op_name, plan.op_name])
    return pl.DataFrame({"kind": kind, "t": t, "op": op}).with_columns(write_t=pl.col("t"))


def _system_rows(plan: _Plan) -> pl.DataFrame:
    step_t = plan.step_times()
    rows = [(6, -1, 0), (6, -2, plan.span + 2)]  # START_TRACE, STOP_TRACE
    rows += [(6, i + 1, int(t)) for i, t in enumerate(step_t)]
    starts = np.concatenate([[0], step_t[:-1]])
    rows += [(7, i, int(s) + 1) for i, s in enumerate(starts)]  # mstx range start
    rows += [(8, i, int(e) - 1) for i, e in enumerate(step_t)]  # mstx range end
    df = pl.DataFrame(rows, schema={"kind": pl.Int8, "op": pl.Int64, "t": pl.Int64}, orient="row")
    return df.with_columns(write_t=pl.col("t"))


def _hal_rows(rng: np.random.Generator, span: int) -> pl.DataFrame:
    """A few 20 MB driver segments: two at the start, some freed and reallocated."""
    n = 24
    t_alloc = np.sort(rng.integers(0, span // 2, size=n))
    t_alloc[:2] = [10, 20]
    t_free = np.where(rng.random(n) < 0.5, t_alloc + span // 4, -1)
    kind = np.concatenate([np.full(n, 9, np.int8), np.full(int((t_free >= 0).sum()), 10, np.int8)])
    block = np.concatenate([np.arange(n), np.nonzero(t_free >= 0)[0]])
    t = np.concatenate([t_alloc, t_free[t_free >= 0]])
    write_t = np.where(t_free < 0, span + 3, t_free)[block]  # alive: after STOP_TRACE
    return pl.DataFrame({"kind": kind, "block": block, "t": t, "write_t": write_t})


def _hex16(values: pl.Series) -> pl.Series:
    """``0x%016llx`` of each value, as the writer prints ``Ptr`` and Attr's ``addr`` (null
    stays null): sixteen nibbles picked from a table, vectorised."""
    numbers = values.fill_null(0).cast(pl.UInt64).to_numpy()
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    nibbles = ((numbers[:, None] >> shifts[None, :]) & np.uint64(15)).astype(np.uint8)
    digits = np.ascontiguousarray(np.frombuffer(b"0123456789abcdef", np.uint8)[nibbles])
    text = pl.Series(digits.view("S16").ravel()).cast(pl.String)
    hexadecimal = ("0x" + text).alias("ptr")
    nulls = values.is_null().arg_true()
    return hexadecimal.scatter(nulls, None) if nulls.len() else hexadecimal


def _format(df: pl.DataFrame, c_stack: str, py_stacks: pl.Series,
            free_stacks: pl.Series) -> pl.DataFrame:
    """Text columns of the dump table from the numeric plan (polars string building)."""
    df = df.with_columns(_hex16(df["addr"]))
    kind = pl.col("kind")
    hexaddr = pl.col("ptr")
    aid = pl.col("block").cast(pl.String)
    base = (pl.lit('{"allocation_id":"') + aid + pl.lit('","addr":"') + hexaddr
            + pl.lit('","size":"') + pl.col("size").cast(pl.String))
    pool = pl.lit('","total":"') + pl.col("total").cast(pl.String) + pl.lit('","used":"') + \
        pl.col("used").cast(pl.String)
    owner = pl.lit('","owner":"') + _take([*_OWNERS, LEAK_OWNER], pl.col("owner"))
    ineff = _take(_INEFFICIENT, pl.col("ineff"))
    ineff_part = pl.when(ineff == "").then(pl.lit("")).otherwise(
        pl.lit('","inefficient_type":"') + ineff)
    mstx = pl.lit('"step ') + pl.col("op").cast(pl.String) + pl.lit('"')
    op = _take(_OPS, pl.col("op").clip(0, len(_OPS) - 1))
    event = (pl.when(kind == 0).then(pl.lit("MALLOC")).when(kind == 1).then(pl.lit("FREE"))
             .when(kind == 2).then(pl.lit("ACCESS"))
             .when(kind.is_in([3, 4])).then(pl.lit("OP_LAUNCH"))
             .when(kind == 5).then(pl.lit("KERNEL_LAUNCH")).when(kind == 6).then(pl.lit("SYSTEM"))
             .when(kind.is_in([7, 8])).then(pl.lit("MSTX")).when(kind == 9).then(pl.lit("MALLOC"))
             .otherwise(pl.lit("FREE")))
    etype = (pl.when(kind.is_in([0, 1])).then(pl.lit("PTA"))
             .when(kind == 2).then(pl.when(pl.col("t") % 2 == 0).then(pl.lit("READ"))
                                   .otherwise(pl.lit("WRITE")))
             .when(kind == 3).then(pl.lit("ATEN_START")).when(kind == 4).then(pl.lit("ATEN_END"))
             .when(kind == 5).then(pl.lit("KERNEL_LAUNCH"))
             .when(kind == 6).then(pl.when(pl.col("op") == -1).then(pl.lit("START_TRACE"))
                                   .when(pl.col("op") == -2).then(pl.lit("STOP_TRACE"))
                                   .otherwise(pl.lit("STEP")))
             .when(kind == 7).then(pl.lit("Range_start")).when(kind == 8).then(pl.lit("Range_end"))
             .otherwise(pl.lit("HAL")))
    name = (pl.when(kind == 2).then(op).when(kind.is_in([3, 4])).then(op)
            .when(kind == 5).then(pl.lit("aclnnKernel_") + pl.col("op").cast(pl.String))
            .when((kind == 6) & (pl.col("op") > 0)).then(pl.col("op").cast(pl.String))
            .when(kind.is_in([7, 8])).then(mstx).otherwise(pl.lit("N/A")))
    attr = (pl.when(kind == 0).then(base + pool + owner + ineff_part + pl.lit('"}'))
            .when(kind == 1).then(base + pool + pl.lit('"}'))
            .when(kind == 2).then(base + pl.lit('","type":"PTA","dtype":"torch.float16",'
                                                '"shape":"[2, 3]"}'))
            .when(kind == 5).then(pl.lit('{"streamId":"2","taskId":"')
                                  + pl.col("op").cast(pl.String) + pl.lit('"}'))
            .when(kind == 9).then(base + pl.lit('","page_type":"huge","owner":"CANN@RUNTIME"}'))
            .when(kind == 10).then(base + pl.lit('"}')).otherwise(pl.lit("{}")))
    is_mem = kind.is_in([0, 1, 2, 9, 10])
    device = pl.when(kind == 6).then(pl.lit("N/A")).otherwise(pl.lit("0"))
    py_stack = (pl.when(kind == 0).then(_take(py_stacks, pl.col("stack")))
                .when(kind == 1).then(_take(free_stacks, pl.col("free_stack"))).otherwise(
                    pl.lit("")))
    return df.select(
        pl.col("id"), event.alias("Event"), etype.alias("Event Type"), name.alias("Name"),
        (pl.col("t") + T0).alias("Timestamp(ns)"), pl.lit(PID).alias("Process Id"),
        pl.lit(TID).alias("Thread Id"), device.alias("Device Id"),
        pl.when(is_mem).then(hexaddr).otherwise(pl.lit("N/A")).alias("Ptr"), attr.alias("Attr"),
        py_stack.alias("Call Stack(Python)"),
        pl.when(kind.is_in([9, 10])).then(pl.lit(c_stack)).otherwise(pl.lit(""))
        .alias("Call Stack(C)"),
    )


def _all_rows(rows: int, seed: int, steps: int | None = None,
              leak_bytes: int = 0) -> tuple[pl.DataFrame, _Plan]:
    """Every row's numbers in write order, with ``id`` = the event counter (time order)."""
    rng = np.random.default_rng(seed)
    plan = _Plan(rows, rng, steps or max(rows // 200_000, 5), leak_bytes)
    mem = _memory_rows(plan).with_columns(
        addr=_take(plan.addr, pl.col("block")), owner=_take(plan.owner, pl.col("block")),
        ineff=_take(plan.ineff, pl.col("block")), stack=_take(plan.stack, pl.col("block")),
        free_stack=_take(plan.free_stack, pl.col("block")))
    hal = _hal_rows(rng, plan.span).with_columns(
        block=pl.col("block") + plan.size.size,  # allocation ids after the PTA blocks'
        addr=pl.col("block").cast(pl.Int64) * (32 * MB) + 0x12C000000000,
        size=pl.lit(20 * MB, pl.Int64))
    parts = [mem, _launch_rows(plan), _system_rows(plan), hal]
    df = pl.concat(parts, how="diagonal_relaxed").head(rows)
    df = df.sort("t", "kind").with_columns(id=pl.int_range(1, pl.len() + 1, dtype=pl.Int64))
    return df.sort("write_t", "t"), plan


def _python_trace(rows: int, rng: np.random.Generator, span: int) -> pl.DataFrame:
    """Nested calls: top-level calls each with a fixed tree of 14 callees, post-order."""
    # The tree as (depth-first offsets): start, end relative to the top call of 1000 ns units.
    template = [(0, 100)]
    for a in range(2):
        template.append((a * 50 + 1, a * 50 + 49))
        for b in range(2):
            template.append((a * 50 + b * 24 + 2, a * 50 + b * 24 + 24))
            for c in range(2):
                template.append((a * 50 + b * 24 + c * 11 + 3, a * 50 + b * 24 + c * 11 + 13))
    offsets = np.array(template, dtype=np.int64) * 1000
    n_top = max(rows // len(template), 1)
    tops = np.linspace(0, span, n_top, endpoint=False).astype(np.int64) + T0
    start = (tops[:, None] + offsets[None, :, 0]).ravel()
    end = (tops[:, None] + offsets[None, :, 1]).ravel()
    funcs = [f"/home/user/model.py({i * 7 + 1}): layer_{i}" for i in range(len(template))]
    func = np.tile(np.arange(len(template)), n_top)
    df = pl.DataFrame({"FuncInfo": pl.Series(funcs).gather(func), "start": start, "end": end})
    df = df.sort("end").with_columns(
        pl.col("start").cast(pl.String).alias("StartTime(ns)"),
        pl.col("end").cast(pl.String).alias("EndTime(ns)"),
        pl.lit(TID).alias("Thread Id"), pl.lit(PID).alias("Process Id"),
    ).drop("start", "end")
    edge = pl.DataFrame({"FuncInfo": ["start: /home/user/train.py(10): main", "stop: <module>"],
                         "StartTime(ns)": ["N/A", str(T0 + span)],
                         "EndTime(ns)": [str(T0 + span), "N/A"],
                         "Thread Id": [TID, TID], "Process Id": [PID, PID]})
    return pl.concat([df, edge], how="vertical_relaxed")


def generate_db(path: Path, rows: int, seed: int = 0, trace_rows: int | None = None,
                batch: int = 500_000, bursts: int = 1, pause: float = 0.0,
                say=None, steps: int | None = None, leak_bytes: int = 0) -> Path:
    """Write a ``memscope_dump`` table of ``rows`` rows (and a python trace table) to ``path``.

    With ``bursts`` > 1 the rows go in that many commits ``pause`` seconds apart, in the
    order msMemScope writes them, the connection held open (a live WAL writer, as while
    a job runs): ``memtui --follow`` on the file shows it grow.  ``say(text)`` reports
    each burst.  ``steps``: how many ``SYSTEM``/``STEP`` rows (default: one per 200,000
    rows, at least 5); ``leak_bytes``: plant a leak of one never-freed block of that size
    per step (owner ``LEAK_OWNER``, innermost frame ``LEAK_FUNCTION``).
    """
    path = Path(path)
    for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if stale.exists():
            stale.unlink()
    df, plan = _all_rows(rows, seed, steps, leak_bytes)
    rng = np.random.default_rng(seed + 1)
    py_stacks = pl.Series([*_python_stacks(rng, ALLOC_STACKS), _LEAK_STACK])
    free_stacks = pl.Series(_free_stacks(FREE_STACKS))
    c_stack = _c_stack(rng)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"CREATE TABLE memscope_dump ({_COLUMNS})")
    con.execute(f"CREATE TABLE python_trace_{PID} ({_TRACE_COLUMNS})")
    con.commit()
    size = -(-df.height // max(bursts, 1)) if bursts > 1 else batch
    for index, offset in enumerate(range(0, df.height, size)):
        if bursts > 1 and index:
            time.sleep(pause)
        for sub in range(offset, min(offset + size, df.height), batch):
            text = _format(df.slice(sub, min(batch, offset + size - sub)), c_stack, py_stacks,
                           free_stacks)
            con.executemany("INSERT INTO memscope_dump VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                            text.iter_rows())
        con.commit()
        if say is not None and bursts > 1:
            say(f"burst {index + 1}/{bursts}: {min(offset + size, df.height):,} rows")
    trace = _python_trace(trace_rows if trace_rows is not None else max(rows // 30, 15),
                          rng, plan.span)
    con.executemany(f"INSERT INTO python_trace_{PID} VALUES (?,?,?,?,?)", trace.iter_rows())
    con.commit()
    con.execute("PRAGMA wal_checkpoint(FULL)")
    con.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=None,
                        help="SYSTEM/STEP rows (default: one per 200,000 rows, at least 5)")
    parser.add_argument("--leak", type=int, default=0, metavar="BYTES",
                        help=f"plant a never-freed block of BYTES per step ({LEAK_OWNER})")
    parser.add_argument("--bursts", type=int, default=1,
                        help="write the rows in this many commits (for memtui --follow)")
    parser.add_argument("--pause", type=float, default=1.0,
                        help="seconds between bursts (default: 1)")
    args = parser.parse_args()
    start = time.perf_counter()
    generate_db(args.out, args.rows, args.seed, bursts=args.bursts, pause=args.pause,
                say=lambda text: print(text, file=sys.stderr, flush=True), steps=args.steps,
                leak_bytes=args.leak)
    size = args.out.stat().st_size / 1e6
    print(f"{args.out}: {args.rows} rows, {size:.0f} MB in {time.perf_counter() - start:.1f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
