"""The one rule that names a call stack (analysis.callstack, issue 23 point 3): stacks
recorded only in C++ (the autograd thread) are named by the forward line or the autograd
node, never by the allocator's or the unwinder's frames; the same name in the Stacks tree
with ``u``, in the findings and in a block's panel.  Hand traces whose answers are read off
the frames, and the real t26 ctx512 snapshot at its peak."""

from __future__ import annotations

import polars as pl
import pytest

from memtui.analysis.findings.frames import evidence_stack, stack_frames
from memtui.analysis.stacks.callstack import CPP_ONLY, forward_line, stack_lines, stack_top_frames
from memtui.analysis.stacks.stack_tree import StackTree, block_rows_for, format_stack
from memtui.analysis.timeline.live import device_index
from memtui.model import DeviceInfo, MemoryTrace, TraceMeta, conform

UNWIND = ("torch::unwind::unwind()", "??")
GATHER = ("torch::CapturedTraceback::gather(bool, bool, bool)", "??")
MALLOC = ("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc("
          "signed char, unsigned long, CUstream_st*)", "CUDACachingAllocator.cpp")
META = ("at::meta::structured_bmm::meta(at::Tensor const&, at::Tensor const&)", "")
BMM_OP = ("at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)", "")
BMM_NODE = ("torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor, "
            "std::allocator<at::Tensor> >&&)", "")
NODE_CALL = ("torch::autograd::Node::operator()(std::vector<at::Tensor, "
             "std::allocator<at::Tensor> >&&)", "")
ENGINE = ("torch::autograd::Engine::evaluate_function(std::shared_ptr<"
          "torch::autograd::GraphTask>&)", "")
REDUCE = ("torch::autograd::InputMetadata::reduce_grad(at::Tensor&) const", "")
LIBC = ("__libc_init_first", "??")
FORWARD = ("forward", "/work/model.py")
CALL_IMPL = ("_call_impl", "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py")
EINSUM = ("einsum", "/venv/lib/python3.11/site-packages/einops/einops.py")

#: innermost first, as PyTorch records them
STACKS = {
    0: [UNWIND, GATHER, MALLOC, META, BMM_OP, BMM_NODE, NODE_CALL, ENGINE, LIBC],
    1: [UNWIND, GATHER, MALLOC, REDUCE, ENGINE, LIBC],
    2: [UNWIND, GATHER, MALLOC, META, BMM_OP, LIBC],
    3: [UNWIND, GATHER, MALLOC, LIBC],
    4: [UNWIND, MALLOC, CALL_IMPL, FORWARD, CALL_IMPL],
    5: [UNWIND, MALLOC, EINSUM, CALL_IMPL],
    6: [UNWIND, GATHER, MALLOC, META, BMM_OP, BMM_NODE, NODE_CALL, ENGINE, LIBC][::1] + [UNWIND],
}
TRACEBACK = ('  File "/work/train.py", line 9, in main\n    loss = model(x)\n'
             '  File "/work/model.py", line 12, in forward\n    return a @ b\n')


def cpp_trace(forward_of_stack_6: tuple[str | None, ...] = (TRACEBACK,)) -> MemoryTrace:
    """One block per stack (1 KiB each, alive to the end); stack 6 is stack 0 once more,
    its blocks carrying ``forward_frames`` as given."""
    keys = sorted({frame for stack in STACKS.values() for frame in stack})
    ids = {key: i for i, key in enumerate(keys)}
    frames = pl.DataFrame({"frame_id": list(range(len(keys))),
                           "name": [k[0] for k in keys], "filename": [k[1] for k in keys],
                           "line": [12 if k == FORWARD else 0 for k in keys]})
    stacks = pl.DataFrame({"stack_id": list(STACKS),
                           "frame_ids": [[ids[f] for f in s] for s in STACKS.values()]},
                          schema={"stack_id": pl.Int32, "frame_ids": pl.List(pl.Int32)})
    stack_of = [*STACKS] + [6] * (len(forward_of_stack_6) - 1)
    forward = [None] * len(STACKS) + list(forward_of_stack_6[1:])
    forward[6] = forward_of_stack_6[0]
    n = len(stack_of)
    blocks = pl.DataFrame({
        "block_id": list(range(n)), "device": ["cuda:0"] * n,
        "addr": [0x1000 * (i + 1) for i in range(n)], "size": [1024] * n,
        "requested_size": [1024] * n, "t_alloc": [10 * (i + 1) for i in range(n)],
        "t_free": [None] * n, "stack_id": stack_of, "ghost": [False] * n,
        "seq_alloc": list(range(n)), "pool": ["CUDA"] * n, "stream": [0] * n,
    }).with_columns(pl.Series("forward_frames", forward, dtype=pl.String))
    events = pl.DataFrame({
        "t": [10 * (i + 1) for i in range(n)], "seq": list(range(n)), "device": ["cuda:0"] * n,
        "action": ["alloc"] * n, "addr": [0x1000 * (i + 1) for i in range(n)],
        "size": [1024] * n, "block_id": list(range(n)), "stack_id": stack_of,
        "allocated": [1024 * (i + 1) for i in range(n)], "pool": ["CUDA"] * n,
        "stream": [0] * n,
    })
    meta = TraceMeta(source="test", path="/toy/cpp.pickle",
                     devices=[DeviceInfo("cuda:0", kind="cuda")])
    return MemoryTrace(meta=meta, events=conform(events, "events"),
                       blocks=conform(blocks, "blocks").with_columns(blocks["forward_frames"]),
                       frames=conform(frames, "frames"), stacks=conform(stacks, "stacks"))


def _tops(trace: MemoryTrace, rule: str = "user") -> dict[int, tuple[str, str]]:
    tops = stack_top_frames(trace, rule)
    return {r["stack_id"]: (r["top"], r["kind"]) for r in tops.iter_rows(named=True)}


def test_cpp_only_stacks_are_named_by_what_a_person_knows():
    tops = _tops(cpp_trace())
    assert tops[0] == ("BmmBackward0 (autograd)", "autograd")
    assert tops[1] == ("InputMetadata::reduce_grad (autograd)", "autograd")
    assert tops[2] == ("aten::bmm", "op")
    assert tops[3] == (CPP_ONLY, "internal")
    assert tops[4] == ("forward (model.py:12)", "user")  # torch's _call_impl is no user frame
    assert tops[5] == ("einsum (einops.py)", "library")  # a library before torch
    assert tops[6] == ("forward (model.py:12)", "forward")  # the forward line, where known


@pytest.mark.parametrize("rule", ["user", "outer", "innermost"])
def test_no_rule_names_a_stack_by_an_internal(rule):
    for top, _ in _tops(cpp_trace(), rule).values():
        for bad in ("c10::", "unwind", "CapturedTraceback", "at::meta::", "__libc"):
            assert bad not in top, (rule, top)


def test_forward_lines_that_disagree_fall_back_to_the_autograd_node():
    other = TRACEBACK.replace("line 12", "line 30")
    assert _tops(cpp_trace((TRACEBACK, other)))[6] == ("BmmBackward0 (autograd)", "autograd")
    assert _tops(cpp_trace((TRACEBACK, TRACEBACK)))[6][1] == "forward"


def test_forward_line_reads_the_innermost_traceback_line():
    assert forward_line(TRACEBACK) == "forward (model.py:12)"
    assert forward_line('File "C:\\w\\m.py", line 3, in f\n') == "f (m.py:3)"
    assert forward_line("no traceback here") is None
    assert forward_line(None) is None


def test_findings_and_the_stacks_tree_use_the_same_names():
    trace = cpp_trace()
    named = dict(zip(*stack_frames(trace).select("stack_id", "label"), strict=True))
    assert named == {k: v[0] for k, v in _tops(trace).items()}
    tree = StackTree(trace, user_only=True)
    index = device_index(trace, "cuda:0")
    rows, _ = block_rows_for(trace, index, "cursor", 10 ** 6)
    figures = tree.figures(index.stack_id[rows], index.size[rows])
    labels = {tree.label(int(k)): int(figures.bytes[k]) for k in tree.children(0, figures)}
    assert labels == {"BmmBackward0 (autograd)": 1024, "forward (model.py:12)": 1024,
                      "InputMetadata::reduce_grad (autograd)": 1024, "aten::bmm": 1024,
                      CPP_ONLY: 1024, "forward  model.py:12": 1024,
                      "einsum  einops.py": 1024}
    assert [tree.label(int(n)) for n in tree.search("bmmbackward")] == [
        "BmmBackward0 (autograd)"]


def test_panels_leave_the_internals_out():
    trace = cpp_trace()
    shown = [label for label, hidden in stack_lines(trace, 0) if not hidden]
    assert shown[0].startswith("at::_ops::bmm::call")
    assert stack_lines(trace, 0, internals=False) == [(s, False) for s in shown]
    assert format_stack(trace, 0)[0].endswith("at::_ops::bmm::call(at::Tensor const&, "
                                              "at::Tensor const&)")
    # a finding's evidence starts where the stack is named: the autograd node, not the op
    # inside it that the panel's first line shows
    assert evidence_stack(trace, 0)[0].name.startswith(
        "torch::autograd::generated::BmmBackward0::apply")
    # a stack of internals only still shows what it has
    assert evidence_stack(trace, 3)[0].name == UNWIND[0]


def test_the_t26_peak_reads_as_a_person_knows_it():
    """The t26 ctx512 snapshot at its peak (issue 23): the largest C++-only stack is the
    bmm of the backward pass; no label of a block alive there names an internal."""
    from memtui.sources import open_capture
    from tests.conftest import require_shared

    trace = open_capture(require_shared("torch_snapshots")
                         / "t26_cs336_kk_ctx512_fullstep.pickle")
    device = trace.meta.devices[0].name
    index = device_index(trace, device)
    rows, _ = block_rows_for(trace, index, "peak", 0)
    tops = stack_top_frames(trace)
    alive = pl.DataFrame({"stack_id": index.stack_id[rows], "size": index.size[rows]}).filter(
        pl.col("stack_id") >= 0).with_columns(pl.col("stack_id").cast(pl.Int32)).join(
        tops, on="stack_id")
    for top in alive["top"].unique().to_list():
        for bad in ("c10::", "unwind", "CapturedTraceback", "at::meta::", "__libc", "??"):
            assert bad not in top, top
    cpp = alive.filter(pl.col("kind") == "autograd").group_by("top").agg(pl.col("size").sum())
    assert cpp.sort("size")["top"][-1] == "BmmBackward0 (autograd)"


def test_a_real_all_stacks_capture_names_its_backward_by_autograd_nodes():
    """tests/data/cuda_train_all_stacks.pickle (torch 2.11, --stacks all): the backward
    pass's blocks are named by their autograd nodes, nothing by an internal."""
    from pathlib import Path

    from memtui.sources import open_capture

    trace = open_capture(Path(__file__).resolve().parents[1] / "data"
                         / "cuda_train_all_stacks.pickle")
    tops = stack_top_frames(trace)
    nodes = set(tops.filter(pl.col("kind") == "autograd")["top"].to_list())
    assert {"AddmmBackward0 (autograd)", "GeluBackward0 (autograd)"} <= nodes
    for top in tops["top"].to_list():
        for bad in ("c10::", "unwind", "CapturedTraceback", "at::meta::", "__libc", "??"):
            assert bad not in top, top
